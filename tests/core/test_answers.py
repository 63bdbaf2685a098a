from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragwright.core.answers import ANSWER_SCHEMA, answer_schema, parse_answer
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


@pytest.mark.parametrize(
    "text",
    ["S1", " s2 ", "S1, S2", "[S1]", "[S1][S2]", "(S1; S2).", "S1 and S2", "Sources: S1"],
)
def test_an_answer_that_is_only_source_labels_is_rejected(text: str) -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_answer(raw(answer=text, sourceIds=["S1"]), SOURCES)
    assert caught.value.reason == "answer_only_source_labels"


@pytest.mark.parametrize(
    "text", ["insufficient", "Insufficient.", " INSUFFICIENT! ", '"insufficient"', "[insufficient]"]
)
def test_answered_with_the_text_insufficient_is_rejected(text: str) -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_answer(raw(answer=text, sourceIds=["S1"]), SOURCES)
    assert caught.value.reason == "answered_as_insufficient"


@pytest.mark.parametrize(
    "text",
    [
        "Drain the queue first [S1].",
        "S1 says to drain within the deadline.",
        "Insufficient drain time causes lost jobs.",
    ],
)
def test_answers_that_mention_labels_or_the_word_insufficient_still_pass(text: str) -> None:
    assert parse_answer(raw(answer=text, sourceIds=["S1"]), SOURCES).text == text


def test_ids_never_resolve_outside_this_requests_labels() -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_answer(raw(sourceIds=["S1"]), ())
    assert caught.value.reason == "unknown_source_id"


def test_the_schema_matches_the_contract() -> None:
    assert ANSWER_SCHEMA["required"] == ["status", "answer", "sourceIds"]
    assert ANSWER_SCHEMA["additionalProperties"] is False
    assert ANSWER_SCHEMA["properties"]["status"]["enum"] == ["answered", "insufficient"]


LABELS = [s.label for s in SOURCES]
outputs = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["answered", "insufficient", "Answered", ""]),
        "answer": st.sampled_from(["", " ", "Drain only within the deadline.", "x" * 40]),
        "sourceIds": st.lists(st.sampled_from(["S1", "S2", "S3", "s1"]), max_size=3),
    }
)


def accepted_by_code(data: dict[str, object]) -> bool:
    try:
        parse_answer(json.dumps(data), SOURCES)
    except AnswerContractError:
        return False
    return True


@given(outputs)
def test_the_variants_schema_admits_what_the_code_accepts(data: dict[str, object]) -> None:
    """A grammar built from the variants schema can only produce contract-valid answers,
    except duplicated ids (grammar engines ignore uniqueItems) and whitespace-only text
    (no portable way to say "not blank"): the code still checks those."""
    schema = answer_schema(LABELS, style="variants", max_answer_chars=40)
    valid = jsonschema.Draft202012Validator(schema).is_valid(data)
    ids, text = data["sourceIds"], data["answer"]
    assert isinstance(ids, list) and isinstance(text, str)
    if len(set(ids)) == len(ids) and (text.strip() or not text):
        assert valid == accepted_by_code(data)
    elif valid:
        assert not accepted_by_code(data)


@given(outputs)
def test_the_object_schema_restricts_ids_to_the_issued_labels(data: dict[str, object]) -> None:
    schema = answer_schema(LABELS, style="object")
    valid = jsonschema.Draft202012Validator(schema).is_valid(data)
    ids = data["sourceIds"]
    assert isinstance(ids, list)
    if any(i not in LABELS for i in ids) or data["status"] not in ("answered", "insufficient"):
        assert not valid
    if accepted_by_code(data):
        assert valid


def test_object_schema_fits_hosted_strict_modes() -> None:
    schema = answer_schema(LABELS, style="object")
    assert schema["type"] == "object" and "anyOf" not in schema
    assert schema["required"] == list(schema["properties"])
    assert schema["additionalProperties"] is False
    portable = {"type", "enum", "items", "properties", "required", "additionalProperties"}

    def keywords(node: object) -> set[str]:
        if not isinstance(node, dict):
            return set()
        found = set(node) - {"status", "answer", "sourceIds"}
        for value in node.values():
            found |= keywords(value)
        return found

    assert keywords(schema) <= portable


def test_variant_answers_are_capped_in_length() -> None:
    schema = answer_schema(LABELS, style="variants", max_answer_chars=10)
    long = {"status": "answered", "answer": "x" * 11, "sourceIds": ["S1"]}
    assert not jsonschema.Draft202012Validator(schema).is_valid(long)


def test_a_schema_needs_labels_and_a_known_style() -> None:
    with pytest.raises(ValueError, match="at least one source label"):
        answer_schema([])
    with pytest.raises(ValueError, match="unknown schema style"):
        answer_schema(LABELS, style="loose")  # type: ignore[arg-type]
