"""The corpus use cases: the chunks sources produce, ingestion into the index, and the
status of what the collection holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragwright.application.components import (
    DocumentStream,
    LoadedSources,
    OpenIndex,
    ReadSources,
)
from ragwright.application.grants import check_stored
from ragwright.application.requests.corpus import (
    ChunkingOptions,
    ChunkRow,
    ChunksRequest,
    ChunksResult,
    DocumentStatus,
    IngestRequest,
    IngestResult,
    SkippedFile,
    StatusRequest,
    StatusResult,
    VersionStatus,
)
from ragwright.application.requests.evidence import CalibrationStamp
from ragwright.application.sources import Sources
from ragwright.core.assembly import cite_location
from ragwright.core.points import LIVE, read_payload
from ragwright.deadline import Deadline, deadline_bound
from ragwright.errors import (
    ChunkingError,
    DocumentError,
    InputTooLong,
    SourceError,
)
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.planning import ProgressCallback, check_new_document, chunk_document
from ragwright.pipeline.validation import Findings
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy, IngestReport

PurgeDrafts = Callable[[Sequence[tuple[str | None, str]]], None]


@dataclass(frozen=True, slots=True)
class IngestParts:
    """What both ingestion paths (in process and queued) read."""

    chunking_policy: Callable[[ChunkingOptions], ChunkingPolicy]
    sources: Sources
    embedder: Callable[[], Embedder]
    sparse_encoder: Callable[[], SparseEncoder]
    open_index: OpenIndex
    purge_drafts: PurgeDrafts


class Corpus:
    """Chunks, ingestion and status over one index."""

    def __init__(
        self,
        settings: Settings,
        parts: IngestParts,
        *,
        load_sources: ReadSources[LoadedSources],
        calibration_stamp: Callable[[], CalibrationStamp | None],
    ) -> None:
        self.settings = settings
        self.parts = parts
        self._load_sources = load_sources
        self._calibration_stamp = calibration_stamp

    def chunks(self, request: ChunksRequest) -> ChunksResult:
        """The chunks ``request.sources`` produce under the (overridden) policy."""
        policy = self.parts.chunking_policy(request.chunking)
        loaded = self._load_sources(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
        )
        # The embedder's tokenizer: every window is held to the profile's input limit.
        embedder = self.parts.embedder()
        rows = []
        for document in loaded.documents:
            for chunk in chunk_document(document, policy, embedder):
                rows.append(
                    ChunkRow(
                        document_id=chunk.document_id,
                        chunk_id=chunk.chunk_id,
                        point_id=str(chunk.point_id),
                        section_id=chunk.section_id,
                        chunking_version=chunk.chunking_version,
                        word_count=chunk.word_count,
                        document_type=document.document_type,
                        publication_state=document.publication_state,
                        paragraphs=chunk.positions.paragraph_indexes,
                        text=chunk.text,
                        pages=chunk.pages,
                        source_uri=document.source_uri or None,
                        location=cite_location(
                            document.source_uri, chunk.pages, document.document_id
                        ),
                        split=chunk.split,
                    )
                )
        return ChunksResult(
            policy.version,
            tuple(rows),
            loaded.skipped,
            loaded.invalid,
            loaded.origins,
            loaded.origins_left_out,
        )

    def ingest(
        self,
        request: IngestRequest,
        *,
        progress: ProgressCallback | None = None,
        planning_process: bool = False,
    ) -> IngestResult:
        """Bring the index in line with ``request.sources`` within the run's tenants,
        within ``RAGWRIGHT_INGEST_DEADLINE`` when set (no embedding attempt, retry or
        backoff outlives it; the run stops as ``deadline_exhausted``).
        ``planning_process``: a large run may plan its slices in a forked child (the
        command line's choice; a threaded service does not fork)."""
        seconds = self.settings.ingest.deadline
        run_deadline = None if seconds is None else Deadline.after(seconds)
        policy = self.parts.chunking_policy(request.chunking)
        try:
            documents, stream = self.parts.sources.open(request, policy.version)
        except (SourceError, DocumentError) as error:
            raise self._with_document_problems(error, request, policy) from error
        embedder = self.parts.embedder()
        index = open_for_writing(self.parts.open_index, policy.version, request)
        try:
            if request.grant is not None:  # before any write: what the run would replace
                check_stored(index, request.tenant, request.documents, request.grant)
            with deadline_bound(run_deadline):
                report = ingest(
                    documents,
                    policy=policy,
                    embedder=embedder,
                    sparse_encoder=self.parts.sparse_encoder(),
                    index=index,
                    prune=request.prune,
                    tenants=() if request.tenant is None else (request.tenant,),
                    prune_within=() if request.grant is None else request.grant.prune_filter(),
                    batch_size=self.settings.ingest.batch_size,
                    progress=progress,
                    # Drafts citing a changed document go as each slice is verified.
                    on_changed=self.parts.purge_drafts,
                    planning_process=planning_process,
                    skip_invalid=request.skip_invalid,
                )
        finally:
            index.close()
        return ingest_result(report, request, policy, embedder, stream)

    def _with_document_problems(
        self, error: SourceError | DocumentError, request: IngestRequest, policy: ChunkingPolicy
    ) -> Exception:
        """The sources' refusal with the problems of the documents they did read (a
        heading over the budget, an input over the model's limit), so one run names every
        problem: on this failure path only, the sources are read a second time and each
        readable document chunked and measured as the validation pass would."""
        embedder, sparse = self.parts.embedder(), self.parts.sparse_encoder()
        found = Findings()
        try:
            for document in self.parts.sources.stream_documents(request):
                try:
                    check_new_document(document, policy, embedder, sparse, count_terms=False)
                except (ChunkingError, InputTooLong) as problem:
                    found.refused(document, problem)
        except (SourceError, DocumentError):
            pass  # the same refusal as the first pass
        return found.with_sources(error)

    def status(self, request: StatusRequest | None = None) -> StatusResult:
        """Documents, chunks, states and chunking versions the collection holds."""
        query_version = self.parts.chunking_policy(ChunkingOptions()).version
        index = self.parts.open_index(query_version, write=False, any_chunking_version=True)
        try:
            per_document, states = _tally(index, request)
            contract = index.contract
        finally:
            index.close()
        documents = tuple(
            DocumentStatus(**row)
            for row in sorted(
                per_document.values(),
                key=lambda r: (r["chunking_version"], r["document_id"], r["tenant"] or ""),
            )
        )
        live: dict[str, tuple[int, int]] = {}
        for version in sorted(
            {*contract.chunking_versions, *(d.chunking_version for d in documents)}
        ):
            held = [d for d in documents if d.chunking_version == version]
            live[version] = (len(held), sum(d.live_chunks for d in held))
        holding = [version for version, (_, chunks) in live.items() if chunks]
        if not self.settings.chunking_configured and len(holding) == 1:
            # What a query left to the defaults reads (application/left_out.py).
            query_version = holding[0]
        versions = [
            VersionStatus(
                chunking_version=version,
                documents=held,
                live_chunks=chunks,
                queried=version == query_version,
            )
            for version, (held, chunks) in live.items()
        ]
        return StatusResult(
            collection=self.settings.index.collection,
            embedding_profile=contract.profile_id,
            dimensions=contract.dimensions,
            distance=contract.distance,
            query_chunking_version=query_version,
            versions=tuple(versions),
            documents=documents,
            points=dict(states),
            calibration=self._calibration_stamp(),
        )


def _tally(
    index: VectorIndex, request: StatusRequest | None
) -> tuple[dict[tuple[str, str | None, str], dict[str, Any]], Counter[str]]:
    """Per (document, tenant, chunking version): its fields and live and staged chunks;
    and the points per index state, within the request's tenants and documents."""
    per_document: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    states: Counter[str] = Counter()
    tenants = request.tenants if request is not None else None
    allowlist = request.documents if request is not None else None
    for point in index.scroll():
        payload = read_payload(point.point_id, point.payload)
        if tenants is not None and payload.tenant not in tenants:
            continue
        if allowlist is not None and payload.document_id not in allowlist:
            continue
        states[payload.index_state] += 1
        row = per_document.setdefault(
            (payload.document_id, payload.tenant, payload.chunking_version),
            {
                "document_id": payload.document_id,
                "title": payload.title,
                "document_type": payload.document_type,
                "publication_state": payload.publication_state,
                "chunking_version": payload.chunking_version,
                "tenant": payload.tenant,
                "live_chunks": 0,
                "staged_chunks": 0,
            },
        )
        row["live_chunks" if payload.index_state == LIVE else "staged_chunks"] += 1
    return per_document, states


def open_for_writing(open_index: OpenIndex, version: str, request: IngestRequest) -> VectorIndex:
    """The index a run writes into: with ``version`` added to its contract, or emptied
    for a rebuild, as the request asks."""
    return open_index(
        version,
        write=True,
        add_chunking_version=request.add_chunking_version,
        rebuild=request.rebuild,
    )


def ingest_result(
    report: IngestReport,
    request: IngestRequest,
    policy: ChunkingPolicy,
    embedder: Embedder,
    stream: DocumentStream | None,
) -> IngestResult:
    """The use case's result: the pipeline's report with the run's sources and profile,
    and what the ``stream`` the documents came from (if any) skipped."""
    skipped = () if stream is None else tuple(SkippedFile(*s) for s in stream.skipped)
    invalid = (() if stream is None else stream.invalid) + report.left_out
    return IngestResult.of_report(
        report,
        chunking_version=policy.version,
        embedding_profile=embedder.profile.profile_id,
        skipped_files=skipped,
        skipped_documents=invalid,
        sources=tuple(str(path) for path in request.sources),
        pruned=request.prune,
        metadata=() if stream is None else stream.origins,
        metadata_left_out=0 if stream is None else stream.origins_left_out,
    )
