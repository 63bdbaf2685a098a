"""What the ingestion's forked helpers share: when a run may fork, what a child keeps of
its parent, and how the parent waits for a child's replies without ever waiting forever.

Two children use it: the source reader of the validation pass
(:mod:`~ragwright.pipeline.source_process`) and the writing pass's planning process
(:mod:`~ragwright.pipeline.planning_process`). Each child works ahead of its parent and
sends numbered replies on a pipe whose write end it alone holds; the parent takes them
in order. Anything unexpected (the child gone, a reply out of order or unreadable, no
reply within a stall bound, the run's deadline passed) makes the parent give up on the
child (killing it) and do the rest of the work itself, so a child only ever costs time
(docs/ingestion.md, "A planning process" and "A source reader").
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext
from typing import Any

from ragwright.deadline import current_bound

# How often a waiting parent checks that the child lives and the run's deadline.
POLL_SECONDS = 1.0


def can_fork() -> bool:
    """Whether a second process would run beside this one: fork exists and this process
    may run on two cores or more (its CPU affinity, so a container pinned to one core
    does not fork)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (not Linux)
        cores = os.cpu_count() or 1
    return cores >= 2 and "fork" in multiprocessing.get_all_start_methods()


def fork_context() -> ForkContext:
    """The fork start method, with this process's buffered output flushed first (a
    child's exit would otherwise write it a second time)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    context: ForkContext = multiprocessing.get_context("fork")
    return context


def close_inherited(keep: set[int]) -> None:
    """Close every descriptor this forked child inherited but ``keep`` (the standard
    streams and its pipes): the index's files, its WAL lock above all, must close when
    the parent closes them, or the parent cannot reopen its shard."""
    low = 0
    for fd in [*sorted(keep), max(os.sysconf("SC_OPEN_MAX"), max(keep) + 1)]:
        # Only non-empty ranges: os.closerange(n, n) may close every descriptor from n.
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1


class Replies:
    """The parent's end of a child's numbered replies."""

    def __init__(self, process: Any, connection: Connection) -> None:
        self._process = process
        self._connection = connection
        self.gone = False  # given up on, or found dead: take nothing more from it

    def take(self, number: int, stall: float) -> tuple[Any, ...] | None:
        """The fields of the reply numbered ``number``, or ``None`` once the child is
        given up on: gone, silent for ``stall`` seconds, out of order, unreadable, or the
        run's deadline passed while waiting."""
        waited = 0.0
        while not self.gone:
            bound = current_bound()
            if waited >= stall or (bound is not None and bound.expired):
                break
            started = time.monotonic()
            try:
                if not self._connection.poll(POLL_SECONDS):
                    waited += time.monotonic() - started
                    self.gone = not self._process.is_alive()
                    continue
                reply = self._connection.recv()
            except Exception:
                break
            if not isinstance(reply, tuple) or not reply or reply[0] != number:
                break  # a reply for another slice: trust none of the next ones
            return reply[1:]
        self.give_up()
        return None

    def give_up(self) -> None:
        """Take nothing more from the child, and stop it."""
        self.gone = True
        with contextlib.suppress(Exception):
            self._process.kill()

    def close(self, grace: float = POLL_SECONDS) -> None:
        """Wait up to ``grace`` seconds for the child to end, then kill it."""
        self._process.join(timeout=grace)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._connection.close()
