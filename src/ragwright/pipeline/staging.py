"""How a slice's points reach the index before its switch, on the writer thread.

A changed document's new points are *staged* (:func:`stage_points`: upserted with
``index_state="staged"``, invisible to queries, and read back), for
:mod:`ragwright.pipeline.switching` to switch. On an index whose upserts are atomic
(:attr:`~ragwright.protocols.VectorIndex.atomic_upsert`), the points of a slice's *new*
documents are built live instead (:func:`prepare_live`) and written whole in one upsert at
the switch (:func:`write_new_live`); points built for a switch that never comes are staged
(:func:`stage_prepared`). docs/ingestion.md, "New documents written live".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from ragwright.core.points import LEXICAL_TERMS, LIVE, STAGED, PlannedPoint
from ragwright.errors import ReadBackError
from ragwright.pipeline.planning import DocumentWork, encode_lexical
from ragwright.protocols import SparseEncoder, VectorIndex
from ragwright.types import IndexPoint, SparseVector

READBACK_FIELDS = ("text", "document_id", "chunking_version", "document_type", "publication_state")
# A point written live is read back for these too: what makes it visible, and to whom.
LIVE_READBACK_FIELDS = (*READBACK_FIELDS, "index_state", "document_digest", "tenant")


def prepare_live(
    sparse_encoder: SparseEncoder,
    batch: Sequence[PlannedPoint],
    vectors: Sequence[Sequence[float]],
    avgdl: float,
    encoded: Mapping[uuid.UUID, tuple[int, SparseVector]] | None,
    into: list[IndexPoint],
) -> None:
    """Add one embedding call's points of new documents to ``into``, live and with their
    BM25 vectors (on the writer thread, while the model embeds the next batch): the
    slice's switch writes them all in one upsert
    (:func:`~ragwright.pipeline.switching.switch_slice`)."""
    into.extend(
        _index_point(sparse_encoder, p, vector, avgdl, encoded, LIVE)
        for p, vector in zip(batch, vectors, strict=True)
    )


def stage_prepared(index: VectorIndex, points: Sequence[IndexPoint]) -> None:
    """Stage points :func:`prepare_live` built whose slice never reached its switch (the
    pass failed first): a later run finds them staged and reuses their vectors instead of
    embedding them again, as it would had they been staged in the first place."""
    switched = _live_already(index, {p.point_id: p.payload["document_digest"] for p in points})
    index.upsert(
        [
            IndexPoint(p.point_id, p.vector, {**p.payload, "index_state": STAGED}, p.sparse)
            for p in points
            if p.point_id not in switched
        ]
    )


def _live_already(index: VectorIndex, planned: Mapping[uuid.UUID, str]) -> set[uuid.UUID]:
    """Which of the ``planned`` points (id → the plan's document digest) are live with
    that digest already.

    A point's id is its content's (embedding input and BM25 text), so such a point is
    this very point after its switch: another attempt at the slice switched it (a worker
    presumed dead after its lease that still writes) or a concurrent run did. Staging it
    again would hide it until its document switches again, which never comes if this
    attempt then dies: it is left as it is.
    """
    if not planned:
        return set()
    # Only the two fields compared are read (the engine converts what it returns).
    state_fields = ("index_state", "document_digest")
    return {
        point.point_id
        for point in index.retrieve(list(planned), payload_fields=state_fields)
        if point.payload.get("index_state") == LIVE
        and point.payload.get("document_digest") == planned[point.point_id]
    }


def _index_point(
    sparse_encoder: SparseEncoder,
    p: PlannedPoint,
    vector: Sequence[float],
    avgdl: float,
    encoded: Mapping[uuid.UUID, tuple[int, SparseVector]] | None,
    state: str,
) -> IndexPoint:
    if encoded is not None:
        count, sparse = encoded[p.stored_id]
    else:
        count, sparse = encode_lexical(sparse_encoder, p.lexical_text, avgdl)
    return IndexPoint(
        p.stored_id, vector, {**p.payload, "index_state": state, LEXICAL_TERMS: count}, sparse
    )


def stage_points(
    index: VectorIndex,
    sparse_encoder: SparseEncoder,
    batch: Sequence[PlannedPoint],
    vectors: Sequence[Sequence[float]],
    avgdl: float,
    encoded: Mapping[uuid.UUID, tuple[int, SparseVector]] | None = None,
) -> None:
    """Upsert one embedding call's points (``batch``, with its ``vectors``) as staged,
    their BM25 vectors encoded against ``avgdl`` (or taken from ``encoded``, a planning
    process's, by stored id), and read them back."""
    switched = _live_already(index, {p.stored_id: p.payload["document_digest"] for p in batch})
    # BM25 encoding runs here, on the writer thread, while the model embeds the next batch.
    points = [
        _index_point(sparse_encoder, p, vector, avgdl, encoded, STAGED)
        for p, vector in zip(batch, vectors, strict=True)
        if p.stored_id not in switched
    ]
    if not points:
        return
    index.upsert(points)
    _read_back(index, points, READBACK_FIELDS)


def _read_back(index: VectorIndex, points: Sequence[IndexPoint], fields: Sequence[str]) -> None:
    """Read ``points`` back after their upsert: each is found with the ``fields`` it was
    sent with (only those are read: the engine converts what it returns)."""
    stored = {
        p.point_id: p.payload
        for p in index.retrieve([p.point_id for p in points], payload_fields=fields)
    }
    for point in points:
        payload = stored.get(point.point_id)
        if payload is None:
            raise ReadBackError(str(point.point_id), "not found after upsert")
        for name in fields:
            if payload.get(name) != point.payload.get(name):
                raise ReadBackError(str(point.point_id), f"payload field {name!r} differs")


def write_new_live(
    index: VectorIndex,
    work: Sequence[DocumentWork],
    live: Sequence[IndexPoint],
    hook: Callable[[str, str], None],
) -> int:
    """Write the slice's new documents live in one upsert and read them back.

    Only on an index whose upsert is atomic (``live`` is empty otherwise): a crash
    leaves each of these documents whole or absent, as the staged copy and its flip
    would, for one write instead of three and one read instead of three
    (docs/ingestion.md, "New documents written live"). The read-back compares what the
    staged read-back does, plus the state, digest and tenant. An error of the upsert (the
    engine may have applied part of it before failing: atomic is a crash's promise, not
    an error's) or of the read-back deletes every point of the upsert before it is
    raised, so a failed write leaves none of these documents visible.
    """
    if not live:
        return 0
    ids = [p.point_id for p in live]
    try:
        index.upsert(live)
    except Exception as error:
        _withdraw(index, ids, error)
        raise
    for item in work:
        hook(item.plan.document.document_id, "live")
    try:
        _read_back(index, live, LIVE_READBACK_FIELDS)
    except Exception as error:
        _withdraw(index, ids, error)
        raise
    return len(live)


def _withdraw(index: VectorIndex, ids: Sequence[uuid.UUID], error: Exception) -> None:
    """Delete points written live whose write failed; when that fails too, say so on
    ``error`` (which is raised either way)."""
    try:
        index.delete(ids)
    except Exception as failed:
        error.add_note(f"the {len(ids)} points written live may still be visible: {failed}")
