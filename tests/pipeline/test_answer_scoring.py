"""Scoring answer outcomes against cases, and a run's summary, with hand-computed values."""

from __future__ import annotations

from typing import Any

import pytest

from ragwright.pipeline.answer_scoring import (
    error_outcome,
    percentile,
    score_answer,
    summarise_answers,
    support_verdict,
)
from ragwright.types import EvalCase, RelevantKey

VERSION = "v1"
CHUNK_CASE = EvalCase(
    "q", "c", "Drain?", (RelevantKey("worker", 2, "queue/p1"),), reference_answers=("drain it now",)
)
DOCUMENT_CASE = EvalCase("d", "c", "Drain?", (RelevantKey("worker", 2),))
UNSUPPORTED = EvalCase("u", "unsupported", "Reset 2FA?", unsupported=True)
SUPPORTED = {"supported": True, "flagged": False}


def outcome(
    status: str = "answered",
    answer: str = "drain it",
    cited: tuple[tuple[str, str, str], ...] = (("S1", "worker", "queue/p1"),),
    sources: tuple[str, ...] = ("S1", "S2"),
    support: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "style": "quoted",
        "answer": answer,
        "withheld_answer": None,
        "citations": [
            {
                "label": label,
                "document_id": document,
                "chunk_id": chunk,
                "chunking_version": VERSION,
                "revision": "r",
            }
            for label, document, chunk in cited
        ],
        "sources": [{"label": label} for label in sources],
        "support": support,
    }


def score(case: EvalCase, result: dict[str, Any], latency: float = 10.0) -> dict[str, Any]:
    return score_answer(case, result, latency_ms=latency, chunking_version=VERSION)


def test_an_answered_case_is_scored_on_its_text() -> None:
    row = score(CHUNK_CASE, outcome(support=SUPPORTED), latency=12.345)
    # [drain it] vs [drain it now]: F1 = 2 * 1 * 2/3 / (5/3) = 0.8; LCS 2 -> 0.8
    assert row == {
        "style": "quoted",
        "status": "answered",
        "text": "drain it",
        "withheld": None,
        "citations": [{"label": "S1", "document_id": "worker", "chunk_id": "queue/p1"}],
        "references": ["drain it now"],
        "token_f1": pytest.approx(0.8),
        "rouge_l": pytest.approx(0.8),
        "gold_cited": True,
        "latency_ms": 12.3,
        "support": "supported",
        "invalid_citations": 0,
        "quotes": [],
        "answerability": None,
        "sentences": {"selected": 0, "precision": None, "recall": None},
    }


def test_an_unanswered_case_has_no_text_scores() -> None:
    row = score(CHUNK_CASE, outcome(status="unsupported", answer=""))
    assert (row["token_f1"], row["rouge_l"]) == (None, None)


def test_gold_cited_matches_chunk_or_document_keys_and_is_null_without_labels() -> None:
    other_chunk = outcome(cited=(("S1", "worker", "queue/p0"),))
    assert score(CHUNK_CASE, other_chunk)["gold_cited"] is False
    assert score(DOCUMENT_CASE, other_chunk)["gold_cited"] is True
    assert score(DOCUMENT_CASE, outcome(cited=(("S1", "refunds", "x/p0"),)))["gold_cited"] is False
    assert score(UNSUPPORTED, outcome())["gold_cited"] is None


def test_a_citation_outside_the_sources_is_counted_invalid() -> None:
    cited = (("S1", "worker", "queue/p1"), ("S9", "worker", "queue/p1"))
    assert score(CHUNK_CASE, outcome(cited=cited))["invalid_citations"] == 1


@pytest.mark.parametrize(
    ("support", "verdict"),
    [
        (None, "not_checked"),
        ({"supported": True, "flagged": False}, "supported"),
        ({"supported": True, "flagged": True}, "flagged"),
        ({"supported": False, "flagged": True}, "unsupported"),
    ],
)
def test_support_verdicts(support: dict[str, Any] | None, verdict: str) -> None:
    assert support_verdict(support) == verdict


def test_an_error_outcome_keeps_its_reason() -> None:
    row = score(CHUNK_CASE, error_outcome("deadline_exhausted: slow", "quoted"))
    assert (row["status"], row["error"], row["citations"]) == (
        "error",
        "deadline_exhausted: slow",
        [],
    )


def test_summary_figures() -> None:
    no_references = EvalCase("n", "c", "Drain?", (RelevantKey("worker", 2, "queue/p1"),))
    second = EvalCase(
        "r", "c", "Drain?", (RelevantKey("worker", 2, "queue/p1"),), reference_answers=("x",)
    )
    cases = [CHUNK_CASE, second, no_references, UNSUPPORTED, UNSUPPORTED]
    rows = [
        score(CHUNK_CASE, outcome(support=SUPPORTED), 10.0),  # F1 0.8, gold cited
        score(second, outcome(status="insufficient", answer="", cited=()), 20.0),
        score(no_references, outcome(cited=(("S3", "worker", "queue/p0"),)), 30.0),
        score(UNSUPPORTED, outcome(), 40.0),  # answered: not declined
        score(UNSUPPORTED, outcome(status="no_eligible_evidence", cited=()), 50.0),
    ]
    summary = summarise_answers(cases, rows, style=None)
    assert summary == {
        "style": None,
        "cases": 5,
        "answerable": {
            "cases": 3,
            "answered": 2,
            "answered_rate": pytest.approx(2 / 3),
            "gold_cited": 1,
            "gold_cited_rate": 0.5,
            "with_references": 2,
            "token_f1": {"answered": pytest.approx(0.8), "all": pytest.approx(0.4)},
            "rouge_l": {"answered": pytest.approx(0.8), "all": pytest.approx(0.4)},
            "sentences": {"scored": 0, "precision": None, "recall": None},
        },
        "unsupported": {"cases": 2, "declined": 1, "declined_rate": 0.5},
        "invalid_citations": 1,  # S3 is not among the sources
        "support": {"supported": 1, "flagged": 0, "unsupported": 0, "not_checked": 4},
        "statuses": {"answered": 3, "insufficient": 1, "no_eligible_evidence": 1},
        "latency_ms": {"p50": 30.0, "p95": 48.0},
    }


def test_quotes_and_answerability_are_recorded_and_selected_sentences_scored() -> None:
    case = EvalCase(
        "s",
        "c",
        "Drain?",
        (RelevantKey("worker", 2, "queue/p1"),),
        reference_sentences=(("Drain the queue first.", "Then stop the worker."),),
    )
    evidence = {
        **outcome(status="evidence_only", answer=""),
        "style": "evidence",
        "quotes": [
            {"id": "S1.1", "source": "S1", "text": "Drain the queue first."},
            {"id": "S1.4", "source": "S1", "text": "Refunds take ten days."},
            {"id": "S2.1", "source": "S2", "text": "Stop the worker."},
        ],
        "answerability": {"score": 0.61, "best_sentence": "x", "threshold": None},
    }
    row = score(case, evidence)
    assert row["quotes"] == ["S1.1", "S1.4", "S2.1"] and row["answerability"] == 0.61
    # "Drain the queue first." matches a reference sentence; "Stop the worker." shares
    # 2 of the 3 tokens of "Then stop the worker." (Jaccard 0.67 < 0.8): no match.
    # Precision 1/3, recall 1/2.
    assert row["sentences"] == {
        "selected": 3,
        "precision": pytest.approx(1 / 3),
        "recall": pytest.approx(1 / 2),
    }
    generated = score(case, {**evidence, "style": "generated"})
    assert generated["sentences"] is None and generated["quotes"] == ["S1.1", "S1.4", "S2.1"]
    declined = score(UNSUPPORTED, evidence)
    assert declined["sentences"] == {"selected": 3, "precision": None, "recall": None}
    nothing = score(case, {**evidence, "quotes": []})
    summary = summarise_answers([case, case, UNSUPPORTED], [row, nothing, declined], style=None)
    # The selection that selected nothing and the unsupported case are not averaged.
    assert summary["answerable"]["sentences"] == {
        "scored": 1,
        "precision": pytest.approx(1 / 3),
        "recall": pytest.approx(1 / 2),
    }


def test_an_empty_run_summarises_to_nulls() -> None:
    summary = summarise_answers([], [], style="evidence")
    assert summary["answerable"]["answered_rate"] is None
    assert summary["answerable"]["token_f1"] == {"answered": None, "all": None}
    assert summary["latency_ms"] == {"p50": None, "p95": None}


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([10.0], 95, 10.0), ([10.0, 20.0], 50, 15.0), ([1.0, 2.0, 3.0, 4.0, 5.0], 95, 4.8)],
)
def test_percentile_interpolates_between_closest_ranks(
    values: list[float], q: float, expected: float
) -> None:
    assert percentile(values, q) == expected
