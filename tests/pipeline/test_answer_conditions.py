"""An answer carries the conditions and exceptions that govern it: the drain question of
the sample corpus, through the answer use case (hashing embedder, real index, real BM25,
scripted model)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.sentences import EvidenceSentence
from ragwright.pipeline.answerability import select_evidence
from ragwright.pipeline.retrieve import Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Reply, ScriptedChatModel
from tests.pipeline.indexes import hashing_index
from tests.pipeline.test_answer_path import ask

RULE = "Drain the remaining jobs only while the shutdown deadline allows it."
EXCEPTION = "If the deadline expires, cancel the in-flight I/O"


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    with hashing_index(tmp_path_factory.mktemp("conditions") / "i") as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


def shown(result_request: object) -> dict[str, str]:
    body = json.loads(result_request.messages[1].content)  # type: ignore[attr-defined]
    return {s["id"]: s["text"] for item in body["evidence"] for s in item["sentences"]}


def test_a_quoted_rule_brings_the_exception_that_follows_it(retriever: Retriever) -> None:
    preview = ask(retriever, None, style="quoted", preview=True)
    assert preview.request is not None
    sentences = shown(preview.request)
    rule = next(label for label, text in sentences.items() if text == RULE)
    # The exception is shown to the model too, so quoting it quotes nothing unseen.
    assert any(text.startswith(EXCEPTION) for text in sentences.values())
    chat = ScriptedChatModel([Reply(json.dumps({"status": "answered", "sentenceIds": [rule]}))])
    result = ask(retriever, chat, style="quoted")
    assert result.status == "answered"
    assert result.answer.startswith(RULE + " " + EXCEPTION)
    assert [(q.label, q.text) for q in result.quotes[:1]] == [(rule, RULE)]
    assert len(result.quotes) == 2


def test_the_evidence_selection_carries_the_exception(retriever: Retriever) -> None:
    result = ask(retriever, None, style="evidence")
    texts = [q.text for q in result.quotes]
    assert RULE in texts
    assert any(text.startswith(EXCEPTION) for text in texts)


def test_the_evidence_selection_adds_a_low_scored_exception_after_a_picked_rule() -> None:
    def sentence(number: int, text: str) -> EvidenceSentence:
        return EvidenceSentence(f"S1.{number}", "S1", text, 1)

    sentences = [
        sentence(1, RULE),
        sentence(2, EXCEPTION + "."),
        sentence(3, "Log the count."),
        sentence(4, "Page the owner."),
    ]
    scores = {"S1.1": 0.9, "S1.2": 0.1, "S1.3": 0.8, "S1.4": 0.7}
    picked = select_evidence(sentences, scores, count=1)
    assert [s.label for s in picked] == ["S1.1", "S1.2"]
