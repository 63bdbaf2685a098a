"""The application: one method per use case, shared by every entry point.

The command line (and the HTTP service) only turn their input into a typed request,
call one of these methods, and print or send the typed result. Nothing here picks an
adapter: :class:`Components` (built by ``ragwright.runtime``) supplies them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ragwright.application.calibration import Answerability as RecordAnswerability
from ragwright.application.calibration import AnswerabilityFigures as RecordAnswerabilityFigures
from ragwright.application.calibration import (
    CalibrationRecord,
    Figures,
    HeldOutFigures,
    RecordThresholds,
    calibrated_at_text,
    calibration_path,
    clear_calibration,
    read_calibration,
    write_calibration,
)
from ragwright.application.callers import evidence_for
from ragwright.application.components import (
    ChatSession,
    Components,
    DocumentStream,
    LoadedSources,
    Workload,
)
from ragwright.application.drafts import (
    Draft,
    ShownDraft,
    cited_revisions,
    input_version,
    question_key,
)
from ragwright.application.grants import check_stored
from ragwright.application.ingest_queue import (
    IngestQueue,
    ItemResult,
    WorkerStats,
    WorkItem,
    item_body,
    read_item_body,
    wait_for_results,
)
from ragwright.application.jobs import JobStore
from ragwright.application.keys import ApiKey
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.requests import (
    STAGES,
    AddKeyRequest,
    AddKeyResult,
    AnswerabilityFigures,
    AnswerabilityResult,
    AnswerRequest,
    AppliedThresholds,
    CalibrateRequest,
    CalibrateResult,
    CalibrationRowResult,
    CalibrationStamp,
    CaseChangeResult,
    ChunkingOptions,
    ChunkRow,
    ChunksRequest,
    ChunksResult,
    ClearCalibrationRequest,
    ClearCalibrationResult,
    CompareRequest,
    CompareResult,
    Dataset,
    DocumentStatus,
    EvaluateRequest,
    EvaluateResult,
    EvidenceFilter,
    HeldOutResult,
    IngestRequest,
    IngestResult,
    ListKeysResult,
    ReportRequest,
    ReportResult,
    RevokeKeyRequest,
    RevokeKeyResult,
    ScoreKind,
    SearchHit,
    SearchRequest,
    SearchResult,
    SkippedFile,
    StatusRequest,
    StatusResult,
    ThresholdOrigin,
    ThresholdOverrides,
    ThresholdSource,
    VerifyProblem,
    VerifyRequest,
    VerifyResult,
    VersionStatus,
)
from ragwright.application.templates import load_templates
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest
from ragwright.core.answers import AnswerStyle
from ragwright.core.assembly import AssembledContext, cite_location, parse_policy
from ragwright.core.chunking import build_chunks
from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.core.points import LIVE, format_query_input, read_payload
from ragwright.core.templates import ApprovedTemplate, select_template
from ragwright.deadline import Deadline, deadline_bound, deadline_scope
from ragwright.errors import (
    AnswerContractError,
    AssemblyError,
    CalibrationError,
    ChatError,
    ConfigError,
    ContractMismatch,
    EvaluationError,
    FailureCategory,
    IndexDamaged,
    IndexNotFound,
    IngestItemFailed,
    PayloadError,
    RequestError,
    SourceError,
    StorageError,
    VectorIndexError,
)
from ragwright.pipeline.answer import Budget, answer_question, instructions_version
from ragwright.pipeline.answer_scoring import attach_answers, error_outcome, score_answer
from ragwright.pipeline.answerability import (
    SignalCase,
    ThresholdFigures,
    choose_threshold,
    held_out_threshold,
    judge_threshold,
)
from ragwright.pipeline.calibrate import MIN_UNSUPPORTED, Calibration, assign_folds, calibrate
from ragwright.pipeline.evaluate import (
    EvalConfig,
    compare_runs,
    eligible_corpus,
    load_run,
    run_evaluation,
    save_run,
)
from ragwright.pipeline.ingest import batched, finish_run, ingest, prepare_run
from ragwright.pipeline.retrieve import Hit, Mode, Retriever, Thresholds
from ragwright.pipeline.writing import (
    BatchContext,
    BatchReport,
    ProgressCallback,
    document_key,
    ingest_batch,
    token_counter,
)
from ragwright.protocols import Embedder, IndexPart, VectorIndex
from ragwright.report import render_report
from ragwright.settings import Settings
from ragwright.threads import run_in_thread
from ragwright.types import (
    ChunkingPolicy,
    EvalCase,
    FieldMatch,
    IndexState,
    IngestReport,
    PointFilter,
    SourceDocument,
)

logger = logging.getLogger(__name__)

# Points read back per request by ``verify``.
VERIFY_PAGE = 256

# History enters an answer through the assembly policy's history share; a request that
# brings history under a policy without one gets this share rather than being ignored.
DEFAULT_HISTORY_SHARE = 0.25


class Application:
    """Every use case of ragwright over one set of components."""

    def __init__(self, components: Components, *, clock: Callable[[], float] = time.time) -> None:
        self.components = components
        self.clock = clock
        self._kept_chat: ChatSession | None = None
        self._kept_batch: ChatSession | None = None
        self._templates: tuple[ApprovedTemplate, ...] | None = None

    @asynccontextmanager
    async def chat_kept_open(self, workload: Workload = "interactive") -> AsyncIterator[None]:
        """Answers made inside share one chat session — one warm local model instead of a
        start per answer — closed on exit (evaluation runs, benchmarks, a service).
        ``workload="batch"`` keeps the session answer jobs use (its own capacity pools)."""
        batch = workload == "batch"
        if (self._kept_batch if batch else self._kept_chat) is not None:
            yield
            return
        session = self.components.chat(self.components.token_counter(), workload)
        if batch:
            self._kept_batch = session
        else:
            self._kept_chat = session
        try:
            yield
        finally:
            if batch:
                self._kept_batch = None
            else:
                self._kept_chat = None
            await session.close()

    @contextmanager
    def hold_index(self) -> Iterator[None]:
        """Use cases called inside share one open index (embedded backend), so a query
        never meets ``IndexBusy`` while an ingestion runs in this process: a service
        holds it for its lifetime. It opens on first use, verified once, and closes,
        committed, on exit; see docs/ingestion.md ("Serving while ingesting")."""
        with self.components.hold_index():
            yield

    def index_state(self) -> IndexState:
        """The index as readiness and status report it: opened or not, its count, and
        the one-line reason it does not open (damaged, absent, busy) instead of raising."""
        return self.components.index_state()

    @property
    def settings(self) -> Settings:
        return self.components.settings

    # --- corpus ---------------------------------------------------------------------

    def chunks(self, request: ChunksRequest) -> ChunksResult:
        """The chunks ``request.sources`` produce under the (overridden) policy."""
        policy = self.chunking_policy(request.chunking)
        loaded = self.components.load_sources(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
        )
        embedder = self.components.embedder() if policy.max_tokens is not None else None
        rows = []
        for document in loaded.documents:
            counter = token_counter(embedder, document) if embedder is not None else None
            for chunk in build_chunks(document, policy, count_tokens=counter):
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
                        location=cite_location(document.source_uri, chunk.pages),
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
        self, request: IngestRequest, *, progress: ProgressCallback | None = None
    ) -> IngestResult:
        """Bring the index in line with ``request.sources`` within the run's tenants,
        within ``RAGWRIGHT_INGEST_DEADLINE`` when set (no embedding attempt, retry or
        backoff outlives it; the run stops as ``deadline_exhausted``)."""
        seconds = self.settings.ingest.deadline
        run_deadline = None if seconds is None else Deadline.after(seconds)
        policy = self.chunking_policy(request.chunking)
        documents, stream = self._open_sources(request, policy.version)
        embedder = self.components.embedder()
        index = self.components.open_index(
            policy.version,
            write=True,
            add_chunking_version=request.add_chunking_version,
            rebuild=request.rebuild,
        )
        try:
            if request.grant is not None:  # before any write: what the run would replace
                check_stored(index, request.tenant, request.documents, request.grant)
            with deadline_bound(run_deadline):
                report = ingest(
                    documents,
                    policy=policy,
                    embedder=embedder,
                    sparse_encoder=self.components.sparse_encoder(),
                    index=index,
                    prune=request.prune,
                    tenants=() if request.tenant is None else (request.tenant,),
                    prune_within=() if request.grant is None else request.grant.prune_filter(),
                    batch_size=self.settings.ingest.batch_size,
                    progress=progress,
                    # Drafts citing a changed document go as each batch is verified.
                    on_changed=self._purge_drafts,
                )
        finally:
            index.close()
        return _ingest_result(report, request, policy, embedder, stream)

    def _open_sources(
        self, request: IngestRequest, version: str
    ) -> tuple[Iterable[SourceDocument], DocumentStream | None]:
        """The run's documents: the request's, or its sources streamed (then also the
        stream, for what it skipped), with ``--rebuild`` checked.

        Sources are streamed: each pass reads them one file at a time, so the corpus is
        never held (docs/ingestion.md, "Memory"). They are read once here, keeping
        nothing, before the index is opened for writing, so invalid or missing sources
        leave no index behind (``--rebuild``'s check made that pass already).
        """
        stream = None if request.documents else self.stream_documents(request)
        documents = request.documents if stream is None else stream
        self._check_rebuild(request, documents, stream, version)
        if stream is not None and not request.rebuild:
            for _ in stream:
                pass
        return documents, stream

    def stream_documents(self, request: IngestRequest) -> DocumentStream:
        """The documents of :meth:`load_documents`, read and validated one file at a time
        on each iteration (what ``ingest`` indexes; see :class:`DocumentStream`)."""
        return self.components.stream_sources(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
            tenant=request.tenant,
        )

    def load_documents(self, request: IngestRequest) -> LoadedSources:
        """The validated documents ``request.sources`` hold (what ``ingest`` would index;
        ``ingest --server`` sends them to a service)."""
        return self.components.load_sources(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
            tenant=request.tenant,
        )

    def ingest_queued(
        self,
        request: IngestRequest,
        *,
        item_size: int,
        progress: ProgressCallback | None = None,
        started: Callable[[str], None] | None = None,
        poll: float = 0.25,
    ) -> IngestResult:
        """``ingest`` with the writing pass done by ``ragwright ingest-worker`` processes:
        the validation pass runs here, the changed documents go on the shared queue in
        items of ``item_size`` documents, and the summary sums the items' recorded
        results (docs/ingestion.md, "Several workers"). ``started`` is called with the
        run id once the run is open (``--local-workers`` starts its workers there).

        Raises:
            ConfigError: no Qdrant server (the embedded index is one process's) or no
                PostgreSQL (``RAGWRIGHT_DATABASE_URL``) for the queue.
            IngestItemFailed: a worker recorded a failure for an item; the run stops
                (what was written stays consistent, and the next run resumes).
            IngestRunExpired: ``RAGWRIGHT_INGEST_DEADLINE`` passed (and
                ``DEADLINE_GRACE`` after it) with items no worker finished.
        """
        self._require_index_server()
        if item_size < 1:
            raise RequestError("item_size", f"must be at least 1, got {item_size}")
        seconds = self.settings.ingest.deadline
        # Workers on other machines bound each item by the run's deadline: a time on the
        # wall clock, which the machines share (their monotonic clocks they do not).
        deadline_at = None if seconds is None else self.clock() + seconds
        queue = self.components.ingest_queue()
        try:
            return self._run_queued(queue, request, item_size, progress, started, poll, deadline_at)
        finally:
            queue.close()

    def _run_queued(
        self,
        queue: IngestQueue,
        request: IngestRequest,
        item_size: int,
        progress: ProgressCallback | None,
        started: Callable[[str], None] | None,
        poll: float,
        deadline_at: float | None,
    ) -> IngestResult:
        policy = self.chunking_policy(request.chunking)
        documents, stream = self._open_sources(request, policy.version)
        embedder = self.components.embedder()
        sparse_encoder = self.components.sparse_encoder()
        index = self.components.open_index(
            policy.version,
            write=True,
            add_chunking_version=request.add_chunking_version,
            rebuild=request.rebuild,
        )
        notify = progress or (lambda _event, _count: None)
        try:
            run = prepare_run(
                documents,
                policy=policy,
                embedder=embedder,
                sparse_encoder=sparse_encoder,
                index=index,
                prune=request.prune,
                tenants=() if request.tenant is None else (request.tenant,),
                progress=progress,
            )
            run_id = uuid.uuid4().hex
            queue.open_run(run_id)
            try:
                if started is not None and run.changed:
                    started(run_id)
                items = 0
                # The writing pass reads the sources again: only the item being built is
                # held, whatever the corpus's size.
                changed = (d for d in documents if document_key(d) in run.changed)
                for number, item in enumerate(batched(changed, item_size)):
                    body = item_body(
                        item,
                        context=run.batch_context().to_json(),
                        policy=policy,
                        embedding_profile=embedder.profile.profile_id,
                        lexical_profile=sparse_encoder.profile.profile_id,
                        deadline_at=deadline_at,
                    )
                    queue.enqueue(run_id, number, body)
                    items += 1
                queue.seal_run(run_id, items)
                logger.info("ingest run %s: %d work items queued", run_id, items)

                # Each item's report, without its changed documents (purged on arrival):
                # the coordinator holds counts per item, not a list of every document.
                reports: dict[int, BatchReport] = {}

                def received(result: ItemResult) -> None:
                    if result.report is None:
                        raise IngestItemFailed(
                            run_id, result.number, result.worker, result.error or "no report"
                        )
                    item = BatchReport.from_json(dict(result.report))
                    self._purge_drafts(item.changed_documents)
                    reports[result.number] = dataclasses.replace(item, changed_documents=())
                    notify("embedded", item.chunks)

                wait_for_results(
                    queue,
                    run_id,
                    items,
                    poll=poll,
                    on_result=received,
                    deadline_at=deadline_at,
                    clock=self.clock,
                )
                report = finish_run(
                    run,
                    [reports[number] for number in sorted(reports)],
                    index=index,
                    sparse_encoder=sparse_encoder,
                    on_changed=self._purge_drafts,
                )
            except BaseException:
                queue.close_run(run_id, "failed")
                raise
            queue.close_run(run_id, "finished")
        finally:
            index.close()
            queue.close()
        return _ingest_result(report, request, policy, embedder, stream)

    def ingest_worker(
        self,
        *,
        worker: str,
        idle_exit: float | None = None,
        stop: threading.Event | None = None,
        phase_hook: Callable[[str, str], None] | None = None,
    ) -> WorkerStats:
        """Run ingestion work items from the shared queue into the configured index
        until ``stop`` is set (or no item was queued or held for ``idle_exit``
        seconds). Each item runs ``ingest_batch`` on its documents with the run's
        chunking policy and context, within its run's deadline and this worker's
        ``RAGWRIGHT_INGEST_DEADLINE`` from the item's start (whichever ends first); its
        report is recorded once per item."""
        self._require_index_server()
        queue = self.components.ingest_queue()
        embedder = self.components.embedder()
        sparse_encoder = self.components.sparse_encoder()

        def handle(item: WorkItem) -> Mapping[str, Any]:
            body = read_item_body(item.body)
            if body.embedding_profile != embedder.profile.profile_id:
                raise ContractMismatch(
                    "embedding_profile", body.embedding_profile, embedder.profile.profile_id
                )
            if body.lexical_profile != sparse_encoder.profile.profile_id:
                raise ContractMismatch(
                    "lexical_profile_id", body.lexical_profile, sparse_encoder.profile.profile_id
                )
            item_deadline = self._item_deadline(body.deadline_at)
            index = self.components.open_index(body.policy.version, write=True)
            try:
                with deadline_bound(item_deadline):
                    report = ingest_batch(
                        body.documents,
                        BatchContext.from_json(dict(body.context)),
                        policy=body.policy,
                        embedder=embedder,
                        sparse_encoder=sparse_encoder,
                        index=index,
                        batch_size=self.settings.ingest.batch_size,
                        phase_hook=phase_hook,
                    )
            finally:
                index.close()
            return report.to_json()

        try:
            return queue.work(handle, worker=worker, idle_exit=idle_exit, stop=stop)
        finally:
            queue.close()

    def _item_deadline(self, deadline_at: float | None) -> Deadline | None:
        """A work item's deadline: its run's (``deadline_at`` on the wall clock) or this
        worker's ``RAGWRIGHT_INGEST_DEADLINE`` from now, whichever ends first."""
        deadlines = [] if deadline_at is None else [Deadline.after(deadline_at - self.clock())]
        if self.settings.ingest.deadline is not None:
            deadlines.append(Deadline.after(self.settings.ingest.deadline))
        return min(deadlines, key=lambda deadline: deadline.expires_at, default=None)

    def _require_index_server(self) -> None:
        location = self.settings.index.qdrant_location or ""
        if self.settings.index.backend != "qdrant" or not location.startswith(
            ("http://", "https://")
        ):
            raise ConfigError(
                "RAGWRIGHT_BACKEND",
                "queued ingestion needs a Qdrant server (RAGWRIGHT_BACKEND=qdrant and an "
                "http(s) RAGWRIGHT_QDRANT_LOCATION): workers in other processes write into "
                "it, and the embedded index is owned by one process",
            )

    def _check_rebuild(
        self,
        request: IngestRequest,
        documents: Iterable[SourceDocument],
        sources: Any,
        version: str,
    ) -> None:
        """Refuse ``--rebuild`` on bad input or across tenants (see :meth:`ingest`).

        One pass over ``documents`` keeping only their tenants; ``sources`` (a stream or
        loaded sources, or ``None``) then tells how many documents were invalid.
        """
        if not request.rebuild:
            return
        tenants = {d.tenant for d in documents}
        invalid = () if sources is None else sources.invalid
        if invalid or not tenants:
            # The sources are about to become the whole index: never on bad input.
            raise SourceError(
                ", ".join(str(s) for s in request.sources),
                f"--rebuild refused: {len(invalid)} invalid documents"
                if invalid
                else "--rebuild refused: the sources hold no documents",
            )
        scope = tenants | ({request.tenant} if request.tenant is not None else set())
        self._refuse_rebuild_across_tenants(version, scope, request.sources)

    def _refuse_rebuild_across_tenants(
        self, version: str, scope: set[str | None], sources: tuple[Path, ...]
    ) -> None:
        """A rebuild empties the collection: refuse it while the collection still reads
        and holds documents of tenants outside the run's scope (tenant scope applies to
        deletes; untenanted documents are outside a run whose sources hold none). A
        damaged or missing index cannot be read, so the sources decide (a rebuild is the
        recovery from damage); any other failure to read the tenants (a server timing
        out) is refused: not knowing whom a rebuild deletes is no licence to delete
        everyone."""
        try:
            index = self.components.open_index(
                version, write=False, any_chunking_version=True, verify=False
            )
        except (IndexDamaged, IndexNotFound, ContractMismatch):
            return  # unreadable, empty or built under another contract: the sources decide
        try:
            outside: Counter[str] = Counter()
            for point in index.scroll(payload_fields=("tenant", "document_id")):
                tenant = point.payload.get("tenant")
                if tenant not in scope:
                    outside[str(tenant) if tenant is not None else "(untenanted)"] += 1
        except IndexDamaged:
            return  # a stored part does not read back: the rebuild is its recovery
        except Exception as error:  # anything else: refuse (fail closed), never delete blind
            raise VectorIndexError(
                "--rebuild refused: cannot read which tenants the collection holds "
                f"({type(error).__name__}: {' '.join(str(error).split())}); nothing was "
                "deleted; run it again once the index answers"
            ) from error
        finally:
            index.close()
        if outside:
            named = ", ".join(f"{t} ({n} chunks)" for t, n in sorted(outside.items()))
            raise SourceError(
                ", ".join(str(s) for s in sources),
                f"--rebuild refused: the collection also holds tenants this run does not "
                f"ingest: {named}; rebuild from sources covering every tenant, or ingest "
                "without --rebuild",
            )

    def status(self, request: StatusRequest | None = None) -> StatusResult:
        """Documents, chunks, states and chunking versions the collection holds."""
        query_version = self.chunking_policy().version
        index = self.components.open_index(query_version, write=False, any_chunking_version=True)
        try:
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
        versions = []
        for version in sorted(
            {*contract.chunking_versions, *(d.chunking_version for d in documents)}
        ):
            held = [d for d in documents if d.chunking_version == version]
            versions.append(
                VersionStatus(
                    chunking_version=version,
                    documents=len(held),
                    live_chunks=sum(d.live_chunks for d in held),
                    queried=version == query_version,
                )
            )
        return StatusResult(
            collection=self.settings.index.collection,
            embedding_profile=contract.profile_id,
            dimensions=contract.dimensions,
            distance=contract.distance,
            query_chunking_version=query_version,
            versions=tuple(versions),
            documents=documents,
            points=dict(states),
            calibration=self._calibration_stamp(self.calibration()),
        )

    # --- queries --------------------------------------------------------------------

    def verify(self, request: VerifyRequest | None = None) -> VerifyResult:
        """Read every point back: payload (validated as queries read it), dense vector
        (the contract's size, finite values) and sparse vector (present when the text
        has terms), and compare the count with the one last committed."""
        index = self.components.open_index(
            self.chunking_policy().version, write=False, any_chunking_version=True, verify=False
        )
        try:
            with index.reading():  # no write of this process between the two
                committed = index.committed_points
                held = index.count()
            ids = [point.point_id for point in index.scroll(payload_fields=())]
            problems: list[VerifyProblem] = []
            if committed is not None and held != committed:
                problems.append(
                    VerifyProblem(
                        None, "id tracker", f"{held} points readable, {committed} committed"
                    )
                )
            checked = 0
            for start in range(0, len(ids), VERIFY_PAGE):
                page = ids[start : start + VERIFY_PAGE]
                checked += self._verify_page(index, page, problems)
        finally:
            index.close()
        return VerifyResult(
            collection=self.settings.index.collection,
            committed_points=committed,
            points=held,
            checked=checked,
            problems=tuple(problems),
        )

    def _verify_page(
        self, index: VectorIndex, page: list[uuid.UUID], problems: list[VerifyProblem]
    ) -> int:
        parts = {part: _read_part(index, page, part, problems) for part in _PARTS}
        dimensions = index.contract.dimensions
        terms = self.components.sparse_encoder().terms
        checked = 0
        for point_id in page:
            if any(point_id not in parts[part] for part in ("payload", "dense")):
                continue  # unreadable (already listed) or lost between scroll and read
            before = len(problems)
            try:
                payload = read_payload(point_id, parts["payload"][point_id])
            except PayloadError as error:
                problems.append(
                    VerifyProblem(str(point_id), "payload", f"{error.field} {error.rule}")
                )
                continue
            vector = parts["dense"][point_id]
            if len(vector) != dimensions or not all(map(math.isfinite, vector)):
                problems.append(
                    VerifyProblem(
                        str(point_id),
                        "dense vectors",
                        f"{len(vector)} values (expected {dimensions}) or a non-finite one",
                    )
                )
            if point_id not in parts["sparse"] and terms(payload.text):
                problems.append(VerifyProblem(str(point_id), "sparse vectors", "missing"))
            if len(problems) == before:
                checked += 1
        return checked

    def search(self, request: SearchRequest) -> SearchResult:
        """The ``k`` best eligible chunks for the question (never relaxed to fill)."""
        self.check_question_tokens(request.question)
        eligibility = self.eligibility(request.evidence)
        applied = self.thresholds(request.thresholds)
        limits = applied.thresholds
        index = self.components.open_index(
            eligibility.chunking_version, write=False, any_chunking_version=True
        )
        try:
            retriever = self.components.retriever(index)
            result = retriever.search(
                request.question,
                eligibility,
                CallerScope(tenant=request.tenant, allowed_documents=request.allowed_documents),
                k=request.k,
                mode=request.mode,
                thresholds=limits,
            )
            excluded = _excluded_versions(index, eligibility, request.tenant)
        finally:
            index.close()
        kind = score_kind(request.mode, reranked=retriever.reranker is not None)
        hits = tuple(_search_hit(rank, hit, kind) for rank, hit in enumerate(result.hits, 1))
        return SearchResult(
            question=request.question,
            mode=request.mode,
            score_kind=kind,
            chunking_version=eligibility.chunking_version,
            hits=hits,
            thresholds=limits,
            excluded_versions=excluded,
            threshold_origin=applied.origin,
        )

    async def answer(
        self,
        request: AnswerRequest,
        *,
        on_evidence: Callable[[AssembledContext], None] | None = None,
        workload: Workload = "interactive",
        drafts: bool = True,
    ) -> AnswerOutcome:
        """Retrieve, assemble, generate, validate and cite; or say why not.

        The outcome states its mode and reason (:class:`AnswerOutcome`): when the model is
        unavailable, the newest previous draft of this tenant for the question whose
        inputs still match (``draft_max_age``), else the approved template for the
        question's class (``RAGWRIGHT_TEMPLATES``) if one matches, else the evidence
        without an answer, else (with ``evidence_only_on_model_failure`` off)
        unavailable. A generated answer is kept as the draft for (tenant, question).
        ``on_evidence`` receives the assembled context before any model call (the HTTP
        stream's ``evidence`` event). ``drafts`` false neither keeps nor shows drafts
        (an evaluation run measures the model, not earlier answers).
        ``workload="batch"`` (answer jobs) draws model capacity from the batch pools.
        """
        self.check_question_tokens(request.question)
        templates = self.templates()  # a broken file fails now, not during an outage
        eligibility = self.eligibility(request.evidence)
        applied = self.thresholds(request.thresholds)
        limits = applied.thresholds
        policy = request.policy
        if parse_policy(policy).prefer_current_revision and request.current_revisions is None:
            raise AssemblyError(
                "policy +prefer-current-revision needs the documents' current revisions "
                "(current_revisions; ask --current-revision DOC=REV)"
            )
        if request.history and "+history=" not in policy:
            policy = f"{policy}+history={DEFAULT_HISTORY_SHARE:g}"
        deadline_seconds = request.deadline_seconds or self.settings.answers.deadline
        deadline = Deadline.after(deadline_seconds)
        counter = self.components.token_counter()
        profiles = self.components.chat_profiles()
        index = self.components.open_index(
            eligibility.chunking_version, write=False, any_chunking_version=True
        )
        style = self.answer_style(request.style)
        answerability_threshold, answerability_source = self.answerability_threshold()
        kept = self._kept_batch if workload == "batch" else self._kept_chat
        session = (
            None
            if request.preview or style == "evidence"
            else kept or self.components.chat(counter, workload)
        )
        try:
            # One budget for the whole answer: the query embedding and reranking (remote
            # providers retry under it) and every model attempt and wait.
            with deadline_scope(deadline), _explained_deadline(deadline_seconds):
                result = await answer_question(
                    request.question,
                    retriever=self.components.retriever(index),
                    eligibility=eligibility,
                    scope=CallerScope(
                        tenant=request.tenant, allowed_documents=request.allowed_documents
                    ),
                    chat=session.model if session else None,
                    counter=counter,
                    k=request.k,
                    mode=request.mode,
                    policy=policy,
                    history=request.history,
                    current_revisions=request.current_revisions,
                    budget=Budget.for_profile(profiles[0]),
                    fallbacks=profiles[1:],
                    deadline=deadline,
                    preview=request.preview,
                    support_check=(
                        self.settings.answers.support_check
                        if request.check_support is None
                        else request.check_support
                    ),
                    thresholds=limits,
                    schema_style=profiles[0].schema_style,
                    temperature=self.settings.chat.temperature,
                    style=style,
                    answerability_threshold=answerability_threshold,
                    on_evidence=on_evidence,
                )
            contract = index.contract
            shown = None
            use_drafts = drafts and self._drafts_apply(request)
            if use_drafts and result.status == "evidence_only" and result.degraded:
                shown = await run_in_thread(
                    self._find_draft,
                    request,
                    index,
                    eligibility,
                    result.context,
                    instructions_version(style, result.context),
                )
        finally:
            if session is not None and session is not kept:
                await session.close()
            index.close()
        options = {
            "k": request.k,
            "mode": request.mode,
            "policy": policy,
            "chunking_version": eligibility.chunking_version,
            "document_types": list(eligibility.document_types),
            "publication_states": list(eligibility.publication_states),
            "documents": list(eligibility.document_ids),
            "tenant": request.tenant,
            "history_messages": len(request.history),
            "current_revisions": dict(request.current_revisions or {}),
            "deadline_seconds": deadline_seconds,
            "style": style,
            "answerability_threshold": answerability_threshold,
            "answerability_source": answerability_source,
            "primary": profiles[0].name,
            "fallbacks": [p.name for p in profiles[1:]],
            "thresholds": dataclasses.asdict(limits),
            **applied.origin.to_dict(),
        }
        degraded = result.status == "evidence_only" and result.degraded is not None
        outcome = AnswerOutcome(
            result,
            options,
            template=select_template(templates, request.question) if degraded else None,
            evidence_allowed=self.settings.answers.evidence_only_on_model_failure,
            draft=shown,
            provenance={
                "provider": result.provider,
                "model": result.model,
                "fallback": result.fallback,
                "instructions_version": (
                    result.request.prompt_version if result.request is not None else None
                ),
                "assembly_policy": result.context.policy,
                "chunking_version": eligibility.chunking_version,
                "index_contract": {
                    "embedding_profile": contract.profile_id,
                    "embedding_digest": contract.profile_digest,
                    "lexical_profile": contract.lexical_profile_id,
                },
            },
        )
        if outcome.mode == "generated" and drafts and self._drafts_apply(request):
            await run_in_thread(self._keep_draft, request, outcome)
        return outcome

    # --- previous drafts ------------------------------------------------------------

    def _drafts_apply(self, request: AnswerRequest) -> bool:
        """Drafts are kept and shown for plain questions only: with drafts turned off
        (``draft_max_age`` 0), a preview, or conversation history (the answer depended
        on the conversation, which the question key does not hold), none is."""
        return (
            self.settings.answers.draft_max_age > 0 and not request.preview and not request.history
        )

    def _keep_draft(self, request: AnswerRequest, outcome: AnswerOutcome) -> None:
        """Store a generated answer as the draft for (tenant, question). A store that
        refuses costs the draft, never the answer: the refusal is logged."""
        body = outcome.to_dict()
        body.pop("request", None)  # the exact model request stays out of the store
        provenance = outcome.provenance
        cited = cited_revisions(body["citations"])
        if not cited:
            return  # nothing to check it against later
        draft = Draft(
            tenant=request.tenant,
            question_key=question_key(request.question),
            input_version=input_version(
                tenant=request.tenant,
                assembly_policy=provenance.get("assembly_policy"),
                instructions_version=provenance.get("instructions_version"),
                cited=cited,
            ),
            cited=cited,
            result=body,
            created_at=self.clock(),
        )
        try:
            self.components.draft_store().put(draft)
        except StorageError as error:
            logger.warning("previous draft not stored: %s", error.reason)

    def _find_draft(
        self,
        request: AnswerRequest,
        index: VectorIndex,
        eligibility: Eligibility,
        context: AssembledContext,
        instructions: str,
    ) -> ShownDraft | None:
        """The newest draft of this tenant for the question whose input version matches
        now and that is younger than ``draft_max_age``; ``None`` otherwise.

        The input version is recomputed from the cited documents' current revisions as
        this caller may see them (tenant, allowlist, eligibility in force), this
        request's assembly policy and instructions version: a cited document that
        changed, is gone or is no longer eligible makes the draft not match, even on a
        replica that missed the purge."""
        try:
            drafts = self.components.draft_store().find(
                request.tenant, question_key(request.question)
            )
        except StorageError as error:
            logger.warning("previous drafts not read: %s", error.reason)
            return None
        now = self.clock()
        scope = CallerScope(tenant=request.tenant, allowed_documents=request.allowed_documents)
        for draft in drafts:
            age = now - draft.created_at
            if age > self.settings.answers.draft_max_age:
                break  # newest first: every later one is older still
            revisions = _current_revisions(
                index, eligibility, scope, sorted({d for d, _ in draft.cited})
            )
            if revisions is None:
                continue
            current = input_version(
                tenant=request.tenant,
                assembly_policy=context.policy,
                instructions_version=instructions,
                cited=((d, revisions[d]) for d, _ in draft.cited),
            )
            if current == draft.input_version:
                return ShownDraft(draft, max(age, 0.0))
        return None

    def _purge_drafts(self, changed: Sequence[tuple[str | None, str]]) -> None:
        """Delete drafts citing documents an ingestion changed or deleted, per tenant.
        Best effort: a draft left behind still fails its revision check at lookup."""
        if not changed or self.settings.answers.draft_max_age <= 0:
            return
        by_tenant: dict[str | None, set[str]] = {}
        for tenant, document_id in changed:
            by_tenant.setdefault(tenant, set()).add(document_id)
        try:
            store = self.components.draft_store()
            for tenant, document_ids in by_tenant.items():
                store.purge_documents(tenant, document_ids)
        except StorageError as error:
            logger.warning("previous drafts not purged: %s", error.reason)

    async def probe_model(self, timeout: float = 30.0) -> str | None:
        """``None`` when the primary chat pipeline answers a tiny schema-constrained
        request, else why not (one line, the failure category first). With the
        ``evidence`` style no model is used, so there is nothing to probe."""
        if self.answer_style() == "evidence":
            return None
        kept = self._kept_chat
        session = kept or self.components.chat(self.components.token_counter())
        # Schema-constrained, as every answer is (the local model answers nothing else),
        # and a few tokens long: it starts a local model and checks a hosted one.
        probe = ChatRequest(
            (ChatMessage("user", 'Reply with {"ok": true}.'),),
            ChatOptions(
                max_output_tokens=8,
                temperature=0.0,
                json_schema={
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                    "additionalProperties": False,
                },
            ),
        )
        try:
            await session.model.complete(probe, Deadline.after(timeout))
        except ChatError as error:
            return f"{error.category.value}: {error.detail}"
        finally:
            if session is not kept:
                await session.close()
        return None

    def check_serving(self) -> list[str]:
        """Validate what a long-running service depends on before it starts.

        Raises (a broken configuration, reported as one line): the templates file
        (:class:`ConfigError`), the embedding model's artifacts (``ArtifactMismatch``),
        an index built under another contract (:class:`ContractMismatch`: the settings
        describe a different embedding or BM25 profile). Returns the problems the service
        can start with and report through readiness (no index yet, a damaged index).
        The API key and answer-job stores are opened (a ``RAGWRIGHT_DATABASE_URL`` that
        cannot be parsed is a :class:`ConfigError`, a server that does not answer a
        :class:`StorageError`, one line each, never the password).
        """
        self.templates()
        self.components.key_store()
        self.jobs()
        self.components.embedder()
        version = self.chunking_policy().version
        try:
            index = self.components.open_index(version, write=False, any_chunking_version=True)
        except (IndexNotFound, IndexDamaged, StorageError):
            problem = self.index_problem()
            return [problem] if problem is not None else []
        index.close()
        return []

    def capacity(self) -> dict[str, dict[str, Any]]:
        """The model-capacity pools of the kept chat sessions (interactive and batch), by
        pool name (backend, limit, leases in use, cooldown, degradation); empty outside
        ``chat_kept_open``."""
        pools: dict[str, dict[str, Any]] = {}
        for session in (self._kept_chat, self._kept_batch):
            if session is not None:
                pools.update(session.capacity())
        return pools

    def model_cooldown(self) -> float | None:
        """Seconds until the kept interactive session's model pools take attempts again,
        when every one of them is cooling down after throttling; ``None`` when one is
        not (or outside ``chat_kept_open``): then nobody knows when capacity frees."""
        if self._kept_chat is None:
            return None
        cooldowns = [p["cooldown_seconds"] for p in self._kept_chat.capacity().values()]
        if not cooldowns or min(cooldowns) <= 0:
            return None
        return float(min(cooldowns))

    def index_problem(self) -> str | None:
        """``None`` when the collection opens for queries, else why not (one line)."""
        state = self.index_state()
        if state.opened:
            return None
        if state.error == "IndexNotFound":
            return "no index yet: ingest documents first (ragwright ingest, POST /v1/ingestions)"
        return f"index: {state.reason}"

    def templates(self) -> tuple[ApprovedTemplate, ...]:
        """The approved templates ``RAGWRIGHT_TEMPLATES`` names (read once, validated)."""
        if self._templates is None:
            self._templates = load_templates(self.settings.answers.templates)
        return self._templates

    # --- evaluation -----------------------------------------------------------------

    def evaluate(
        self, request: EvaluateRequest, *, progress: ProgressCallback | None = None
    ) -> EvaluateResult:
        """Score retrieval on labelled cases (and with ``request.answers`` their answers);
        persist the run (and its HTML report, compared with ``request.compare`` when given:
        that run is loaded before anything runs).

        An answer run drives the asynchronous answer use case on an event loop of its
        own: call this from synchronous code (the command line), never from inside a
        running event loop.
        """
        if not request.ks or any(k <= 0 for k in request.ks):
            raise EvaluationError(f"cutoffs must be positive, got {list(request.ks)}")
        earlier = load_run(request.compare, self.settings.storage.home) if request.compare else None
        cases = self._cases(request.dataset)
        applied = self.thresholds(request.thresholds)
        config = EvalConfig(
            eligibility=self.eligibility(request.evidence),
            scope=CallerScope(tenant=request.tenant),
            mode=request.mode,
            ks=request.ks,
            thresholds=applied.thresholds,
            with_text=request.with_text,
        )
        profile = self.components.embedding_profile()
        index = self.components.open_index(
            config.eligibility.chunking_version, write=False, any_chunking_version=True
        )
        try:
            retriever = self._evaluation_retriever(index, config)
            record = run_evaluation(
                cases,
                retriever,
                config,
                eligible_corpus(index, config.eligibility, config.scope),
                run_config={
                    "dataset": str(request.dataset.path),
                    "dataset_sha256": _dataset_digest(request.dataset),
                    "embedding_profile": profile.profile_id,
                    "model_digest": profile.artifact_digest,
                    "lexical_profile": self.components.sparse_encoder().profile.profile_id,
                    "chunking_version": config.eligibility.chunking_version,
                    "rrf_k": self.settings.retrieval.rrf_k,
                    "rrf_weights": list(self.settings.retrieval.rrf_weights),
                    "reranker": self.settings.retrieval.reranker,
                    "score_kind": score_kind(request.mode, reranked=retriever.reranker is not None),
                    "collection": self.settings.index.collection,
                    "code_revision": self.components.code_revision(),
                    **applied.origin.to_dict(),
                },
            )
        finally:
            index.close()
        if request.answers:
            rows = asyncio.run(self._answer_cases(cases, request, config, progress))
            attach_answers(record, cases, rows, style=self.answer_style(request.style))
        directory = save_run(record, self.settings.storage.home)
        report_path = None
        if request.report:
            report_path = directory / "report.html"
            report_path.write_text(render_report(record.to_json(), earlier=earlier), "utf-8")
        return EvaluateResult(
            execution_id=record.execution_id,
            path=directory,
            summary=record.summary,
            categories=record.categories,
            unsupported=record.unsupported,
            report_path=report_path,
            thresholds=applied.thresholds,
            threshold_origin=applied.origin,
            answers=record.answers,
        )

    async def _answer_cases(
        self,
        cases: list[EvalCase],
        request: EvaluateRequest,
        config: EvalConfig,
        progress: ProgressCallback | None = None,
    ) -> list[dict[str, Any]]:
        """Answer every case in turn (one local model at a time) and score the outcome;
        a provider failure or a broken answer contract is recorded as an ``error``
        outcome, not the run's end. ``progress`` hears ``("answers", total)`` and then
        ``("answered", 1)`` per case."""
        rows = []
        if progress is not None:
            progress("answers", len(cases))
        async with self.chat_kept_open():
            for case in cases:
                rows.append(await self._answer_case(case, request, config))
                if progress is not None:
                    progress("answered", 1)
        return rows

    async def _answer_case(
        self, case: EvalCase, request: EvaluateRequest, config: EvalConfig
    ) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            outcome = (
                await self.answer(
                    AnswerRequest(
                        case.question,
                        mode=request.mode,
                        evidence=request.evidence,
                        tenant=request.tenant,
                        thresholds=request.thresholds,
                        style=request.style,
                    ),
                    drafts=False,
                )
            ).to_dict()
        except ChatError as error:
            outcome = error_outcome(f"{error.category.value}: {error}", request.style)
        except AnswerContractError as error:
            outcome = error_outcome(str(error), request.style)
        return score_answer(
            case,
            outcome,
            latency_ms=(time.perf_counter() - started) * 1000,
            chunking_version=config.eligibility.chunking_version,
        )

    def calibrate(
        self, request: CalibrateRequest, *, progress: ProgressCallback | None = None
    ) -> CalibrateResult:
        """Sweep thresholds so unsupported questions find no evidence; recommend one,
        judge it on held-out questions, and with ``write`` persist it beside the index.

        Raises:
            EvaluationError: fewer than ``MIN_UNSUPPORTED`` unsupported questions without
                ``force`` (checked before anything is embedded), or what the sweep refuses.
        """
        cases = self._cases(request.dataset)
        unsupported = sum(1 for c in cases if c.unsupported)
        if unsupported < MIN_UNSUPPORTED and not request.force:
            raise EvaluationError(
                f"{request.dataset.path} has {unsupported} unsupported questions; a "
                f"recommendation needs at least {MIN_UNSUPPORTED} (each one moves the "
                "false-acceptance rate by more than 5 points); label more, or pass --force "
                "to recommend anyway"
            )
        holdout = self._cases(request.holdout) if request.holdout is not None else None
        config = EvalConfig(
            eligibility=self.eligibility(request.evidence),
            scope=CallerScope(tenant=request.tenant),
            mode=request.mode,
            ks=(request.k,),
        )
        index = self.components.open_index(
            config.eligibility.chunking_version, write=False, any_chunking_version=True
        )
        try:
            result = calibrate(
                cases,
                self._evaluation_retriever(index, config),
                config,
                eligible_corpus(index, config.eligibility, config.scope),
                k=request.k,
                max_recall_loss=request.max_recall_loss,
                max_candidates=request.max_candidates,
                folds=request.folds,
                holdout=holdout,
                progress=progress,
            )
            answerability = self._calibrate_answerability(
                request, config, index, result.recommended.thresholds, cases, holdout, progress
            )
        finally:
            index.close()
        rows = tuple(
            CalibrationRowResult(
                threshold_dense=r.thresholds.dense,
                threshold_sparse=r.thresholds.sparse,
                false_acceptance_rate=r.false_acceptance_rate,
                recall=r.recall,
                ndcg=r.ndcg,
                refused_answerable=r.refused_answerable,
                recommended=r is result.recommended,
            )
            for r in result.rows
        )
        held = result.held_out
        held_out = None
        if held is not None:
            held_out = HeldOutResult(
                method=held.method,
                folds=held.folds,
                dataset=str(request.holdout.path) if request.holdout is not None else None,
                answerable=held.answerable,
                unsupported=held.unsupported,
                false_acceptance_rate=held.false_acceptance_rate,
                recall=held.recall,
                ndcg=held.ndcg,
                refused_answerable=held.refused_answerable,
                fold_thresholds=tuple((t.dense, t.sparse) for t in held.fold_thresholds),
            )
        written = None
        if request.write:
            written = self.calibration_file()
            write_calibration(
                written, self._calibration_record(request, config, result, answerability)
            )
        return CalibrateResult(
            mode=result.mode,
            k=request.k,
            answerable=result.answerable,
            unsupported=result.unsupported,
            rows=rows,
            held_out=held_out,
            forced=unsupported < MIN_UNSUPPORTED,
            written=written,
            answerability=answerability,
        )

    def _calibrate_answerability(
        self,
        request: CalibrateRequest,
        config: EvalConfig,
        index: VectorIndex,
        thresholds: Thresholds,
        cases: Sequence[EvalCase],
        holdout: Sequence[EvalCase] | None,
        progress: ProgressCallback | None,
    ) -> AnswerabilityResult:
        """Score every question's answerability signal as ``ask`` would compute it (same
        retrieval, recommended thresholds, assembly and budget; no model call), then
        choose the threshold and judge it on held-out questions."""
        style: Literal["quoted", "evidence"] = (
            "quoted" if self.answer_style() == "quoted" else "evidence"
        )
        retriever = self.components.retriever(index)
        counter = self.components.token_counter()
        budget = Budget.for_profile(self.components.chat_profiles()[0])

        def signals(labelled: Sequence[EvalCase]) -> list[SignalCase]:
            if progress:
                progress("signals", len(labelled))
            scored = []
            for case in labelled:
                result = asyncio.run(
                    answer_question(
                        case.question,
                        retriever=retriever,
                        eligibility=config.eligibility,
                        scope=config.scope,
                        chat=None,
                        counter=counter,
                        k=request.k,
                        mode=request.mode,
                        budget=budget,
                        preview=True,
                        style=style,
                        thresholds=thresholds,
                    )
                )
                signal = result.answerability
                score = signal.score if signal is not None and result.status == "preview" else None
                scored.append(SignalCase(case.case_id, not case.unsupported, score))
                if progress:
                    progress("scored", 1)
            return scored

        labelled = signals(cases)
        chosen = choose_threshold(labelled, request.max_answerable_loss)
        if holdout is not None:
            held = judge_threshold(signals(holdout), chosen.threshold)
        else:
            held = held_out_threshold(
                labelled, assign_folds(cases, request.folds), request.max_answerable_loss
            )
        return AnswerabilityResult(
            threshold=chosen.threshold,
            max_answerable_loss=request.max_answerable_loss,
            style=style,
            in_sample=_figures(chosen),
            held_out=_figures(held),
        )

    def _calibration_record(
        self,
        request: CalibrateRequest,
        config: EvalConfig,
        result: Calibration,
        answerability: AnswerabilityResult | None = None,
    ) -> CalibrationRecord:
        chosen, held = result.recommended, result.held_out
        if held is None:  # the use case always asks for held-out figures
            raise EvaluationError("a calibration is persisted only with held-out figures")
        return CalibrationRecord(
            calibrated_at=datetime.now(UTC).replace(microsecond=0),
            code_revision=self.components.code_revision(),
            collection=self.settings.index.collection,
            embedding_profile=self.components.embedding_profile().profile_id,
            lexical_profile=self.components.sparse_encoder().profile.profile_id,
            chunking_version=config.eligibility.chunking_version,
            document_types=config.eligibility.document_types,
            publication_states=config.eligibility.publication_states,
            tenant=request.tenant,
            mode=result.mode,
            k=result.k,
            max_recall_loss=request.max_recall_loss,
            dataset=str(request.dataset.path),
            dataset_sha256=_dataset_digest(request.dataset),
            forced=result.unsupported < MIN_UNSUPPORTED,
            thresholds=RecordThresholds(
                dense=chosen.thresholds.dense, sparse=chosen.thresholds.sparse
            ),
            in_sample=Figures(
                answerable=result.answerable,
                unsupported=result.unsupported,
                false_acceptance_rate=chosen.false_acceptance_rate,
                recall=chosen.recall,
                ndcg=chosen.ndcg,
                refused_answerable=chosen.refused_answerable,
            ),
            held_out=HeldOutFigures(
                method=held.method,
                folds=held.folds,
                dataset=str(request.holdout.path) if request.holdout is not None else None,
                dataset_sha256=(
                    _dataset_digest(request.holdout) if request.holdout is not None else None
                ),
                answerable=held.answerable,
                unsupported=held.unsupported,
                false_acceptance_rate=held.false_acceptance_rate,
                recall=held.recall,
                ndcg=held.ndcg,
                refused_answerable=held.refused_answerable,
                fold_thresholds=tuple(
                    RecordThresholds(dense=t.dense, sparse=t.sparse) for t in held.fold_thresholds
                ),
            ),
            answerability=(
                RecordAnswerability(
                    threshold=answerability.threshold,
                    max_answerable_loss=answerability.max_answerable_loss,
                    style=answerability.style,
                    in_sample=RecordAnswerabilityFigures(**answerability.in_sample.to_dict()),
                    held_out=RecordAnswerabilityFigures(**answerability.held_out.to_dict()),
                )
                if answerability is not None and answerability.threshold is not None
                else None
            ),
        )

    def clear_calibration(
        self, request: ClearCalibrationRequest | None = None
    ) -> ClearCalibrationResult:
        """Remove the persisted calibration, readable or not; thresholds then come from
        requests and settings only."""
        path = self.calibration_file()
        return ClearCalibrationResult(path, clear_calibration(path))

    def compare(self, request: CompareRequest) -> CompareResult:
        """Per-case regressions and improvements between two persisted runs."""
        home = self.settings.storage.home
        regressions, improvements, notes = compare_runs(
            load_run(request.before, home),
            load_run(request.after, home),
            k=request.k,
            metric=request.metric,
        )
        return CompareResult(
            k=request.k,
            metric=request.metric,
            regressions=tuple(CaseChangeResult(c.case_id, c.before, c.after) for c in regressions),
            improvements=tuple(
                CaseChangeResult(c.case_id, c.before, c.after) for c in improvements
            ),
            notes=tuple(notes),
        )

    def report(self, request: ReportRequest) -> ReportResult:
        """Write report.html for a persisted run, compared with ``request.compare`` when
        given."""
        home = self.settings.storage.home
        data = load_run(request.run, home)
        earlier = load_run(request.compare, home) if request.compare else None
        target = home / "evaluations" / data["execution_id"] / "report.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_report(data, earlier=earlier), "utf-8")
        return ReportResult(
            data["execution_id"], target, earlier["execution_id"] if earlier else None
        )

    # --- API keys -------------------------------------------------------------------

    def add_key(self, request: AddKeyRequest) -> AddKeyResult:
        """Make an API key; the result holds its secret, which is never shown again.

        Raises:
            RequestError: naming ``types`` when a type is not one of the configured
                document types (a key for it would see nothing).
        """
        known = self.settings.index.document_types
        for document_type in request.types:
            if document_type not in known:
                raise RequestError(
                    "types",
                    f"unknown document type {document_type!r}; allowed: {', '.join(known)} "
                    "(RAGWRIGHT_DOCUMENT_TYPES)",
                )
        key, secret = self.components.key_store().add(
            tenant=request.tenant,
            scopes=request.scopes,
            documents=request.documents,
            types=request.types,
            states=request.states,
            name=request.name,
        )
        return AddKeyResult(key, secret)

    def list_keys(self) -> ListKeysResult:
        """Every API key, revoked ones included (no secrets: the store has none)."""
        return ListKeysResult(tuple(self.components.key_store().list()))

    def revoke_key(self, request: RevokeKeyRequest) -> RevokeKeyResult:
        """Revoke a key: from now on its secret authenticates nothing.

        Raises:
            RequestError: naming ``key_id`` when no key has that id.
        """
        return RevokeKeyResult(self.components.key_store().revoke(request.key_id))

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key this secret belongs to, else ``None`` (unknown, malformed and
        revoked secrets alike). The caller's tenant, scopes and eligibility come from
        the key, never from the request."""
        return self.components.key_store().authenticate(secret)

    def jobs(self) -> JobStore:
        """The durable answer-job store (PostgreSQL with ``RAGWRIGHT_DATABASE_URL``, else
        SQLite under ``RAGWRIGHT_HOME``), opened once."""
        return self.components.job_store()

    def key(self, key_id: str) -> ApiKey | None:
        """The key with this id (revoked ones included), else ``None``: a job's worker
        revalidates the submitting caller's current permissions with it.

        Raises:
            StorageError: the key store cannot be read (PostgreSQL down: within its
                connect timeout, so call it off the event loop).
        """
        return self.components.key_store().get(key_id)

    def changed_citations(self, outcome: AnswerOutcome, key: ApiKey) -> list[str]:
        """The cited documents no longer eligible for ``key``'s caller at the revision the
        answer cited (changed, unpublished, deleted, or out of the key's reach): a result
        is published as current only when this is empty."""
        result = outcome.result
        if not result.citations:
            return []
        by_label = {s.label: s.candidate for s in result.context.sources}
        cited = {c.document_id: by_label[c.label].revision for c in result.citations}
        current = self._eligible_revisions(key, cited, result.citations[0].chunking_version)
        return sorted(d for d, revision in cited.items() if current.get(d) != {revision})

    def ineligible_citations(
        self, key: ApiKey, citations: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """The documents a stored result cites (``citations`` in their JSON form) that
        ``key``'s caller may not see now at any revision: outside its tenant, allowlist,
        document types or publication states, or gone. A job's result is shown to a
        reader only when this is empty (a document that merely changed revision since is
        still the reader's to see).

        Raises:
            VectorIndexError: the index cannot be read.
        """
        if not citations:
            return []
        cited = sorted({str(c["document_id"]) for c in citations})
        version = str(citations[0]["chunking_version"])
        current = self._eligible_revisions(key, cited, version)
        return [d for d in cited if d not in current]

    def _eligible_revisions(
        self, key: ApiKey, document_ids: Iterable[str], chunking_version: str
    ) -> dict[str, set[str]]:
        """The revisions among live points of ``document_ids`` that ``key``'s caller may
        see now (tenant, allowlist, the key's document types and publication states)."""
        eligibility = dataclasses.replace(
            self.eligibility(evidence_for(key, ())),
            chunking_version=chunking_version,
            document_ids=tuple(sorted(document_ids)),
        )
        scope = CallerScope(tenant=key.tenant, allowed_documents=key.documents or None)
        current: dict[str, set[str]] = {}
        index = self.components.open_index(chunking_version, write=False, any_chunking_version=True)
        try:
            with index.reading():
                for point in index.scroll(
                    eligibility_filter(eligibility, scope),
                    payload_fields=("document_id", "revision"),
                ):
                    document = str(point.payload.get("document_id"))
                    current.setdefault(document, set()).add(str(point.payload.get("revision")))
        finally:
            index.close()
        return current

    # --- shared decisions -----------------------------------------------------------

    def chunking_policy(self, options: ChunkingOptions = ChunkingOptions()) -> ChunkingPolicy:
        """The configured chunking policy with a request's overrides, validated like
        settings (an out-of-range value names its setting)."""
        overrides: dict[str, Any] = {
            name: value
            for name, value in (
                ("chunking", options.policy),
                ("max_words", options.max_words),
                ("max_tokens", options.max_tokens),
                ("overlap", options.overlap),
            )
            if value is not None
        }
        if not overrides:
            return self.settings.chunking_policy()
        return self.settings.with_overrides(**overrides).chunking_policy()

    def check_question_tokens(self, question: str) -> None:
        """Refuse a question the embedding model cannot read whole (blank and overlong
        questions are already refused by the request).

        Raises:
            RequestError: naming ``question``, its tokens and the model's limit, with
                advice for questions (the embedder's own error speaks of chunks).
        """
        embedder = self.components.embedder()
        if not embedder.counts_tokens:
            return
        limit = embedder.profile.max_input_tokens
        tokens = embedder.count_tokens([format_query_input(embedder.profile, question)])[0]
        if tokens > limit:
            raise RequestError(
                "question",
                f"has {tokens} tokens, the embedding model reads at most {limit}; "
                "shorten the question to what you want to know",
            )

    def eligibility(self, evidence: EvidenceFilter) -> Eligibility:
        """The eligibility a request asks for, defaults applied in this one place."""
        return Eligibility(
            chunking_version=evidence.chunking_version or self.chunking_policy().version,
            document_types=evidence.effective_types,
            publication_states=evidence.effective_states,
            document_ids=evidence.documents,
        )

    def answer_style(self, requested: AnswerStyle | None = None) -> AnswerStyle:
        """The request's style, else the ``answer_style`` setting; ``auto`` is ``quoted``
        for the embedded local model (a small model should select, not write) and
        ``generated`` for every other provider."""
        if requested is not None:
            return requested
        configured = self.settings.answers.style
        if configured != "auto":
            return configured
        return "quoted" if self.settings.chat.provider == "local" else "generated"

    def answerability_threshold(self) -> tuple[float | None, str]:
        """The answerability threshold and where it came from: the
        ``answerability_threshold`` setting, else the persisted calibration's
        (``eval calibrate --write``), else none.

        Raises:
            CalibrationError: the persisted calibration is damaged.
        """
        if self.settings.answers.answerability_threshold is not None:
            return self.settings.answers.answerability_threshold, "settings"
        record = self.calibration()
        if record is not None and record.answerability is not None:
            self._check_calibration_profiles(record)
            return record.answerability.threshold, "calibration"
        return None, "none"

    def thresholds(self, overrides: ThresholdOverrides = ThresholdOverrides()) -> AppliedThresholds:
        """Per-stage thresholds and where each came from: the request's value, else the
        setting's (``RAGWRIGHT_THRESHOLD_*`` or ragwright.toml; unset is ``None``), else
        the persisted calibration's (dense and sparse only), else none.

        Raises:
            CalibrationError: the persisted calibration is damaged, or was made under
                another embedding or lexical profile than the settings select while it
                supplies a stage.
        """
        s = self.settings.retrieval
        configured = {
            "dense": s.threshold_dense,
            "sparse": s.threshold_sparse,
            "fusion": s.threshold_fusion,
            "rerank": s.threshold_rerank,
        }
        record = self.calibration()
        calibrated = {
            "dense": record.thresholds.dense if record else None,
            "sparse": record.thresholds.sparse if record else None,
        }
        values: dict[str, float | None] = {}
        sources: dict[str, ThresholdSource] = {}
        for stage in STAGES:
            for source, value in (
                ("request", getattr(overrides, stage)),
                ("settings", configured[stage]),
                ("calibration", calibrated.get(stage)),
            ):
                if value is not None:
                    values[stage], sources[stage] = value, source  # type: ignore[assignment]
                    break
            else:
                values[stage], sources[stage] = None, "none"
        stamp = None
        if record is not None and "calibration" in sources.values():
            self._check_calibration_profiles(record)
            stamp = self._calibration_stamp(record)
        return AppliedThresholds(Thresholds(**values), ThresholdOrigin(sources, stamp))

    def calibration_file(self) -> Path:
        """Where this collection's persisted calibration lives (beside the index)."""
        return calibration_path(self.settings.index_path)

    def calibration(self) -> CalibrationRecord | None:
        """The persisted calibration, validated (``None`` when there is none).

        Raises:
            CalibrationError: the file is damaged or out of shape, naming the field.
        """
        return read_calibration(self.calibration_file())

    def _check_calibration_profiles(self, record: CalibrationRecord) -> None:
        """Scores of another embedding model or BM25 parameters are on another scale."""
        current = {
            "embedding_profile": self.components.embedding_profile().profile_id,
            "lexical_profile": self.components.sparse_encoder().profile.profile_id,
        }
        for name, now in current.items():
            then = getattr(record, name)
            if then != now:
                raise CalibrationError(
                    str(self.calibration_file()),
                    name,
                    f"calibrated under {then!r}, the settings now select {now!r}; its "
                    "thresholds are on another score scale",
                )

    def _calibration_stamp(self, record: CalibrationRecord | None) -> CalibrationStamp | None:
        if record is None:
            return None
        return CalibrationStamp(
            path=str(self.calibration_file()),
            calibrated_at=calibrated_at_text(record.calibrated_at),
            dataset=record.dataset,
            dataset_sha256=record.dataset_sha256,
            mode=record.mode,
            k=record.k,
            threshold_dense=record.thresholds.dense,
            threshold_sparse=record.thresholds.sparse,
            answerability_threshold=(
                record.answerability.threshold if record.answerability is not None else None
            ),
        )

    def _cases(self, dataset: Dataset) -> list[EvalCase]:
        return self.components.load_cases(dataset.path, beir=dataset.beir, split=dataset.split)

    def _evaluation_retriever(self, index: VectorIndex, config: EvalConfig) -> Retriever:
        # Document-level scoring ranks chunks deeper than the largest cutoff.
        depth = max(
            self.settings.retrieval.hybrid_candidates, max(config.ks) * config.document_depth_factor
        )
        return self.components.retriever(index, candidates=depth)


def _figures(figures: ThresholdFigures) -> AnswerabilityFigures:
    return AnswerabilityFigures(
        figures.answerable,
        figures.unsupported,
        figures.answerable_declined,
        figures.unsupported_declined,
    )


@contextmanager
def _explained_deadline(seconds: float) -> Iterator[None]:
    """An exhausted answer budget says which budget and how to raise it."""
    try:
        yield
    except ChatError as error:
        if error.category is not FailureCategory.DEADLINE_EXHAUSTED:
            raise
        raise ChatError(
            error.provider,
            FailureCategory.DEADLINE_EXHAUSTED,
            f"the answer's {seconds:g} s budget ran out ({error}); raise it with "
            "--deadline SECONDS or RAGWRIGHT_ANSWER_DEADLINE",
            retry_after=error.retry_after,
        ) from error


def score_kind(mode: Mode, *, reranked: bool) -> ScoreKind:
    """What a hit's ``score`` measures: cosine (dense), BM25, RRF (hybrid) or rerank."""
    if reranked:
        return "rerank"
    return {"dense": "cosine", "sparse": "bm25", "hybrid": "rrf"}[mode]  # type: ignore[return-value]


def _search_hit(rank: int, hit: Hit, kind: ScoreKind) -> SearchHit:
    p = hit.payload
    return SearchHit(
        rank=rank,
        document_id=p.document_id,
        chunk_id=p.chunk_id,
        chunking_version=p.chunking_version,
        revision=p.revision,
        document_type=p.document_type,
        publication_state=p.publication_state,
        score=hit.score,
        score_kind=kind,
        text=p.text,
        dense_score=hit.dense_score,
        sparse_score=hit.sparse_score,
        fused_score=hit.fused_score,
        rerank_score=hit.rerank_score,
        source_uri=p.source_uri,
        pages=p.pages,
        location=cite_location(p.source_uri, p.pages),
    )


def _excluded_versions(
    index: VectorIndex, eligibility: Eligibility, tenant: str | None
) -> dict[str, int]:
    """Live chunks the query could not see only because of their chunking version."""
    others = [v for v in index.contract.chunking_versions if v != eligibility.chunking_version]
    if not others:
        return {}
    counts = {}
    for version in others:
        other = dataclasses.replace(eligibility, chunking_version=version)
        count = index.count(_eligibility_filter(other, tenant))
        if count:
            counts[version] = count
    return counts


_PARTS: tuple[IndexPart, ...] = ("payload", "dense", "sparse")


def _read_part(
    index: VectorIndex, page: list[uuid.UUID], part: IndexPart, problems: list[VerifyProblem]
) -> dict[uuid.UUID, Any]:
    """One part of a page of points; on a damaged read, point by point, so every
    unreadable point is listed and every readable one still checked."""
    try:
        return index.read_part(page, part)
    except IndexDamaged:
        found: dict[uuid.UUID, Any] = {}
        for point_id in page:
            try:
                found.update(index.read_part([point_id], part))
            except IndexDamaged as error:
                problems.append(VerifyProblem(str(point_id), error.part, error.detail))
        return found


def _current_revisions(
    index: VectorIndex, eligibility: Eligibility, scope: CallerScope, document_ids: list[str]
) -> dict[str, str] | None:
    """Each document's revision among its live points this caller may see now; ``None``
    when one is absent (gone or not eligible) or shows more than one revision."""
    if scope.sees_nothing:
        return None
    base = eligibility_filter(eligibility, scope)
    point_filter = dataclasses.replace(
        base, must=(*base.must, FieldMatch("document_id", tuple(document_ids)))
    )
    seen: dict[str, set[str]] = {}
    for point in index.scroll(point_filter, payload_fields=("document_id", "revision")):
        payload = point.payload
        seen.setdefault(str(payload.get("document_id")), set()).add(str(payload.get("revision")))
    if any(len(seen.get(d, ())) != 1 for d in document_ids):
        return None
    return {d: next(iter(seen[d])) for d in document_ids}


def _eligibility_filter(eligibility: Eligibility, tenant: str | None) -> PointFilter:
    return eligibility_filter(eligibility, CallerScope(tenant=tenant))


def _dataset_digest(dataset: Dataset) -> str:
    path = dataset.path / "qrels" / f"{dataset.split}.tsv" if dataset.beir else dataset.path
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ingest_result(
    report: IngestReport,
    request: IngestRequest,
    policy: ChunkingPolicy,
    embedder: Embedder,
    stream: DocumentStream | None,
) -> IngestResult:
    """The use case's result: the pipeline's report with the run's sources and profile,
    and what the ``stream`` the documents came from (if any) skipped."""
    skipped = () if stream is None else tuple(SkippedFile(*s) for s in stream.skipped)
    invalid = () if stream is None else stream.invalid
    return IngestResult(
        # Not asdict: it would turn the nested records into dicts.
        **{
            f.name: getattr(report, f.name)
            for f in dataclasses.fields(report)
            if f.name != "changed_documents"
        },
        chunking_version=policy.version,
        embedding_profile=embedder.profile.profile_id,
        skipped_files=skipped,
        skipped_documents=invalid,
        sources=tuple(str(path) for path in request.sources),
        pruned=request.prune,
        metadata=() if stream is None else stream.origins,
        metadata_left_out=0 if stream is None else stream.origins_left_out,
    )
