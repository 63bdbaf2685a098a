"""What qdrant-edge is told and what it answers, in the project's terms: the shard's
configuration (vectors, cold memory, segment sizes), the stored layout checked against
the contract before the engine opens it, the keyword and integer payload indexes, filters,
stored points, and memory handed back after a seal."""

from __future__ import annotations

import ctypes
import json
import uuid
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ragwright.adapters.edge.files import one_line
from ragwright.core.points import INTEGER_INDEX_FIELDS, KEYWORD_INDEX_FIELDS
from ragwright.errors import ContractMismatch, IndexDamaged
from ragwright.types import CollectionContract, PointFilter, StoredPoint

_DISTANCES = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot, "euclid": qe.Distance.Euclid}
# Segment sizes, in points: what a segment costs in memory while it is written, sealed
# or merged grows with its points (ids, payload, keyword and sparse indexes), not with
# the dense vectors' width, so the engine's KiB thresholds are derived from these.
# An appendable segment is sealed (EdgeWrites._compact) at about SEAL_POINTS; sealed
# segments merge up to MAX_SEGMENT_POINTS, into about _SEGMENTS segments while they are
# smaller.
# Merges are bounded to two seals' worth: the engine holds the GIL while it seals or
# merges (a serving process pauses), so no step may grow with the collection.
SEAL_POINTS = 16_384
MAX_SEGMENT_POINTS = 32_768
_SEGMENTS = 16
SPARSE_BYTES = 512


def load_shard(
    index: Path, shard_path: Path, contract: CollectionContract | None = None
) -> qe.EdgeShard:
    """The shard at ``shard_path`` of the index at ``index``, opened with the contract's
    configuration (``None``: as stored); :class:`IndexDamaged` when the engine cannot."""
    config = edge_config(contract) if contract is not None else None
    try:
        return qe.EdgeShard.load(str(shard_path), config)
    except Exception as error:  # qdrant-edge reports storage faults as plain Exception
        raise IndexDamaged(str(index), "shard", one_line(error)) from error


def check_vectors(index: Path, shard_path: Path, contract: CollectionContract) -> None:
    """:class:`ContractMismatch` unless the shard's stored vector layout is the
    contract's (read from its files before the engine opens it with ours)."""
    try:
        config = json.loads((shard_path / "edge_config.json").read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise IndexDamaged(str(index), "shard", one_line(error)) from error
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


def ensure_payload_indexes(shard: qe.EdgeShard) -> None:
    """Create the payload indexes the queries filter on; :class:`ContractMismatch` when
    one exists with another type."""
    schema = shard.info().payload_schema
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
            shard.update(qe.UpdateOperation.create_field_index(field, params))
        elif info.data_type != kind:
            name = str(kind).rsplit(".", 1)[-1].lower()
            raise ContractMismatch(f"payload_index.{field}", name, str(info.data_type))


def edge_config(contract: CollectionContract) -> qe.EdgeConfig:
    """The shard layout: the contract's vectors, every sealed part memory-mapped cold.

    ``hnsw_config.m = 0`` keeps sealed segments on the plain (exact) index, as the
    appendable ones are: searches return what they returned before sealing, and a seal
    costs a copy instead of a graph build (~12x longer measured, all under the GIL).
    Segments merge up to ``MAX_SEGMENT_POINTS``, so a merge's work is bounded too.
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
            indexing_threshold=_kib(SEAL_POINTS, contract.dimensions),
            max_segment_size=_kib(MAX_SEGMENT_POINTS, contract.dimensions),
            default_segment_number=_SEGMENTS,
        ),
    )


def _kib(points: int, dimensions: int) -> int:
    """The engine's segment thresholds count KiB of vectors: the dense one (4-byte
    floats) and the BM25 one (8 bytes a term; SPARSE_BYTES is a typical chunk's)."""
    return max(1, points * (dimensions * 4 + SPARSE_BYTES) // 1024)


def release_free_memory() -> None:
    """Give memory freed by the engine back to the kernel (glibc keeps it otherwise)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to trim
        return
    libc.malloc_trim(0)


def edge_filter(point_filter: PointFilter | None) -> qe.Filter | None:
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


def stored_point(
    point_id: Any, payload: Any, score: float | None, vector: Any, vector_name: str
) -> StoredPoint:
    dense = vector.get(vector_name) if isinstance(vector, dict) else vector
    return StoredPoint(
        point_id=point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id)),
        payload=payload or {},
        score=score,
        vector=list(dense) if dense is not None else None,
    )
