"""The end of an ingestion run (:func:`finish_run`): prune, BM25 statistics, the summary.

Runs once after every slice of the writing pass is written (by this process or by
workers, :mod:`ragwright.application.queued`): with ``prune``, the stored documents of
the run's tenants that the run does not hold are deleted; the collection's BM25
statistics are counted again from the payload index of term counts, and every sparse
vector is re-encoded when the mean drifted (docs/ingestion.md, "BM25 average document
length"); the slices' reports are summed into the run's :class:`IngestReport`. What the
validation pass decided, and the run's end reads, is a :class:`RunPlan`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ragwright.core.keysets import KeySet
from ragwright.core.lexical import AVGDL_TOLERANCE, avgdl_drifted, document_vector
from ragwright.core.points import LEXICAL_TERMS, lexical_text
from ragwright.pipeline.planning import DOCUMENT_SLICE, DocumentKey, in_slices
from ragwright.pipeline.writing import SliceContext
from ragwright.protocols import SparseEncoder, VectorIndex
from ragwright.types import (
    FieldMatch,
    IngestReport,
    LexicalStats,
    PointFilter,
    SkippedDocument,
    SliceReport,
    SparseVector,
    record_fields,
)

_SPARSE_UPDATES_PER_CALL = 256


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What the validation pass decided before any write.

    ``keys`` holds every document of the run (prune deletes documents of the run's
    tenants not in it); ``changed`` the documents the writing pass must process;
    ``shared_in_run`` the document ids the run holds under more than one tenant. Keys
    are the only per-document state kept for the whole run, 16 bytes each
    (:class:`~ragwright.core.keysets.KeySet`: membership and size, no iteration): no
    texts, no vectors.
    """

    chunking_version: str
    scope: tuple[str | None, ...]
    keys: KeySet
    changed: KeySet
    unchanged_chunks: int
    planned_chunks: int
    staging_avgdl: float
    encoded_avgdl: float | None
    prune: bool
    shared_in_run: frozenset[str] = frozenset()
    prune_within: tuple[FieldMatch, ...] = ()
    # Documents left out for a problem of their own (``skip_invalid``), and how many of
    # the changed documents had a paragraph split to fit (the first named).
    left_out: tuple[SkippedDocument, ...] = ()
    split_documents: int = 0
    split_sources: tuple[str, ...] = ()

    @property
    def documents(self) -> int:
        return len(self.keys)

    def slice_context(self) -> SliceContext:
        return SliceContext(self.chunking_version, self.staging_avgdl)


def finish_run(
    run: RunPlan,
    reports: Iterable[SliceReport],
    *,
    index: VectorIndex,
    sparse_encoder: SparseEncoder,
    avgdl_tolerance: float = AVGDL_TOLERANCE,
    on_changed: Callable[[Sequence[DocumentKey]], None] | None = None,
) -> IngestReport:
    """Prune (when asked), refresh the BM25 statistics, and sum the run's slices.
    ``on_changed`` receives the pruned documents' keys (see :func:`ingest`)."""
    written = SliceReport.total(reports)
    deleted = written.deleted
    touched = list(written.changed_documents)
    pruned_documents = 0
    if run.prune:
        for key, stale in _stale_documents(index, run).items():
            index.delete(stale)
            deleted += len(stale)
            pruned_documents += 1
            if on_changed is not None:
                on_changed((key,))
            else:
                touched.append(key)
    bm25_avgdl, reencoded = _refresh_lexical_stats(
        index, sparse_encoder, run.encoded_avgdl, avgdl_tolerance
    )
    return IngestReport(
        **{
            **record_fields(written),
            "chunks": run.unchanged_chunks + written.chunks,
            "deleted": deleted,
            "changed_documents": tuple(touched),
        },
        documents=run.documents,
        unchanged=run.unchanged_chunks,
        documents_pruned=pruned_documents,
        bm25_avgdl=bm25_avgdl,
        sparse_reencoded=reencoded,
        tenants=run.scope,
        left_out=run.left_out,
        split_documents=run.split_documents,
        split_sources=run.split_sources,
    )


def _stale_documents(index: VectorIndex, run: RunPlan) -> dict[DocumentKey, list[uuid.UUID]]:
    """Stored documents of the run's tenants that the run does not hold (and that meet
    the run's ``prune_within`` conditions).

    The stored documents come from a facet of ``document_id`` per tenant in scope (the
    payload index, no payload read); only the stale documents' points are scrolled,
    for their ids. A point without a string document id or tenant is in no facet, so it
    is left to read-time validation, never guessed at.
    """
    version = FieldMatch("chunking_version", (run.chunking_version,))
    stale: dict[DocumentKey, list[uuid.UUID]] = {}
    for tenant in run.scope:
        owner = _tenant_filter(tenant, version, *run.prune_within)
        stored = [d for d in index.facet("document_id", owner) if isinstance(d, str)]
        gone = sorted(d for d in stored if (tenant, d) not in run.keys)
        for ids in in_slices(gone, DOCUMENT_SLICE):
            points = index.scroll(
                PointFilter(
                    must=(*owner.must, FieldMatch("document_id", tuple(ids))), empty=owner.empty
                ),
                payload_fields=("document_id",),
            )
            for point in points:
                document_id = point.payload.get("document_id")
                if isinstance(document_id, str):
                    stale.setdefault((tenant, document_id), []).append(point.point_id)
    return stale


def _tenant_filter(tenant: str | None, *must: FieldMatch) -> PointFilter:
    """Points of ``tenant`` (untenanted ones: no ``tenant`` field) matching ``must``."""
    if tenant is None:
        return PointFilter(must=must, empty=("tenant",))
    return PointFilter(must=(*must, FieldMatch("tenant", (tenant,))))


def _refresh_lexical_stats(
    index: VectorIndex,
    sparse_encoder: SparseEncoder,
    encoded_avgdl: float | None,
    tolerance: float,
) -> tuple[float | None, int]:
    """Count the corpus again; re-encode every sparse vector when its mean drifted.

    Returns the avgdl the stored vectors now carry and how many were re-encoded.
    """
    chunks = terms = 0
    # A facet of the integer-indexed term counts: the corpus is counted from the payload
    # index, never by reading every point (a whole scroll's pages would stay resident
    # in an embedded index's process). Points written by other tools carry no count;
    # they are not part of the mean.
    for count, points in index.facet(LEXICAL_TERMS).items():
        if isinstance(count, int):
            chunks += points
            terms += count * points
    if not terms:
        return encoded_avgdl, 0
    current = terms / chunks
    reencoded = 0
    if encoded_avgdl is None or avgdl_drifted(encoded_avgdl, current, tolerance):
        reencoded = _reencode(index, sparse_encoder, current)
        encoded_avgdl = current
    stats = LexicalStats(chunks=chunks, terms=terms, avgdl=encoded_avgdl)
    if stats != index.contract.lexical_stats:
        index.record_lexical_stats(stats)
    return encoded_avgdl, reencoded


def _reencode(index: VectorIndex, sparse_encoder: SparseEncoder, avgdl: float) -> int:
    """Rebuild every point's sparse vector from its stored text under ``avgdl``."""
    done = 0
    updates: list[tuple[uuid.UUID, SparseVector]] = []
    for point in index.scroll(payload_fields=("title", "heading", "text")):
        title, heading, text = (point.payload.get(k) for k in ("title", "heading", "text"))
        if not (isinstance(title, str) and isinstance(heading, str) and isinstance(text, str)):
            continue  # not a ragwright chunk: it has no BM25 text to rebuild from
        terms = sparse_encoder.terms(lexical_text(title, heading, text))
        if terms:  # a text without terms has no sparse vector, whatever the mean
            updates.append((point.point_id, document_vector(terms, sparse_encoder.profile, avgdl)))
        if len(updates) >= _SPARSE_UPDATES_PER_CALL:
            index.update_sparse(updates)
            done += len(updates)
            updates = []
    index.update_sparse(updates)
    return done + len(updates)
