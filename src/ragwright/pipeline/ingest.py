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
   :data:`~ragwright.pipeline.writing_pass.SLICES_IN_FLIGHT` slices held). One writer thread
   makes every write in order. On an index whose upserts are atomic (the embedded one),
   the points of the slice's *new* documents (nothing stored under their keys) are not
   staged: they are written live in one upsert at step 3, whole or not at all after a
   crash (docs/ingestion.md, "New documents written live").
3. **Switch** — once every point of the slice is staged and read back, obsolete points
   of the document are deleted, then one ``set_payload``
   sets the document-level fields (revision, metadata, digest, ``index_state="live"``) on
   all its desired points. Until the delete the visible set is the old revision; between
   delete and flip it is the unchanged chunks (a subset of both revisions); after the
   flip it is the new revision. A reader never sees a mix (docs/ingestion.md).
4. **Verify** — the document's points are read back and validated fail-closed (new
   documents written live: the fields that decide what a point says and who sees it).

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
re-embedding), a half-switched document (finished by the next run), new documents
written whole (or not at all) or sparse vectors
partly re-encoded (the recorded mean is still the old one, so the next run re-encodes
again): re-running converges to the same index as one uninterrupted run. A slice run
again (by another worker, after a crash) converges the same way, and reports what an
uninterrupted slice would, so a run's summary does not depend on who finished a slice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from ragwright.core.lexical import AVGDL_TOLERANCE
from ragwright.core.points import DocumentPlan, plan_document
from ragwright.pipeline.finishing import RunPlan, finish_run
from ragwright.pipeline.planning import (
    DOCUMENT_SLICE,
    DocumentKey,
    ProgressCallback,
    chunk_document,
    document_key,
    in_slices,
)
from ragwright.pipeline.planning_process import wanted as planning_wanted
from ragwright.pipeline.refusals import LocatingEmbedder, RefusedInputs
from ragwright.pipeline.validation import prepare_run
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
            chunk_document(d, policy, embedder),
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
    skip_invalid: bool = False,
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
        skip_invalid: leave out (and list in the report's ``left_out``) documents
            that cannot be chunked or embedded, instead of refusing the run.

    Raises:
        DocumentError (duplicate ids), SourceError (``prune`` with no documents),
        SourceProblems (documents that cannot be chunked or embedded, every one named,
            unless ``skip_invalid``), ContractMismatch: before any write.
        DimensionMismatch, ReadBackError, ProviderError: during the run; everything
            already written stays consistent and the next run resumes.
    """
    if iter(documents) is documents:
        # A one-shot iterator would be empty on the writing pass: nothing would be written.
        raise TypeError("ingest reads documents twice: pass a list or a re-iterable source")
    # Documents whose inputs the provider refused (skip_invalid): left out of the next
    # pass, which embeds only what the failed one did not write (pipeline/refusals.py).
    refused: dict[DocumentKey, str] = {}
    while True:
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
            skip_invalid=skip_invalid,
            refused=refused,
        )
        # Nothing changed (a re-run over unchanged sources): the sources are not read again.
        changed = (d for d in documents if document_key(d) in run.changed) if run.changed else ()
        try:
            reports = write_slices(
                in_slices(changed, slice_size),
                run.slice_context(),
                policy=policy,
                embedder=LocatingEmbedder(embedder) if skip_invalid else embedder,
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
        except RefusedInputs as refusal:
            found = _refused_documents(documents, run, refusal, policy, embedder)
            if not found.keys() - refused.keys():
                raise refusal.error from refusal  # not narrowed to a new document
            refused.update(found)


def _refused_documents(
    documents: Iterable[SourceDocument],
    run: RunPlan,
    refusal: RefusedInputs,
    policy: ChunkingPolicy,
    embedder: Embedder,
) -> dict[DocumentKey, str]:
    """The changed documents one of whose embedding inputs the provider refused, each
    with the reason a run lists (on this failure path their chunks are planned again)."""
    texts = set(refusal.texts)
    reason = (
        f"the embedding provider refused a chunk of it ({refusal.error}); shorten its "
        "paragraphs, or use --max-tokens with a profile that counts tokens"
    )
    found: dict[DocumentKey, str] = {}
    for document in documents:
        key = document_key(document)
        if key not in run.changed:
            continue
        plan = plan_document(document, chunk_document(document, policy, embedder), embedder.profile)
        if any(p.embedding_input in texts for p in plan.points):
            found[key] = reason
    return found
