"""The embedded index's file helpers walking a sparse file's data (adapters/edge/files.py):
the private copy of a read-only index and the payload read-ahead share them."""

from __future__ import annotations

import os
from pathlib import Path

from ragwright.adapters.edge.files import _copy_sparse, data_extents

MIB = 1 << 20


def _sparse(path: Path) -> bytes:
    """A 3 MiB file with data in its first 4 KiB and at 2 MiB, holes elsewhere."""
    with path.open("wb") as handle:
        handle.write(b"a" * 4096)
        handle.seek(2 * MIB)
        handle.write(b"b" * 8192)
        handle.truncate(3 * MIB)
    return path.read_bytes()


def test_the_data_extents_hold_every_written_byte_and_stay_within_the_range(
    tmp_path: Path,
) -> None:
    content = _sparse(tmp_path / "f")
    descriptor = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        extents = list(data_extents(descriptor, 0, len(content)))
        within = list(data_extents(descriptor, 1 * MIB, 2 * MIB + 100))
    finally:
        os.close(descriptor)
    covered = bytearray(len(content))
    for start, end in extents:
        assert 0 <= start < end <= len(content)
        covered[start:end] = content[start:end]
    # Whatever the file system reports as holes reads as zeros: nothing written is outside.
    assert bytes(covered) == content
    assert all(1 * MIB <= start < end <= 2 * MIB + 100 for start, end in within)
    assert sum(end - start for start, end in within) >= 100


def test_a_sparse_copy_is_byte_for_byte_the_source(tmp_path: Path) -> None:
    content = _sparse(tmp_path / "f")
    _copy_sparse(str(tmp_path / "f"), str(tmp_path / "copy"))
    assert (tmp_path / "copy").read_bytes() == content
