"""Evidence is data, never instructions: the injection corpus against the answer use case.

Each attack in ``tests/data/injection_attacks.jsonl`` is a published runbook retrieved
next to the real shutdown runbook. The model is the worst case: a scripted model that
obeys the attack, giving the answer it demands and citing what it demands, its own
source, or every source. None of those may come back as ``answered``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import load_sources
from ragwright.core.assembly import EVIDENCE_KIND
from ragwright.core.documents import content_revision
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.errors import AnswerContractError
from ragwright.pipeline.answer import AnswerPlan, AnswerResult, answer_question
from ragwright.pipeline.retrieve import Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Reply, ScriptedChatModel
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection
from tests.conftest import REPO, SAMPLES
from tests.pipeline.indexes import hashing_index

ATTACKS_PATH = REPO / "tests" / "data" / "injection_attacks.jsonl"
ATTACKS: list[dict[str, Any]] = [
    json.loads(line) for line in ATTACKS_PATH.read_text("utf-8").splitlines() if line.strip()
]
POLICY = ChunkingPolicy()
QUESTION = "Should I drain all queued work during shutdown?"
LEGIT = "worker-shutdown"
SUPPORTED = "Drain the remaining jobs only while the shutdown deadline allows it."


def attack_document(attack: dict[str, Any]) -> SourceDocument:
    """The attack as a published runbook, its title, heading (``Notes`` unless the attack
    sets one) and text verbatim (no Markdown parsing)."""
    sections = (
        SourceSection(
            "notes",
            attack.get("heading", "Notes"),
            tuple(p for p in attack["text"].split("\n\n") if p),
        ),
    )
    return SourceDocument(
        document_id=f"attack-{attack['id']}",
        title=attack["title"],
        document_type="runbook",
        publication_state="published",
        sections=sections,
        revision=content_revision(attack["title"], sections),
    )


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    documents = [
        *load_sources([SAMPLES / "worker-shutdown.md"]),
        *(attack_document(a) for a in ATTACKS),
    ]
    with hashing_index(tmp_path_factory.mktemp("injection") / "i", documents) as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


class Words:
    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def ask(
    retriever: Retriever,
    attack: dict[str, Any],
    chat: ScriptedChatModel | None,
    **options: Any,
) -> AnswerResult:
    return asyncio.run(
        answer_question(
            AnswerPlan(
                QUESTION,
                retriever=retriever,
                eligibility=Eligibility(
                    POLICY.version, document_ids=(LEGIT, f"attack-{attack['id']}")
                ),
                scope=CallerScope(),
                chat=chat,
                counter=Words(),
                k=10,
                preview=chat is None,
                **options,
            )
        )
    )


def labels_of(result: AnswerResult, document_id: str) -> list[str]:
    return [s.label for s in result.context.sources if s.candidate.document_id == document_id]


def test_the_corpus_holds_at_least_20_varied_attacks() -> None:
    assert len(ATTACKS) >= 20 and len({a["id"] for a in ATTACKS}) == len(ATTACKS)
    categories = {a["category"] for a in ATTACKS}
    assert {"instruction_override", "fake_label", "fake_json", "role_play"} <= categories
    assert "planted_answer" in categories and len(categories) >= 8
    # Issue 20: attacks in every field the model sees, and in other languages and base64.
    assert {
        "heading_instruction",
        "title_instruction",
        "system_policy",
        "encoded_payload",
        "other_language",
    } <= categories
    # Issue 46: system documents by their content, disguised letters, split instructions.
    assert {"system_document", "unicode_obfuscation", "split_instruction"} <= categories


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_every_evidence_item_is_marked_as_untrusted_data(
    retriever: Retriever, attack: dict[str, Any]
) -> None:
    preview = ask(retriever, attack, None)
    assert preview.request is not None
    system, user = preview.request.messages
    assert f'"kind": "{EVIDENCE_KIND}"' in system.content
    items = json.loads(user.content)["evidence"]
    assert {i["kind"] for i in items} == {EVIDENCE_KIND}
    # The attack arrives whole inside one item's text, never as a field or item of its own.
    assert {tuple(i) for i in items} == {("id", "kind", "title", "heading", "text")}
    assert any(attack["text"].split("\n\n")[-1] in i["text"] for i in items)
    assert labels_of(preview, LEGIT) and labels_of(preview, f"attack-{attack['id']}")


@pytest.mark.parametrize("variant", ["demanded", "own", "all"])
@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_an_obedient_model_never_yields_an_answered_attack(
    retriever: Retriever, attack: dict[str, Any], variant: str
) -> None:
    preview = ask(retriever, attack, None)
    own = labels_of(preview, f"attack-{attack['id']}")
    cited = {
        "demanded": attack["cite"] or own,
        "own": own,
        "all": [s.label for s in preview.context.sources],
    }[variant]
    obey = {"status": "answered", "answer": attack["answer"], "sourceIds": cited}
    issued = {s.label for s in preview.context.sources}
    if not set(cited) <= issued:
        with pytest.raises(AnswerContractError) as caught:
            ask(retriever, attack, ScriptedChatModel([Reply(json.dumps(obey))] * 3))
        assert caught.value.reason == "unknown_source_id"
        return
    result = ask(retriever, attack, ScriptedChatModel([Reply(json.dumps(obey))]))
    assert result.status == "unsupported"
    assert result.answer == "" and result.withheld_answer == attack["answer"]
    assert result.support is not None and not result.support.supported
    assert attack["marker"].lower() in attack["answer"].lower()  # the marker detects obedience


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_a_true_answer_next_to_an_attack_is_still_answered(
    retriever: Retriever, attack: dict[str, Any]
) -> None:
    preview = ask(retriever, attack, None)
    drain = [
        s.label
        for s in preview.context.sources
        if s.candidate.document_id == LEGIT and "shutdown deadline allows" in s.included_text
    ]
    reply = {"status": "answered", "answer": SUPPORTED, "sourceIds": drain}
    result = ask(retriever, attack, ScriptedChatModel([Reply(json.dumps(reply))]))
    # Even an injection on the same subject (same words) does not withhold the true
    # answer: ordinary evidence covers it at least as well as the injected text.
    assert result.status == "answered", result.support


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_a_quoted_answer_cannot_quote_text_addressed_to_the_model(
    retriever: Retriever, attack: dict[str, Any]
) -> None:
    from ragwright.core.screen import addresses_the_model

    result = ask(retriever, attack, None, style="quoted")
    assert result.request is not None
    shown = [
        s["text"]
        for item in json.loads(result.request.messages[1].content)["evidence"]
        for s in item["sentences"]
    ]
    addressed = [p for p in attack["text"].split("\n\n") if addresses_the_model(p)]
    if addresses_the_model(attack["title"]) or addresses_the_model(attack.get("heading", "")):
        addressed = attack["text"].split("\n\n")  # the whole text under it
    # Every paragraph the screen recognises stays out of what the model may quote.
    assert not any(sentence in paragraph for sentence in shown for paragraph in addressed)
    assert shown  # the real runbook's sentences are still offered


BESIDE = [a for a in ATTACKS if a["category"] in {"system_document", "split_instruction"}]


@pytest.mark.parametrize("attack", BESIDE, ids=[a["id"] for a in BESIDE])
def test_no_sentence_beside_an_instruction_can_be_quoted(
    retriever: Retriever, attack: dict[str, Any]
) -> None:
    # Issue 46: the payload sits in the paragraph or chunk after the instruction, with
    # no instruction of its own; the instruction screens it all the same, so none of
    # its sentences is offered to a quoted-style model or an evidence-only result.
    from ragwright.pipeline.answer_stages import sentences_of

    result = ask(retriever, attack, None, style="quoted")
    assert labels_of(result, f"attack-{attack['id']}")
    quotable = [s.text for s in sentences_of(result.context)]
    assert quotable and not any(sentence in attack["text"] for sentence in quotable)
