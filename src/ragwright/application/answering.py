"""The question use cases: ``search`` (the best eligible chunks), ``answer`` (retrieve,
assemble, generate, validate and cite; or say why not) and the model probe."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ragwright.application.components import ChatSession, MakeRetriever, OpenIndex, Workload
from ragwright.application.decisions import Decisions
from ragwright.application.drafts import DraftPolicy, ShownDraft
from ragwright.application.left_out import LeftOut
from ragwright.application.outcomes import AnswerOutcome, AnswerProvenance, RequestOptions
from ragwright.application.requests.evidence import AppliedThresholds
from ragwright.application.requests.questions import (
    AnswerRequest,
    ScoreKind,
    SearchHit,
    SearchRequest,
    SearchResult,
)
from ragwright.application.serving import KeptChatSessions
from ragwright.application.thresholds import ThresholdResolver
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, ModelProfile
from ragwright.core.answers import AnswerStyle
from ragwright.core.assembly import AssembledContext, cite_location
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.templates import ApprovedTemplate, select_template
from ragwright.deadline import Deadline, deadline_scope
from ragwright.errors import ChatError, FailureCategory
from ragwright.pipeline.answer import (
    AnswerPlan,
    AnswerResult,
    Budget,
    answer_question,
    instructions_version,
)
from ragwright.pipeline.retrieve import Hit, Mode
from ragwright.protocols import TokenCounter, VectorIndex
from ragwright.settings import Settings
from ragwright.threads import run_in_thread
from ragwright.types import CollectionContract

# History enters an answer through the assembly policy's history share; a request that
# brings history under a policy without one gets this share rather than being ignored.
DEFAULT_HISTORY_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What one answer runs under, decided before the index is opened."""

    eligibility: Eligibility
    applied: AppliedThresholds
    policy: str
    deadline_seconds: float
    deadline: Deadline
    counter: TokenCounter
    profiles: tuple[ModelProfile, ...]
    left_out: LeftOut = field(default_factory=LeftOut)


class Answering:
    """Search, answer and the model probe over one index and chat pipeline."""

    def __init__(
        self,
        settings: Settings,
        *,
        decisions: Decisions,
        thresholds: ThresholdResolver,
        sessions: KeptChatSessions,
        drafts: DraftPolicy,
        templates: Callable[[], tuple[ApprovedTemplate, ...]],
        token_counter: Callable[[], TokenCounter],
        chat_profiles: Callable[[], tuple[ModelProfile, ...]],
        open_index: OpenIndex,
        retriever: MakeRetriever,
    ) -> None:
        self.settings = settings
        self.decisions = decisions
        self.thresholds = thresholds
        self.sessions = sessions
        self.drafts = drafts
        self._templates = templates
        self._token_counter = token_counter
        self._chat_profiles = chat_profiles
        self._open_index = open_index
        self._retriever = retriever

    def search(self, request: SearchRequest) -> SearchResult:
        """The ``k`` best eligible chunks for the question (never relaxed to fill)."""
        self.decisions.check_question_tokens(request.question)
        applied = self.thresholds.thresholds(request.thresholds)
        limits = applied.thresholds
        scope = CallerScope(tenant=request.tenant, allowed_documents=request.allowed_documents)
        index = self._open_for_queries()
        try:
            chosen = self.decisions.evidence_scope(index, request.evidence, scope)
            eligibility, left_out = chosen.eligibility, chosen.left_out
            retriever = self._retriever(index)
            result = retriever.search(
                request.question,
                eligibility,
                scope,
                k=request.k,
                mode=request.mode,
                thresholds=limits,
            )
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
            excluded_versions=left_out.versions,
            threshold_origin=applied.origin,
            chunking_version_source=left_out.version_source,
            excluded_types=left_out.types,
            excluded_states=left_out.states,
            searched=left_out.searched,
        )

    def _open_for_queries(self) -> VectorIndex:
        """The index, open for reading under whichever chunking version a query picks."""
        return self._open_index(
            self.decisions.chunking_policy().version, write=False, any_chunking_version=True
        )

    async def answer(
        self,
        request: AnswerRequest,
        *,
        on_evidence: Callable[[AssembledContext], None] | None = None,
        workload: Workload = "interactive",
        drafts: bool = True,
    ) -> AnswerOutcome:
        """Retrieve, assemble, generate, validate and cite; or say why not (see
        :meth:`ragwright.application.Application.answer`)."""
        self.decisions.check_question_tokens(request.question)
        templates = self._templates()  # a broken file fails now, not during an outage
        inputs = self._inputs(request)
        index = self._open_for_queries()
        try:
            chosen = self.decisions.evidence_scope(index, request.evidence, _scope(request))
        except BaseException:
            index.close()
            raise
        inputs = dataclasses.replace(
            inputs, eligibility=chosen.eligibility, left_out=chosen.left_out
        )
        style = self.decisions.answer_style(request.style)
        answerability_threshold, answerability_source = self.thresholds.answerability_threshold()
        kept = self.sessions.kept(workload)
        session = (
            None
            if request.preview or style == "evidence"
            else kept or self.sessions.open(inputs.counter, workload)
        )
        try:
            result = await self._generate(
                request, inputs, index, session, style, answerability_threshold, on_evidence
            )
            contract = index.contract
            shown = None
            if drafts and self.drafts.applies(request) and result.status == "evidence_only":
                shown = await self._stand_in(request, inputs, index, style, result)
        finally:
            if session is not None and session is not kept:
                await session.close()
            index.close()
        answerability = (answerability_threshold, answerability_source)
        options = _options(request, inputs, style, answerability)
        outcome = self._outcome(request, result, options, inputs, contract, templates, shown)
        if outcome.mode == "generated" and drafts and self.drafts.applies(request):
            await run_in_thread(self.drafts.keep, request, outcome)
        return outcome

    def _inputs(self, request: AnswerRequest) -> _Inputs:
        """What the answer runs under; its eligibility is replaced by the one chosen once
        the index is open (its deadline starts now)."""
        eligibility = self.decisions.eligibility(request.evidence)
        applied = self.thresholds.thresholds(request.thresholds)
        policy = request.policy
        if request.history and "+history=" not in policy:
            policy = f"{policy}+history={DEFAULT_HISTORY_SHARE:g}"
        deadline_seconds = request.deadline_seconds or self.settings.answers.deadline
        return _Inputs(
            eligibility,
            applied,
            policy,
            deadline_seconds,
            Deadline.after(deadline_seconds),
            self._token_counter(),
            tuple(self._chat_profiles()),
        )

    async def _generate(
        self,
        request: AnswerRequest,
        inputs: _Inputs,
        index: VectorIndex,
        session: ChatSession | None,
        style: AnswerStyle,
        answerability_threshold: float | None,
        on_evidence: Callable[[AssembledContext], None] | None,
    ) -> AnswerResult:
        eligibility, policy, profiles = inputs.eligibility, inputs.policy, inputs.profiles
        counter, limits = inputs.counter, inputs.applied.thresholds
        deadline_seconds, deadline = inputs.deadline_seconds, inputs.deadline
        # One budget for the whole answer: the query embedding and reranking (remote
        # providers retry under it) and every model attempt and wait.
        with deadline_scope(deadline), _explained_deadline(deadline_seconds):
            plan = AnswerPlan(
                request.question,
                retriever=self._retriever(index),
                eligibility=eligibility,
                scope=_scope(request),
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
            result = await answer_question(plan)
        return result

    async def _stand_in(
        self,
        request: AnswerRequest,
        inputs: _Inputs,
        index: VectorIndex,
        style: AnswerStyle,
        result: AnswerResult,
    ) -> ShownDraft | None:
        """The previous draft shown when the model could not answer (degraded)."""
        if not result.degraded:
            return None
        return await run_in_thread(
            self.drafts.find,
            request,
            index,
            inputs.eligibility,
            result.context,
            instructions_version(style, result.context),
        )

    def _outcome(
        self,
        request: AnswerRequest,
        result: AnswerResult,
        options: RequestOptions,
        inputs: _Inputs,
        contract: CollectionContract,
        templates: tuple[ApprovedTemplate, ...],
        shown: ShownDraft | None,
    ) -> AnswerOutcome:
        degraded = result.status == "evidence_only" and result.degraded is not None
        return AnswerOutcome(
            result,
            options,
            template=select_template(templates, request.question) if degraded else None,
            evidence_allowed=self.settings.answers.evidence_only_on_model_failure,
            draft=shown,
            provenance=AnswerProvenance.of(result, inputs.eligibility.chunking_version, contract),
            left_out=inputs.left_out,
        )

    async def probe_model(self, timeout: float = 30.0) -> str | None:
        """``None`` when the primary chat pipeline answers a tiny schema-constrained
        request, else why not (one line, the failure category first). With the
        ``evidence`` style no model is used, so there is nothing to probe."""
        if self.decisions.answer_style() == "evidence":
            return None
        kept = self.sessions.kept()
        session = kept or self.sessions.open(self._token_counter())
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


def _options(
    request: AnswerRequest,
    inputs: _Inputs,
    style: AnswerStyle,
    answerability: tuple[float | None, str],
) -> RequestOptions:
    """The answer's ``options`` member: what it ran under."""
    eligibility, profiles = inputs.eligibility, inputs.profiles
    return RequestOptions(
        k=request.k,
        mode=request.mode,
        policy=inputs.policy,
        chunking_version=eligibility.chunking_version,
        document_types=eligibility.document_types,
        publication_states=eligibility.publication_states,
        documents=eligibility.document_ids,
        tenant=request.tenant,
        history_messages=len(request.history),
        current_revisions=dict(request.current_revisions or {}),
        deadline_seconds=inputs.deadline_seconds,
        style=style,
        answerability_threshold=answerability[0],
        answerability_source=answerability[1],
        primary=profiles[0].name,
        fallbacks=tuple(p.name for p in profiles[1:]),
        thresholds=inputs.applied.thresholds,
        threshold_origin=inputs.applied.origin,
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
        location=cite_location(p.source_uri, p.pages, p.document_id),
    )


def _scope(request: AnswerRequest) -> CallerScope:
    """What the caller may see, from the request's trusted context."""
    return CallerScope(tenant=request.tenant, allowed_documents=request.allowed_documents)
