"""The application: one method per use case, shared by every entry point.

The command line (and the HTTP service) only turn their input into a typed request,
call one of these methods, and print or send the typed result. Nothing here picks an
adapter: :class:`Components` (built by ``ragwright.runtime``) supplies them.

:class:`Application` is a façade: each method delegates to the use-case object that
owns it (see docs/application.md, "Where each use case lives"), and each of those
receives only the parts of :class:`Components` it calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from ragwright.application.access import Access
from ragwright.application.answering import Answering
from ragwright.application.calibrating import Calibrating
from ragwright.application.calibration import CalibrationRecord
from ragwright.application.components import Components, DocumentStream, LoadedSources, Workload
from ragwright.application.corpus import Corpus, IngestParts
from ragwright.application.decisions import Decisions
from ragwright.application.drafts import DraftPolicy
from ragwright.application.evaluation import Evaluation, LabelledParts
from ragwright.application.ingest_queue import WorkerStats
from ragwright.application.jobs import JobStore
from ragwright.application.keys import ApiKey
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.queued import QueuedIngest
from ragwright.application.requests.calibration import (
    CalibrateRequest,
    CalibrateResult,
    ClearCalibrationRequest,
    ClearCalibrationResult,
)
from ragwright.application.requests.corpus import (
    ChunkingOptions,
    ChunksRequest,
    ChunksResult,
    IngestRequest,
    IngestResult,
    StatusRequest,
    StatusResult,
    VerifyRequest,
    VerifyResult,
)
from ragwright.application.requests.evaluation import (
    CompareRequest,
    CompareResult,
    EvaluateRequest,
    EvaluateResult,
    ReportRequest,
    ReportResult,
)
from ragwright.application.requests.evidence import (
    AppliedThresholds,
    EvidenceFilter,
    ThresholdOverrides,
)
from ragwright.application.requests.keys import (
    AddKeyRequest,
    AddKeyResult,
    ListKeysResult,
    RevokeKeyRequest,
    RevokeKeyResult,
)
from ragwright.application.requests.questions import AnswerRequest, SearchRequest, SearchResult
from ragwright.application.serving import KeptChatSessions, Readiness
from ragwright.application.sources import Sources
from ragwright.application.thresholds import ThresholdResolver
from ragwright.application.verifying import Verification
from ragwright.core.answers import AnswerStyle
from ragwright.core.assembly import AssembledContext
from ragwright.core.eligibility import Eligibility
from ragwright.core.templates import ApprovedTemplate
from ragwright.pipeline.planning import ProgressCallback
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy, IndexState


class Application:
    """Every use case of ragwright over one set of components."""

    def __init__(self, components: Components, *, clock: Callable[[], float] = time.time) -> None:
        self.components = components
        self.clock = clock
        c, settings = components, components.settings
        self.decisions = Decisions(settings, c.embedder)
        self.resolver = ThresholdResolver(
            settings, embedding_profile=c.embedding_profile, sparse_encoder=c.sparse_encoder
        )
        self.sessions = KeptChatSessions(c.chat, c.token_counter)
        self.drafts = DraftPolicy(settings, c.draft_store, clock)
        self.readiness = Readiness(
            settings,
            key_store=c.key_store,
            job_store=c.job_store,
            embedder=c.embedder,
            open_index=c.open_index,
            index_state=c.index_state,
            chunking_version=lambda: self.decisions.chunking_policy().version,
        )
        self.sources = Sources(c.load_sources, c.stream_sources, c.open_index)
        self._build_corpus(c, settings)
        self._build_questions(c, settings)
        self.access = Access(
            settings.index.document_types,
            key_store=c.key_store,
            eligibility=self.decisions.eligibility,
            open_index=c.open_index,
        )

    def _build_corpus(self, c: Components, settings: Settings) -> None:
        parts = IngestParts(
            chunking_policy=self.decisions.chunking_policy,
            sources=self.sources,
            embedder=c.embedder,
            sparse_encoder=c.sparse_encoder,
            open_index=c.open_index,
            purge_drafts=self.drafts.purge,
        )
        self.corpus = Corpus(
            settings,
            parts,
            load_sources=c.load_sources,
            calibration_stamp=lambda: self.resolver.stamp(self.resolver.calibration()),
        )
        self.queued = QueuedIngest(settings, parts, clock=self.clock, ingest_queue=c.ingest_queue)
        self.verification = Verification(
            settings.index.collection,
            open_index=c.open_index,
            sparse_encoder=c.sparse_encoder,
            chunking_version=lambda: self.decisions.chunking_policy().version,
        )

    def _build_questions(self, c: Components, settings: Settings) -> None:
        self.answering = Answering(
            settings,
            decisions=self.decisions,
            thresholds=self.resolver,
            sessions=self.sessions,
            drafts=self.drafts,
            templates=self.readiness.templates,
            token_counter=c.token_counter,
            chat_profiles=c.chat_profiles,
            open_index=c.open_index,
            retriever=c.retriever,
        )
        labelled = LabelledParts(
            settings,
            decisions=self.decisions,
            thresholds=self.resolver,
            load_cases=c.load_cases,
            embedding_profile=c.embedding_profile,
            sparse_encoder=c.sparse_encoder,
            code_revision=c.code_revision,
            open_index=c.open_index,
            retriever=c.retriever,
        )
        self.evaluation = Evaluation(
            labelled, answer=self.answer, chat_kept_open=self.chat_kept_open
        )
        self.calibrating = Calibrating(
            labelled, token_counter=c.token_counter, chat_profiles=c.chat_profiles
        )

    @property
    def settings(self) -> Settings:
        return self.components.settings

    def close(self) -> None:
        """Release the components' pools, connections and servers (idempotent)."""
        self.components.close()

    # --- a process's lifetime: sessions, the index held, readiness --------------------

    @asynccontextmanager
    async def chat_kept_open(self, workload: Workload = "interactive") -> AsyncIterator[None]:
        """See :meth:`KeptChatSessions.kept_open`: answers inside share one chat session."""
        async with self.sessions.kept_open(workload):
            yield

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

    def check_serving(self) -> list[str]:
        """See :meth:`Readiness.check_serving` (raises on a broken configuration)."""
        return self.readiness.check_serving()

    def index_problem(self) -> str | None:
        """``None`` when the collection opens for queries, else why not (one line)."""
        return self.readiness.index_problem()

    def templates(self) -> tuple[ApprovedTemplate, ...]:
        """The approved templates ``RAGWRIGHT_TEMPLATES`` names (read once, validated)."""
        return self.readiness.templates()

    def capacity(self) -> dict[str, dict[str, Any]]:
        """The model-capacity pools of the kept chat sessions, by pool name."""
        return self.sessions.capacity()

    def model_cooldown(self) -> float | None:
        """See :meth:`KeptChatSessions.model_cooldown`."""
        return self.sessions.model_cooldown()

    async def probe_model(self, timeout: float = 30.0) -> str | None:
        """``None`` when the primary chat pipeline answers a tiny request, else why not."""
        return await self.answering.probe_model(timeout)

    def jobs(self) -> JobStore:
        """The durable answer-job store (PostgreSQL with ``RAGWRIGHT_DATABASE_URL``, else
        SQLite under ``RAGWRIGHT_HOME``), opened once."""
        return self.components.job_store()

    # --- corpus (application/corpus.py, sources.py, queued.py, verifying.py) -----------

    def chunks(self, request: ChunksRequest) -> ChunksResult:
        """The chunks ``request.sources`` produce under the (overridden) policy."""
        return self.corpus.chunks(request)

    def ingest(
        self,
        request: IngestRequest,
        *,
        progress: ProgressCallback | None = None,
        planning_process: bool = False,
    ) -> IngestResult:
        """Bring the index in line with ``request.sources`` (see :meth:`Corpus.ingest`)."""
        return self.corpus.ingest(request, progress=progress, planning_process=planning_process)

    def stream_documents(self, request: IngestRequest) -> DocumentStream:
        """The documents ``request.sources`` hold, read one file at a time per pass."""
        return self.sources.stream_documents(request)

    def load_documents(self, request: IngestRequest) -> LoadedSources:
        """The validated documents ``request.sources`` hold (``ingest --server``)."""
        return self.sources.load_documents(request)

    def ingest_queued(
        self,
        request: IngestRequest,
        *,
        item_size: int,
        progress: ProgressCallback | None = None,
        started: Callable[[str], None] | None = None,
        poll: float = 0.25,
    ) -> IngestResult:
        """``ingest`` with the writing pass done by ``ragwright ingest-worker`` processes
        (see :meth:`QueuedIngest.ingest_queued`)."""
        return self.queued.ingest_queued(
            request, item_size=item_size, progress=progress, started=started, poll=poll
        )

    def ingest_worker(
        self,
        *,
        worker: str,
        idle_exit: float | None = None,
        stop: threading.Event | None = None,
        phase_hook: Callable[[str, str], None] | None = None,
    ) -> WorkerStats:
        """Run ingestion work items from the shared queue (see
        :meth:`QueuedIngest.ingest_worker`)."""
        return self.queued.ingest_worker(
            worker=worker, idle_exit=idle_exit, stop=stop, phase_hook=phase_hook
        )

    def status(self, request: StatusRequest | None = None) -> StatusResult:
        """Documents, chunks, states and chunking versions the collection holds."""
        return self.corpus.status(request)

    def verify(self, request: VerifyRequest | None = None) -> VerifyResult:
        """Read every point back and compare the count with the one last committed."""
        return self.verification.verify(request)

    # --- questions (application/answering.py) --------------------------------------

    def search(self, request: SearchRequest) -> SearchResult:
        """The ``k`` best eligible chunks for the question (never relaxed to fill)."""
        return self.answering.search(request)

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
        ``workload="jobs"`` (answer jobs) draws model capacity from the jobs' own pools.
        """
        return await self.answering.answer(
            request, on_evidence=on_evidence, workload=workload, drafts=drafts
        )

    # --- evaluation (application/evaluation.py, calibrating.py) ------------------------

    def evaluate(
        self, request: EvaluateRequest, *, progress: ProgressCallback | None = None
    ) -> EvaluateResult:
        """Score labelled cases and persist the run (see :meth:`Evaluation.evaluate`);
        call it from synchronous code, never inside a running event loop."""
        return self.evaluation.evaluate(request, progress=progress)

    def calibrate(
        self, request: CalibrateRequest, *, progress: ProgressCallback | None = None
    ) -> CalibrateResult:
        """Sweep and recommend thresholds (see :meth:`Calibrating.calibrate`)."""
        return self.calibrating.calibrate(request, progress=progress)

    def clear_calibration(
        self, request: ClearCalibrationRequest | None = None
    ) -> ClearCalibrationResult:
        """Remove the persisted calibration, readable or not."""
        return self.calibrating.clear_calibration(request)

    def compare(self, request: CompareRequest) -> CompareResult:
        """Per-case regressions and improvements between two persisted runs."""
        return self.evaluation.compare(request)

    def report(self, request: ReportRequest) -> ReportResult:
        """Write report.html for a persisted run (compared with another when given)."""
        return self.evaluation.report(request)

    # --- API keys and eligibility (application/access.py) ----------------------------

    def add_key(self, request: AddKeyRequest) -> AddKeyResult:
        """Make an API key; the result holds its secret, which is never shown again."""
        return self.access.add_key(request)

    def list_keys(self) -> ListKeysResult:
        """Every API key, revoked ones included (no secrets: the store has none)."""
        return self.access.list_keys()

    def revoke_key(self, request: RevokeKeyRequest) -> RevokeKeyResult:
        """Revoke a key: from now on its secret authenticates nothing."""
        return self.access.revoke_key(request)

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key this secret belongs to, else ``None``."""
        return self.access.authenticate(secret)

    def key(self, key_id: str) -> ApiKey | None:
        """The key with this id (revoked ones included), else ``None``."""
        return self.access.key(key_id)

    def changed_citations(self, outcome: AnswerOutcome, key: ApiKey) -> list[str]:
        """Cited documents no longer eligible for ``key``'s caller at the cited revision."""
        return self.access.changed_citations(outcome, key)

    def ineligible_citations(
        self, key: ApiKey, citations: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """Documents a stored result cites that ``key``'s caller may not see now."""
        return self.access.ineligible_citations(key, citations)

    # --- shared decisions (application/decisions.py, thresholds.py) -------------------

    def chunking_policy(self, options: ChunkingOptions = ChunkingOptions()) -> ChunkingPolicy:
        """The configured chunking policy with a request's overrides."""
        return self.decisions.chunking_policy(options)

    def check_question_tokens(self, question: str) -> None:
        """Refuse a question the embedding model cannot read whole."""
        self.decisions.check_question_tokens(question)

    def eligibility(self, evidence: EvidenceFilter) -> Eligibility:
        """The eligibility a request asks for, defaults applied in this one place."""
        return self.decisions.eligibility(evidence)

    def answer_style(self, requested: AnswerStyle | None = None) -> AnswerStyle:
        """The request's style, else the ``answer_style`` setting (``auto`` resolved)."""
        return self.decisions.answer_style(requested)

    def answerability_threshold(self) -> tuple[float | None, str]:
        """The answerability threshold and where it came from."""
        return self.resolver.answerability_threshold()

    def thresholds(self, overrides: ThresholdOverrides = ThresholdOverrides()) -> AppliedThresholds:
        """Per-stage thresholds and where each came from."""
        return self.resolver.thresholds(overrides)

    def calibration_file(self) -> Path:
        """Where this collection's persisted calibration lives (beside the index)."""
        return self.resolver.calibration_file()

    def calibration(self) -> CalibrationRecord | None:
        """The persisted calibration, validated (``None`` when there is none)."""
        return self.resolver.calibration()
