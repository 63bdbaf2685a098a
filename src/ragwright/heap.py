"""Give freed large blocks back to the system at once (glibc only).

glibc serves a request of at least the *mmap threshold* with its own mapping, unmapped
when freed; smaller requests come from the heap, which is returned to the system only
from its top. The threshold starts at 128 KiB and rises to the size of any mapped block
that is freed (up to 32 MiB), so after the first large temporary buffer (an embedding
run's working memory, a scroll's payloads) later ones of that size come from the heap,
and once something small is allocated above them their pages stay resident. A process
that answers question after question then sits anywhere between its floor and its
last peak: one ``eval run --answers`` process over 150 ClapNQ questions (evidence style)
read 397-482 MiB between answers; with the threshold fixed at 128 KiB, 314-354 MiB, in
the same time (docs/ingestion.md, "Memory of the embedding model").

Fixing the threshold (``mallopt(M_MMAP_THRESHOLD)``) turns the adjustment off; the trim
threshold is set to the same size so the heap's free top is returned as well. Nothing
is changed when the process runs on another C library, or when the person running it
set ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` (glibc's own tunables: theirs
win). It costs a command that allocates and frees large buffers page faults (an ``ask``:
about 50,000 more, 0.2-0.3 s), so only long-running commands call it
(``cli/common.py``, ``LONG_RUNNING``). Standard library only (ctypes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

THRESHOLD = 128 * 1024
"""Bytes: glibc's starting mmap threshold, kept."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_TUNABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def fix_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds at :data:`THRESHOLD` for this process.

    Returns whether they were set (False off glibc, or when the environment sets one).
    """
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _TUNABLES):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None or not hasattr(libc, "gnu_get_libc_version"):
        return False  # musl and others: no such tunables
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, THRESHOLD)
    )
