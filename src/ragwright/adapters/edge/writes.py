"""The writes of an open embedded index: points, sparse vectors, payload changes and
deletions, each after the free-space check and inside a write session the manifest
records (``writing`` until :meth:`EdgeWrites.commit` or a clean close), and the seal
of the appendable segment that keeps the index's resident memory bounded."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as qe

from ragwright.adapters.edge import engine, files
from ragwright.adapters.edge.reads import EdgeReads
from ragwright.core.contracts import contract_to_metadata, reconcile_contract
from ragwright.types import IndexPoint, LexicalStats, SparseVector

# Bytes handed to the engine between two counts of its files' holes (_require_space), a
# point's costed at its dense vector, engine.SPARSE_BYTES and _PAYLOAD_BYTES: half the
# headroom.
_RECOUNT_BYTES = files.HEADROOM_BYTES // 2
_PAYLOAD_BYTES = 4096


class EdgeWrites(EdgeReads):
    """What changes an open shard; the reads it checks its commits with are inherited."""

    # One upsert is one ``update`` of the engine: written to its WAL as one record before
    # it is applied, and replayed whole when the shard is opened after a crash (a torn
    # record at the WAL's end is dropped whole). Every engine call of this process runs
    # under the mutex, so a reader of this process never sees part of one either.
    atomic_upsert = True

    committed_points: int | None
    seals: int
    _writing: bool
    _unsealed: int
    _holes: int | None
    _written: int

    def _start_writes(self) -> None:
        """No write session open, nothing written yet."""
        self._writing = False
        self.seals = 0  # appendable segments sealed by this instance (_compact)
        # Points written since the last seal check, and the free-space check's state:
        # the shard's holes as last counted (None: count before the next write) and
        # the bytes handed to the engine since (_require_space).
        self._unsealed = 0
        self._holes = None
        self._written = 0

    def _begin_write(self) -> None:
        # Before the first change of a session: a writer that dies now leaves "writing",
        # and the next open trusts the WAL for the count instead of refusing the index.
        # Nothing committed describes the index any more until the session commits.
        if not self._writing:
            files.write_json_atomically(self.path / "manifest.json", {"state": "writing"})
            self._writing = True
            self.committed_points = None

    def _commit_manifest(self) -> None:
        with self._mutex:
            sample = [p.point_id for p in self._first_points()]
            points = self.count()
            files.write_json_atomically(
                self.path / "manifest.json",
                {
                    "state": "clean",
                    "points": points,
                    "sample": [str(i) for i in sample],
                    "digest": files.payload_digest(self.read_part(sample, "payload")),
                },
            )
            self._writing = False
            self.committed_points = points

    def commit(self) -> None:
        """Make what was written so far durable and committed, keeping the index open.

        Flushes the shard and records the manifest (count and sample) as a clean close
        would, so a process that holds the index for its lifetime (``ragwright serve``)
        leaves after each ingestion an index the next open verifies clean. Nothing to
        do when nothing was written since the last commit.
        """
        with self._mutex:
            if not self._writing:
                return
            self._shard.flush()
            self._commit_manifest()

    def _require_space(self, points: int) -> None:
        """The free-space check of a write of ``points`` points (see the module).

        The free space is asked of the file system on every write; the holes of the
        engine's files are counted again only after a seal (which makes and removes
        files) or once :data:`_RECOUNT_BYTES` were handed to the engine since the last
        count: walking every file of every segment before each write made the check,
        not the write, the cost of a payload switch, growing with the segments
        (docs/ingestion.md, "Where the time goes"). Between counts the engine only
        fills holes (the count is then too high: safe) or creates files for what was
        written since, which is less than the headroom.
        Called with the mutex held.
        """
        if self._holes is None or self._written >= _RECOUNT_BYTES:
            self._holes = files.shard_holes(self.path / "shard")
            self._written = 0
        files.require_free_space(self.path, self._holes)
        self._written += points * (
            self.contract.dimensions * 4 + engine.SPARSE_BYTES + _PAYLOAD_BYTES
        )

    def _compact(self, points: int) -> None:
        """Seal the appendable segment once it holds about ``engine.SEAL_POINTS`` points.

        Every write lands in an appendable segment whose id tracker, keyword indexes and
        sparse inverted index live in RAM (about 2.5 KB a point measured at 100,000
        points), and qdrant-edge optimises only when asked. Sealing converts that segment
        into an immutable one whose parts are memory-mapped ``Cold``, and a new
        appendable segment takes the next writes, so the resident index stays about the
        size of one appendable segment whatever the collection holds. The engine keeps
        the converted segment's working memory until the shard is opened again, and
        glibc keeps freed memory until trimmed: both are done after each seal. A check
        that seals nothing costs about 0.1 ms; a seal takes a second or a few, during
        which the engine holds the GIL (docs/ingestion.md, "Memory").
        Called with the mutex held, after a write of ``points`` points; the engine is
        asked once every sixteenth of a seal's points written (each ask costs more as
        segments accumulate), so a segment is sealed a little past the threshold.
        """
        self._unsealed += points
        if self._unsealed < max(1, engine.SEAL_POINTS // 16):
            return
        self._unsealed = 0
        if not self._shard.optimize():
            return
        self._holes = None  # the seal made and removed files: count them again
        self._shard.close()
        self._shard = engine.load_shard(self.path, self.path / "shard", self.contract)
        self.seals += 1
        engine.release_free_memory()

    def add_chunking_version(self, version: str) -> None:
        """Add ``version`` to the contract (and ``contract.json``), as opening with
        ``add_chunking_version=True`` would, without reopening the index."""
        with self._mutex:
            wanted = dataclasses.replace(self.contract, chunking_versions=(version,))
            contract = reconcile_contract(wanted, self.contract, add_chunking_version=True)
            if contract != self.contract:
                files.write_json_atomically(
                    self.path / "contract.json", contract_to_metadata(contract)
                )
                self.contract = contract

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        edge_points = [qe.Point(p.point_id, self._vectors(p), dict(p.payload)) for p in points]
        with self._mutex:
            self._require_space(len(points))
            self._begin_write()
            self._shard.update(qe.UpdateOperation.upsert_points(edge_points))
            self._compact(len(points))

    def _vectors(self, point: IndexPoint) -> dict[str, Any]:
        vectors: dict[str, Any] = {self.contract.vector_name: list(point.vector)}
        if point.sparse is not None and point.sparse.indices:
            vectors[self.contract.sparse_vector_name] = qe.SparseVector(
                list(point.sparse.indices), list(point.sparse.values)
            )
        return vectors

    def update_sparse(self, vectors: Sequence[tuple[uuid.UUID, SparseVector]]) -> None:
        if not vectors:
            return
        name = self.contract.sparse_vector_name
        updates = [
            qe.PointVectors(pid, {name: qe.SparseVector(list(v.indices), list(v.values))})
            for pid, v in vectors
        ]
        with self._mutex:
            self._require_space(len(updates))
            self._begin_write()
            self._shard.update(qe.UpdateOperation.update_vectors(updates))
            self._compact(len(updates))

    def record_lexical_stats(self, stats: LexicalStats) -> None:
        with self._mutex:
            self._require_space(1)
            contract = dataclasses.replace(self.contract, lexical_stats=stats)
            files.write_json_atomically(self.path / "contract.json", contract_to_metadata(contract))
            self.contract = contract

    def set_payload(self, ids: Sequence[uuid.UUID], payload: Mapping[str, Any]) -> None:
        if ids:
            with self._mutex:
                self._require_space(len(ids))
                self._begin_write()
                self._shard.update(qe.UpdateOperation.set_payload(list(ids), dict(payload)))
                self._compact(len(ids))

    def delete_payload_keys(self, ids: Sequence[uuid.UUID], keys: Sequence[str]) -> None:
        if ids and keys:
            with self._mutex:
                self._require_space(len(ids))
                self._begin_write()
                self._shard.update(qe.UpdateOperation.delete_payload(list(ids), list(keys)))

    def delete(self, ids: Sequence[uuid.UUID]) -> None:
        if ids:
            with self._mutex:
                self._require_space(len(ids))
                self._begin_write()
                self._shard.update(qe.UpdateOperation.delete_points(list(ids)))
