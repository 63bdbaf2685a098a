"""Planning a slice of documents: what the index holds of them and what to write.

Both passes of an ingestion run read here: the validation pass scans each slice's
stored points to find the changed documents (:mod:`ragwright.pipeline.ingest`), and the
writing pass plans each slice of changed documents — chunks, stored ids and payloads,
which points to embed (length sorted), keep and delete — before it stages them
(:mod:`ragwright.pipeline.writing`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragwright.core.chunking import TokenCounter, build_chunks
from ragwright.core.lexical import document_vector
from ragwright.core.points import (
    DocumentPlan,
    PlannedPoint,
    chunk_body,
    chunk_inputs,
    format_document_input,
    plan_document,
    source_digest,
)
from ragwright.errors import InputTooLong
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import (
    Chunk,
    ChunkingPolicy,
    DocumentKey,
    FieldMatch,
    PointFilter,
    SharedDocumentId,
    SourceDocument,
    SparseVector,
)

# Called with a phase name and a count: ("plan", total_chunks), ("embedded", n),
# ("switched", 1) … The CLI drives its progress bar from these; tests record them.
ProgressCallback = Callable[[str, int], None]

__all__ = [
    "DOCUMENT_SLICE",
    "DocumentKey",
    "DocumentWork",
    "PlannedDocument",
    "PointState",
    "ProgressCallback",
    "ScanPrefetch",
    "SlicePlan",
    "check_input_lengths",
    "check_lengths",
    "check_new_document",
    "chunk_and_plan",
    "chunk_document",
    "document_key",
    "document_source_digest",
    "encode_lexical",
    "in_slices",
    "plan_documents",
    "plan_slice",
    "scan_documents",
    "shared_ids",
    "tenant_order",
    "token_counter",
]


# Documents per change-detection scan (one filtered, payload-light scroll each) in the
# validation pass, and per slice in the writing pass: what memory holds at once is about
# SLICES_IN_FLIGHT such slices with their chunks, and one embedding batch per call.
DOCUMENT_SLICE = 128


def in_slices(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive lists of ``size`` items (the last may be shorter)."""
    part: list[Any] = []
    for item in items:
        part.append(item)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part


def document_key(document: SourceDocument) -> DocumentKey:
    """The (tenant, id) pair that identifies ``document`` in the index."""
    return (document.tenant, document.document_id)


@dataclass(slots=True)
class DocumentWork:
    """One changed document of a slice: its plan, and which of its points to embed,
    which stored ones to keep and which to delete."""

    plan: DocumentPlan
    to_embed: list[PlannedPoint] = field(default_factory=list)
    kept: list[uuid.UUID] = field(default_factory=list)
    obsolete: list[uuid.UUID] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class SlicePlan:
    """A slice of changed documents as planned: each document's work, the tenants the
    index holds its ids under (``held``), and the inputs to embed in embedding order
    (length sorted) with their lengths."""

    work: list[DocumentWork]
    held: dict[str, set[str | None]]
    pending: list[PlannedPoint]
    lengths: list[int]
    # Stored id → (analysed term count, BM25 vector), when planned in a planning
    # process (:mod:`ragwright.pipeline.planning_process`); else encoded when staged.
    encoded: dict[uuid.UUID, tuple[int, SparseVector]] | None = None


@dataclass(slots=True, eq=False)
class PlannedDocument:
    """What planning a document needs no index for: its plan, each point's embedding
    input length and, encoded under the run's staging mean, its BM25 term count and
    vector (all of them aligned with ``plan.points``)."""

    plan: DocumentPlan
    lengths: list[int]
    encoded: list[tuple[int, SparseVector]]


def plan_documents(
    documents: Sequence[SourceDocument],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    avgdl: float,
) -> list[PlannedDocument]:
    """Plan ``documents`` as :func:`plan_slice` would, without reading the index: the
    part a planning process does for the writing pass."""
    planned = []
    for document in documents:
        source = document_source_digest(document, policy, embedder, sparse_encoder)
        plan = chunk_and_plan(document, policy, embedder, source)
        lengths = check_lengths(embedder, plan.points)
        encoded = [encode_lexical(sparse_encoder, p.lexical_text, avgdl) for p in plan.points]
        planned.append(PlannedDocument(plan, lengths, encoded))
    return planned


def encode_lexical(
    sparse_encoder: SparseEncoder, text: str, avgdl: float
) -> tuple[int, SparseVector]:
    """A point's BM25 term count and vector under the corpus mean ``avgdl``."""
    terms = sparse_encoder.terms(text)
    return len(terms), document_vector(terms, sparse_encoder.profile, avgdl)


def chunk_document(
    document: SourceDocument, policy: ChunkingPolicy, embedder: Embedder | None
) -> list[Chunk]:
    """``document``'s chunks under ``policy``, every window within the embedding
    profile's input limit as ``embedder`` counts it (none without an embedder or a
    tokenizer of its own)."""
    if embedder is None:
        return build_chunks(document, policy)
    return build_chunks(
        document,
        policy,
        count_tokens=token_counter(embedder, document),
        token_limit=embedder.profile.max_input_tokens if embedder.counts_tokens else None,
    )


def token_counter(embedder: Embedder, document: SourceDocument) -> TokenCounter | None:
    """Counts the model tokens of a chunk text as it will be embedded for ``document``."""
    if not embedder.counts_tokens:
        return None
    profile = embedder.profile
    title = document.title

    def count(text: str) -> int:
        # Chunk texts open with their heading; a heading equal to the title is dropped
        # from the embedding input (see core.points.chunk_body), so count it that way.
        heading = text.split("\n\n", 1)[0]
        body = chunk_body(title, heading, text)
        return embedder.count_tokens([format_document_input(profile, title, body)])[0]

    return count


def document_source_digest(
    document: SourceDocument,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
) -> str:
    """The digest a document's points carry of its source under this run's chunking
    and profiles: stored live under it, the document is unchanged."""
    return source_digest(
        document,
        chunking_version=policy.version,
        profile=embedder.profile,
        lexical_profile_id=sparse_encoder.profile.profile_id,
    )


def chunk_and_plan(
    document: SourceDocument, policy: ChunkingPolicy, embedder: Embedder, source: str
) -> DocumentPlan:
    """Chunk ``document`` (counting tokens with the embedder's tokenizer) and plan its
    stored ids, payloads and digest."""
    chunks = chunk_document(document, policy, embedder)
    return plan_document(document, chunks, embedder.profile, source=source)


def check_new_document(
    document: SourceDocument,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    *,
    count_terms: bool,
) -> tuple[int, int, bool]:
    """The validation pass's check of a document nothing is stored under: chunk it and
    measure its embedding inputs (the first over the limit raises); its number of
    chunks, with ``count_terms`` of BM25 terms (0 otherwise), and whether a paragraph
    of it was split to fit.

    Every chunk of such a document is new, so no stored id or digest is compared and
    :func:`chunk_and_plan`'s payloads, ids and digest are left to the writing pass:
    planning them here too was about half of the pass's cost on a first ingestion
    (docs/ingestion.md, "The validation pass of new documents").
    """
    chunks = chunk_document(document, policy, embedder)
    inputs = [chunk_inputs(document, chunk, embedder.profile) for chunk in chunks]
    check_input_lengths(embedder, [text for text, _ in inputs], chunks)
    terms = sum(sparse_encoder.count_terms(lexical) for _, lexical in inputs) if count_terms else 0
    return len(chunks), terms, any(chunk.split for chunk in chunks)


def plan_slice(
    documents: Sequence[SourceDocument],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    earlier: dict[str, set[str | None]],
    planned: Sequence[PlannedDocument] | None = None,
) -> SlicePlan:
    """Scan the slice's stored points and plan its documents: what to embed (in
    length-sorted order), keep and delete, and which ids the index holds for other
    tenants (``earlier``: those of earlier slices of the pass, written or not).
    ``planned``: the documents' plans made elsewhere (:func:`plan_documents`, in order)."""
    existing = scan_documents(index, policy.version, documents)
    held: dict[str, set[str | None]] = {}
    for tenant, document_id in existing:
        held.setdefault(document_id, set()).add(tenant)
    work: list[DocumentWork] = []
    known: dict[uuid.UUID, int] = {}
    encoded: dict[uuid.UUID, tuple[int, SparseVector]] | None = None
    if planned is not None:
        encoded = {}
        for made in planned:
            for point, length, sparse in zip(
                made.plan.points, made.lengths, made.encoded, strict=True
            ):
                known[point.stored_id] = length
                encoded[point.stored_id] = sparse
    for number, document in enumerate(documents):
        if document.document_id in earlier:
            held.setdefault(document.document_id, set()).update(earlier[document.document_id])
        if planned is not None:
            plan = planned[number].plan
        else:
            source = document_source_digest(document, policy, embedder, sparse_encoder)
            plan = chunk_and_plan(document, policy, embedder, source)
        stored = existing.get(document_key(document), {})
        desired = {p.stored_id for p in plan.points}
        work.append(
            DocumentWork(
                plan,
                to_embed=[p for p in plan.points if p.stored_id not in stored],
                kept=[p.stored_id for p in plan.points if p.stored_id in stored],
                obsolete=[sid for sid in stored if sid not in desired],
            )
        )
    pending = [p for item in work for p in item.to_embed]
    if planned is not None:
        lengths = [known[p.stored_id] for p in pending]
    else:
        lengths = check_lengths(embedder, pending)
    # Padding is wasted compute: each embedding call gets inputs of similar length.
    order = sorted(range(len(pending)), key=lambda i: lengths[i])
    return SlicePlan(work, held, [pending[i] for i in order], [lengths[i] for i in order], encoded)


def shared_ids(
    work: Sequence[DocumentWork], held: dict[str, set[str | None]]
) -> tuple[SharedDocumentId, ...]:
    """Written documents whose id the index also held under other tenants."""
    shared = []
    for item in work:
        document = item.plan.document
        others = held.get(document.document_id, set()) - {document.tenant}
        if others:
            shared.append(
                SharedDocumentId(
                    document.document_id, document.tenant, tuple(sorted(others, key=tenant_order))
                )
            )
    return tuple(shared)


def tenant_order(tenant: str | None) -> tuple[bool, str]:
    """Untenanted first, then tenants by name."""
    return (tenant is not None, tenant or "")


@dataclass(frozen=True, slots=True)
class PointState:
    """A stored point as change detection reads it: its document digest, source digest,
    its document's chunk count and its index state (as stored: not validated)."""

    document: Any
    source: Any
    count: Any
    state: Any


# The validation pass prefetches the stored payloads once its scans have found this share
# of the index's points: a run that covers that much reads the rest too, as a re-run over
# an unchanged corpus does, and reading them ahead in bulk costs less than one fault a page.
PREFETCH_AFTER_SHARE = 0.10


class ScanPrefetch:
    """Asks ``index`` to prefetch its payloads (once) when the points the scans found
    reach :data:`PREFETCH_AFTER_SHARE` of the points it held when the run began."""

    def __init__(self, index: VectorIndex) -> None:
        self._index = index
        self._threshold = index.count() * PREFETCH_AFTER_SHARE
        self._found = 0
        # An empty index has nothing to prefetch.
        self.done = self._threshold == 0

    def scanned(self, found: dict[DocumentKey, dict[uuid.UUID, PointState]]) -> None:
        if self.done:
            return
        self._found += sum(len(points) for points in found.values())
        if self._found >= self._threshold:
            self.done = True
            self._index.prefetch_payloads()


def scan_documents(
    index: VectorIndex, version: str, documents: Sequence[SourceDocument]
) -> dict[DocumentKey, dict[uuid.UUID, PointState]]:
    """(tenant, document_id) → {stored id: digests, chunk count, state} for the stored
    points of ``documents``' ids (every tenant's: shared ids are reported)."""
    found: dict[DocumentKey, dict[uuid.UUID, PointState]] = {}
    if not documents:
        return found
    ids = tuple(sorted({d.document_id for d in documents}))
    points = index.scroll(
        PointFilter(
            must=(FieldMatch("chunking_version", (version,)), FieldMatch("document_id", ids))
        ),
        payload_fields=(
            "document_id",
            "document_digest",
            "source_digest",
            "chunk_count",
            "index_state",
            "tenant",
        ),
    )
    for point in points:
        p = point.payload
        document_id, tenant = p.get("document_id"), p.get("tenant")
        # A point without a readable document id or tenant cannot be reconciled; keep it
        # visible to read-time validation rather than guessing which document owns it.
        if isinstance(document_id, str) and (tenant is None or isinstance(tenant, str)):
            found.setdefault((tenant, document_id), {})[point.point_id] = PointState(
                p.get("document_digest"),
                p.get("source_digest"),
                p.get("chunk_count"),
                p.get("index_state"),
            )
    return found


def check_lengths(embedder: Embedder, pending: Sequence[PlannedPoint]) -> list[int]:
    """Token counts of every pending input; the first over the limit stops the run."""
    return check_input_lengths(
        embedder, [p.embedding_input for p in pending], [p.chunk for p in pending]
    )


def check_input_lengths(
    embedder: Embedder, inputs: Sequence[str], chunks: Sequence[Chunk]
) -> list[int]:
    """Token counts of embedding ``inputs`` (one per chunk of ``chunks``); the first over
    the limit stops the run."""
    if not embedder.counts_tokens:
        return [len(text) for text in inputs]
    lengths = embedder.count_tokens(list(inputs))
    limit = embedder.profile.max_input_tokens
    for chunk, tokens in zip(chunks, lengths, strict=True):
        if tokens > limit:
            raise InputTooLong(
                f"document {chunk.document_id!r}, chunk {chunk.chunk_id!r}",
                tokens,
                limit,
                document_id=chunk.document_id,
                chunk_id=chunk.chunk_id,
            )
    return lengths
