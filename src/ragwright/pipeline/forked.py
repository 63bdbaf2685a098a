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
import queue
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ragwright.deadline import current_bound
from ragwright.forking import close_inherited, fork_context, start_child

__all__ = ["Child", "Replies", "can_fork", "close_inherited", "fork_context", "start_child"]

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


class Child:
    """A forked child running ``target(writer, parent_pid, *args)`` (``writer``: the
    write end of its replies pipe, which only the child holds) and the parent's
    :class:`Replies` from it. Raises ``OSError`` when no child can be forked now."""

    def __init__(self, target: Any, args: tuple[Any, ...], name: str) -> None:
        context = fork_context()
        reader, writer = context.Pipe(duplex=False)
        try:
            self.process = context.Process(
                target=target, args=(writer, os.getpid(), *args), name=name, daemon=True
            )
            self.process.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()
        self.replies = Replies(self.process, reader)
        self.ended = False  # it sent its last reply: let it leave on its own

    @property
    def pid(self) -> int | None:
        pid: int | None = self.process.pid
        return pid

    def close(self) -> None:
        """Wait for a child that ended; stop one that did not."""
        if not self.ended:
            self.replies.give_up()
        self.replies.close()


class Replies:
    """The parent's end of a child's numbered replies.

    A reply is received on a thread of its own, one at a time and only when asked for
    (so the child stays held back by the pipe, never further ahead), and the caller
    waits on that thread with a timeout: a child stopped in the middle of a message
    (whose first bytes make the pipe readable) cannot hold the caller past the stall
    bound. The stall bound counts time without a reply *and* without the child using
    CPU: a child busy reading a slow file is working, a stopped or blocked one is not.
    """

    def __init__(self, process: Any, connection: Connection) -> None:
        self._process = process
        self._connection = connection
        self.gone = False  # given up on, or found dead: take nothing more from it
        self._asked = threading.Semaphore(0)
        self._received: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._pending = False  # a reply asked of the reader thread and not taken yet
        self._closing = False
        self._reader = threading.Thread(
            target=self._read, name="ragwright-child-replies", daemon=True
        )
        self._reader.start()

    def take(self, number: int, stall: float) -> tuple[Any, ...] | None:
        """The fields of the reply numbered ``number``, or ``None`` once the child is
        given up on: gone, idle (no reply, no CPU) for ``stall`` seconds, out of order,
        unreadable, or the run's deadline passed while waiting."""
        waited = 0.0
        cpu = _cpu_ticks(self._process.pid)
        while not self.gone:
            bound = current_bound()
            if waited >= stall or (bound is not None and bound.expired):
                break
            if not self._pending:
                self._pending = True
                self._asked.release()
            started = time.monotonic()
            try:
                read, reply = self._received.get(timeout=POLL_SECONDS)
            except queue.Empty:
                waited += time.monotonic() - started
                now = _cpu_ticks(self._process.pid)
                if now is not None and now != cpu:
                    cpu, waited = now, 0.0  # working: not stalled
                continue  # a child gone reads as the end of its pipe, taken next
            self._pending = False
            if not read or not isinstance(reply, tuple) or not reply or reply[0] != number:
                break  # unreadable, ended, or a reply for another slice: trust no more
            return tuple(reply[1:])
        self.give_up()
        return None

    def give_up(self) -> None:
        """Take nothing more from the child, and stop it."""
        self.gone = True
        with contextlib.suppress(Exception):
            self._process.kill()

    def close(self, grace: float = POLL_SECONDS) -> None:
        """Wait up to ``grace`` seconds for the child to end, then kill it; end the reader
        thread (a killed child's pipe reads as its end)."""
        self._process.join(timeout=grace)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=10 * POLL_SECONDS)
        self._closing = True
        self._asked.release()
        self._reader.join(timeout=10 * POLL_SECONDS)
        self._connection.close()

    def _read(self) -> None:
        try:
            while True:
                self._asked.acquire()
                if self._closing:
                    return
                self._received.put((True, self._connection.recv()))
        except BaseException:
            self._received.put((False, None))  # the end of the pipe, or a broken message


def _cpu_ticks(pid: int | None) -> int | None:
    """The CPU time ``pid`` and its children have used (clock ticks, user and system),
    where the system tells (Linux); ``None`` otherwise. Its children count: a source
    reader waiting for a file's conversion process (adapters/formats/box.py) is working."""
    ticks = _own_ticks(pid)
    if ticks is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                ticks += _own_ticks(int(child)) or 0
    return ticks


def _own_ticks(pid: int | None) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None
