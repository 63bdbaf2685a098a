"""The quoted-answer contract: sentence sub-labels, the narrowed schema, validation."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ragwright.core.answers import (
    MAX_QUOTES,
    QUOTED_SCHEMA,
    parse_quoted_answer,
    quoted_schema,
)
from ragwright.core.assembly import CUT_MARK, Candidate, SelectedSource
from ragwright.core.sentences import evidence_sentences, render_sentences
from ragwright.errors import AnswerContractError


def by_dot(text: str) -> list[str]:
    return [part.strip() + "." for part in text.split(".") if part.strip()]


def source(label: str, text: str, document: str = "doc") -> SelectedSource:
    candidate = Candidate(document, "s/p0", "v1", "s", "Title", "H", f"H\n\n{text}", 1.0)
    return SelectedSource(label, candidate, text)


SOURCES = [
    source("S1", "Drain only in time. Cancel after.\n\nLeave the rest."),
    source("S2", "Other.", "two"),
]
SENTENCES = evidence_sentences(SOURCES, by_dot)


def test_sub_labels_number_sentences_per_source_across_paragraphs() -> None:
    assert [(s.label, s.source, s.text) for s in SENTENCES] == [
        ("S1.1", "S1", "Drain only in time."),
        ("S1.2", "S1", "Cancel after."),
        ("S1.3", "S1", "Leave the rest."),
        ("S2.1", "S2", "Other."),
    ]


def test_a_cut_mark_is_no_sentence() -> None:
    (sentence,) = evidence_sentences([source("S1", "Only this." + CUT_MARK)], by_dot)
    assert sentence.text == "Only this."


def test_the_rendered_message_holds_only_the_shown_sentences_in_the_given_order() -> None:
    shown = [SENTENCES[3], SENTENCES[2], SENTENCES[0]]
    body = json.loads(render_sentences(SOURCES, shown, "Drain?"))
    assert [item["id"] for item in body["evidence"]] == ["S2", "S1"]
    assert [[s["id"] for s in item["sentences"]] for item in body["evidence"]] == [
        ["S2.1"],
        ["S1.3", "S1.1"],
    ]
    assert all(item["kind"] == "untrusted-data" for item in body["evidence"])
    assert body["question"] == "Drain?"


def test_the_answer_is_the_selection_verbatim_in_reading_order_with_its_sources() -> None:
    raw = json.dumps({"status": "answered", "sentenceIds": ["S2.1", "S1.2"]})
    answer = parse_quoted_answer(raw, SENTENCES, SOURCES)
    assert answer.text == "Cancel after. Other."
    assert [q.label for q in answer.quotes] == ["S1.2", "S2.1"]
    assert [(c.label, c.document_id) for c in answer.citations] == [("S1", "doc"), ("S2", "two")]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("nope", "not_json"),
        ("[]", "not_object"),
        ('{"status": "answered"}', "missing_field"),
        ('{"status": "answered", "sentenceIds": ["S1.1"], "answer": "x"}', "unknown_field"),
        ('{"status": "answered", "sentenceIds": "S1.1"}', "wrong_type"),
        ('{"status": "maybe", "sentenceIds": []}', "unknown_status"),
        ('{"status": "insufficient", "sentenceIds": ["S1.1"]}', "inconsistent_insufficient"),
        ('{"status": "answered", "sentenceIds": []}', "answered_without_sources"),
        ('{"status": "answered", "sentenceIds": ["S1.9"]}', "unknown_source_id"),
        # Partly forged: shown ids first, an id never shown last (never a KeyError).
        ('{"status": "answered", "sentenceIds": ["S1.1", "S2.1", "S7.1"]}', "unknown_source_id"),
        ('{"status": "answered", "sentenceIds": ["S1.1", "S1"]}', "unknown_source_id"),
        (
            json.dumps({"status": "answered", "sentenceIds": ["S1.1", "S1.2", "S1.3", "S2.1"]}),
            "too_many_sentences",
        ),
    ],
)
def test_every_violation_has_its_reason(raw: str, reason: str) -> None:
    with pytest.raises(AnswerContractError) as caught:
        parse_quoted_answer(raw, SENTENCES, SOURCES)
    assert caught.value.reason == reason


def test_a_sentence_named_twice_is_quoted_once() -> None:
    raw = json.dumps({"status": "answered", "sentenceIds": ["S1.1", "S1.1", "S1.2", "S1.3"]})
    answer = parse_quoted_answer(raw, SENTENCES, SOURCES)
    assert [q.label for q in answer.quotes] == ["S1.1", "S1.2", "S1.3"]
    assert answer.text == "Drain only in time. Cancel after. Leave the rest."


def test_insufficient_is_empty() -> None:
    answer = parse_quoted_answer(
        '{"status": "insufficient", "sentenceIds": []}', SENTENCES, SOURCES
    )
    assert (answer.status, answer.text, answer.citations, answer.quotes) == (
        "insufficient",
        "",
        (),
        (),
    )


@pytest.mark.parametrize("style", ["variants", "object"])
def test_the_schema_admits_only_shown_ids_and_every_valid_answer(style: str) -> None:
    schema = quoted_schema(["S1.1", "S1.2"], style=style)  # type: ignore[arg-type]
    jsonschema.validate({"status": "answered", "sentenceIds": ["S1.2"]}, schema)
    jsonschema.validate({"status": "insufficient", "sentenceIds": []}, schema)
    jsonschema.validate({"status": "answered", "sentenceIds": ["S1.2"]}, QUOTED_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": "answered", "sentenceIds": ["S2.1"]}, schema)


def test_the_variants_schema_bounds_the_selection() -> None:
    ids = [f"S1.{n}" for n in range(1, 8)]
    schema = quoted_schema(ids)
    too_many = {"status": "answered", "sentenceIds": ids[: MAX_QUOTES + 1]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(too_many, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": "answered", "sentenceIds": []}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": "insufficient", "sentenceIds": ["S1.1"]}, schema)
