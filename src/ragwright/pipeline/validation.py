"""The validation pass of a run: every document read and checked before anything is
written (step 0 of :mod:`ragwright.pipeline.ingest`).

Each slice of documents is checked for unique (tenant, id) pairs, its stored points are
read by one filtered scan, and a changed document is chunked and its embedding inputs
measured; what is kept is the run's keys and counts (:class:`RunPlan`). A large run
from the command line reads its sources in a forked child
(:mod:`ragwright.pipeline.source_process`).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from types import MappingProxyType

from ragwright.core.contracts import require_compatible
from ragwright.core.documents import SeenDocuments
from ragwright.core.keysets import KeySet
from ragwright.core.points import LIVE
from ragwright.errors import (
    ChunkingError,
    DocumentError,
    DocumentProblems,
    InputTooLong,
    SourceError,
    SourceProblems,
)
from ragwright.pipeline.finishing import RunPlan
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
    scan_documents,
    tenant_order,
)
from ragwright.pipeline.source_process import ReadingWork, read_slices
from ragwright.pipeline.source_process import wanted as source_process_wanted
from ragwright.pipeline.unchanged import proven_unchanged
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import ChunkingPolicy, FieldMatch, SkippedDocument, SourceDocument

SPLIT_EXAMPLES = 20
"""Documents with split paragraphs a run names (the rest are counted)."""


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
    skip_invalid: bool = False,
    refused: Mapping[DocumentKey, str] = MappingProxyType({}),
) -> RunPlan:
    """The validation pass: every document is checked before anything is written.

    Streams ``documents`` in slices: unique (tenant, id) pairs, then one filtered scan
    of the stored points of the slice's documents; a changed document is chunked and its
    embedding inputs measured. A document that cannot be chunked or embedded (a heading
    over the budget, an input over the profile's limit) is a problem of that document:
    the pass goes on, and at its end raises it (one as its own error, several in one
    :class:`~ragwright.errors.DocumentProblems`), or with ``skip_invalid`` leaves those
    documents out of the writing pass (their stored points, if any, are kept and not
    pruned) and lists them in ``RunPlan.left_out``, as it does the documents in
    ``refused`` (those whose inputs the embedding provider refused in an earlier pass).
    Nothing of a slice is kept but its keys and counts, and the names of the first
    documents whose paragraphs were split.
    ``source_process``: a run known to be large reads its sources (and digests and, in
    a new collection, checks its documents) in a forked child
    (:mod:`~ragwright.pipeline.source_process`), with the same outcome and errors.
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
    found = Findings()
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
            digests = read.digests or [
                document_source_digest(d, policy, embedder, sparse_encoder) for d in part
            ]
            # Documents proven unchanged by counts are not scanned (pipeline/unchanged.py).
            proven = proven_unchanged(index, policy.version, part, digests)
            rest = [
                (d, s) for d, s in zip(part, digests, strict=True) if document_key(d) not in proven
            ]
            existing = scan_documents(index, policy.version, [d for d, _ in rest])
            prefetch.scanned(existing)
            candidates = dict(_changed_documents(rest, existing))
            for position, document in enumerate(part):
                key = document_key(document)
                if key in refused:
                    found.provider_refused(document, refused[key])
                    continue
                if key in proven:
                    unchanged += proven[key]
                    continue
                source = candidates.get(key)
                if source is None:  # stored live under the same source digest
                    unchanged += len(existing[key])
                    continue
                stored = existing.get(key, {})
                try:
                    if not stored:
                        checked = read.checks[position] if read.checks else None
                        chunks, lexical_terms, cut = checked or check_new_document(
                            document,
                            policy,
                            embedder,
                            sparse_encoder,
                            count_terms=stats is None,
                        )
                        if cut:
                            found.split_seen(document)
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
                except (ChunkingError, InputTooLong) as error:
                    found.refused(document, error)
                    continue
                if any(p.chunk.split for p in plan.points):
                    found.split_seen(document)
                if stats is None:
                    terms += sum(sparse_encoder.count_terms(p.lexical_text) for p in pending)
                    pending_chunks += len(pending)
                planned += len(plan.points)
                changed.add(*key)
    found.check(skip_invalid)
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
        left_out=tuple(found.problems),
        split_documents=found.split,
        split_sources=tuple(found.split_names),
    )


@dataclass
class Findings:
    """What the validation pass found of the documents themselves: those it cannot
    chunk or embed (each with its typed error), and those with split paragraphs (a
    count and the first :data:`SPLIT_EXAMPLES` names)."""

    problems: list[SkippedDocument] = field(default_factory=list)
    errors: list[ChunkingError | InputTooLong] = field(default_factory=list)
    split: int = 0
    split_names: list[str] = field(default_factory=list)

    def split_seen(self, document: SourceDocument) -> None:
        self.split += 1
        if len(self.split_names) < SPLIT_EXAMPLES:
            self.split_names.append(document.source_uri or document.document_id)

    def refused(self, document: SourceDocument, error: ChunkingError | InputTooLong) -> None:
        self.problems.append(document_problem(document, error))
        self.errors.append(error)

    def provider_refused(self, document: SourceDocument, reason: str) -> None:
        self.problems.append(
            SkippedDocument(
                document.document_id,
                document.source_uri or document.document_id,
                "embedding_input",
                reason,
            )
        )

    def check(self, skip_invalid: bool) -> None:
        """Raise the documents' problems unless ``skip_invalid`` leaves them out: one
        as its own typed error, several in one :class:`DocumentProblems`."""
        if skip_invalid or not self.problems:
            return
        if len(self.errors) == 1:
            raise self.errors[0]
        raise DocumentProblems("sources", listed_problems(self.problems), tuple(self.errors))

    def with_sources(self, error: SourceError | DocumentError) -> Exception:
        """The sources' refusal, with the documents' problems when there are any."""
        if not self.problems:
            return error
        source = error.source or "sources"  # a DocumentError's file, when it has one
        listed = error.problems if isinstance(error, SourceProblems) else ((source, str(error)),)
        return DocumentProblems(
            source, (*listed, *listed_problems(self.problems)), tuple(self.errors)
        )


def listed_problems(problems: Sequence[SkippedDocument]) -> tuple[tuple[str, str], ...]:
    """Documents' problems as a refusal lists them: (file, "field: reason")."""
    return tuple((p.source, f"{p.field}: {p.reason}") for p in problems)


def document_problem(
    document: SourceDocument, error: ChunkingError | InputTooLong
) -> SkippedDocument:
    """A document the run cannot write, with its reason and fix."""
    if isinstance(error, ChunkingError):
        field = "chunking"
        reason = (
            f"section {error.section_id!r}: {error.reason}; shorten the heading, or raise "
            "--max-words"
        )
    else:
        field = "embedding_input"
        reason = (
            f"chunk {error.chunk_id!r} is {error.tokens} tokens as embedded, the embedding "
            f"profile reads at most {error.limit}; shorten the title or heading"
        )
    return SkippedDocument(
        document.document_id, document.source_uri or document.document_id, field, reason
    )


def _changed_documents(
    documents: Sequence[tuple[SourceDocument, str]],
    existing: dict[DocumentKey, dict[uuid.UUID, PointState]],
) -> Iterator[tuple[DocumentKey, str]]:
    """(key, source digest) of the (document, source digest) pairs whose stored points
    are not all live under the same source digest."""
    for document, source in documents:
        stored = existing.get(document_key(document), {})
        if not stored or not all(
            s.state == LIVE and s.source == source and s.count == len(stored)
            for s in stored.values()
        ):
            yield document_key(document), source
