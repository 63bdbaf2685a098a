"""The stages of the answer path, each a function over an :class:`AnswerPlan`.

retrieve → assemble → score and gate → generate → validate → support. Each stage takes
the plan and what the stage before it produced, and returns a frozen record (or the
result, when the path ends there), so each can be called and tested alone.
:func:`ragwright.pipeline.answer.answer_question` runs them in order. This module holds
the stages before the model; :mod:`ragwright.pipeline.answer_generation` the model's
(generate, validate, support).

Retrieval, sentence scoring, assembly and the support check are CPU- or I/O-bound and
synchronous: the async stages run them in worker threads
(:func:`~ragwright.threads.run_in_thread`, which carries the deadline scope), so an event
loop serving other requests is never blocked by them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from ragwright.chat.contract import (
    ChatMessage,
    ChatOptions,
    ChatRequest,
    Deadline,
    ModelProfile,
)
from ragwright.core.answers import (
    QUOTED_INSTRUCTIONS,
    SchemaStyle,
    answer_schema,
    quoted_answer,
    quoted_schema,
)
from ragwright.core.assembly import INSTRUCTIONS, AssembledContext, Candidate, Turn, assemble
from ragwright.core.screen import screened_sources
from ragwright.core.sentences import (
    EvidenceSentence,
    evidence_sentences,
    render_sentences,
)
from ragwright.deadline import deadline_scope
from ragwright.pipeline import answerability as answerability_module
from ragwright.pipeline.answer_plan import AnswerPlan, ScaledCounter
from ragwright.pipeline.answer_records import (
    AnswerOptions,
    AnswerResult,
    Budget,
    Status,
    instructions_version,
)
from ragwright.pipeline.answerability import (
    Answerability,
    SentenceScorer,
    answerability,
    select_evidence,
    split_sentences,
)
from ragwright.pipeline.retrieve import Hit, QueryVectors, RetrievalResult
from ragwright.protocols import TokenCounter
from ragwright.stages import announce
from ragwright.threads import run_in_thread


class Timings:
    """Milliseconds spent in each stage (a stage run twice adds up)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        announce(stage)  # for a terminal that shows what the answer is doing
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = (time.perf_counter() - started) * 1000
            self.ms[stage] = self.ms.get(stage, 0.0) + spent


# --- retrieve ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retrieved:
    """The eligible candidates, and the question's sentence scorer when the plan scores
    evidence sentences."""

    candidates: tuple[Candidate, ...]
    scorer: SentenceScorer | None = None


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


async def retrieve(plan: AnswerPlan, deadline: Deadline, timings: Timings) -> Retrieved:
    """Search with the caller's eligibility and scope (never relaxed), under the answer's
    deadline (the query embedding and reranking spend it too)."""
    retriever = plan.retriever

    def search() -> tuple[QueryVectors, RetrievalResult]:
        vectors = retriever.embed(plan.question)  # once: the sentence scorer reuses it
        return vectors, retriever.search(
            vectors,
            plan.eligibility,
            plan.scope,
            k=plan.k,
            mode=plan.mode,
            thresholds=plan.thresholds,
        )

    with timings.timed("retrieve"), deadline_scope(deadline):
        vectors, result = await run_in_thread(search)
    scorer = (
        SentenceScorer(retriever.embedder, plan.question, query_vector=vectors.dense)
        if plan.scores_sentences
        else None
    )
    return Retrieved(tuple(candidates_from(result.hits)), scorer)


# --- assemble ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prepared:
    """An assembled context and the model request made from it (``None``: no evidence);
    ``shown`` holds the sentences a quoted request shows."""

    context: AssembledContext
    request: ChatRequest | None
    options: AnswerOptions
    shown: tuple[EvidenceSentence, ...] = ()


def assemble_for(
    plan: AnswerPlan,
    retrieved: Retrieved,
    budget: Budget,
    schema: SchemaStyle,
    counter: TokenCounter,
) -> Prepared:
    """The context and request for one model: its budget, schema style and counter."""
    style = plan.answer_style
    context = assemble(
        retrieved.candidates,
        plan.question,
        counter=counter,
        max_input_tokens=budget.max_input_tokens,
        policy=plan.policy,
        history=plan.turns,
        current_revisions=plan.current_revisions,
        instructions=QUOTED_INSTRUCTIONS if style == "quoted" else INSTRUCTIONS,
    )
    options = AnswerOptions(
        plan.k,
        plan.mode,
        context.policy,
        schema,
        plan.temperature,
        budget,
        plan.thresholds,
        plan.support_checked,
        style,
    )
    if not context.sources:
        return Prepared(context, None, options)
    shown: tuple[EvidenceSentence, ...] = ()
    if style == "quoted":
        assert retrieved.scorer is not None
        context, shown = quoted_context(
            context, plan.question, plan.turns, retrieved.scorer, counter, budget
        )
    return Prepared(context, model_request(plan, context, shown, budget, schema), options, shown)


def model_request(
    plan: AnswerPlan,
    context: AssembledContext,
    shown: Sequence[EvidenceSentence],
    budget: Budget,
    schema: SchemaStyle,
) -> ChatRequest:
    """The request one model receives for an assembled context: the instructions, the
    evidence message and the answer schema of the plan's style (the sentences ``shown``
    for a quoted answer)."""
    style = plan.answer_style
    if style == "quoted":
        # Once a calibrated gate has judged that the evidence answers, the model only
        # selects: measured on ClapNQ, the 0.5B model's own "insufficient" was unrelated
        # to answerability (docs/answers.md).
        json_schema = quoted_schema(
            [s.label for s in shown],
            style=schema,
            allow_insufficient=plan.answerability_threshold is None,
        )
    else:
        json_schema = answer_schema(
            [s.label for s in context.sources],
            style=schema,
            max_answer_chars=budget.max_answer_chars,
        )
    return ChatRequest(
        (
            ChatMessage("system", context.instructions),
            ChatMessage("user", context.user_message),
        ),
        ChatOptions(
            max_output_tokens=budget.output_reserve,
            temperature=plan.temperature,
            json_schema=json_schema,
        ),
        scope=plan.cache_scope,
        prompt_version=instructions_version(style, context),
    )


def assemble_primary(plan: AnswerPlan, retrieved: Retrieved) -> Prepared:
    """The context and request for the primary model."""
    return assemble_for(plan, retrieved, plan.budget, plan.schema_style, plan.counter)


def assemble_alternate(plan: AnswerPlan, retrieved: Retrieved, profile: ModelProfile) -> Prepared:
    """The context and request for an alternate: its window, output limit, schema style
    and token ratio (the primary's framing reserve)."""
    return assemble_for(
        plan,
        retrieved,
        Budget.for_profile(profile, framing_reserve=plan.budget.framing_reserve),
        profile.schema_style,
        ScaledCounter(plan.counter, profile.token_ratio),
    )


def sentences_of(context: AssembledContext) -> tuple[EvidenceSentence, ...]:
    """The evidence sentences a quoted answer or an evidence-only result may use: none
    of a source the screen takes whole — one whose title, heading or text addresses the
    model, next to one that does, or in a document claiming authority (evidence is data,
    not instructions: ``core/screen.py``)."""
    screened = screened_sources(context.sources)
    sentences = evidence_sentences(context.sources, split_sentences)
    return tuple(s for s in sentences if s.source not in screened)


def quoted_context(
    context: AssembledContext,
    question: str,
    turns: Sequence[Turn],
    scorer: SentenceScorer,
    counter: TokenCounter,
    budget: Budget,
) -> tuple[AssembledContext, tuple[EvidenceSentence, ...]]:
    """The quoted form of an assembled context: the most similar sentences under their
    sub-labels. It is a subset of the assembled text (it fits whenever the text did);
    should the labels' overhead ever break the allowance, the least similar go first."""
    sentences = sentences_of(context)
    scores = scorer.scores(sentences)
    # Looked up on the module at call time: benchmarks/answers.py --shown compares
    # other choices of what the model sees through the same path.
    shown = answerability_module.shown_to_model(sentences, scores)
    kept_turns = tuple(turns[len(turns) - context.history_turns :]) if context.history_turns else ()
    instruction_tokens = counter.count(context.instructions)
    while True:
        message = render_sentences(context.sources, shown, question, kept_turns)
        tokens = instruction_tokens + counter.count(message)
        if tokens <= budget.max_input_tokens or len(shown) == 1:
            break
        weakest = min(shown, key=lambda s: scores[s.label])
        shown = [s for s in shown if s is not weakest]
    return dataclasses.replace(context, user_message=message, input_tokens=tokens), tuple(shown)


# --- score and gate ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    """The assembled evidence's sentences, each one's similarity to the question, and
    the answerability signal drawn from them (all empty when nothing was scored)."""

    sentences: tuple[EvidenceSentence, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    signal: Answerability | None = None


async def score(
    plan: AnswerPlan,
    retrieved: Retrieved,
    prepared: Prepared,
    deadline: Deadline,
    timings: Timings,
) -> Evidence:
    """Score the assembled sentences against the question (when the plan scores them)."""
    if retrieved.scorer is None:
        return Evidence()
    sentences = sentences_of(prepared.context)
    with timings.timed("score"), deadline_scope(deadline):
        scores = await run_in_thread(retrieved.scorer.scores, sentences)
    signal = answerability(sentences, scores, plan.answerability_threshold)
    return Evidence(sentences, scores, signal)


def gate(plan: AnswerPlan, evidence: Evidence) -> Literal["preview", "insufficient"] | None:
    """Where the path ends before any model call: a preview always; ``insufficient``
    when the answerability signal says the evidence does not answer; else ``None``."""
    if plan.preview:
        return "preview"
    if evidence.signal is not None and not evidence.signal.answerable:
        return "insufficient"
    return None


def ended_early(
    status: Status, prepared: Prepared, evidence: Evidence, timings: Timings
) -> AnswerResult:
    """The result of a path that ends without a model call (no evidence, a preview,
    an ``insufficient`` gate); a preview holds the request the model would receive."""
    return AnswerResult(
        status,
        "",
        (),
        prepared.context,
        request=prepared.request if status == "preview" else None,
        options=prepared.options,
        answerability=evidence.signal,
        timings=timings.ms,
    )


async def evidence_only(
    plan: AnswerPlan,
    prepared: Prepared,
    evidence: Evidence,
    degraded: str | None,
    timings: Timings,
) -> AnswerResult:
    """The most relevant evidence sentences, never an answer: the ``evidence`` style, or
    a model that could not be reached in time (``degraded`` names the failure)."""
    if not evidence.scores:  # a degraded generated answer without a threshold: score now
        sentences = sentences_of(prepared.context)

        def rescore() -> dict[str, float]:
            return SentenceScorer(plan.retriever.embedder, plan.question).scores(sentences)

        with timings.timed("score"):
            evidence = Evidence(sentences, await run_in_thread(rescore), evidence.signal)
    picked = select_evidence(evidence.sentences, evidence.scores)
    cited = quoted_answer(picked, prepared.context.sources).citations if picked else ()
    signal = evidence.signal or answerability(
        evidence.sentences, evidence.scores, plan.answerability_threshold
    )
    return AnswerResult(
        "evidence_only",
        "",
        cited,
        prepared.context,
        options=dataclasses.replace(prepared.options, style="evidence", support_check=False),
        quotes=tuple(picked),
        answerability=signal,
        degraded=degraded,
        timings=timings.ms,
    )
