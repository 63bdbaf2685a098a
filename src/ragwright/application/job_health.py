"""Whether a process's job runner can do its work now, and why a job waits.

The runner records every job store call it makes: a failure (the store refuses a
claim, a publish, a release or the sweep: a full disk, a database that is down) makes
it unhealthy until a later call shows the store accepts writes again: one that changed
a row (a job claimed, a result published), or the same kind of call succeeding (a
claim that failed while a job was queued, and now succeeds). A write that changes
nothing proves nothing on a full disk (SQLite commits an empty transaction without
writing), so an idle claim does not clear a failed publish. ``/readyz`` reports it (the
``jobs`` check) and a waiting job's status says so (``waiting_reason``).

Standard library only: the service reads it on every status request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ragwright.application.jobs import AnswerJob

WaitingReason = Literal["store_unavailable", "lease_expired", "waiting_for_worker"]
"""Why a job that has not finished is not running now:

- ``store_unavailable``: this process's job runner cannot claim or publish (the job
  store refuses writes: a full disk, a database that is down); the job runs once the
  store accepts writes again, without a restart.
- ``lease_expired``: the worker that ran it stopped before publishing (it died, or the
  store refused its result); it runs again once a worker claims it.
- ``waiting_for_worker``: queued for a free slot of the job pool.
"""


@dataclass(frozen=True, slots=True)
class StoreFailure:
    """The job store call that failed first since the last write that succeeded."""

    operation: str
    error: str
    since: float


class RunnerHealth:
    """The job runner's view of its store: failing or not, and since when (``clock``:
    seconds, monotonic by default). Safe to read from any thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failure: StoreFailure | None = None
        self._stopped: str | None = None

    def failed(self, operation: str, error: BaseException) -> None:
        """``operation`` (``claim``, ``publish``, ``release``, ``sweep``) raised ``error``."""
        with self._lock:
            if self._failure is None:
                self._failure = StoreFailure(operation, type(error).__name__, self._clock())

    def succeeded(self, operation: str, *, changed: bool) -> None:
        """``operation`` succeeded, ``changed``: it changed a row. Either (or the
        operation that failed succeeding now) shows the store accepts writes again."""
        with self._lock:
            if self._failure is not None and (changed or self._failure.operation == operation):
                self._failure = None

    def stopped(self, error: BaseException) -> None:
        """The dispatch loop ended on ``error``: no job runs in this process any more."""
        with self._lock:
            self._stopped = type(error).__name__

    @property
    def failure(self) -> StoreFailure | None:
        with self._lock:
            return self._failure

    def problem(self) -> str | None:
        """One line for ``/readyz`` when the runner cannot do its work, else ``None``."""
        with self._lock:
            if self._stopped is not None:
                return f"the job runner stopped ({self._stopped}); restart the process"
            failure = self._failure
            if failure is None:
                return None
            seconds = max(0.0, self._clock() - failure.since)
        return (
            f"the job store refuses the runner's {failure.operation} ({failure.error}) "
            f"for {seconds:.0f} s; jobs wait and run once it accepts writes again"
        )


def waiting_reason(job: AnswerJob, *, store_failing: bool, now: float) -> WaitingReason | None:
    """Why ``job`` is not running now (``None``: it finished, or a worker holds it);
    ``store_failing``: this process's runner cannot write to the store; ``now``:
    seconds since the epoch."""
    if job.finished:
        return None
    if store_failing:
        return "store_unavailable"
    if job.state == "running":
        if job.lease_expires_at is not None and _seconds(job.lease_expires_at) <= now:
            return "lease_expired"
        return None
    return "waiting_for_worker"


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()
