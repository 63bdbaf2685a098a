"""The writer thread of the writing pass, and a slice's switch and verification.

Every index write of a pass runs on one :class:`Writer` thread, in order: a slice's
staged upserts, each read back, or its new documents' live points built
(:mod:`ragwright.pipeline.staging`), then its switch (:func:`switch_slice`: new documents
written live in one upsert where upserts are atomic; for the others obsolete points
deleted, document fields written, ``index_state`` flipped to live; each document read
back). What a crash between two of these writes leaves is in
:mod:`ragwright.pipeline.ingest` and docs/ingestion.md.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragwright.core.points import (
    DOCUMENT_FIELDS,
    LIVE,
    DocumentPlan,
    read_payload,
)
from ragwright.errors import ReadBackError
from ragwright.pipeline.planning import (
    DocumentWork,
    ProgressCallback,
    SlicePlan,
    document_key,
    shared_ids,
)
from ragwright.pipeline.staging import READBACK_FIELDS, write_new_live
from ragwright.protocols import VectorIndex
from ragwright.types import IndexPoint, SliceReport, StoredPoint

T = TypeVar("T")


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
    verified = write_new_live(index, direct, live, hook)
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
        for name in READBACK_FIELDS:
            if point.payload.get(name) != wanted[point.point_id][name]:
                raise ReadBackError(str(point.point_id), f"payload field {name!r} differs")
    return len(stored)
