"""Ingestion: documents → chunks → batched embeddings → staged upsert → switch → verify.

The run is planned before anything is written, so bad input (a chunking error, an input
over the embedding limit) stops it with the index untouched. Then, per document:

1. **Scan** — one payload-light scroll reads ``document_id``, ``document_digest`` and
   ``index_state`` of every point with this chunking version. A document whose stored ids,
   digests and states already equal the plan is *unchanged*: no embedding, no write.
2. **Stage** — chunks whose stored id is absent (new or edited text) are embedded in
   length-sorted batches and upserted with ``index_state="staged"``; queries only ever
   match ``live`` points, so staged points are invisible. Every written point is read
   back. Embedding of batch *n+1* overlaps the write and read-back of batch *n*.
3. **Switch** — obsolete points of the document are deleted, then one ``set_payload``
   sets the document-level fields (revision, metadata, digest, ``index_state="live"``) on
   all its desired points. Until the delete the visible set is the old revision; between
   delete and flip it is the unchanged chunks (a subset of both revisions); after the
   flip it is the new revision. A reader never sees a mix (docs/ingestion.md).
4. **Verify** — the document's points are read back and validated fail-closed.

5. **BM25 statistics** — one payload-light scroll sums the analysed term counts every
   point carries (``lexical_terms``). New points were encoded with the ``avgdl`` the
   collection records; when the corpus mean has drifted beyond
   :data:`~ragwright.core.lexical.AVGDL_TOLERANCE` of it, every point's sparse vector is
   rebuilt from its stored text (no embedding) and the new mean recorded.

A document is its (tenant, id) pair. A run's scope is the tenants of the documents it
ingests (plus any named with ``tenants``): it changes and prunes documents of those tenants
only, so two tenants' ``faq`` never meet, and a document whose tenant changed is a new
document, the old one staying with its tenant (reported as a shared id, never silent).

A run killed at any moment leaves staged points (reused by the next run without
re-embedding), a half-switched document (finished by the next run) or sparse vectors
partly re-encoded (the recorded mean is still the old one, so the next run re-encodes
again): re-running converges to the same index as one uninterrupted run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ragwright.core.chunking import TokenCounter, build_chunks
from ragwright.core.contracts import require_compatible
from ragwright.core.documents import ensure_unique_ids
from ragwright.core.lexical import AVGDL_TOLERANCE, avgdl_drifted, document_vector
from ragwright.core.points import (
    DOCUMENT_FIELDS,
    LIVE,
    STAGED,
    DocumentPlan,
    PlannedPoint,
    chunk_body,
    format_document_input,
    lexical_text,
    plan_document,
    read_payload,
    source_digest,
)
from ragwright.errors import (
    DimensionMismatch,
    InputTooLong,
    ReadBackError,
    SourceError,
)
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import (
    ChunkingPolicy,
    FieldMatch,
    IndexPoint,
    IngestReport,
    LexicalStats,
    PointFilter,
    SharedDocumentId,
    SourceDocument,
    SparseVector,
)

# Called with a phase name and a count: ("plan", total_chunks), ("embedded", n),
# ("switched", 1) … The CLI drives its progress bar from these; tests record them.
ProgressCallback = Callable[[str, int], None]
_READBACK_FIELDS = ("text", "document_id", "chunking_version", "document_type", "publication_state")
# Analysed terms of the point's BM25 text, written with its sparse vector: the collection's
# avgdl is the mean of these over all points.
LEXICAL_TERMS = "lexical_terms"
_REENCODE_BATCH = 256
# A document's identity: its tenant (None for untenanted) and its id.
DocumentKey = tuple[str | None, str]


def document_key(document: SourceDocument) -> DocumentKey:
    """The (tenant, id) pair that identifies ``document`` in the index."""
    return (document.tenant, document.document_id)


@dataclass(slots=True)
class _DocumentWork:
    plan: DocumentPlan
    to_embed: list[PlannedPoint] = field(default_factory=list)
    kept: list[uuid.UUID] = field(default_factory=list)
    obsolete: list[uuid.UUID] = field(default_factory=list)


def plan_documents(
    documents: Sequence[SourceDocument],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sources: dict[DocumentKey, str] | None = None,
) -> list[DocumentPlan]:
    """Chunk and plan every document; raises before anything touches the index.

    ``sources`` maps a document's (tenant, id) to its source digest.
    """
    return [
        plan_document(
            d,
            build_chunks(d, policy, count_tokens=token_counter(embedder, d)),
            embedder.profile,
            source=(sources or {}).get(document_key(d), ""),
        )
        for d in documents
    ]


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


def ingest(
    documents: Sequence[SourceDocument],
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    prune: bool = False,
    tenants: Collection[str | None] = (),
    batch_size: int = 64,
    progress: ProgressCallback | None = None,
    phase_hook: Callable[[str, str], None] | None = None,
    avgdl_tolerance: float = AVGDL_TOLERANCE,
) -> IngestReport:
    """Bring the index in line with ``documents`` for ``policy``'s chunking version.

    Args:
        documents: validated documents, unique ids.
        policy: the chunking policy; its version must be in the index contract.
        embedder: must carry the index contract's embedding profile.
        sparse_encoder: must carry the index contract's lexical profile.
        index: the open collection.
        prune: delete documents of this chunking version and of the run's tenants that
            are not in ``documents``.
        tenants: tenants in the run's scope besides those of ``documents`` (``None``
            stands for untenanted documents); other tenants' documents are never touched.
        batch_size: chunks per embedding call and per upsert.
        progress: receives (event, count) pairs for progress display.
        phase_hook: called as (document_id, phase) at each switch step; tests use it to
            observe what a reader sees mid-replacement.
        avgdl_tolerance: relative drift of the corpus mean length from the recorded
            ``avgdl`` that is tolerated before every sparse vector is re-encoded.

    Raises:
        DocumentError (duplicate ids), SourceError (``prune`` with no documents),
        ChunkingError, InputTooLong, ContractMismatch: before any write.
        DimensionMismatch, ReadBackError, ProviderError: during the run; everything
            already written stays consistent and the next run resumes.
    """
    notify = progress or (lambda _event, _count: None)
    hook = phase_hook or (lambda _doc, _phase: None)
    documents = ensure_unique_ids(documents)
    if prune and not documents:
        raise SourceError("sources", "no documents found; refusing to --prune every document")
    require_compatible(
        index.contract,
        embedder.profile,
        sparse_encoder.profile.profile_id,
        chunking_version=policy.version,
    )
    scope = {d.tenant for d in documents} | set(tenants)
    sources = {
        document_key(d): source_digest(
            d,
            chunking_version=policy.version,
            profile=embedder.profile,
            lexical_profile_id=sparse_encoder.profile.profile_id,
        )
        for d in documents
    }
    existing = _scan(index, policy.version)
    held: dict[str, set[str | None]] = {}
    for tenant, document_id in existing:
        held.setdefault(document_id, set()).add(tenant)
    unchanged = 0
    changed: list[SourceDocument] = []
    for document in documents:
        key = document_key(document)
        stored = existing.get(key, {})
        if stored and all(
            s.state == LIVE and s.source == sources[key] and s.count == len(stored)
            for s in stored.values()
        ):
            unchanged += len(stored)
            del existing[key]
        else:
            changed.append(document)
    plans = plan_documents(changed, policy, embedder, sources)
    notify("plan", unchanged + sum(len(p.points) for p in plans))

    work: list[_DocumentWork] = []
    for plan in plans:
        stored = existing.pop(document_key(plan.document), {})
        desired = {p.stored_id for p in plan.points}
        if stored.keys() == desired and all(
            (s.document, s.state) == (plan.digest, LIVE) for s in stored.values()
        ):
            unchanged += len(desired)
            continue
        work.append(
            _DocumentWork(
                plan,
                to_embed=[p for p in plan.points if p.stored_id not in stored],
                kept=[p.stored_id for p in plan.points if p.stored_id in stored],
                obsolete=[sid for sid in stored if sid not in desired],
            )
        )
    notify("unchanged", unchanged)

    pending = [p for item in work for p in item.to_embed]
    lengths = _check_lengths(embedder, pending)
    stats = index.contract.lexical_stats
    if stats is not None:
        # Every stored vector carries the recorded mean: new ones must match them.
        staging_avgdl: float = stats.avgdl
        encoded_avgdl: float | None = stats.avgdl
    else:
        # A new collection: its first points set the mean. Points already present
        # without recorded statistics carry an unknown one and are re-encoded below.
        staging_avgdl = _mean_terms(sparse_encoder, pending)
        encoded_avgdl = staging_avgdl if index.count() == 0 else None
    embedded_tokens = _stage(
        embedder, sparse_encoder, index, pending, lengths, batch_size, notify, staging_avgdl
    )

    payload_updated = deleted = verified = 0
    for item in work:
        payload_updated += _refresh_kept(index, item)
        deleted += len(item.obsolete)
        verified += _switch(index, item, hook)
        notify("switched", len(item.plan.points))

    touched = [(item.plan.document.tenant, item.plan.document.document_id) for item in work]
    pruned_documents = 0
    if prune:
        for (tenant, document_id), stale in existing.items():
            if tenant not in scope:
                continue  # another tenant's document: outside this run's scope
            index.delete(list(stale))
            deleted += len(stale)
            pruned_documents += 1
            touched.append((tenant, document_id))
    bm25_avgdl, reencoded = _refresh_lexical_stats(
        index, sparse_encoder, encoded_avgdl, avgdl_tolerance
    )
    return IngestReport(
        documents=len(documents),
        chunks=unchanged + sum(len(item.plan.points) for item in work),
        embedded=len(pending),
        unchanged=unchanged,
        payload_updated=payload_updated,
        deleted=deleted,
        verified=verified,
        documents_changed=len(work),
        documents_pruned=pruned_documents,
        embedding_tokens=embedded_tokens,
        bm25_avgdl=bm25_avgdl,
        sparse_reencoded=reencoded,
        tenants=tuple(sorted(scope, key=_tenant_order)),
        shared_ids=_shared_ids(work, held),
        changed_documents=tuple(touched),
    )


def _shared_ids(
    work: Sequence[_DocumentWork], held: dict[str, set[str | None]]
) -> tuple[SharedDocumentId, ...]:
    """Written documents whose id the index also held under other tenants."""
    shared = []
    for item in work:
        document = item.plan.document
        others = held.get(document.document_id, set()) - {document.tenant}
        if others:
            shared.append(
                SharedDocumentId(
                    document.document_id, document.tenant, tuple(sorted(others, key=_tenant_order))
                )
            )
    return tuple(shared)


def _tenant_order(tenant: str | None) -> tuple[bool, str]:
    """Untenanted first, then tenants by name."""
    return (tenant is not None, tenant or "")


@dataclass(frozen=True, slots=True)
class _Stored:
    document: Any
    source: Any
    count: Any
    state: Any


def _scan(index: VectorIndex, version: str) -> dict[DocumentKey, dict[uuid.UUID, _Stored]]:
    """(tenant, document_id) → {stored id: its digests, chunk count and state}."""
    found: dict[DocumentKey, dict[uuid.UUID, _Stored]] = {}
    points = index.scroll(
        PointFilter(must=(FieldMatch("chunking_version", (version,)),)),
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
            found.setdefault((tenant, document_id), {})[point.point_id] = _Stored(
                p.get("document_digest"),
                p.get("source_digest"),
                p.get("chunk_count"),
                p.get("index_state"),
            )
    return found


def _check_lengths(embedder: Embedder, pending: Sequence[PlannedPoint]) -> list[int]:
    """Token counts of every pending input; the first over the limit stops the run."""
    if not embedder.counts_tokens:
        return [len(p.embedding_input) for p in pending]
    lengths = embedder.count_tokens([p.embedding_input for p in pending])
    limit = embedder.profile.max_input_tokens
    for point, tokens in zip(pending, lengths, strict=True):
        if tokens > limit:
            raise InputTooLong(
                f"document {point.chunk.document_id!r}, chunk {point.chunk.chunk_id!r}",
                tokens,
                limit,
            )
    return lengths


def _stage(
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    pending: Sequence[PlannedPoint],
    lengths: Sequence[int],
    batch_size: int,
    notify: ProgressCallback,
    avgdl: float,
) -> int:
    """Embed in length-sorted batches and write them staged, overlapping the two."""
    order = sorted(range(len(pending)), key=lambda i: lengths[i])
    dimensions = embedder.profile.dimensions
    tokens = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragwright-writer") as writer:
        in_flight: Future[None] | None = None
        for start in range(0, len(order), batch_size):
            batch = [pending[i] for i in order[start : start + batch_size]]
            vectors = embedder.embed_documents([p.embedding_input for p in batch])
            for vector in vectors:
                if len(vector) != dimensions:
                    raise DimensionMismatch(dimensions, len(vector))
            if embedder.counts_tokens:
                tokens += sum(lengths[i] for i in order[start : start + batch_size])
            if in_flight is not None:
                in_flight.result()
            in_flight = writer.submit(
                _write_and_verify, index, sparse_encoder, batch, vectors, avgdl
            )
            notify("embedded", len(batch))
        if in_flight is not None:
            in_flight.result()
    return tokens


def _write_and_verify(
    index: VectorIndex,
    sparse_encoder: SparseEncoder,
    batch: Sequence[PlannedPoint],
    vectors: Sequence[Sequence[float]],
    avgdl: float,
) -> None:
    # BM25 encoding runs here, on the writer thread, while the model embeds the next batch.
    points = []
    for p, vector in zip(batch, vectors, strict=True):
        terms = sparse_encoder.terms(p.lexical_text)
        points.append(
            IndexPoint(
                p.stored_id,
                vector,
                {**p.payload, "index_state": STAGED, LEXICAL_TERMS: len(terms)},
                document_vector(terms, sparse_encoder.profile, avgdl),
            )
        )
    index.upsert(points)
    stored = {p.point_id: p.payload for p in index.retrieve([p.point_id for p in points])}
    for point in points:
        payload = stored.get(point.point_id)
        if payload is None:
            raise ReadBackError(str(point.point_id), "not found after upsert")
        for name in _READBACK_FIELDS:
            if payload.get(name) != point.payload[name]:
                raise ReadBackError(str(point.point_id), f"payload field {name!r} differs")


def _mean_terms(sparse_encoder: SparseEncoder, pending: Sequence[PlannedPoint]) -> float:
    total = sum(len(sparse_encoder.terms(p.lexical_text)) for p in pending)
    return total / len(pending) if total else 1.0


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
    for point in index.scroll(payload_fields=(LEXICAL_TERMS,)):
        count = point.payload.get(LEXICAL_TERMS)
        # Points written by other tools carry no count; they are not part of the mean.
        if isinstance(count, int) and not isinstance(count, bool):
            chunks += 1
            terms += count
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
    batch: list[tuple[uuid.UUID, SparseVector]] = []
    for point in index.scroll(payload_fields=("title", "heading", "text")):
        title, heading, text = (point.payload.get(k) for k in ("title", "heading", "text"))
        if not (isinstance(title, str) and isinstance(heading, str) and isinstance(text, str)):
            continue  # not a ragwright chunk: it has no BM25 text to rebuild from
        terms = sparse_encoder.terms(lexical_text(title, heading, text))
        if terms:  # a text without terms has no sparse vector, whatever the mean
            batch.append((point.point_id, document_vector(terms, sparse_encoder.profile, avgdl)))
        if len(batch) >= _REENCODE_BATCH:
            index.update_sparse(batch)
            done += len(batch)
            batch = []
    index.update_sparse(batch)
    return done + len(batch)


def _refresh_kept(index: VectorIndex, item: _DocumentWork) -> int:
    """Bring chunk-level fields of reused points up to date (e.g. shifted positions)."""
    if not item.kept:
        return 0
    wanted = {p.stored_id: p.payload for p in item.plan.points}
    for point in index.retrieve(item.kept):
        chunk_fields = {k: v for k, v in wanted[point.point_id].items() if k not in DOCUMENT_FIELDS}
        if any(point.payload.get(k) != v for k, v in chunk_fields.items()):
            index.set_payload([point.point_id], chunk_fields)
    return len(item.kept)


def _switch(index: VectorIndex, item: _DocumentWork, hook: Callable[[str, str], None]) -> int:
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


def _verify(index: VectorIndex, plan: DocumentPlan, ids: Iterable[uuid.UUID]) -> int:
    wanted = {p.stored_id: p.payload for p in plan.points}
    stored = index.retrieve(list(ids))
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
        if payload.text != wanted[point.point_id]["text"]:
            raise ReadBackError(str(point.point_id), "text differs after switch")
    return len(stored)
