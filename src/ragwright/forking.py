"""What every forked child of ragwright's shares: how it is forked, what it keeps of its
parent, and how it ends with its parent.

Three children use it: the ingestion's source reader and planning process
(:mod:`ragwright.pipeline.forked`) and the conversion box
(:mod:`ragwright.adapters.formats.box`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
from multiprocessing.context import ForkContext

# prctl(2): the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


def flush_streams() -> None:
    """Flush this process's buffered output (a child's exit would otherwise write it a
    second time)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def fork_context() -> ForkContext:
    """The fork start method, with this process's buffered output flushed first."""
    flush_streams()
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


def start_child(parent: int) -> None:
    """What a forked child of ``parent`` does first: never collect the parent's objects
    (a cycle holding an index would run its finalizer here, on the parent's files), and
    end when the parent ends, however it ends (Linux: the parent-death signal)."""
    gc.freeze()
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the signal was set
        os._exit(0)


# prctl(2): the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1
