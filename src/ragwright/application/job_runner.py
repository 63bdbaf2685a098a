"""Running durable answer jobs: claim, revalidate, answer, revalidate, publish once.

One :class:`JobRunner` per process (``ragwright serve`` and ``ragwright worker`` start
one) dispatches up to ``concurrency`` jobs at a time; the store's claim enforces the
job pool across every process and replica (``JobLimits``), and model attempts draw
from the jobs' own capacity pools, never the interactive ones.

Each job:

1. **Revalidate before execution.** The submitting key must still be active, with the
   same tenant and the ``answer`` scope (else the job fails ``permission_revoked``),
   and grant what it granted at submission (the job's ``grant_digest``: else it fails
   ``permission_changed``). The key is read off the event loop; a key store that is
   down hands the job back to the queue.
2. **Answer** with the key's eligibility, under ``RAGWRIGHT_JOB_DEADLINE``, while a
   task renews the lease every third of it. A renewal refused (the job was cancelled,
   expired, or taken over after this worker stalled) stops the answer: nothing is
   published. A renewal that fails because the store is down is tried again until the
   lease would have run out. Invalid input found only now (a question the embedder
   cannot read, history the model's window cannot hold) fails the job
   ``invalid_request``: running it again would not help.
3. **The model unavailable** (the answer degraded): a job is work that still matters
   later, so it goes back to the queue instead of publishing evidence only, and the
   dispatch ramp drops to one job at a time (:class:`DispatchRamp`).
4. **Revalidate before publishing.** The key again, and every cited document must still
   be eligible for the caller at the revision the answer cited; otherwise the job runs
   again (up to ``MAX_ATTEMPTS`` claims), then fails ``inputs_changed``.
5. **Publish** through the store's guarded write: at most once per job, only by the
   worker holding the current lease.

Every sweep (``EXPIRY_SWEEP``) marks overdue jobs ``expired`` and deletes finished jobs
older than ``RAGWRIGHT_JOB_RETENTION``. Logs name jobs by id, never their content.

A job store that refuses a call (a full disk refuses the commit; a database that is
down) never ends the dispatch loop: the call is an outage for the ramp (dispatch backs
off, up to ``DispatchRamp.max_backoff``), the runner's :class:`RunnerHealth` says so
(``/readyz``, a waiting job's ``waiting_reason``) until a later write succeeds, and
the jobs stay in the store: a result not published runs again after its lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragwright.application.callers import OutsideAllowlist, answer_request_for, grant_digest
from ragwright.application.job_health import RunnerHealth, waiting_reason
from ragwright.application.jobs import AnswerJob, JobLimits, JobStore
from ragwright.application.keys import ApiKey
from ragwright.errors import AssemblyError, RagwrightError, RequestError, StorageError

if TYPE_CHECKING:
    from ragwright.application.facade import Application

logger = logging.getLogger("ragwright.jobs")

# Claims of one job before a changing input fails it instead of running it again.
MAX_ATTEMPTS = 3
DEGRADED = ("model_unavailable", "request_deadline_exceeded")
# Seconds between two sweeps marking overdue jobs ``expired`` and deleting finished ones
# past their retention (each process sweeps).
EXPIRY_SWEEP = 10.0


@dataclass
class DispatchRamp:
    """How many jobs this process may run at once: ``limit`` normally; after an outage
    one, then doubling with each success (slow start), so a backlog is released at a
    bounded rate instead of all at once. An outage also pauses dispatch for
    ``backoff`` seconds, doubling up to ``max_backoff`` while outages repeat."""

    limit: int
    allowed: int = 0
    backoff: float = 1.0
    max_backoff: float = 30.0
    paused_until: float = 0.0
    clock: Callable[[], float] = time.monotonic
    _next_backoff: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.allowed = self.allowed or self.limit
        self._next_backoff = self.backoff

    def may_start(self, running: int) -> bool:
        return running < self.allowed and self.clock() >= self.paused_until

    def outage(self) -> None:
        self.allowed = 1
        self.paused_until = self.clock() + self._next_backoff
        self._next_backoff = min(self._next_backoff * 2, self.max_backoff)

    def success(self) -> None:
        self.allowed = min(self.allowed * 2, self.limit)
        self._next_backoff = self.backoff


class JobRunner:
    """Claims and runs answer jobs until stopped; ``events`` receives one line per step
    (``claimed:<id>``, ``published:<id>``, ``released:<id>:<reason>``, ``failed:<id>:
    <reason>``, ``lost:<id>``, ``store_unavailable:<error>``, ``keys_unavailable:<id>``,
    ``renewal_failed:<id>``, ``expired:<n>``, ``purged:<n>``), never content.

    ``retention_seconds`` (default ``RAGWRIGHT_JOB_RETENTION``) is how long finished jobs
    are kept; ``sweep_seconds`` how often this process sweeps. ``health`` records whether
    the store accepts the runner's writes (``/readyz`` reads it).
    """

    def __init__(
        self,
        application: Application,
        store: JobStore,
        *,
        concurrency: int,
        limits: JobLimits,
        lease_seconds: float,
        deadline_seconds: float,
        poll_seconds: float = 0.5,
        worker_id: str | None = None,
        events: Callable[[str], None] | None = None,
        ramp: DispatchRamp | None = None,
        retention_seconds: float | None = None,
        sweep_seconds: float = EXPIRY_SWEEP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.application = application
        self.store = store
        self.concurrency = concurrency
        self.limits = limits
        self.lease_seconds = lease_seconds
        self.deadline_seconds = deadline_seconds
        self.poll_seconds = poll_seconds
        self.worker_id = worker_id or f"worker-{uuid.uuid4().hex[:12]}"
        self.events = events or (lambda _event: None)
        self.ramp = ramp or DispatchRamp(concurrency)
        self.retention_seconds = (
            application.settings.jobs.retention if retention_seconds is None else retention_seconds
        )
        self.sweep_seconds = sweep_seconds
        # What a lease is measured with (claim and renewal times); tests pass a manual one.
        self.clock = clock
        self.health = RunnerHealth()
        self._running: set[asyncio.Task[None]] = set()
        self._next_sweep = 0.0
        # Set when a job ends, so a freed slot is taken at once, not at the next poll
        # (the backlog then drains at the pool's rate; benchmarks/job_faults.py).
        self._freed = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until ``stop`` is set, then wait for the jobs in progress."""
        try:
            await self._dispatch(stop)
        except Exception as error:
            self.health.stopped(error)
            raise
        finally:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)

    async def _dispatch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._freed.clear()
            if self.ramp.may_start(len(self._running)):
                # The lease starts no earlier than this: renewals count from here.
                claiming = self.clock()
                try:
                    job = await asyncio.to_thread(
                        self.store.claim,
                        self.worker_id,
                        lease_seconds=self.lease_seconds,
                        limits=self.limits,
                    )
                except RagwrightError as error:
                    # The store is down (a database restart) or refuses writes (a full
                    # disk): keep the loop alive and claim again once it answers; the
                    # jobs are safe in the store.
                    self.events(f"store_unavailable:{type(error).__name__}")
                    logger.warning("job store unavailable: %s", error)
                    self.health.failed("claim", error)
                    self.ramp.outage()
                    job = None
                except Exception as error:
                    # Not the store's own error (a bug, or a store that leaks its driver's
                    # errors): logged by type and place, never message (it could quote a
                    # job's input); the loop goes on after the backoff.
                    self.events(f"store_unavailable:{type(error).__name__}")
                    logger.error(
                        "job claim ended by an unexpected %s; claiming again after a backoff\n%s",
                        type(error).__name__,
                        "".join(traceback.format_tb(error.__traceback__)).rstrip(),
                    )
                    self.health.failed("claim", error)
                    self.ramp.outage()
                    job = None
                else:
                    self.health.succeeded("claim", changed=job is not None)
                if job is not None:
                    self.events(f"claimed:{job.id}")
                    task = asyncio.create_task(
                        self.execute(job, claimed_at=claiming), name=f"job {job.id}"
                    )
                    self._running.add(task)
                    task.add_done_callback(self._ended)
                    continue
            await self._sweep()
            await self._idle(stop)

    async def _sweep(self) -> None:
        """Mark jobs past their expiry ``expired`` (a claim never takes them; this makes
        their state say so) and delete finished jobs older than the retention, at most
        every ``sweep_seconds`` per process."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_seconds
        try:
            expired = await asyncio.to_thread(self.store.expire)
            purged = await asyncio.to_thread(self.store.purge, older_than=self.retention_seconds)
        except RagwrightError as error:
            logger.warning("job store unavailable: %s", error)
            self.health.failed("sweep", error)
            return
        self.health.succeeded("sweep", changed=bool(expired or purged))
        if expired:
            self.events(f"expired:{expired}")
            logger.info("%d job(s) expired", expired)
        if purged:
            self.events(f"purged:{purged}")
            logger.info("%d finished job(s) past their retention deleted", purged)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._freed.set()
        if task.cancelled() or (error := task.exception()) is None:
            return
        # A bug, not an outcome: the job's lease lapses and it is claimed again. The
        # traceback names code only; the exception's message could quote the job's input.
        logger.error(
            "%s ended by an unexpected %s; it runs again after its lease\n%s",
            task.get_name(),
            type(error).__name__,
            "".join(traceback.format_tb(error.__traceback__)).rstrip(),
        )

    async def _idle(self, stop: asyncio.Event) -> None:
        """Wait for a poll interval, a job to end, or ``stop``, whichever comes first."""
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._freed.wait())]
        try:
            await asyncio.wait(
                waits, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()

    async def execute(self, job: AnswerJob, *, claimed_at: float | None = None) -> None:
        """Run one claimed job to a published outcome, a release, or a lost lease
        (``claimed_at``: ``self.clock()`` when its claim began, else now)."""
        claimed_at = self.clock() if claimed_at is None else claimed_at
        key = await self._revalidated_key(job)
        if key is None:
            return
        try:
            request = answer_request_for(
                key,
                question=str(job.request["question"]),
                history=[(m["role"], m["content"]) for m in job.request.get("history", [])],
                documents=list(job.request.get("documents", [])),
                deadline_seconds=self.deadline_seconds,
            )
        except (RequestError, OutsideAllowlist) as error:
            await self._publish_failure(job, f"invalid_request: {error}")
            return
        answer = asyncio.ensure_future(self.application.answer(request, workload="jobs"))
        renewing = asyncio.create_task(self._renew_until(answer, job, claimed_at))
        try:
            outcome = await answer
        except asyncio.CancelledError:
            if renewing.done() and not renewing.cancelled() and renewing.result() is False:
                self.events(f"lost:{job.id}")
                return  # cancelled, expired or taken over: publish nothing
            raise
        except (RequestError, AssemblyError) as error:
            # The input itself is refused (a question longer than the embedder reads, a
            # history the model's window cannot hold): no later attempt would differ.
            await self._publish_failure(job, f"invalid_request: {error}")
            return
        except RagwrightError as error:
            # Retrieval or the index failed: the work still matters; try again later.
            await self._release(job, f"unavailable: {type(error).__name__}", outage=True)
            return
        finally:
            renewing.cancel()
        if outcome.reason in DEGRADED:
            await self._release(job, outcome.reason or "model_unavailable", outage=True)
            return
        key = await self._revalidated_key(job)
        if key is None:
            return
        changed = await asyncio.to_thread(self.application.changed_citations, outcome, key)
        if changed:
            reason = f"inputs_changed: {', '.join(changed)}"
            if job.attempts < MAX_ATTEMPTS:
                await self._release(job, reason, outage=False)
            else:
                await self._publish_failure(job, reason)
            return
        published = await self._store_write(
            job,
            "publish",
            lambda: self.store.publish(
                job.id, self.worker_id, state="succeeded", result=outcome.public_dict()
            ),
        )
        if published is None:
            return
        self.events(f"published:{job.id}" if published else f"lost:{job.id}")
        if published:
            self.ramp.success()
            logger.info("job %s succeeded mode=%s attempts=%d", job.id, outcome.mode, job.attempts)

    async def _revalidated_key(self, job: AnswerJob) -> ApiKey | None:
        """The submitting key, when the job may go on with it; ``None`` when it may not:
        the job was failed (``permission_revoked``, ``permission_changed``) or, with the
        key store down, handed back to the queue."""
        try:
            # Off the event loop: a PostgreSQL key store that is down takes up to its
            # connect timeout to say so, and interactive requests share this loop.
            key = await asyncio.to_thread(self.application.key, job.key_id)
        except StorageError as error:
            self.events(f"keys_unavailable:{job.id}")
            logger.warning(
                "job %s: the API key store is unavailable (%s); the job goes back to the queue",
                job.id,
                type(error).__name__,
            )
            await self._release(job, "keys_unavailable", outage=True)
            return None
        if key is None or not _still_allowed(key, job):
            await self._publish_failure(job, "permission_revoked")
            return None
        if job.grant_digest is not None and grant_digest(key) != job.grant_digest:
            # The key's documents, types or states changed since submission: neither the
            # old grant (no longer the caller's) nor the new one (not what was asked
            # under) may answer silently.
            await self._publish_failure(job, "permission_changed")
            return None
        return key

    async def _renew_until(
        self, answer: asyncio.Future[Any], job: AnswerJob, claimed_at: float
    ) -> bool:
        """Renew the lease every third of it while ``answer`` runs; ``False`` (and the
        answer cancelled) once the lease is lost: refused, or not renewed in time while
        the store was down."""
        renewed_at = claimed_at
        while not answer.done():
            await asyncio.sleep(self.lease_seconds / 3)
            if answer.done():
                break
            attempt = self.clock()
            try:
                renewed = await asyncio.to_thread(
                    self.store.renew, job.id, self.worker_id, lease_seconds=self.lease_seconds
                )
            except StorageError as error:
                self.events(f"renewal_failed:{job.id}")
                if self.clock() - renewed_at < self.lease_seconds:
                    logger.warning(
                        "job %s: lease not renewed, the job store is unavailable (%s); "
                        "trying again",
                        job.id,
                        type(error).__name__,
                    )
                    continue
                # Another worker may hold it by now: stop; it runs again after the lease.
                logger.warning("job %s: lease ran out while the job store was unavailable", job.id)
                renewed = False
            if not renewed:
                answer.cancel()
                return False
            renewed_at = attempt
        return True

    async def _store_write(
        self, job: AnswerJob, what: str, write: Callable[[], bool]
    ) -> bool | None:
        """``write`` (a guarded store call) off the event loop; ``None`` when the store is
        down: nothing changed, and the job runs again once its lease runs out."""
        try:
            written = await asyncio.to_thread(write)
        except StorageError as error:
            self.health.failed(what, error)
            self.events(f"store_unavailable:{type(error).__name__}")
            logger.warning(
                "job %s: %s not recorded, the job store is unavailable (%s); it runs again "
                "after its lease",
                job.id,
                what,
                type(error).__name__,
            )
            return None
        self.health.succeeded(what, changed=written)
        return written

    async def _release(self, job: AnswerJob, reason: str, *, outage: bool) -> None:
        if outage:
            self.ramp.outage()
        released = await self._store_write(
            job, "release", lambda: self.store.release(job.id, self.worker_id, reason=reason)
        )
        if released is None:
            return
        self.events(f"released:{job.id}:{reason}" if released else f"lost:{job.id}")
        logger.info("job %s released (%s)", job.id, reason)

    async def _publish_failure(self, job: AnswerJob, reason: str) -> None:
        published = await self._store_write(
            job,
            "publish",
            lambda: self.store.publish(job.id, self.worker_id, state="failed", failure=reason),
        )
        if published is None:
            return
        self.events(f"failed:{job.id}:{reason}" if published else f"lost:{job.id}")
        logger.info("job %s failed (%s)", job.id, reason.split(":", maxsplit=1)[0])


def _still_allowed(key: ApiKey, job: AnswerJob) -> bool:
    """The submitting key is still active, for the job's tenant, with the answer scope."""
    return key.active and key.tenant == job.tenant and key.allows("answer")


def job_status(job: AnswerJob, *, store_failing: bool = False) -> Mapping[str, Any]:
    """A job's JSON form for its caller (``GET /v1/answer-jobs/{id}``); ``store_failing``:
    this process's runner cannot write to the job store (``waiting_reason``)."""
    return {
        "id": job.id,
        "state": job.state,
        "created_at": job.created_at,
        "expires_at": job.expires_at,
        "finished_at": job.finished_at,
        "attempts": job.attempts,
        "result": dict(job.result) if job.result is not None else None,
        "failure": job.failure,
        "waiting_reason": waiting_reason(job, store_failing=store_failing, now=time.time()),
    }
