"""Each stage of the answer path, alone: a plan, the stage's input, its output.

The whole path is tested in test_answer.py and test_answer_path.py; here each stage
function is called by itself, so a stage that breaks names itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.chat.contract import ChatMessage, ChatResponse, Deadline, ModelProfile
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.errors import AnswerContractError, AssemblyError
from ragwright.pipeline import answer_generation as generation
from ragwright.pipeline import answer_stages as stages
from ragwright.pipeline.answer import AnswerPlan
from ragwright.pipeline.answer_records import Budget
from ragwright.pipeline.answerability import Answerability, SentenceScorer
from ragwright.pipeline.retrieve import Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Reply, ScriptedChatModel
from ragwright.types import ChunkingPolicy
from tests.pipeline.indexes import hashing_index

ELIGIBLE = Eligibility(ChunkingPolicy().version)
QUESTION = "Should I drain all queued work during shutdown?"
SUPPORTED = "Drain the remaining jobs only while the shutdown deadline allows it."
ALTERNATE = ModelProfile("alt", "openai", "m", context_window=2048, output_limit=256)


class Words:
    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    with hashing_index(tmp_path_factory.mktemp("index") / "i") as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


def plan(retriever: Retriever, **options: Any) -> AnswerPlan:
    options.setdefault("chat", ScriptedChatModel([]))
    return AnswerPlan(
        QUESTION,
        retriever=retriever,
        eligibility=ELIGIBLE,
        scope=CallerScope(),
        counter=Words(),
        **options,
    )


def retrieved(p: AnswerPlan) -> stages.Retrieved:
    return asyncio.run(stages.retrieve(p, Deadline.after(60), stages.Timings()))


def reply(*labels: str, text: str = SUPPORTED) -> str:
    return json.dumps({"status": "answered", "answer": text, "sourceIds": list(labels)})


def response(text: str, *, provider: str = "scripted", fallback: bool = False) -> ChatResponse:
    return ChatResponse(text, "stop", "m", provider=provider, fallback=fallback)


# --- the plan ---------------------------------------------------------------------------


def test_the_plan_refuses_an_unknown_style(retriever: Retriever) -> None:
    with pytest.raises(ValueError, match="unknown answer style 'poem'"):
        plan(retriever, style="poem")


def test_the_plan_refuses_prefer_current_revision_without_revisions(retriever: Retriever) -> None:
    # The one place this is checked: the message names the field and the CLI option.
    policy = "seed-baseline+prefer-current-revision"
    with pytest.raises(AssemblyError, match=r"current_revisions; ask --current-revision DOC=REV"):
        plan(retriever, policy=policy)
    assert plan(retriever, policy=policy, current_revisions={}).current_revisions == {}


def test_the_plan_refuses_a_malformed_history(retriever: Retriever) -> None:
    with pytest.raises(AssemblyError, match=r"history\[0\]\.role"):
        plan(retriever, history=(ChatMessage("assistant", "a"), ChatMessage("user", "q")))


def test_without_a_model_the_plan_answers_with_evidence_unless_previewing(
    retriever: Retriever,
) -> None:
    assert plan(retriever, chat=None).answer_style == "evidence"
    assert plan(retriever, chat=None, preview=True).answer_style == "generated"
    assert plan(retriever, style="quoted").answer_style == "quoted"


def test_the_support_check_and_sentence_scoring_follow_the_style(retriever: Retriever) -> None:
    generated = plan(retriever)
    assert generated.support_checked and not generated.scores_sentences
    assert plan(retriever, answerability_threshold=0.3).scores_sentences
    quoted = plan(retriever, style="quoted")
    assert quoted.scores_sentences and not quoted.support_checked


# --- retrieve ---------------------------------------------------------------------------


def test_retrieve_returns_the_eligible_candidates_and_times_itself(retriever: Retriever) -> None:
    p = plan(retriever, k=3)
    timings = stages.Timings()
    got = asyncio.run(stages.retrieve(p, Deadline.after(60), timings))
    hits = retriever.search(QUESTION, ELIGIBLE, CallerScope(), k=3, mode="hybrid").hits
    assert [c.chunk_id for c in got.candidates] == [h.payload.chunk_id for h in hits]
    assert got.scorer is None and set(timings.ms) == {"retrieve"}


def test_retrieve_makes_a_scorer_when_sentences_are_scored(retriever: Retriever) -> None:
    assert retrieved(plan(retriever, style="quoted")).scorer is not None


def test_the_question_is_embedded_once_for_retrieval_and_sentence_scoring(
    retriever: Retriever,
) -> None:
    queries: list[str] = []

    class Recording(HashingEmbedder):
        def embed_query(self, text: str) -> list[float]:
            queries.append(text)
            return super().embed_query(text)

    recording = Retriever(retriever.index, Recording(), Bm25Encoder())
    got = retrieved(plan(recording, style="quoted"))
    assert len(queries) == 1 and got.scorer is not None
    # The scorer reuses that vector: the same similarities as a scorer embedding anew.
    sentences = stages.sentences_of(
        stages.assemble_primary(plan(recording, style="quoted"), got).context
    )
    fresh = SentenceScorer(Recording(), QUESTION).scores(sentences)
    assert got.scorer.scores(sentences) == pytest.approx(fresh)
    assert len(queries) == 2  # only the fresh scorer embedded the question again


# --- assemble ---------------------------------------------------------------------------


def test_assemble_makes_the_request_for_the_caller_scope(retriever: Retriever) -> None:
    p = plan(retriever, temperature=0.5)
    got = retrieved(p)  # the stage takes the candidates as given
    prepared = stages.assemble_primary(replace(p, scope=CallerScope(tenant="acme")), got)
    assert prepared.request is not None and prepared.request.scope == "tenant:acme"
    assert prepared.request.options.temperature == 0.5
    assert [m.role for m in prepared.request.messages] == ["system", "user"]
    assert prepared.options.support_check and prepared.options.style == "generated"


def test_assemble_without_candidates_makes_no_request(retriever: Retriever) -> None:
    p = plan(retriever)
    prepared = stages.assemble_primary(p, stages.Retrieved(()))
    assert prepared.request is None and not prepared.context.sources


def test_an_alternate_is_assembled_for_its_own_profile(retriever: Retriever) -> None:
    p = plan(retriever, budget=Budget(8192, 1024, 300))
    prepared = stages.assemble_alternate(p, retrieved(p), ALTERNATE)
    assert prepared.options.budget == Budget(2048, 256, 300)
    assert prepared.request is not None
    assert prepared.request.options.max_output_tokens == 256


def test_a_quoted_assembly_shows_labelled_sentences(retriever: Retriever) -> None:
    p = plan(retriever, style="quoted")
    prepared = stages.assemble_primary(p, retrieved(p))
    assert prepared.shown and all("." in s.label for s in prepared.shown)
    assert not prepared.options.support_check


# --- score and gate ---------------------------------------------------------------------


def test_score_draws_the_signal_from_the_assembled_sentences(retriever: Retriever) -> None:
    p = plan(retriever, style="quoted", answerability_threshold=2.0)
    got = retrieved(p)
    prepared = stages.assemble_primary(p, got)
    evidence = asyncio.run(stages.score(p, got, prepared, Deadline.after(60), stages.Timings()))
    assert set(evidence.scores) == {s.label for s in evidence.sentences}
    assert evidence.signal is not None and evidence.signal.score == max(evidence.scores.values())
    assert not evidence.signal.answerable  # no cosine reaches 2.0


def test_score_without_a_scorer_scores_nothing(retriever: Retriever) -> None:
    p = plan(retriever)
    got = retrieved(p)
    prepared = stages.assemble_primary(p, got)
    evidence = asyncio.run(stages.score(p, got, prepared, Deadline.after(60), stages.Timings()))
    assert evidence == stages.Evidence()


@pytest.mark.parametrize(
    ("preview", "signal", "expected"),
    [
        (True, Answerability(0.9, "s", 0.5), "preview"),
        (True, Answerability(0.1, "s", 0.5), "preview"),
        (False, Answerability(0.1, "s", 0.5), "insufficient"),
        (False, Answerability(0.5, "s", 0.5), None),
        (False, Answerability(0.1, "s", None), None),
        (False, None, None),
    ],
)
def test_gate_stops_a_preview_and_unanswerable_evidence(
    retriever: Retriever, preview: bool, signal: Answerability | None, expected: str | None
) -> None:
    evidence = stages.Evidence(signal=signal)
    assert stages.gate(plan(retriever, preview=preview), evidence) == expected


# --- generate, validate, support --------------------------------------------------------


def test_generate_sends_the_request_with_its_hooks(retriever: Retriever) -> None:
    chat = ScriptedChatModel([Reply(reply("S1"))])
    p = plan(retriever, chat=chat)
    got = retrieved(p)
    primary = stages.assemble_primary(p, got)
    alternates = generation.alternates_for(p, got)
    answer = asyncio.run(
        generation.generate(p, chat, primary, alternates, Deadline.after(60), stages.Timings())
    )
    sent = chat.requests[0]
    assert answer.text == reply("S1") and sent.messages == primary.request.messages  # type: ignore[union-attr]
    assert sent.prepare is not None and sent.accept is not None
    assert sent.accept(response(reply("S1"))) and not sent.accept(response(reply("S99")))


def test_validate_reads_the_answer_against_the_context_its_model_received(
    retriever: Retriever,
) -> None:
    p = plan(retriever, fallbacks=(ALTERNATE,))
    got = retrieved(p)
    primary = stages.assemble_primary(p, got)
    alternates = generation.alternates_for(p, got)
    used, answer = generation.validate(p, response(reply("S1")), primary, alternates)
    assert used is primary and answer.citations[0].label == "S1"
    used, _ = generation.validate(
        p, response(reply("S1"), provider="alt", fallback=True), primary, alternates
    )
    assert used is not primary and used.options.budget.window == 2048
    with pytest.raises(AnswerContractError):
        generation.validate(p, response(reply("S1", "S99")), primary, alternates)


def test_support_runs_only_on_answered_answers_with_the_check_on(retriever: Retriever) -> None:
    p = plan(retriever)
    got = retrieved(p)
    primary = stages.assemble_primary(p, got)
    alternates = generation.alternates_for(p, got)
    _, answer = generation.validate(p, response(reply("S1")), primary, alternates)
    report = asyncio.run(generation.support(answer, primary))
    assert report is not None and report.checked_sentences >= 1
    unchecked = replace(primary, options=replace(primary.options, support_check=False))
    assert asyncio.run(generation.support(answer, unchecked)) is None


def test_an_unsupported_answer_is_withheld(retriever: Retriever) -> None:
    p = plan(retriever)
    got = retrieved(p)
    primary = stages.assemble_primary(p, got)
    text = "Reboot the database cluster every Tuesday at noon."
    said = response(reply("S1", text=text))
    _, answer = generation.validate(p, said, primary, generation.alternates_for(p, got))
    report = asyncio.run(generation.support(answer, primary))
    assert report is not None and not report.supported
    result = generation.answered(
        ScriptedChatModel([]), said, primary, answer, report, stages.Evidence(), stages.Timings()
    )
    assert (result.status, result.answer, result.withheld_answer) == ("unsupported", "", text)


def test_evidence_only_scores_the_sentences_it_was_not_given(retriever: Retriever) -> None:
    # A degraded generated answer had no scores: the stage scores them itself.
    p = plan(retriever)
    primary = stages.assemble_primary(p, retrieved(p))
    timings = stages.Timings()
    result = asyncio.run(stages.evidence_only(p, primary, stages.Evidence(), "timeout", timings))
    assert result.status == "evidence_only" and result.degraded == "timeout"
    assert result.quotes and result.answerability is not None and "score" in timings.ms
    assert result.options is not None and result.options.style == "evidence"
    assert not result.options.support_check
