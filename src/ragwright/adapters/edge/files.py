"""The embedded index's own files beside the engine's shard: the manifest (its fields
checked, the sample's payload digest), JSON replaced atomically and durably, the
free-space check before the engine maps or writes anything, the private sparse copy a
read-only open works on, and a rebuild's removal of the collection's own entries."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ragwright.errors import StorageError

# Everything a collection directory holds; a rebuild removes these names and nothing else.
_STORED_ENTRIES = ("shard", "contract.json", "manifest.json", "contract.tmp", "manifest.tmp")
# A new shard's preallocated files (write-ahead log, vector and payload pages) are about
# 210 MiB of holes that the engine fills as it maps and touches them.
_NEW_SHARD_BYTES = 224 * 2**20
# Room for files a write (or the log replay of an open) creates.
HEADROOM_BYTES = 16 * 2**20


def payload_digest(payloads: Mapping[uuid.UUID, Any]) -> str:
    canonical = json.dumps(
        [[str(i), payloads[i]] for i in sorted(payloads)], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# What a new index records before its contract: committed, empty.
EMPTY_MANIFEST = {"state": "clean", "points": 0, "sample": [], "digest": payload_digest({})}


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def shard_holes(shard: Path) -> int | None:
    """Bytes of the shard's files not allocated yet (None: no shard yet)."""
    if not shard.is_dir():
        return None
    holes = 0
    directories = [str(shard)]
    while directories:
        with os.scandir(directories.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    directories.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    holes += max(0, st.st_size - st.st_blocks * 512)
    return holes


def require_free_space(path: Path, holes: int | None = None) -> None:
    """``StorageError`` unless the file system has room for the engine's holes
    (``holes``, counted now when not given) plus headroom."""
    if holes is None:
        holes = shard_holes(path / "shard")
    needed = _NEW_SHARD_BYTES if holes is None else holes + HEADROOM_BYTES
    free = shutil.disk_usage(path).free
    if free < needed:
        raise StorageError(
            str(path),
            f"disk nearly full ({free // 2**20} MiB free, the embedded index may need "
            f"{needed // 2**20} MiB to open or write safely); free space and run the "
            "command again (the index is as the last completed ingest left it)",
        )


def private_copy(path: Path) -> Path:
    """A copy of the index at ``path`` in the temporary directory, holes kept as holes.

    The engine's files are mostly preallocated zeros; copying them byte for byte would
    cost hundreds of MiB, so only their data extents are copied.
    """
    target = Path(tempfile.mkdtemp(prefix="ragwright-index-"))
    try:
        shutil.copytree(
            path,
            target,
            ignore=shutil.ignore_patterns(".lock"),
            copy_function=_copy_sparse,
            dirs_exist_ok=True,
        )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def data_extents(descriptor: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The (start, end) byte ranges of the open file within [start, end) that hold data
    (``SEEK_DATA``/``SEEK_HOLE``): the engine preallocates its files, mostly holes."""
    offset = start
    while offset < end:
        try:
            data = os.lseek(descriptor, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: only a hole remains
                raise
            return
        if data >= end:
            return
        hole = min(os.lseek(descriptor, data, os.SEEK_HOLE), end)
        yield data, hole
        offset = hole


def _copy_sparse(source: str, destination: str) -> None:
    with open(source, "rb") as reader, open(destination, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        for start, end in data_extents(reader.fileno(), 0, size):
            reader.seek(start)
            writer.seek(start)
            position = start
            while position < end:
                block = reader.read(min(end - position, 2**20))
                if not block:
                    break
                writer.write(block)
                position += len(block)
        writer.truncate(size)


def write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``data`` whole or not at all, durably: the new file's bytes
    are fsynced before the rename, and the directory after it (a rename is a change of
    the directory; until that is on disk a power cut can bring the old file back)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True), "utf-8")
    with temporary.open("rb") as handle:
        os.fsync(handle.fileno())
    temporary.replace(path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def checked_manifest(manifest: Any) -> dict[str, Any]:
    """The manifest's fields, each of its type, or ``ValueError``/``TypeError`` naming
    the first that is not (a ``"points": "621"`` is refused, not converted)."""
    if not isinstance(manifest, dict):
        raise TypeError(f"a JSON {type(manifest).__name__}, not an object")
    state = manifest["state"]
    if state == "writing":
        return {"state": "writing"}
    if state != "clean":
        raise ValueError(f"state {state!r} is neither 'writing' nor 'clean'")
    points, sample, digest = manifest["points"], manifest["sample"], manifest["digest"]
    if not isinstance(points, int) or isinstance(points, bool) or points < 0:
        raise TypeError(f"points {points!r} is not a count (a whole number, 0 or more)")
    if not isinstance(sample, list) or not all(isinstance(i, str) for i in sample):
        raise TypeError(f"sample {sample!r} is not a list of point ids")
    if not isinstance(digest, str):
        raise TypeError(f"digest {digest!r} is not a string")
    return {
        "state": "clean",
        "points": points,
        "sample": [uuid.UUID(i) for i in sample],
        "digest": digest,
    }


def remove_stored(path: Path) -> None:
    """Remove the collection's own entries under ``path`` (a rebuild), nothing else."""
    for name in _STORED_ENTRIES:
        entry = path / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.exists() or entry.is_symlink():
            entry.unlink()
