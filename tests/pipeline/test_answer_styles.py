"""Answer styles through the answer use case: quoted, evidence only, the answerability
gate and degradation when the model cannot be reached (hashing embedder, real index,
real BM25, scripted model)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.conditions import qualifies
from ragwright.errors import AnswerContractError, FailureCategory
from ragwright.pipeline.answerability import QUOTE_CANDIDATES
from ragwright.pipeline.retrieve import Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel
from tests.pipeline.indexes import hashing_index
from tests.pipeline.test_answer_path import ask


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    with hashing_index(tmp_path_factory.mktemp("styles") / "i") as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


def position(label: str) -> tuple[int, int]:
    source, number = label[1:].split(".")
    return int(source), int(number)


def quoted(*ids: str) -> Reply:
    status = "answered" if ids else "insufficient"
    return Reply(json.dumps({"status": status, "sentenceIds": list(ids)}))


def shown_sentences(chat: ScriptedChatModel) -> dict[str, str]:
    """Sentence id → text, as the (last) quoted request showed them."""
    body = json.loads(chat.requests[-1].messages[1].content)
    return {s["id"]: s["text"] for item in body["evidence"] for s in item["sentences"]}


def test_a_quoted_answer_is_the_selected_sentences_verbatim(retriever: Retriever) -> None:
    preview = ask(retriever, None, style="quoted", preview=True)
    assert preview.request is not None
    body = json.loads(preview.request.messages[1].content)
    ids = [s["id"] for item in body["evidence"] for s in item["sentences"]]
    chosen = ids[:2]
    chat = ScriptedChatModel([quoted(*chosen)])
    result = ask(retriever, chat, style="quoted")
    shown = shown_sentences(chat)
    assert result.status == "answered"
    labels = [q.label for q in result.quotes]
    # The chosen sentences, with any shown sentence right after one that qualifies it
    # (a condition or an exception: tests/core/test_conditions.py), in reading order.
    assert [label for label in labels if label in chosen] == sorted(chosen, key=position)
    for extra in (label for label in labels if label not in chosen):
        assert extra in shown and qualifies(shown[extra])
    assert result.answer == " ".join(shown[i] for i in labels)
    # Every quote is a sentence of the source it names, as the model received it.
    by_label = {s.label: s for s in result.context.sources}
    for quote in result.quotes:
        assert quote.text in by_label[quote.source].included_text
    assert [c.label for c in result.citations] == list(
        dict.fromkeys(q.source for q in result.quotes)
    )
    assert result.support is None and result.options is not None
    assert result.options.style == "quoted"


def test_a_quoted_request_shows_a_bounded_set_of_sentences_under_sub_labels(
    retriever: Retriever,
) -> None:
    chat = ScriptedChatModel([quoted()])
    result = ask(retriever, chat, style="quoted", k=10)
    shown = shown_sentences(chat)
    # The evidence selection's candidates: one source's most similar sentences, each
    # with at most the sentences that qualify it.
    primary = [i for i in shown if not qualifies(shown[i])]
    assert 0 < len(primary) <= QUOTE_CANDIDATES
    assert len({i.split(".")[0] for i in shown}) == 1
    labels = {s.label for s in result.context.sources}
    assert all(i.split(".")[0] in labels for i in shown)
    # Best first: the first sentence shown is the one the answerability signal names.
    assert result.answerability is not None
    assert next(iter(shown)) == result.answerability.best_sentence
    schema = chat.requests[0].options.json_schema
    assert schema is not None
    answered = schema["anyOf"][0]["properties"]["sentenceIds"]
    assert answered["items"]["enum"] == list(shown) and answered["maxItems"] <= 3
    # The model declined (no threshold is set): the most relevant evidence is shown in
    # ``quotes``, never as an answer.
    assert result.status == "insufficient" and result.answer == "" and result.quotes
    assert result.citations == ()


def test_past_a_calibrated_gate_the_model_can_only_select(retriever: Retriever) -> None:
    preview = ask(retriever, None, style="quoted", preview=True, answerability_threshold=-1.0)
    assert preview.request is not None
    first = json.loads(preview.request.messages[1].content)["evidence"][0]["sentences"][0]
    chat = ScriptedChatModel([quoted(first["id"])])
    assert ask(retriever, chat, style="quoted", answerability_threshold=-1.0).quotes
    schema = chat.requests[0].options.json_schema
    assert schema is not None and "anyOf" not in schema
    assert schema["properties"]["status"] == {"type": "string", "const": "answered"}
    assert schema["properties"]["sentenceIds"]["minItems"] == 1


def test_a_quoted_answer_naming_a_sentence_not_shown_breaks_the_contract(
    retriever: Retriever,
) -> None:
    with pytest.raises(AnswerContractError) as caught:
        ask(retriever, ScriptedChatModel([quoted("S9.9")]), style="quoted")
    assert caught.value.reason == "unknown_source_id"


def test_evidence_style_never_calls_the_model(retriever: Retriever) -> None:
    chat = ScriptedChatModel([])
    result = ask(retriever, chat, style="evidence")
    assert chat.calls == 0
    assert result.status == "evidence_only" and result.answer == ""
    assert 0 < len(result.quotes) <= 3 and result.degraded is None
    assert len({q.source for q in result.quotes}) == 1  # one coherent source
    assert result.answerability is not None and result.answerability.answerable


def test_no_chat_model_means_evidence_only(retriever: Retriever) -> None:
    result = ask(retriever, None, style="generated")
    assert result.status == "evidence_only" and result.quotes


@pytest.mark.parametrize("style", ["quoted", "generated", "evidence"])
def test_below_the_answerability_threshold_no_model_is_called(
    retriever: Retriever, style: str
) -> None:
    chat = ScriptedChatModel([])
    result = ask(retriever, chat, style=style, answerability_threshold=0.999)
    assert chat.calls == 0
    # Declined by the gate: no evidence offered as quotes, the evidence kept in context.
    assert result.status == "insufficient" and result.answer == "" and not result.quotes
    assert result.answerability is not None and not result.answerability.answerable
    assert result.to_dict()["answerability"]["threshold"] == 0.999
    assert result.context.sources  # the evidence stays in the result


def test_above_the_answerability_threshold_the_model_answers(retriever: Retriever) -> None:
    signal = ask(retriever, None, style="evidence").answerability
    assert signal is not None
    chat = ScriptedChatModel([quoted()])
    result = ask(retriever, chat, style="quoted", answerability_threshold=signal.score - 0.01)
    assert chat.calls == 1 and result.answerability is not None
    assert result.answerability.answerable


@pytest.mark.parametrize(
    ("category", "degrades"),
    [
        (FailureCategory.TRANSIENT, True),
        (FailureCategory.TIMEOUT, True),
        (FailureCategory.INVALID_CONFIGURATION, False),
    ],
)
def test_an_unreachable_model_degrades_to_evidence_only(
    retriever: Retriever, category: FailureCategory, degrades: bool
) -> None:
    chat = ScriptedChatModel([Fail(category)])
    if not degrades:
        with pytest.raises(Exception, match=category.value):
            ask(retriever, chat, style="quoted")
        return
    result = ask(retriever, chat, style="quoted")
    assert result.status == "evidence_only" and result.degraded == category.value
    assert result.answer == "" and result.quotes
    assert result.to_dict()["style"] == "evidence"


def test_the_generated_style_skips_the_signal_unless_a_threshold_is_set(
    retriever: Retriever,
) -> None:
    reply = json.dumps(
        {
            "status": "answered",
            "answer": "Drain the remaining jobs only while the shutdown deadline allows it.",
            "sourceIds": ["S1"],
        }
    )
    result = ask(retriever, ScriptedChatModel([Reply(reply)]), style="generated")
    assert result.answerability is None and result.support is not None


def test_an_unknown_style_is_refused(retriever: Retriever) -> None:
    with pytest.raises(ValueError, match="answer style"):
        ask(retriever, None, style="poetic")
