"""Reading the embedded index's payloads ahead of a pass that reads most of them.

qdrant-edge reads its payload storage and payload indexes through memory-mapped files.
A pass that reads every stored payload (the change detection of a re-run over an
unchanged corpus) then takes one page fault per 4 KiB page it touches, each waiting for
its own read while the engine holds the GIL (docs/ingestion.md, "Re-running over an
unchanged corpus: reading the payloads ahead").

:func:`prefetch_mapped` gives the kernel one ``madvise(MADV_WILLNEED)`` per data extent of
those mappings: it starts reading the pages into the page cache in bulk, so the scan's
faults find them there. The pages are not mapped into the process, so its RSS does not
grow (``MADV_POPULATE_READ``, which maps them too, was measured: faster by a few more
percent, for up to 940 MiB more RSS at 300,000 documents). Only the files' data extents
are advised (``SEEK_DATA``/``SEEK_HOLE``): the engine's preallocated holes are not read.
What is advised stays within half the memory the process can still take
(:func:`memory_room`: available memory, and its memory cgroup's limit), so a read-ahead
under a tight limit does not evict what it just read.

No library offers this for another library's mappings, hence ctypes. Nothing here can
change what the engine reads: the advice only fills the page cache, and any failure
(another OS, a mapping the engine dropped meanwhile) leaves the pages to be read on
fault as before.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ragwright.adapters.edge.files import data_extents

MADV_WILLNEED = 3  # <linux/mman.h>
# The engine's files a change-detection scan reads: stored payloads and payload indexes.
PAYLOAD_PARTS: tuple[str, ...] = ("payload_storage", "payload_index")


def _madvise() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


def mapped_files(root: Path, parts: Sequence[str]) -> Iterator[tuple[int, int, int, str]]:
    """(start, end, file offset, path) of this process's mappings of files under ``root``
    whose path names one of ``parts`` as a directory."""
    prefix = os.path.realpath(root) + os.sep
    try:
        lines = Path("/proc/self/maps").read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith(prefix):
            continue
        path = fields[5]
        if path.endswith(" (deleted)") or not any(f"{os.sep}{p}{os.sep}" in path for p in parts):
            continue
        start, end = (int(value, 16) for value in fields[0].split("-"))
        yield start, end, int(fields[2], 16), path


def file_extents(path: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The data extents of the file at ``path`` within [start, end); none when it cannot
    be read (the engine replaced it meanwhile)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        yield from data_extents(descriptor, start, end)
    except OSError:
        return
    finally:
        os.close(descriptor)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text("ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cgroup_room() -> int | None:
    """Bytes left under this process's memory cgroup limit (v2 or v1); None: no limit
    found."""
    try:
        lines = Path("/proc/self/cgroup").read_text("utf-8").splitlines()
    except OSError:
        return None
    base = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":  # v2: the unified hierarchy
            places: tuple[Path, ...] = (base, base / "unified")
            limit_file, usage_file = "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            places = (base / "memory",)
            limit_file, usage_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        for place in places:
            # The group as named, or the mount's root when a namespace hides the path.
            for directory in (place / group.lstrip("/"), place):
                limit = _read_int(directory / limit_file)
                usage = _read_int(directory / usage_file)
                if limit is not None and usage is not None and limit < 1 << 60:
                    return max(0, limit - usage)
    return None


def memory_room() -> int | None:
    """Bytes this process can still take: the smaller of the system's available memory
    and what its memory cgroup's limit leaves; None when neither is known."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text("ascii").splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError):
        pass
    limits = [room for room in (available, _cgroup_room()) if room is not None]
    return min(limits) if limits else None


def prefetch_mapped(
    root: Path, parts: Sequence[str] = PAYLOAD_PARTS, *, budget: int | None = None
) -> int:
    """Ask the kernel to read ahead the data of this process's mapped files under
    ``root`` in ``parts``, at most ``budget`` bytes (default: half of
    :func:`memory_room`); the number of bytes advised (0 where the OS offers no way)."""
    madvise = _madvise()
    if madvise is None:
        return 0
    if budget is None:
        room = memory_room()
        budget = 0 if room is None else room // 2
    page = mmap.PAGESIZE
    advised = 0
    for start, end, offset, path in list(mapped_files(root, parts)):
        for low, high in file_extents(path, offset, offset + (end - start)):
            first = start + (low - offset) // page * page
            length = min(end, start + (high - offset), first + budget - advised) - first
            if length <= 0:
                if advised >= budget:
                    return advised
                continue
            if madvise(first, length, MADV_WILLNEED) != 0:
                continue  # the engine unmapped or remapped it meanwhile
            advised += length
    return advised
