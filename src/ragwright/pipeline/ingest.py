"""Ingestion: documents → chunks → embedding batches → staged upsert → switch → verify.

The documents stream through two passes, a slice of :data:`DOCUMENT_SLICE` documents at a
time; nothing holds the corpus's texts or vectors (docs/ingestion.md, "Memory").

0. **Validate** (:func:`prepare_run`) — every document is read, its (tenant, id) checked
   unique, and the stored points of the slice's document ids read by one filtered,
   payload-light scroll (``document_id``, digests, ``index_state``); once the scans have
   found a tenth of the index's points, the index reads its stored payloads ahead
   (:class:`~ragwright.pipeline.planning.ScanPrefetch`). A document stored
   live under the same source digest is *unchanged*; any other is chunked and its
   embedding inputs measured (one with nothing stored under its key only that: its
   ids, payloads and digest are planned by the writing pass). Bad input (a duplicate
   id, a chunking error, an input over the embedding limit) stops the run here, with
   the index untouched. What is kept: the run's document keys (for prune), the changed
   keys and counts (:class:`RunPlan`). In a large run from the command line a forked
   child, :mod:`ragwright.pipeline.source_process`, reads the sources a slice ahead and
   digests (and, in a new collection, checks) their documents.

Then per slice of changed documents (:mod:`ragwright.pipeline.writing`:
:func:`~ragwright.pipeline.writing.ingest_slice`; several workers may each take slices
from a queue; in a large run from the command line a forked child,
:mod:`ragwright.pipeline.planning_process`, reads the slices and does the part of
planning that needs no index a slice ahead):

1. **Scan** — the slice's stored points again (one filtered scroll).
2. **Stage** — chunks whose stored id is absent (new or edited text) are embedded in
   length-sorted batches, up to the embedder's ``in_flight`` calls at once, and upserted
   with ``index_state="staged"``; queries only ever match ``live`` points, so staged
   points are invisible. Every written point is read back. The calls stay outstanding
   across slices: the next slice is scanned and planned once the current
   one's calls are all made, and its calls go out while the current one's last ones
   return and while it is switched and verified (at most
   :data:`~ragwright.pipeline.writing.SLICES_IN_FLIGHT` slices held). One writer thread
   makes every write in order.
3. **Switch** — once every point of the slice is staged and read back, obsolete points
   of the document are deleted, then one ``set_payload``
   sets the document-level fields (revision, metadata, digest, ``index_state="live"``) on
   all its desired points. Until the delete the visible set is the old revision; between
   delete and flip it is the unchanged chunks (a subset of both revisions); after the
   flip it is the new revision. A reader never sees a mix (docs/ingestion.md).
4. **Verify** — the document's points are read back and validated fail-closed.

Finally (:func:`~ragwright.pipeline.finishing.finish_run`, in its own module):

5. **Prune** — with ``prune``, one payload-light scroll finds stored documents of the
   run's tenants that the run does not hold, and deletes them.
6. **BM25 statistics** — one payload-light scroll sums the analysed term counts every
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
again): re-running converges to the same index as one uninterrupted run. A slice run
again (by another worker, after a crash) converges the same way, and reports what an
uninterrupted slice would, so a run's summary does not depend on who finished a slice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import closing

from ragwright.core.chunking import build_chunks
from ragwright.core.contracts import require_compatible
from ragwright.core.documents import SeenDocuments
from ragwright.core.keysets import KeySet
from ragwright.core.lexical import AVGDL_TOLERANCE
from ragwright.core.points import LIVE, DocumentPlan, plan_document
from ragwright.errors import SourceError
from ragwright.pipeline.finishing import RunPlan, finish_run
from ragwright.pipeline.planning import (
    DOCUMENT_SLICE,
    DocumentKey,
    PointState,
    ProgressCallback,
    ScanPrefetch,
    check_lengths,
    check_new_document,
    chunk_and_plan,
    document_key,
    document_source_digest,
    in_slices,
    scan_documents,
    tenant_order,
    token_counter,
)
from ragwright.pipeline.planning_process import wanted as planning_wanted
from ragwright.pipeline.source_process import ReadingWork, read_slices
from ragwright.pipeline.source_process import wanted as source_process_wanted
from ragwright.pipeline.writing import write_slices
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import (
    ChunkingPolicy,
    FieldMatch,
    IngestReport,
    SourceDocument,
)

# The run's end and the slicing helpers live beside it; callers reach them here too.
__all__ = [
    "DOCUMENT_SLICE",
    "RunPlan",
    "finish_run",
    "in_slices",
    "ingest",
    "plan_documents",
    "prepare_run",
]


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


def ingest(
    documents: Iterable[SourceDocument],
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    prune: bool = False,
    tenants: Collection[str | None] = (),
    prune_within: tuple[FieldMatch, ...] = (),
    batch_size: int = 64,
    slice_size: int = DOCUMENT_SLICE,
    progress: ProgressCallback | None = None,
    phase_hook: Callable[[str, str], None] | None = None,
    avgdl_tolerance: float = AVGDL_TOLERANCE,
    on_changed: Callable[[Sequence[DocumentKey]], None] | None = None,
    planning_process: bool = False,
) -> IngestReport:
    """Bring the index in line with ``documents`` for ``policy``'s chunking version.

    Two passes over ``documents`` (so it must be re-iterable: a list, or a source that
    reads its files again): :func:`prepare_run` validates everything before any write,
    then the changed documents are written ``slice_size`` at a time as
    :func:`~ragwright.pipeline.writing.ingest_slice` writes one slice (the next slices
    embedding while one is switched), then :func:`finish_run` prunes and refreshes the
    BM25 statistics.
    Several workers run the same three steps with the slices on a queue
    (docs/ingestion.md). ``progress`` and ``phase_hook`` may be called from the
    ingestion's writer thread.

    Args:
        documents: validated documents, unique (tenant, id) pairs.
        policy: the chunking policy; its version must be in the index contract.
        embedder: must carry the index contract's embedding profile.
        sparse_encoder: must carry the index contract's lexical profile.
        index: the open collection.
        prune: delete documents of this chunking version and of the run's tenants that
            are not in ``documents``.
        tenants: tenants in the run's scope besides those of ``documents`` (``None``
            stands for untenanted documents); other tenants' documents are never touched.
        prune_within: payload conditions a stored document must also meet to be pruned
            (a caller's grant: its allowlist, types, states); the others are kept.
        batch_size: chunks per embedding call and per upsert.
        slice_size: documents per change-detection scan and per slice of the writing pass.
        progress: receives (event, count) pairs for progress display.
        phase_hook: called as (document_id, phase) at each switch step; tests use it to
            observe what a reader sees mid-replacement.
        avgdl_tolerance: relative drift of the corpus mean length from the recorded
            ``avgdl`` that is tolerated before every sparse vector is re-encoded.
        on_changed: receives the (tenant, id) keys of the documents the run replaced
            (each slice once it is verified) and pruned, as it goes; the report's
            ``changed_documents`` is then empty. Without it the report lists them all.
        planning_process: allow forked helpers when the run is large enough: the
            validation pass reads its sources in a child
            (:mod:`~ragwright.pipeline.source_process`) and the writing pass plans its
            slices in another (:mod:`~ragwright.pipeline.planning_process`); for a
            process that forks safely (the command line, not a threaded service).

    Raises:
        DocumentError (duplicate ids), SourceError (``prune`` with no documents),
        ChunkingError, InputTooLong, ContractMismatch: before any write.
        DimensionMismatch, ReadBackError, ProviderError: during the run; everything
            already written stays consistent and the next run resumes.
    """
    if iter(documents) is documents:
        # A one-shot iterator would be empty on the writing pass: nothing would be written.
        raise TypeError("ingest reads documents twice: pass a list or a re-iterable source")
    run = prepare_run(
        documents,
        policy=policy,
        embedder=embedder,
        sparse_encoder=sparse_encoder,
        index=index,
        prune=prune,
        tenants=tenants,
        prune_within=prune_within,
        slice_size=slice_size,
        progress=progress,
        source_process=planning_process,
    )
    # Nothing changed (a re-run over unchanged sources): the sources are not read again.
    changed = (d for d in documents if document_key(d) in run.changed) if run.changed else ()
    reports = write_slices(
        in_slices(changed, slice_size),
        run.slice_context(),
        policy=policy,
        embedder=embedder,
        sparse_encoder=sparse_encoder,
        index=index,
        batch_size=batch_size,
        progress=progress,
        phase_hook=phase_hook,
        shared_in_run=run.shared_in_run,
        on_changed=on_changed,
        planning_process=planning_process and planning_wanted(run.planned_chunks),
    )
    return finish_run(
        run,
        reports,
        index=index,
        sparse_encoder=sparse_encoder,
        avgdl_tolerance=avgdl_tolerance,
        on_changed=on_changed,
    )


def prepare_run(
    documents: Iterable[SourceDocument],
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    prune: bool = False,
    tenants: Collection[str | None] = (),
    prune_within: tuple[FieldMatch, ...] = (),
    slice_size: int = DOCUMENT_SLICE,
    progress: ProgressCallback | None = None,
    source_process: bool = False,
) -> RunPlan:
    """The validation pass: every document is checked before anything is written.

    Streams ``documents`` in slices: unique (tenant, id) pairs, then one filtered scan
    of the stored points of the slice's documents; a changed document is chunked and its
    embedding inputs measured (``ChunkingError``/``InputTooLong`` stop the run here).
    Nothing of a slice is kept but its keys and counts. ``source_process``: a run known
    to be large reads its sources (and digests and, in a new collection, checks its
    documents) in a forked child (:mod:`~ragwright.pipeline.source_process`), with the
    same outcome and errors.
    """
    notify = progress or (lambda _event, _count: None)
    require_compatible(
        index.contract,
        embedder.profile,
        sparse_encoder.profile.profile_id,
        chunking_version=policy.version,
    )
    stats = index.contract.lexical_stats

    def earlier_source(key: DocumentKey) -> str | None:
        # A repeat is rare: read the documents again for the first with its key.
        return next((d.source_uri for d in documents if document_key(d) == key), None)

    seen = SeenDocuments(earlier_source)
    changed = KeySet()
    tenants_seen: set[str | None] = set()
    # Ids under more than one tenant: an id seen before (``ids``) with a new key.
    ids = KeySet()
    shared_in_run: set[str] = set()
    unchanged = planned = 0
    terms = pending_chunks = 0
    prefetch = ScanPrefetch(index)
    work = None
    if source_process and source_process_wanted(documents):
        # In a new collection every document is new: the child checks each as one.
        work = ReadingWork(
            policy,
            embedder,
            sparse_encoder,
            check_new=index.count() == 0,
            count_terms=stats is None,
        )
    with closing(read_slices(documents, slice_size, work)) as slices:
        for read in slices:
            part = read.documents
            for document in part:
                seen.add(document)
                tenants_seen.add(document.tenant)
                if not ids.add(None, document.document_id):
                    shared_in_run.add(document.document_id)
            existing = scan_documents(index, policy.version, part)
            prefetch.scanned(existing)
            candidates = dict(
                _changed_documents(part, read.digests, existing, policy, embedder, sparse_encoder)
            )
            for position, document in enumerate(part):
                key = document_key(document)
                source = candidates.get(key)
                if source is None:  # stored live under the same source digest
                    unchanged += len(existing[key])
                    continue
                stored = existing.get(key, {})
                if not stored:
                    checked = read.checks[position] if read.checks else None
                    chunks, lexical_terms = checked or check_new_document(
                        document, policy, embedder, sparse_encoder, count_terms=stats is None
                    )
                    if stats is None:
                        terms += lexical_terms
                        pending_chunks += chunks
                    planned += chunks
                    changed.add(*key)
                    continue
                plan = chunk_and_plan(document, policy, embedder, source)
                if stored.keys() == {p.stored_id for p in plan.points} and all(
                    (s.document, s.state) == (plan.digest, LIVE) for s in stored.values()
                ):
                    unchanged += len(stored)
                    continue
                pending = [p for p in plan.points if p.stored_id not in stored]
                check_lengths(embedder, pending)
                if stats is None:
                    terms += sum(sparse_encoder.count_terms(p.lexical_text) for p in pending)
                    pending_chunks += len(pending)
                planned += len(plan.points)
                changed.add(*key)
    if prune and not seen.keys:
        raise SourceError("sources", "no documents found; refusing to --prune every document")
    scope = tenants_seen | set(tenants)
    if stats is not None:
        # Every stored vector carries the recorded mean: new ones must match them.
        staging_avgdl: float = stats.avgdl
        encoded_avgdl: float | None = stats.avgdl
    else:
        # A new collection: its first points set the mean. Points already present
        # without recorded statistics carry an unknown one and are re-encoded at the end.
        staging_avgdl = terms / pending_chunks if terms else 1.0
        encoded_avgdl = staging_avgdl if index.count() == 0 else None
    notify("plan", unchanged + planned)
    notify("unchanged", unchanged)
    return RunPlan(
        chunking_version=policy.version,
        scope=tuple(sorted(scope, key=tenant_order)),
        keys=seen.keys,
        changed=changed,
        unchanged_chunks=unchanged,
        planned_chunks=planned,
        staging_avgdl=staging_avgdl,
        encoded_avgdl=encoded_avgdl,
        prune=prune,
        shared_in_run=frozenset(shared_in_run),
        prune_within=prune_within,
    )


def _changed_documents(
    documents: Sequence[SourceDocument],
    digests: Sequence[str] | None,
    existing: dict[DocumentKey, dict[uuid.UUID, PointState]],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
) -> Iterator[tuple[DocumentKey, str]]:
    """(key, source digest) of the documents whose stored points are not all live under
    the same source digest."""
    if digests is None:
        digests = [document_source_digest(d, policy, embedder, sparse_encoder) for d in documents]
    for document, source in zip(documents, digests, strict=True):
        stored = existing.get(document_key(document), {})
        if not stored or not all(
            s.state == LIVE and s.source == source and s.count == len(stored)
            for s in stored.values()
        ):
            yield document_key(document), source
