from __future__ import annotations

import json

import pytest

from ragwright.core.answers import ANSWER_SCHEMA, parse_answer
from ragwright.core.assembly import Candidate, SelectedSource
from ragwright.errors import AnswerContractError

SOURCES = (
    SelectedSource(
        "S1",
        Candidate(
            "worker-shutdown",
            "shutdown/p0",
            "v1",
            "shutdown",
            "T",
            "H",
            "H\n\nDrain within the deadline.",
            0.9,
        ),
        "Drain within the deadline.",
    ),
    SelectedSource(
        "S2",
        Candidate(
            "worker-shutdown",
            "shutdown/p1",
            "v1",
            "shutdown",
            "T",
            "H",
            "H\n\nPass the token.",
            0.8,
        ),
        "Pass the token.",
    ),
)


def raw(**fields: object) -> str:
    body: dict[str, object] = {
        "status": "answered",
        "answer": "Only within the deadline.",
        "sourceIds": ["S1"],
    }
    body.update(fields)
    return json.dumps({k: v for k, v in body.items() if v is not ...})


def test_answered_resolves_citations_from_the_source_map() -> None:
    answer = parse_answer(raw(sourceIds=["S2", "S1"]), SOURCES)
    assert answer.status == "answered" and answer.text == "Only within the deadline."
    assert [(c.label, c.document_id, c.chunk_id, c.chunking_version) for c in answer.citations] == [
        ("S2", "worker-shutdown", "shutdown/p1", "v1"),
        ("S1", "worker-shutdown", "shutdown/p0", "v1"),
    ]
    assert answer.citations[1].included_text == "Drain within the deadline."


def test_insufficient_is_a_valid_outcome() -> None:
    answer = parse_answer(raw(status="insufficient", answer="", sourceIds=[]), SOURCES)
    assert (answer.status, answer.text, answer.citations) == ("insufficient", "", ())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The answer is yes.", "not_json"),
        ("[1, 2]", "not_object"),
        (raw(sourceIds=...), "missing_field"),
        (raw(confidence=0.9), "unknown_field"),
        (raw(status=1), "wrong_type"),
        (raw(answer=None), "wrong_type"),
        (raw(sourceIds="S1"), "wrong_type"),
        (raw(sourceIds=[1]), "wrong_type"),
        (raw(status="Answered"), "unknown_status"),
        (raw(answer="  "), "empty_answer"),
        (raw(sourceIds=[]), "answered_without_sources"),
        (raw(status="insufficient", answer="Maybe.", sourceIds=[]), "inconsistent_insufficient"),
        (raw(status="insufficient", answer="", sourceIds=["S1"]), "inconsistent_insufficient"),
        (raw(sourceIds=["S9"]), "unknown_source_id"),
        (raw(sourceIds=["https://example.com/doc"]), "unknown_source_id"),
        (raw(sourceIds=["S1", "S1"]), "duplicate_source_id"),
    ],
)
def test_contract_violations_are_typed(text: str, reason: str) -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_answer(text, SOURCES)
    assert caught.value.reason == reason


def test_ids_never_resolve_outside_this_requests_labels() -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_answer(raw(sourceIds=["S1"]), ())
    assert caught.value.reason == "unknown_source_id"


def test_the_schema_matches_the_contract() -> None:
    assert ANSWER_SCHEMA["required"] == ["status", "answer", "sourceIds"]
    assert ANSWER_SCHEMA["additionalProperties"] is False
    assert ANSWER_SCHEMA["properties"]["status"]["enum"] == ["answered", "insufficient"]
