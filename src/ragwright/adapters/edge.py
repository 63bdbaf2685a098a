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

import ctypes
import dataclasses
import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ragwright.core.contracts import (
    contract_from_metadata,
    contract_to_metadata,
    reconcile_contract,
)
from ragwright.core.points import INTEGER_INDEX_FIELDS, KEYWORD_INDEX_FIELDS
from ragwright.errors import ContractMismatch, IndexBusy, IndexDamaged, IndexNotFound, StorageError
from ragwright.protocols import IndexPart
from ragwright.types import (
    CollectionContract,
    IndexPoint,
    LexicalStats,
    PointFilter,
    SparseVector,
    StoredPoint,
)

_DISTANCES = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot, "euclid": qe.Distance.Euclid}
_SCROLL_PAGE = 2048
# Points read back on every open: enough to touch each storage file, cheap at any size.
_SAMPLE_SIZE = 8
_PART_NAMES: dict[IndexPart, str] = {
    "payload": "payload storage",
    "dense": "dense vectors",
    "sparse": "sparse vectors",
}
# Everything a collection directory holds; a rebuild removes these names and nothing else.
_STORED_ENTRIES = ("shard", "contract.json", "manifest.json", "contract.tmp", "manifest.tmp")
# A new shard's preallocated files (write-ahead log, vector and payload pages) are about
# 210 MiB of holes that the engine fills as it maps and touches them.
_NEW_SHARD_BYTES = 224 * 2**20
# Room for files a write (or the log replay of an open) creates.
_HEADROOM_BYTES = 16 * 2**20
# Bytes handed to the engine between two counts of its files' holes (_require_space), a
# point's costed at its dense vector, _SPARSE_BYTES and _PAYLOAD_BYTES: half the headroom.
_RECOUNT_BYTES = _HEADROOM_BYTES // 2
_PAYLOAD_BYTES = 4096
# Segment sizes, in points: what a segment costs in memory while it is written, sealed
# or merged grows with its points (ids, payload, keyword and sparse indexes), not with
# the dense vectors' width, so the engine's KiB thresholds are derived from these.
# An appendable segment is sealed (_compact) at about _SEAL_POINTS; sealed segments merge
# up to _MAX_SEGMENT_POINTS, into about _SEGMENTS segments while they are smaller.
# Merges are bounded to two seals' worth: the engine holds the GIL while it seals or
# merges (a serving process pauses), so no step may grow with the collection.
_SEAL_POINTS = 16_384
_MAX_SEGMENT_POINTS = 32_768
_SEGMENTS = 16
_SPARSE_BYTES = 512


class EdgeIndex:
    """A collection stored by qdrant-edge under ``path`` (created on first open)."""

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
            self.path = self._copy = _private_copy(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        _require_free_space(self.path)
        self._lock_file = (self.path / ".lock").open("a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            self._lock_file.close()
            raise IndexBusy(str(self.path)) from error
        # Serialises this process's writes against its own reads; see docs/ingestion.md.
        self._mutex = threading.RLock()
        self._writing = False
        self.seals = 0  # appendable segments sealed by this instance (_compact)
        # Points written since the last seal check, and the free-space check's state:
        # the shard's holes as last counted (None: count before the next write) and
        # the bytes handed to the engine since (_require_space).
        self._unsealed = 0
        self._holes: int | None = None
        self._written = 0
        try:
            if rebuild:
                self._remove_stored()
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
            contract = reconcile_contract(
                expected, stored, add_chunking_version=add_chunking_version
            )
            # The stored vector layout is checked before the engine opens the shard with
            # our configuration, so a contract mismatch is named as one.
            self._check_vectors(shard_path, contract)
            self._shard = self._load_shard(shard_path, contract)
        else:
            # First open, or a crash before the contract was written: creating the
            # shard again is safe only if it holds nothing.
            if shard_path.exists():
                self._shard = self._load_shard(shard_path)
                if self._shard.info().points_count:
                    raise ContractMismatch(
                        "contract.json", "present", "missing on a non-empty shard"
                    )
            else:
                self._shard = qe.EdgeShard.create(str(shard_path), _edge_config(expected))
            # Before the contract: an index with a contract always has a manifest.
            _write_json_atomically(self.path / "manifest.json", _EMPTY_MANIFEST)
            contract = expected
        self._ensure_payload_indexes()
        # Only a new or changed contract is written: opening to read writes nothing.
        if stored is None or contract_to_metadata(stored) != contract_to_metadata(contract):
            _write_json_atomically(contract_path, contract_to_metadata(contract))
        return contract

    def _stored_contract(self, contract_path: Path) -> CollectionContract:
        try:
            metadata = json.loads(contract_path.read_text("utf-8"))
            if not isinstance(metadata, dict):
                raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
            return contract_from_metadata(metadata)
        except (ValueError, ContractMismatch) as error:
            # We write this file atomically, so one that does not parse was damaged.
            raise IndexDamaged(str(self.path), "contract.json", _one_line(error)) from error

    def _load_shard(
        self, shard_path: Path, contract: CollectionContract | None = None
    ) -> qe.EdgeShard:
        config = _edge_config(contract) if contract is not None else None
        try:
            return qe.EdgeShard.load(str(shard_path), config)
        except Exception as error:  # qdrant-edge reports storage faults as plain Exception
            raise IndexDamaged(str(self.path), "shard", _one_line(error)) from error

    def _remove_stored(self) -> None:
        for name in _STORED_ENTRIES:
            entry = self.path / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.exists() or entry.is_symlink():
                entry.unlink()

    def _read_manifest(self) -> dict[str, Any]:
        path = self.path / "manifest.json"
        if not path.exists():
            # Created with the index (before its contract): gone means damaged or
            # removed, and the count it held can no longer be checked.
            raise IndexDamaged(str(self.path), "manifest.json", "missing")
        try:
            return _checked_manifest(json.loads(path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as error:
            raise IndexDamaged(str(self.path), "manifest.json", _one_line(error)) from error

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
            if _payload_digest(payloads) != manifest["digest"]:
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

    def _first_points(self) -> list[StoredPoint]:
        points: list[StoredPoint] = []
        for point in self.scroll(payload_fields=()):
            points.append(point)
            if len(points) == _SAMPLE_SIZE:
                break
        return points

    def _begin_write(self) -> None:
        # Before the first change of a session: a writer that dies now leaves "writing",
        # and the next open trusts the WAL for the count instead of refusing the index.
        # Nothing committed describes the index any more until the session commits.
        if not self._writing:
            _write_json_atomically(self.path / "manifest.json", {"state": "writing"})
            self._writing = True
            self.committed_points = None

    def _commit_manifest(self) -> None:
        with self._mutex:
            sample = [p.point_id for p in self._first_points()]
            points = self.count()
            _write_json_atomically(
                self.path / "manifest.json",
                {
                    "state": "clean",
                    "points": points,
                    "sample": [str(i) for i in sample],
                    "digest": _payload_digest(self.read_part(sample, "payload")),
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
            self._holes = _shard_holes(self.path / "shard")
            self._written = 0
        _require_free_space(self.path, self._holes)
        self._written += points * (self.contract.dimensions * 4 + _SPARSE_BYTES + _PAYLOAD_BYTES)

    def _compact(self, points: int) -> None:
        """Seal the appendable segment once it holds about ``_SEAL_POINTS`` points.

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
        if self._unsealed < max(1, _SEAL_POINTS // 16):
            return
        self._unsealed = 0
        if not self._shard.optimize():
            return
        self._holes = None  # the seal made and removed files: count them again
        self._shard.close()
        self._shard = self._load_shard(self.path / "shard", self.contract)
        self.seals += 1
        _release_free_memory()

    def add_chunking_version(self, version: str) -> None:
        """Add ``version`` to the contract (and ``contract.json``), as opening with
        ``add_chunking_version=True`` would, without reopening the index."""
        with self._mutex:
            wanted = dataclasses.replace(self.contract, chunking_versions=(version,))
            contract = reconcile_contract(wanted, self.contract, add_chunking_version=True)
            if contract != self.contract:
                _write_json_atomically(self.path / "contract.json", contract_to_metadata(contract))
                self.contract = contract

    def reading(self) -> AbstractContextManager[object]:
        """Reads made inside see no write of this process between them: the writes of
        an ingestion running in another thread wait (each engine call is already
        serialised by the same lock), so a query's dense and BM25 legs see one state."""
        return self._mutex

    def read_part(self, ids: Sequence[uuid.UUID], part: IndexPart) -> dict[uuid.UUID, Any]:
        if not ids:
            return {}
        name = self.contract.vector_name if part == "dense" else self.contract.sparse_vector_name
        try:
            with self._mutex:
                if part == "payload":
                    records = self._shard.retrieve(list(ids), True, False)
                else:
                    records = self._shard.retrieve(list(ids), False, [name])
        except Exception as error:  # qdrant-edge reports storage faults as plain Exception
            raise IndexDamaged(str(self.path), _PART_NAMES[part], _one_line(error)) from error
        found: dict[uuid.UUID, Any] = {}
        for record in records:
            point_id = record.id if isinstance(record.id, uuid.UUID) else uuid.UUID(str(record.id))
            if part == "payload":
                found[point_id] = record.payload or {}
                continue
            vector: Any = record.vector.get(name) if isinstance(record.vector, dict) else None
            if vector is None:
                continue
            found[point_id] = (
                list(vector)
                if part == "dense"
                else SparseVector(tuple(vector.indices), tuple(vector.values))
            )
        return found

    def _check_vectors(self, shard_path: Path, contract: CollectionContract) -> None:
        try:
            config = json.loads((shard_path / "edge_config.json").read_text("utf-8"))
        except (OSError, ValueError) as error:
            raise IndexDamaged(str(self.path), "shard", _one_line(error)) from error
        vector = config.get("vectors", {}).get(contract.vector_name)
        if vector is None:
            raise ContractMismatch(
                "vector_name", contract.vector_name, sorted(config.get("vectors", {}))
            )
        if vector.get("size") != contract.dimensions:
            raise ContractMismatch("dimensions", contract.dimensions, vector.get("size"))
        if str(vector.get("distance", "")).lower() != contract.distance:
            raise ContractMismatch("distance", contract.distance, vector.get("distance"))
        sparse = config.get("sparse_vectors", {}).get(contract.sparse_vector_name)
        if sparse is None or str(sparse.get("modifier", "")).lower() != "idf":
            raise ContractMismatch(
                "sparse_vectors", {contract.sparse_vector_name: "idf"}, config.get("sparse_vectors")
            )

    def _ensure_payload_indexes(self) -> None:
        schema = self._shard.info().payload_schema
        cold = qe.Memory.Cold
        wanted: list[tuple[str, qe.PayloadSchemaType, Any]] = [
            (field, qe.PayloadSchemaType.Keyword, qe.KeywordIndexParams(memory=cold))
            for field in KEYWORD_INDEX_FIELDS
        ] + [
            (
                field,
                qe.PayloadSchemaType.Integer,
                qe.IntegerIndexParams(lookup=True, range=False, memory=cold),
            )
            for field in INTEGER_INDEX_FIELDS
        ]
        for field, kind, params in wanted:
            info = schema.get(field)
            if info is None:
                # Created on an index that already holds points too: the engine builds
                # it from their payloads (once, on the first open after an upgrade).
                self._shard.update(qe.UpdateOperation.create_field_index(field, params))
            elif info.data_type != kind:
                name = str(kind).rsplit(".", 1)[-1].lower()
                raise ContractMismatch(f"payload_index.{field}", name, str(info.data_type))

    def payload_index_types(self) -> dict[str, str]:
        """Field name → index type, as the engine reports it."""
        return {
            name: str(info.data_type).rsplit(".", 1)[-1].lower()
            for name, info in self._shard.info().payload_schema.items()
        }

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
            _write_json_atomically(self.path / "contract.json", contract_to_metadata(contract))
            self.contract = contract

    def retrieve(
        self, ids: Sequence[uuid.UUID], *, with_vectors: bool = False
    ) -> list[StoredPoint]:
        if not ids:
            return []
        with self._mutex:
            records = self._shard.retrieve(list(ids), True, with_vectors)
        return [
            _stored(r.id, r.payload, None, r.vector, self.contract.vector_name) for r in records
        ]

    def scroll(
        self,
        point_filter: PointFilter | None = None,
        *,
        payload_fields: Sequence[str] | None = None,
    ) -> Iterator[StoredPoint]:
        offset: Any = None
        with_payload: bool | list[str] = (
            True if payload_fields is None else (list(payload_fields) or False)
        )
        while True:
            try:
                with self._mutex:
                    records, offset = self._shard.scroll(
                        qe.ScrollRequest(
                            offset=offset,
                            limit=_SCROLL_PAGE,
                            filter=_edge_filter(point_filter),
                            with_payload=with_payload,
                            with_vector=False,
                        )
                    )
            except Exception as error:  # qdrant-edge reports storage faults as plain Exception
                part = "payload storage" if with_payload else "id tracker"
                raise IndexDamaged(str(self.path), part, _one_line(error)) from error
            for record in records:
                yield _stored(record.id, record.payload, None, None, "")
            if offset is None:
                return

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

    def count(self, point_filter: PointFilter | None = None) -> int:
        with self._mutex:
            return self._shard.count(qe.CountRequest(exact=True, filter=_edge_filter(point_filter)))

    def facet(self, field: str, point_filter: PointFilter | None = None) -> dict[str | int, int]:
        with self._mutex:
            # Every value: a field has at most as many values as matching points.
            limit = max(1, self.count(point_filter))
            response = self._shard.facet(
                qe.FacetRequest(
                    key=field, limit=limit, exact=True, filter=_edge_filter(point_filter)
                )
            )
        return {hit.value: hit.count for hit in response.hits if not isinstance(hit.value, bool)}

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        return self._nearest(list(vector), self.contract.vector_name, point_filter, limit)

    def search_sparse(
        self, vector: SparseVector, point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        if not vector.indices:
            return []
        sparse = qe.SparseVector(list(vector.indices), list(vector.values))
        return self._nearest(sparse, self.contract.sparse_vector_name, point_filter, limit)

    def _nearest(
        self, vector: Any, using: str, point_filter: PointFilter, limit: int
    ) -> list[StoredPoint]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector, using=using),
            filter=_edge_filter(point_filter),
            with_payload=True,
            with_vector=False,
        )
        with self._mutex:
            results = self._shard.query(request)
        return [_stored(r.id, r.payload, r.score, None, "") for r in results]

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


def _edge_config(contract: CollectionContract) -> qe.EdgeConfig:
    """The shard layout: the contract's vectors, every sealed part memory-mapped cold.

    ``hnsw_config.m = 0`` keeps sealed segments on the plain (exact) index, as the
    appendable ones are: searches return what they returned before sealing, and a seal
    costs a copy instead of a graph build (~12x longer measured, all under the GIL).
    Segments merge up to ``_MAX_SEGMENT_POINTS``, so a merge's work is bounded too.
    Applied on create and on every open, so shards made before it are converted as they
    are written.
    """
    cold = qe.Memory.Cold
    return qe.EdgeConfig(
        vectors={
            contract.vector_name: qe.EdgeVectorParams(
                size=contract.dimensions, distance=_DISTANCES[contract.distance], memory=cold
            )
        },
        sparse_vectors={
            contract.sparse_vector_name: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf, memory=cold
            )
        },
        payload_memory=cold,
        id_tracker_memory=cold,
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=_kib(_SEAL_POINTS, contract.dimensions),
            max_segment_size=_kib(_MAX_SEGMENT_POINTS, contract.dimensions),
            default_segment_number=_SEGMENTS,
        ),
    )


def _kib(points: int, dimensions: int) -> int:
    """The engine's segment thresholds count KiB of vectors: the dense one (4-byte
    floats) and the BM25 one (8 bytes a term; _SPARSE_BYTES is a typical chunk's)."""
    return max(1, points * (dimensions * 4 + _SPARSE_BYTES) // 1024)


def _release_free_memory() -> None:
    """Give memory freed by the engine back to the kernel (glibc keeps it otherwise)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to trim
        return
    libc.malloc_trim(0)


def _edge_filter(point_filter: PointFilter | None) -> qe.Filter | None:
    if point_filter is None or not (
        point_filter.must or point_filter.must_not or point_filter.empty
    ):
        return None

    def condition(key: str, values: tuple[str, ...]) -> qe.FieldCondition:
        match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(list(values))
        return qe.FieldCondition(key, match=match)

    must: list[Any] = [condition(m.key, m.values) for m in point_filter.must]
    must += [qe.IsEmptyCondition(key) for key in point_filter.empty]
    return qe.Filter(
        must=must or None,
        must_not=[condition(m.key, m.values) for m in point_filter.must_not] or None,
    )


def _stored(
    point_id: Any, payload: Any, score: float | None, vector: Any, vector_name: str
) -> StoredPoint:
    dense = vector.get(vector_name) if isinstance(vector, dict) else vector
    return StoredPoint(
        point_id=point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id)),
        payload=payload or {},
        score=score,
        vector=list(dense) if dense is not None else None,
    )


def _payload_digest(payloads: Mapping[uuid.UUID, Any]) -> str:
    canonical = json.dumps(
        [[str(i), payloads[i]] for i in sorted(payloads)], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# What a new index records before its contract: committed, empty.
_EMPTY_MANIFEST = {"state": "clean", "points": 0, "sample": [], "digest": _payload_digest({})}


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _shard_holes(shard: Path) -> int | None:
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


def _require_free_space(path: Path, holes: int | None = None) -> None:
    """``StorageError`` unless the file system has room for the engine's holes
    (``holes``, counted now when not given) plus headroom."""
    if holes is None:
        holes = _shard_holes(path / "shard")
    needed = _NEW_SHARD_BYTES if holes is None else holes + _HEADROOM_BYTES
    free = shutil.disk_usage(path).free
    if free < needed:
        raise StorageError(
            str(path),
            f"disk nearly full ({free // 2**20} MiB free, the embedded index may need "
            f"{needed // 2**20} MiB to open or write safely); free space and run the "
            "command again (the index is as the last completed ingest left it)",
        )


def _private_copy(path: Path) -> Path:
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


def _copy_sparse(source: str, destination: str) -> None:
    with open(source, "rb") as reader, open(destination, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(reader.fileno(), offset, os.SEEK_DATA)
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: only a hole remains
                    raise
                break
            end = os.lseek(reader.fileno(), start, os.SEEK_HOLE)
            reader.seek(start)
            writer.seek(start)
            while start < end:
                block = reader.read(min(end - start, 2**20))
                if not block:
                    break
                writer.write(block)
                start += len(block)
            offset = end
        writer.truncate(size)


def _write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
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


def _checked_manifest(manifest: Any) -> dict[str, Any]:
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
