from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.deadline import Deadline, current_deadline
from ragwright.errors import AnswerContractError
from ragwright.pipeline.answer import AnswerPlan, answer_question
from ragwright.pipeline.retrieve import Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Reply, ScriptedChatModel
from ragwright.types import ChunkingPolicy
from tests.pipeline.indexes import hashing_index

POLICY = ChunkingPolicy()
ELIGIBLE = Eligibility(POLICY.version)
QUESTION = "Should I drain all queued work during shutdown?"
SUPPORTED = "Drain the remaining jobs only while the shutdown deadline allows it."


class Words:
    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
def retriever(tmp_path: Path) -> Iterator[Retriever]:
    with hashing_index(tmp_path / "i") as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


def ask(retriever: Retriever, chat: ScriptedChatModel | None, **kwargs: object):  # type: ignore[no-untyped-def]
    return asyncio.run(
        answer_question(
            AnswerPlan(
                QUESTION,
                retriever=retriever,
                eligibility=ELIGIBLE,
                scope=CallerScope(),
                chat=chat,
                counter=Words(),
                **kwargs,
            )
        )
    )  # type: ignore[arg-type]


def test_answer_cites_resolved_sources_and_sends_the_assembled_message(
    retriever: Retriever,
) -> None:
    reply = json.dumps({"status": "answered", "answer": SUPPORTED, "sourceIds": ["S1"]})
    chat = ScriptedChatModel([Reply(reply)])
    result = ask(retriever, chat)
    assert result.status == "answered" and result.answer == SUPPORTED
    first = result.context.sources[0].candidate
    assert (result.citations[0].document_id, result.citations[0].chunk_id) == (
        first.document_id,
        first.chunk_id,
    )
    (request,) = chat.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[1].content == result.context.user_message
    assert request.options.json_schema is not None and request.scope == "tenant:-"
    assert result.usage is None  # the scripted provider reports none: unknown, not 0


@pytest.mark.parametrize("style", ["variants", "object"])
def test_the_request_schema_offers_only_this_requests_labels(
    retriever: Retriever, style: str
) -> None:
    reply = json.dumps({"status": "insufficient", "answer": "", "sourceIds": []})
    chat = ScriptedChatModel([Reply(reply)])
    result = ask(retriever, chat, schema_style=style, temperature=0.0)
    (request,) = chat.requests
    schema = request.options.json_schema
    assert schema is not None and request.options.temperature == 0.0
    labels = [s.label for s in result.context.sources]
    assert len(labels) >= 2
    text = json.dumps(schema)
    assert ("anyOf" in schema) == (style == "variants")
    assert f'"enum": {json.dumps(labels)}' in text
    assert f'"S{len(labels) + 1}"' not in text


def test_no_eligible_evidence_means_no_model_call(retriever: Retriever) -> None:
    chat = ScriptedChatModel([])  # any call would fail the test
    nothing = Eligibility(POLICY.version, document_ids=("worker-shutdown-draft",))
    result = asyncio.run(
        answer_question(
            AnswerPlan(
                QUESTION,
                retriever=retriever,
                eligibility=nothing,
                scope=CallerScope(),
                chat=chat,
                counter=Words(),
            )
        )
    )
    assert result.status == "no_eligible_evidence" and chat.calls == 0


def test_preview_stops_before_the_model(retriever: Retriever) -> None:
    result = ask(retriever, None, preview=True)
    assert result.status == "preview" and result.context.sources


def test_a_contract_violation_is_raised_not_answered(retriever: Retriever) -> None:
    bad = json.dumps({"status": "answered", "answer": "Yes.", "sourceIds": ["S99"]})
    with pytest.raises(AnswerContractError) as caught:
        ask(retriever, ScriptedChatModel([Reply(bad)]))
    assert caught.value.reason == "unknown_source_id"


def test_support_check_flags_a_citation_without_the_claim(retriever: Retriever) -> None:
    reply = json.dumps(
        {
            "status": "answered",
            "answer": "Refunds are paid in cash at the branch.",
            "sourceIds": ["S1"],
        }
    )
    result = ask(retriever, ScriptedChatModel([Reply(reply)]), support_check=True)
    assert result.support is not None and result.support.flagged


def test_retrieval_spends_the_answer_deadline(tmp_path: Path) -> None:
    seen: list[Deadline | None] = []

    class DeadlineRecorder(HashingEmbedder):
        def embed_query(self, text: str) -> list[float]:
            seen.append(current_deadline())
            return super().embed_query(text)

    reply = json.dumps({"status": "insufficient", "answer": "", "sourceIds": []})
    deadline = Deadline.after(30)
    with hashing_index(tmp_path / "i") as index:
        retriever = Retriever(index, DeadlineRecorder(), Bm25Encoder())
        ask(retriever, ScriptedChatModel([Reply(reply)]), deadline=deadline)
    assert seen == [deadline]  # embedding and rerank calls share the request's budget
