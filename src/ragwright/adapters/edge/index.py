"""``EdgeIndex``: Qdrant's own engine in-process (qdrant-edge), the embedded default.

Layout under the index directory::

    contract.json   the collection contract and BM25 statistics (edge shards keep no
                    collection metadata)
    manifest.json   what the last writer committed: ``writing`` while a write session is
                    open, then ``clean`` with the point count and a sample's payload digest
                    (written ``clean`` with 0 points when the index is created, so a
                    missing one is damage, never "nothing written yet")
    shard/          the edge shard: WAL, segments, payload indexes
    .lock           held with flock while a process has the index open

qdrant-edge allows one process per shard path. We take our own ``flock`` first so a
second process gets :class:`IndexBusy` at once instead of an engine error string.
A process that dies releases the lock with its file descriptors, and the WAL replays
every acknowledged update on the next open.

Opening verifies what the engine exposes against the manifest: the exact point count,
then a sample read back part by part (payload digest, dense vectors of the contract's
size and finite, sparse vectors readable). A file that cannot be parsed, a count that
does not match (above or below the committed count) or a part that does not read back
is :class:`IndexDamaged`, naming the part; so is a missing manifest, or one whose
``state`` is neither ``writing`` nor ``clean`` or whose fields have the wrong type.
After a crashed writer (manifest ``writing``) the WAL is the authority on the count,
so only the sample is read back. ``rebuild=True`` removes the collection's own
files (never anything else in or above its directory) before opening, so the caller
can ingest it again from its sources.
The engine maps its files writable even to read them, and touching a mapped page on a
full disk kills the process with ``SIGBUS``. So every open and every write (upsert,
sparse update, payload change, delete, the lexical-statistics record) first checks
that the space the engine may still allocate is free (:class:`StorageError` otherwise:
the holes of its preallocated files, plus headroom for new ones; the holes are counted
again after each seal and every few MiB written, not walked before every write), and a
read-only open of a directory we cannot write (a read-only home) works on a private,
sparse copy in the temporary directory, removed on close. ``contract.json`` and
``manifest.json`` are replaced atomically: written to a temporary file, fsynced,
renamed, and the directory fsynced so the rename survives a power cut.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ragwright.adapters.edge import engine, files
from ragwright.adapters.edge.writes import EdgeWrites
from ragwright.core.contracts import (
    contract_from_metadata,
    contract_to_metadata,
    reconcile_contract,
)
from ragwright.errors import ContractMismatch, IndexBusy, IndexDamaged, IndexNotFound
from ragwright.types import CollectionContract


class EdgeIndex(EdgeWrites):
    """A collection stored by qdrant-edge under ``path`` (created on first open): its
    reads (:class:`~ragwright.adapters.edge.reads.EdgeReads`) and writes
    (:class:`~ragwright.adapters.edge.writes.EdgeWrites`) over the shard opened, locked
    and verified here."""

    def __init__(
        self,
        path: Path,
        contract: CollectionContract,
        *,
        add_chunking_version: bool = False,
        create: bool = True,
        rebuild: bool = False,
        verify: bool = True,
    ) -> None:
        self.path = Path(path)
        if not create and not (self.path / "contract.json").is_file():
            raise IndexNotFound(str(self.path))
        self._copy: Path | None = None
        if not create and not os.access(self.path, os.W_OK):
            self.path = self._copy = files.private_copy(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        files.require_free_space(self.path)
        self._lock_file = (self.path / ".lock").open("a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            self._lock_file.close()
            raise IndexBusy(str(self.path)) from error
        # Serialises this process's writes against its own reads; see docs/ingestion.md.
        self._mutex = threading.RLock()
        self._start_writes()
        try:
            if rebuild:
                files.remove_stored(self.path)
            self.contract = self._open(contract, add_chunking_version)
            self.committed_points = self._verify(check=verify)
        except BaseException:
            self._release()
            raise

    def _open(self, expected: CollectionContract, add_chunking_version: bool) -> CollectionContract:
        shard_path = self.path / "shard"
        contract_path = self.path / "contract.json"
        stored: CollectionContract | None = None
        if contract_path.exists():
            stored = self._stored_contract(contract_path)
            # Every field but the chunking versions first (they depend on whether the
            # shard holds anything): the stored vector layout is checked before the
            # engine opens the shard with our configuration, so a contract mismatch is
            # named as one.
            contract = reconcile_contract(expected, stored, add_chunking_version=True)
            engine.check_vectors(self.path, shard_path, contract)
            self._shard = engine.load_shard(self.path, shard_path, contract)
            try:
                contract = reconcile_contract(
                    expected,
                    stored,
                    add_chunking_version=add_chunking_version,
                    empty=not self._shard.info().points_count,
                )
            except ContractMismatch:
                self._shard.close()  # its WAL lock would outlive the refusal
                del self._shard
                raise
        else:
            # First open, or a crash before the contract was written: creating the
            # shard again is safe only if it holds nothing.
            if shard_path.exists():
                self._shard = engine.load_shard(self.path, shard_path)
                if self._shard.info().points_count:
                    raise ContractMismatch(
                        "contract.json", "present", "missing on a non-empty shard"
                    )
            else:
                self._shard = qe.EdgeShard.create(str(shard_path), engine.edge_config(expected))
            # Before the contract: an index with a contract always has a manifest.
            files.write_json_atomically(self.path / "manifest.json", files.EMPTY_MANIFEST)
            contract = expected
        engine.ensure_payload_indexes(self._shard)
        # Only a new or changed contract is written: opening to read writes nothing.
        if stored is None or contract_to_metadata(stored) != contract_to_metadata(contract):
            files.write_json_atomically(contract_path, contract_to_metadata(contract))
        return contract

    def _stored_contract(self, contract_path: Path) -> CollectionContract:
        try:
            metadata = json.loads(contract_path.read_text("utf-8"))
            if not isinstance(metadata, dict):
                raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
            return contract_from_metadata(metadata)
        except (ValueError, ContractMismatch) as error:
            # We write this file atomically, so one that does not parse was damaged.
            raise IndexDamaged(str(self.path), "contract.json", files.one_line(error)) from error

    def _read_manifest(self) -> dict[str, Any]:
        path = self.path / "manifest.json"
        if not path.exists():
            # Created with the index (before its contract): gone means damaged or
            # removed, and the count it held can no longer be checked.
            raise IndexDamaged(str(self.path), "manifest.json", "missing")
        try:
            return files.checked_manifest(json.loads(path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as error:
            raise IndexDamaged(str(self.path), "manifest.json", files.one_line(error)) from error

    def _verify(self, *, check: bool) -> int | None:
        manifest = self._read_manifest()
        committed = manifest["points"] if manifest["state"] == "clean" else None
        if not check:
            return committed
        if committed is None:
            sample = [p.point_id for p in self._first_points()]
        else:
            held = self.count()
            if held != committed:
                raise IndexDamaged(
                    str(self.path),
                    "id tracker",
                    f"{held} points readable, {committed} committed",
                )
            sample = manifest["sample"]
        payloads = self.read_part(sample, "payload")
        if committed is not None:
            missing = [str(i) for i in sample if i not in payloads]
            if missing:
                raise IndexDamaged(
                    str(self.path), "id tracker", f"committed point {missing[0]} is missing"
                )
            if files.payload_digest(payloads) != manifest["digest"]:
                raise IndexDamaged(
                    str(self.path), "payload storage", "sampled payloads differ from the commit"
                )
        for point_id, vector in self.read_part(list(payloads), "dense").items():
            if len(vector) != self.contract.dimensions or not all(map(math.isfinite, vector)):
                raise IndexDamaged(
                    str(self.path),
                    "dense vectors",
                    f"point {point_id} has {len(vector)} values or a non-finite one",
                )
        self.read_part(list(payloads), "sparse")
        return committed

    def close(self) -> None:
        shard: qe.EdgeShard | None = getattr(self, "_shard", None)
        if shard is not None:
            shard.flush()
            if self._writing:
                self._commit_manifest()
            shard.close()
            del self._shard
        self._release()

    def _release(self) -> None:
        if not self._lock_file.closed:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)

    def __enter__(self) -> EdgeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
