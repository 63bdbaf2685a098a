"""The writer thread of the writing pass: stage points, switch documents live, verify.

Every index write of a pass runs on one :class:`Writer` thread, in order: a slice's
staged upserts (:func:`stage_points`, each read back), then its switch
(:func:`switch_slice`: obsolete points deleted, document fields written, ``index_state``
flipped to live, each document read back). On an index whose upserts are atomic
(:attr:`~ragwright.protocols.VectorIndex.atomic_upsert`), the slice's new documents
(nothing stored under their keys) skip the staged copy: their points are built live
(:func:`prepare_live`) and written in one upsert at the switch, then read back. What a
crash between two of these writes leaves is in :mod:`ragwright.pipeline.ingest` and
docs/ingestion.md.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragwright.core.points import (
    DOCUMENT_FIELDS,
    LEXICAL_TERMS,
    LIVE,
    STAGED,
    DocumentPlan,
    PlannedPoint,
    read_payload,
)
from ragwright.errors import ReadBackError
from ragwright.pipeline.planning import (
    DocumentWork,
    ProgressCallback,
    SlicePlan,
    document_key,
    encode_lexical,
    shared_ids,
)
from ragwright.protocols import SparseEncoder, VectorIndex
from ragwright.types import IndexPoint, SliceReport, SparseVector, StoredPoint

T = TypeVar("T")
_READBACK_FIELDS = ("text", "document_id", "chunking_version", "document_type", "publication_state")
# A point written live is read back for these too: what makes it visible, and to whom.
_LIVE_READBACK_FIELDS = (*_READBACK_FIELDS, "index_state", "document_digest", "tenant")


class Writer:
    """One thread that runs the writing pass's index writes in the order given.

    After a task fails, the tasks after it do not run (they raise the same error), and
    :meth:`check` raises it on the caller's thread. Leaving the block waits for the
    tasks already given (those after a failure end at once).
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragwright-writer")
        self._failure: BaseException | None = None

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def submit(self, task: Callable[..., T], *args: Any) -> Future[T]:
        def run() -> T:
            if self._failure is not None:
                raise self._failure
            try:
                return task(*args)
            except BaseException as error:
                self._failure = error
                raise

        return self._pool.submit(contextvars.copy_context().run, run)

    def check(self) -> None:
        """Raise the first failure of a write, if any."""
        if self._failure is not None:
            raise self._failure


def switch_slice(
    plan: SlicePlan,
    tokens: int,
    writes: Sequence[Future[None]],
    index: VectorIndex,
    notify: ProgressCallback,
    hook: Callable[[str, str], None],
    live: Sequence[IndexPoint] = (),
) -> SliceReport:
    """Switch and verify every document of a staged slice (on the writer thread), once
    its staging ``writes`` are done; ``tokens`` is what embedding its inputs counted.
    ``live``: every point of the slice's new documents written directly
    (:func:`prepare_live`), upserted here in one call."""
    for write in writes:
        write.result()  # written before this, in order; a document switches only staged
    payload_updated = deleted = 0
    new = [item for item in plan.work if not item.kept and not item.obsolete]
    written = {p.point_id for p in live}
    direct = [item for item in new if all(p.stored_id in written for p in item.plan.points)]
    if sum(len(item.plan.points) for item in direct) != len(written):
        raise AssertionError("a live point outside the slice's new documents")  # pragma: no cover
    verified = _write_new_live(index, direct, live, hook)
    verified += _switch_new(index, [item for item in new if item not in direct], hook)
    for item in new:
        notify("switched", len(item.plan.points))
    for item in plan.work:
        if item.kept or item.obsolete:
            payload_updated += _refresh_kept(index, item)
            deleted += len(item.obsolete)
            verified += _switch(index, item, hook)
            notify("switched", len(item.plan.points))
    return SliceReport(
        chunks=sum(len(item.plan.points) for item in plan.work),
        embedded=len(plan.pending),
        payload_updated=payload_updated,
        deleted=deleted,
        verified=verified,
        documents_changed=len(plan.work),
        embedding_tokens=tokens,
        shared_ids=shared_ids(plan.work, plan.held),
        changed_documents=tuple(document_key(item.plan.document) for item in plan.work),
    )


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
    slice's switch writes them all in one upsert (:func:`switch_slice`)."""
    for p, vector in zip(batch, vectors, strict=True):
        into.append(_index_point(sparse_encoder, p, vector, avgdl, encoded, LIVE))


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
    _read_back(index, points, _READBACK_FIELDS)


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


def _refresh_kept(index: VectorIndex, item: DocumentWork) -> int:
    """Bring chunk-level fields of reused points up to date (e.g. shifted positions)."""
    if not item.kept:
        return 0
    wanted = {p.stored_id: p.payload for p in item.plan.points}
    for point in index.retrieve(item.kept):
        chunk_fields = {k: v for k, v in wanted[point.point_id].items() if k not in DOCUMENT_FIELDS}
        if any(point.payload.get(k) != v for k, v in chunk_fields.items()):
            index.set_payload([point.point_id], chunk_fields)
    return len(item.kept)


def _switch(index: VectorIndex, item: DocumentWork, hook: Callable[[str, str], None]) -> int:
    document = item.plan.document
    ids = [p.stored_id for p in item.plan.points]
    hook(document.document_id, "staged")
    index.delete(item.obsolete)
    hook(document.document_id, "obsolete-deleted")
    index.set_payload(ids, item.plan.document_fields)
    # A tenant never leaves a point: it is part of the document's identity (a document
    # under another tenant has other points), so only an optional source_uri can go.
    absent = [k for k in ("source_uri",) if k not in item.plan.document_fields]
    index.delete_payload_keys(ids, absent)
    hook(document.document_id, "live")
    return _verify(index, item.plan, ids)


def _switch_new(
    index: VectorIndex, work: Sequence[DocumentWork], hook: Callable[[str, str], None]
) -> int:
    """Switch documents none of whose points was stored before the slice: one flip.

    Each such point was staged by this slice with its plan's whole payload (document
    fields included, ``index_state`` aside) or was already live with the plan's digest,
    so :func:`_switch` would only flip ``index_state``: one ``set_payload`` flips every
    point of these documents at once (each document still all-or-nothing) and one
    read-back verifies them, where a switch per document cost three writes and a read,
    each write a free-space check and a WAL record (docs/ingestion.md).
    """
    if not work:
        return 0
    ids = [p.stored_id for item in work for p in item.plan.points]
    for phase in ("staged", "obsolete-deleted"):  # nothing obsolete to delete
        for item in work:
            hook(item.plan.document.document_id, phase)
    index.set_payload(ids, {"index_state": LIVE})
    for item in work:
        hook(item.plan.document.document_id, "live")
    stored = {point.point_id: point for point in index.retrieve(ids)}
    return sum(
        _verify_points(
            item.plan, [stored[p.stored_id] for p in item.plan.points if p.stored_id in stored]
        )
        for item in work
    )


def _write_new_live(
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
        _read_back(index, live, _LIVE_READBACK_FIELDS)
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


def _verify(index: VectorIndex, plan: DocumentPlan, ids: Iterable[uuid.UUID]) -> int:
    return _verify_points(plan, index.retrieve(list(ids)))


def _verify_points(plan: DocumentPlan, stored: Sequence[StoredPoint]) -> int:
    wanted = {p.stored_id: p.payload for p in plan.points}
    if len(stored) != len(wanted):
        raise ReadBackError(
            plan.document.document_id, f"{len(stored)} of {len(wanted)} points found"
        )
    for point in stored:
        payload = read_payload(point.point_id, point.payload)
        if payload.index_state != LIVE or payload.document_digest != plan.digest:
            raise ReadBackError(
                str(point.point_id), "not live with the planned digest after switch"
            )
        for name in _READBACK_FIELDS:
            if point.payload.get(name) != wanted[point.point_id][name]:
                raise ReadBackError(str(point.point_id), f"payload field {name!r} differs")
    return len(stored)
