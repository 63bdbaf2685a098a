"""The support-answer use case: retrieve → assemble → generate → validate.

* Retrieval runs with the caller's eligibility and trusted scope (never relaxed).
* Assembly applies the chosen policy inside the o200k_base input allowance
  (window − output reserve − framing reserve), with the conversation's earlier turns
  (``history``, for the policy's history block) and the caller's current document
  revisions (``+prefer-current-revision``; candidates carry the revision stored in
  their payload).
* Empty context means no model call: the outcome is ``no_eligible_evidence``.
* The model gets the grounded-answer instructions as the system message and the
  assembled JSON evidence as the user message, with the answer JSON schema; the answer
  is validated in code and its citations resolved from the assembler's labels.
* A fallback model is not a transparent replacement: the request carries a ``prepare``
  hook, and when the chat pipeline's failover switches, the alternate receives a request
  assembled again for *its* profile (context window, output limit, schema style, token
  ratio). Citations resolve against the context the answering model actually received,
  and the result names that provider and model and says it was a fallback.
* The support check (:mod:`ragwright.core.support`) runs on every answered answer unless
  turned off: an answer whose claims its cited evidence does not support, or that
  echoes text in the evidence addressed to the model, ends as ``unsupported``. Its text
  is withheld (``withheld_answer``, never ``answer``) and the evidence stays in the
  result, so a caller that only reads ``answer`` never shows it.
* The request also carries an ``accept`` hook running the answer contract against the
  answering model's labels, so the response cache stores only answers that pass it.
* The result records the exact final request (every message, the options and schema),
  the assembly decisions, the estimated input tokens and the provider-reported usage
  (``None`` when unknown, never 0); :meth:`AnswerResult.to_dict` is its JSON form.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from ragwright.chat.contract import (
    ChatMessage,
    ChatModel,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    Deadline,
    ModelProfile,
    Usage,
)
from ragwright.core.answers import (
    ANSWER_STYLES,
    QUOTED_INSTRUCTIONS,
    Answer,
    AnswerStyle,
    Citation,
    SchemaStyle,
    answer_schema,
    parse_answer,
    parse_quoted_answer,
    quoted_answer,
    quoted_schema,
)
from ragwright.core.assembly import (
    INSTRUCTIONS,
    AssembledContext,
    Candidate,
    Turn,
    assemble,
    parse_policy,
)
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.screen import addresses_the_model, frame_addresses_the_model
from ragwright.core.sentences import EvidenceSentence, evidence_sentences, render_sentences
from ragwright.core.support import SupportReport, check_support
from ragwright.deadline import deadline_scope
from ragwright.errors import (
    AnswerContractError,
    AssemblyError,
    ChatError,
    ConfigError,
    FailureCategory,
)
from ragwright.pipeline.answerability import (
    QUOTE_CANDIDATES,
    Answerability,
    SentenceScorer,
    answerability,
    most_similar,
    select_evidence,
    split_sentences,
)
from ragwright.pipeline.retrieve import Hit, Mode, Retriever, Thresholds
from ragwright.protocols import TokenCounter
from ragwright.stages import announce
from ragwright.threads import run_in_thread

Status = Literal[
    "answered", "unsupported", "insufficient", "no_eligible_evidence", "evidence_only", "preview"
]

DEGRADE_TO_EVIDENCE = frozenset(
    {
        FailureCategory.TRANSIENT,
        FailureCategory.THROTTLED,
        FailureCategory.TIMEOUT,
        FailureCategory.CAPACITY,
        FailureCategory.DEADLINE_EXHAUSTED,
    }
)
"""Model failures after which the answer degrades to evidence only (the model could not
be reached in time); configuration, input and output failures stay errors."""


@dataclass(frozen=True, slots=True)
class Budget:
    """The model window split into input allowance, output reserve and framing reserve."""

    window: int = 4096
    output_reserve: int = 512
    framing_reserve: int = 256

    @classmethod
    def for_profile(cls, profile: ModelProfile, *, framing_reserve: int = 256) -> Budget:
        """The budget of a model profile (its window and output limit)."""
        return cls(profile.context_window, profile.output_limit, framing_reserve)

    @property
    def max_input_tokens(self) -> int:
        return self.window - self.output_reserve - self.framing_reserve

    @property
    def max_answer_chars(self) -> int:
        """Cap on the answer text in a grammar-constrained schema: about 2 characters per
        reserved token (English runs near 4), so the JSON closes inside the reserve."""
        return 2 * self.output_reserve


@dataclass(frozen=True, slots=True)
class AnswerOptions:
    """The options that shaped one answer, as used for the model that answered."""

    k: int
    mode: Mode
    policy: str
    schema_style: SchemaStyle
    temperature: float | None
    budget: Budget
    thresholds: Thresholds
    support_check: bool
    style: AnswerStyle = "generated"


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What the use case produced, with everything needed to audit it.

    ``context`` and ``request`` are what the answering model received (an alternate's
    own assembly after a failover); ``request`` is also set for a preview (what the
    primary would receive) and ``None`` when no model was involved. An ``unsupported``
    result has an empty ``answer``; the model's text is in ``withheld_answer``, its
    citations in ``citations`` and the reasons in ``support``.
    """

    status: Status
    answer: str
    citations: tuple[Citation, ...]
    context: AssembledContext
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    support: SupportReport | None = None
    fallback: bool = False
    request: ChatRequest | None = None
    options: AnswerOptions | None = None
    withheld_answer: str | None = None
    quotes: tuple[EvidenceSentence, ...] = ()
    answerability: Answerability | None = None
    degraded: str | None = None
    timings: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (``docs/assembly.md`` documents every key).

        It holds the request's message content (evidence and question): it is meant for
        the caller who asked, never for logs or telemetry.
        """
        by_label = {s.label: s for s in self.context.sources}
        return {
            "status": self.status,
            "style": self.options.style if self.options is not None else None,
            "answer": self.answer,
            "withheld_answer": self.withheld_answer,
            "quotes": [{"id": q.label, "source": q.source, "text": q.text} for q in self.quotes],
            "answerability": (
                {
                    "score": self.answerability.score,
                    "best_sentence": self.answerability.best_sentence,
                    "threshold": self.answerability.threshold,
                    "answerable": self.answerability.answerable,
                }
                if self.answerability is not None
                else None
            ),
            "degraded": self.degraded,
            "citations": [
                {
                    "label": c.label,
                    "document_id": c.document_id,
                    "chunk_id": c.chunk_id,
                    "chunking_version": c.chunking_version,
                    "revision": by_label[c.label].candidate.revision,
                    **_where(by_label[c.label].candidate),
                }
                for c in self.citations
            ],
            "sources": [
                {
                    "label": s.label,
                    "document_id": s.candidate.document_id,
                    "chunk_id": s.candidate.chunk_id,
                    "chunking_version": s.candidate.chunking_version,
                    "revision": s.candidate.revision,
                    "score": s.candidate.score,
                    **_where(s.candidate),
                }
                for s in self.context.sources
            ],
            "decisions": [dataclasses.asdict(d) for d in self.context.decisions],
            "policy": self.context.policy,
            "input_tokens": self.context.input_tokens,
            "history": {
                "included": self.context.history_turns,
                "dropped": self.context.history_dropped,
            },
            "request": _request_dict(self.request) if self.request is not None else None,
            "usage": dataclasses.asdict(self.usage) if self.usage is not None else None,
            "provider": self.provider,
            "model": self.model,
            "fallback": self.fallback,
            "support": _support_dict(self.support) if self.support is not None else None,
            "options": _options_dict(self.options) if self.options is not None else None,
            "timings": {stage: round(ms, 3) for stage, ms in self.timings.items()},
        }


def instructions_version(style: str, context: AssembledContext) -> str:
    """The version of the instructions a model request carries (its ``prompt_version``):
    the answer style, the assembly policy id and a digest of the instructions text. A
    degraded result has no request; the previous-draft check recomputes it from this."""
    digest = hashlib.sha256(context.instructions.encode()).hexdigest()[:12]
    return f"{style}:{context.policy}:{digest}"


def _request_dict(request: ChatRequest) -> dict[str, Any]:
    return {
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "options": {
            "max_output_tokens": request.options.max_output_tokens,
            "temperature": request.options.temperature,
            "json_schema": request.options.json_schema,
        },
        "scope": request.scope,
        "prompt_version": request.prompt_version,
    }


def _support_dict(support: SupportReport) -> dict[str, Any]:
    return {
        "flagged": support.flagged,
        "supported": support.supported,
        "citations": [dataclasses.asdict(c) for c in support.citations],
        "unsupported_sentences": list(support.unsupported_sentences),
        "checked_sentences": support.checked_sentences,
        "followed_instructions": list(support.followed_instructions),
        "instruction_sources": list(support.instruction_sources),
    }


def _options_dict(options: AnswerOptions) -> dict[str, Any]:
    return {
        "k": options.k,
        "mode": options.mode,
        "policy": options.policy,
        "schema_style": options.schema_style,
        "temperature": options.temperature,
        "budget": {
            "window": options.budget.window,
            "output_reserve": options.budget.output_reserve,
            "framing_reserve": options.budget.framing_reserve,
            "max_input_tokens": options.budget.max_input_tokens,
        },
        "thresholds": dataclasses.asdict(options.thresholds),
        "support_check": options.support_check,
        "style": options.style,
    }


def _where(candidate: Candidate) -> dict[str, Any]:
    """A cited chunk's file, pages (paged formats) and the two as a reader sees them."""
    return {
        "source_uri": candidate.source_uri,
        "pages": None if candidate.pages is None else list(candidate.pages),
        "location": candidate.location,
    }


def candidates_from(hits: Sequence[Hit]) -> list[Candidate]:
    """Assembly candidates from validated retrieval hits (the stored revision included)."""
    return [
        Candidate(
            document_id=h.payload.document_id,
            chunk_id=h.payload.chunk_id,
            chunking_version=h.payload.chunking_version,
            section_id=h.payload.section_id,
            title=h.payload.title,
            heading=h.payload.heading,
            text=h.payload.text,
            score=h.score,
            positions=h.payload.positions,
            revision=h.payload.revision,
            source_uri=h.payload.source_uri,
            pages=h.payload.pages,
        )
        for h in hits
    ]


def history_turns(history: Sequence[ChatMessage]) -> tuple[Turn, ...]:
    """Earlier turns from a conversation: ``user`` then ``assistant``, alternating.

    Raises:
        AssemblyError: naming the message (``history[2].role``) and the rule it breaks.
    """
    if len(history) % 2:
        raise AssemblyError(
            f"history[{len(history) - 1}]: the history must end with an assistant message"
        )
    turns: list[Turn] = []
    for index in range(0, len(history), 2):
        question, answer = history[index], history[index + 1]
        expected = ((index, question, "user"), (index + 1, answer, "assistant"))
        for position, message, role in expected:
            if message.role != role:
                raise AssemblyError(
                    f"history[{position}].role: expected {role!r} (user and assistant "
                    f"alternate, user first), got {message.role!r}"
                )
        if not question.content.strip():
            raise AssemblyError(f"history[{index}].content: must not be blank")
        turns.append(Turn(question.content, answer.content))
    return tuple(turns)


class ScaledCounter:
    """Token counts of another tokenizer, estimated as ``ceil(count × ratio)``."""

    def __init__(self, counter: TokenCounter, ratio: float) -> None:
        self._counter = counter
        self._ratio = ratio
        self.encoding_name = f"{counter.encoding_name}x{ratio:g}"

    def count(self, text: str) -> int:
        return math.ceil(self._counter.count(text) * self._ratio)


@dataclass(frozen=True, slots=True)
class _Prepared:
    context: AssembledContext
    request: ChatRequest | None
    options: AnswerOptions
    shown: tuple[EvidenceSentence, ...] = ()  # the sentences a quoted request shows


async def answer_question(
    question: str,
    *,
    retriever: Retriever,
    eligibility: Eligibility,
    scope: CallerScope,
    chat: ChatModel | None,
    counter: TokenCounter,
    k: int = 5,
    mode: Mode = "hybrid",
    policy: str = "seed-baseline",
    budget: Budget = Budget(),
    deadline: Deadline | None = None,
    preview: bool = False,
    support_check: bool = True,
    schema_style: SchemaStyle = "variants",
    temperature: float | None = 0.0,
    thresholds: Thresholds = Thresholds(),
    history: Sequence[ChatMessage] = (),
    current_revisions: Mapping[str, str] | None = None,
    fallbacks: Sequence[ModelProfile] = (),
    style: AnswerStyle = "generated",
    answerability_threshold: float | None = None,
    on_evidence: Callable[[AssembledContext], None] | None = None,
) -> AnswerResult:
    """Answer ``question`` from eligible evidence, or say why not.

    ``style`` is how the answer is made (``docs/answers.md``):

    - ``generated``: the model writes the answer and cites sources; the support check
      (``support_check``, on by default) turns an answer its cited evidence does not
      support into ``unsupported``.
    - ``quoted``: the model is shown the evidence sentences most similar to the question
      under sub-labels (``S1.2``) and names the status and at most ``MAX_QUOTES`` of
      them; the answer is those sentences verbatim (``quotes``), so it cannot say what
      the evidence does not.
    - ``evidence``: no model call; the most relevant sentences are selected
      deterministically and the status is ``evidence_only`` — never an answer.

    ``chat`` may be ``None`` for a preview or the ``evidence`` style (and is then
    treated as the ``evidence`` style). A model that cannot be reached in time
    (:data:`DEGRADE_TO_EVIDENCE`) degrades the result to ``evidence_only`` with
    ``degraded`` naming the failure. ``answerability_threshold`` (calibrated with
    ``eval calibrate``): when the best evidence sentence's similarity to the question is
    below it, the status is ``insufficient`` without a model call; the signal is
    recorded in ``answerability`` whenever it is computed (every style but
    ``generated`` without a threshold).

    ``budget``, ``schema_style`` and ``counter`` describe the primary model; ``fallbacks``
    are the profiles of the alternates ``chat`` may fail over to
    (``runtime.chat_profiles(settings)[1:]``), each of which gets a request assembled for
    it. ``temperature`` 0 makes a greedy, repeatable answer (``None`` leaves it to the
    provider). ``thresholds`` (calibrated with ``eval calibrate``) let a question whose
    best evidence scores too low end as ``no_eligible_evidence`` without a model call.
    ``history`` holds the conversation's earlier messages (user, assistant, …), used by
    a policy with a history share (``+history=0.25``); without one they are recorded as
    dropped. ``current_revisions`` (document id → revision, from a trusted source of
    truth) is required by ``+prefer-current-revision``. ``on_evidence`` is called once
    with the assembled context as soon as there is evidence, before any model call (the
    HTTP stream sends it as its ``evidence`` event).

    Retrieval, sentence scoring, assembly and the support check are CPU- or I/O-bound
    and synchronous: they run in worker threads (:func:`~ragwright.threads.run_in_thread`,
    which carries the deadline scope), so an event loop serving other requests is never
    blocked by them; a cancelled answer ends once its running thread has returned.
    ``AnswerResult.timings`` records each stage in milliseconds.

    Example:
        >>> result = await answer_question(  # doctest: +SKIP
        ...     "Drain queued work on shutdown?", retriever=retriever,
        ...     eligibility=Eligibility(version), scope=CallerScope(), chat=chat,
        ...     counter=counter, fallbacks=profiles[1:], style="quoted")
        >>> [q["id"] for q in result.to_dict()["quotes"]]  # doctest: +SKIP
        ['S1.2']

    Raises:
        AnswerContractError: the model's answer breaks the contract.
        AssemblyError: malformed history, or ``+prefer-current-revision`` without
            ``current_revisions``.
        ChatError: the model call fails for a reason other than reachability.
    """
    if style not in ANSWER_STYLES:
        raise ValueError(f"unknown answer style {style!r}; expected one of {ANSWER_STYLES}")
    if chat is None and not preview:
        style = "evidence"
    turns = history_turns(history)
    if parse_policy(policy).prefer_current_revision and current_revisions is None:
        raise AssemblyError(
            "policy +prefer-current-revision needs current_revisions (document id → revision)"
        )
    deadline = deadline or Deadline.after(120)
    timings: dict[str, float] = {}

    @contextmanager
    def timed(stage: str) -> Iterator[None]:
        announce(stage)  # for a terminal that shows what the answer is doing
        started = time.perf_counter()
        try:
            yield
        finally:
            timings[stage] = timings.get(stage, 0.0) + (time.perf_counter() - started) * 1000

    with timed("retrieve"), deadline_scope(deadline):  # embedding and rerank spend it too
        result = await run_in_thread(
            retriever.search, question, eligibility, scope, k=k, mode=mode, thresholds=thresholds
        )
    candidates = candidates_from(result.hits)
    scorer: SentenceScorer | None = None
    if style != "generated" or answerability_threshold is not None:
        with deadline_scope(deadline):  # it embeds the question: off the event loop too
            scorer = await run_in_thread(SentenceScorer, retriever.embedder, question)

    def prepare(run_budget: Budget, schema: SchemaStyle, run_counter: TokenCounter) -> _Prepared:
        quoted = style == "quoted"
        context = assemble(
            candidates,
            question,
            counter=run_counter,
            max_input_tokens=run_budget.max_input_tokens,
            policy=policy,
            history=turns,
            current_revisions=current_revisions,
            instructions=QUOTED_INSTRUCTIONS if quoted else INSTRUCTIONS,
        )
        options = AnswerOptions(
            k,
            mode,
            context.policy,
            schema,
            temperature,
            run_budget,
            thresholds,
            support_check and style == "generated",
            style,
        )
        if not context.sources:
            return _Prepared(context, None, options)
        shown: tuple[EvidenceSentence, ...] = ()
        if quoted:
            assert scorer is not None
            context, shown = _quoted_context(
                context, question, turns, scorer, run_counter, run_budget.max_input_tokens
            )
            # Once a calibrated gate has judged that the evidence answers, the model only
            # selects: measured on ClapNQ, the 0.5B model's own "insufficient" was
            # unrelated to answerability (docs/answers.md).
            json_schema = quoted_schema(
                [s.label for s in shown],
                style=schema,
                allow_insufficient=answerability_threshold is None,
            )
        else:
            json_schema = answer_schema(
                [s.label for s in context.sources],
                style=schema,
                max_answer_chars=run_budget.max_answer_chars,
            )
        request = ChatRequest(
            (
                ChatMessage("system", context.instructions),
                ChatMessage("user", context.user_message),
            ),
            ChatOptions(
                max_output_tokens=run_budget.output_reserve,
                temperature=temperature,
                json_schema=json_schema,
            ),
            scope=f"tenant:{scope.tenant}" if scope.tenant else "tenant:-",
            prompt_version=instructions_version(style, context),
        )
        return _Prepared(context, request, options, shown)

    with timed("assemble"), deadline_scope(deadline):
        primary = await run_in_thread(prepare, budget, schema_style, counter)
    if primary.request is None:
        return AnswerResult(
            "no_eligible_evidence",
            "",
            (),
            primary.context,
            options=primary.options,
            timings=timings,
        )
    if on_evidence is not None:
        on_evidence(primary.context)
    sentences: tuple[EvidenceSentence, ...] = ()
    scores: dict[str, float] = {}
    signal: Answerability | None = None
    if scorer is not None:
        sentences = _sentences_of(primary.context)
        with timed("score"), deadline_scope(deadline):
            scores = await run_in_thread(scorer.scores, sentences)
        signal = answerability(sentences, scores, answerability_threshold)
    if preview:
        return AnswerResult(
            "preview",
            "",
            (),
            primary.context,
            request=primary.request,
            options=primary.options,
            answerability=signal,
            timings=timings,
        )
    if signal is not None and not signal.answerable:
        return AnswerResult(
            "insufficient",
            "",
            (),
            primary.context,
            options=primary.options,
            answerability=signal,
            timings=timings,
        )

    async def evidence_only(degraded: str | None) -> AnswerResult:
        if not scores:  # a degraded generated answer without a threshold: score now
            nonlocal sentences
            sentences = _sentences_of(primary.context)
            with timed("score"):
                scores.update(
                    await run_in_thread(
                        lambda: SentenceScorer(retriever.embedder, question).scores(sentences)
                    )
                )
        picked = select_evidence(sentences, scores)
        cited = quoted_answer(picked, primary.context.sources).citations if picked else ()
        return AnswerResult(
            "evidence_only",
            "",
            cited,
            primary.context,
            options=dataclasses.replace(primary.options, style="evidence", support_check=False),
            quotes=tuple(picked),
            answerability=signal or answerability(sentences, scores, answerability_threshold),
            degraded=degraded,
            timings=timings,
        )

    if style == "evidence" or chat is None:
        return await evidence_only(None)

    def prepare_alternate(profile: ModelProfile) -> _Prepared:
        return prepare(
            Budget.for_profile(profile, framing_reserve=budget.framing_reserve),
            profile.schema_style,
            ScaledCounter(counter, profile.token_ratio),
        )

    alternates = _Alternates(fallbacks, prepare_alternate)

    def prepared_for(response: ChatResponse) -> _Prepared:
        return alternates.get(response.provider) if response.fallback else primary

    def parse(response: ChatResponse) -> Answer:
        used = prepared_for(response)
        if style == "quoted":
            return parse_quoted_answer(response.text, used.shown, used.context.sources)
        return parse_answer(response.text, used.context.sources)

    def accept(response: ChatResponse) -> bool:
        try:
            parse(response)
        except AnswerContractError:
            return False
        return True

    request = dataclasses.replace(primary.request, prepare=alternates.request_for, accept=accept)
    try:
        with timed("generate"):
            response = await chat.complete(request, deadline)
    except ChatError as error:
        if error.category in DEGRADE_TO_EVIDENCE:
            return await evidence_only(error.category.value)
        raise
    with timed("validate"):
        used = prepared_for(response)
        answer = parse(response)
        support = (
            await run_in_thread(
                check_support,
                answer.text,
                [(c.label, c.included_text) for c in answer.citations],
                evidence=[(s.label, s.included_text) for s in used.context.sources],
                frames={
                    s.label: (s.candidate.title, s.candidate.heading) for s in used.context.sources
                },
            )
            if used.options.support_check and answer.status == "answered"
            else None
        )
    status: Status = answer.status
    text, withheld = answer.text, None
    if support is not None and not support.supported:
        status, text, withheld = "unsupported", "", answer.text
    quotes = answer.quotes
    if status == "insufficient" and scores:
        # The model declined although the evidence passed the gate (or none is
        # calibrated): show the most relevant evidence, never as an answer.
        quotes = tuple(select_evidence(sentences, scores))
    return AnswerResult(
        status,
        text,
        answer.citations,
        used.context,
        usage=response.usage,
        model=response.model,
        provider=response.provider or chat.name,
        support=support,
        fallback=response.fallback,
        request=dataclasses.replace(used.request, prepare=None, accept=None)
        if used.request is not None
        else None,
        options=used.options,
        withheld_answer=withheld,
        quotes=quotes,
        answerability=signal,
        timings=timings,
    )


def _sentences_of(context: AssembledContext) -> tuple[EvidenceSentence, ...]:
    """The evidence sentences a quoted answer or an evidence-only result may use: never
    one from a paragraph that addresses the model, nor any under a title or heading that
    does (evidence is data, not instructions: ``core/screen.py``)."""
    screened = {
        s.label
        for s in context.sources
        if frame_addresses_the_model(s.candidate.title, s.candidate.heading)
    }
    sentences = evidence_sentences(
        context.sources, split_sentences, skip_paragraph=addresses_the_model
    )
    return tuple(s for s in sentences if s.source not in screened)


def _quoted_context(
    context: AssembledContext,
    question: str,
    turns: Sequence[Turn],
    scorer: SentenceScorer,
    counter: TokenCounter,
    max_input_tokens: int,
) -> tuple[AssembledContext, tuple[EvidenceSentence, ...]]:
    """The quoted form of an assembled context: the most similar sentences under their
    sub-labels. It is a subset of the assembled text (it fits whenever the text did);
    should the labels' overhead ever break the allowance, the least similar go first."""
    sentences = _sentences_of(context)
    scores = scorer.scores(sentences)
    shown = most_similar(sentences, scores, QUOTE_CANDIDATES)
    kept_turns = tuple(turns[len(turns) - context.history_turns :]) if context.history_turns else ()
    instruction_tokens = counter.count(context.instructions)
    while True:
        message = render_sentences(context.sources, shown, question, kept_turns)
        tokens = instruction_tokens + counter.count(message)
        if tokens <= max_input_tokens or len(shown) == 1:
            break
        weakest = min(shown, key=lambda s: scores[s.label])
        shown = [s for s in shown if s is not weakest]
    return dataclasses.replace(context, user_message=message, input_tokens=tokens), tuple(shown)


class _Alternates:
    """Per-alternate preparations, made once each, on demand (a switch or a cache hit)."""

    def __init__(
        self, profiles: Sequence[ModelProfile], prepare: Callable[[ModelProfile], _Prepared]
    ) -> None:
        self._profiles = {p.name: p for p in profiles}
        self._prepare = prepare
        self._done: dict[str, _Prepared] = {}

    def _for(self, profile: ModelProfile) -> _Prepared:
        if profile.name not in self._done:
            self._done[profile.name] = self._prepare(profile)
        return self._done[profile.name]

    def get(self, name: str) -> _Prepared:
        """The preparation alternate ``name`` answered from (prepared again on a cache hit:
        assembly is deterministic for the same evidence)."""
        if name in self._done:
            return self._done[name]
        profile = self._profiles.get(name)
        if profile is None:
            raise ConfigError(
                "RAGWRIGHT_CHAT_FALLBACKS",
                f"a cached answer came from alternate {name!r}, whose profile was not given "
                "to the answer use case (pass runtime.chat_profiles(settings)[1:] as fallbacks)",
            )
        return self._for(profile)

    def request_for(self, profile: ModelProfile) -> ChatRequest | None:
        """The failover hook: the request for ``profile``, or ``None`` when nothing fits."""
        try:
            return self._for(profile).request
        except AssemblyError:
            # Instructions and question alone exceed this model's window: it cannot take
            # the request, so failover skips it (and records that it did).
            return None
