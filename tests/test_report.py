"""The HTML report of a run, rendered from synthetic run records (the shape
``RunRecord.to_json()`` persists, plus the ``answer`` objects of answer runs)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from ragwright.report import NO_TEXT, render_report

SCRIPT = "<script>alert('evidence')</script>"


def metrics(p: float, r: float, rr: float, ndcg: float) -> dict[str, float]:
    return {"precision": p, "recall": r, "reciprocal_rank": rr, "ndcg": ndcg}


def case(
    case_id: str, ndcg: tuple[float, float], *, text: str | None = None, **extra: Any
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "key": ["worker-shutdown", "sv1", "drain/p0"],
        "score": 0.03279,
        "scores": {"cosine": 0.6123, "bm25": 7.25, "rrf": 0.03279},
        "grade": 2,
    }
    if text is not None:
        item["text"] = text
    other = {"key": ["disk-full", "sv1", "logs/p2"], "score": 0.0161, "scores": {}, "grade": 0}
    if text is not None:
        other["text"] = "Rotate the logs."
    return {
        "id": case_id,
        "category": "procedure",
        "question": f"Question {case_id}?",
        "level": "chunk",
        "relevant": 1,
        "ranking": [item, other],
        "metrics": {"1": metrics(1, 0.5, 1, ndcg[0]), "3": metrics(0.5, 1, 1, ndcg[1])},
        **extra,
    }


def synthetic_run(**overrides: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "execution_id": "20261201T000000Z-aaaaaa",
        "created_at": "2026-12-01T00:00:00+00:00",
        "config": {
            "dataset": "cases.jsonl",
            "mode": "hybrid",
            "score_kind": "rrf",
            "ks": [1, 3],
            "rrf_weights": [1.0, 0.5],
            "thresholds": {"dense": None, "sparse": 3.5, "fusion": None, "rerank": None},
            "eligibility": {
                "chunking_version": "sv1",
                "document_types": ["runbook", "note"],
                "publication_states": ["published"],
                "document_ids": [],
            },
            "tenant": None,
            "with_rerank": False,
        },
        "summary": {"cases": 2, "K": {"1": metrics(1, 0.5, 1, 0.8), "3": metrics(0.5, 1, 1, 0.9)}},
        "categories": {
            "procedure": {
                "cases": 2,
                "K": {"1": metrics(1, 0.5, 1, 0.8), "3": metrics(0.5, 1, 1, 0.9)},
            }
        },
        "unsupported": {
            "cases": 1,
            "accepted": 0,
            "false_acceptance_rate": 0.0,
            "results": [
                {
                    "id": "u1",
                    "question": "Reset 2FA?",
                    "results": 0,
                    "accepted": False,
                    "top_score": None,
                }
            ],
        },
        "cases": [case("a", (1.0, 0.9)), case("b", (0.6, 0.9))],
    }
    run.update(overrides)
    return run


def section(html: str, title: str) -> str:
    """The HTML between the ``<h2>`` starting with ``title`` and the next ``<h2>``."""
    start = html.index(f"<h2>{title}")
    end = html.find("<h2>", start + 4)
    return html[start : end if end != -1 else None]


def answer(status: str, **changes: Any) -> dict[str, Any]:
    return {
        "style": "extractive",
        "status": status,
        "text": "Drain the queue first [S1].",
        "withheld": None,
        "citations": [{"label": "S1", "document_id": "worker-shutdown", "chunk_id": "drain/p0"}],
        "references": ["Drain queued work before stopping."],
        "token_f1": 0.5,
        "rouge_l": 0.4,
        "gold_cited": True,
        "latency_ms": 812.4,
        **changes,
    }


# --- evidence ---------------------------------------------------------------------


def test_each_case_shows_its_evidence_in_a_collapsible_block_with_scores_and_their_kind() -> None:
    html = render_report(synthetic_run())
    evidence = section(html, "Retrieved evidence")
    assert evidence.count("<details id='case-") == 2
    assert "Score (RRF fusion)" in evidence
    assert "dense cosine 0.6123<br>BM25 7.25<br>RRF fusion 0.03279" in evidence
    assert "<code>worker-shutdown</code>" in evidence and "<code>drain/p0</code>" in evidence
    assert "scores are <b>RRF fusion</b>" in html


@pytest.mark.parametrize(
    ("kind", "label"),
    [("cosine", "dense cosine"), ("bm25", "BM25"), ("rrf", "RRF fusion"), ("rerank", "rerank")],
)
def test_the_score_column_names_the_runs_score_kind(kind: str, label: str) -> None:
    run = synthetic_run()
    run["config"]["score_kind"] = kind
    assert f"Score ({label})" in render_report(run)


def test_a_run_without_a_recorded_score_kind_says_so() -> None:
    run = synthetic_run()
    del run["config"]["score_kind"]
    assert "Score (kind not recorded)" in render_report(run)


def test_document_level_evidence_names_the_chunk_that_placed_the_document() -> None:
    run = synthetic_run()
    run["cases"][0]["ranking"] = [
        {"key": ["doc-7"], "score": 0.5, "scores": {"cosine": 0.5}, "grade": 1, "chunk_id": "s/p3"}
    ]
    evidence = section(render_report(run), "Retrieved evidence")
    assert "<code>doc-7</code>" in evidence and "<code>s/p3</code>" in evidence


def test_evidence_text_is_shown_when_recorded_and_escaped() -> None:
    run = synthetic_run(cases=[case("a", (1.0, 0.9), text=f"Stop the worker. {SCRIPT}")])
    html = render_report(run)
    evidence = section(html, "Retrieved evidence")
    assert "Text shown" in evidence and "Rotate the logs." in evidence
    assert "&lt;script&gt;alert(&#x27;evidence&#x27;)&lt;/script&gt;" in evidence
    assert "<script" not in html
    assert NO_TEXT not in html


def test_evidence_without_text_says_how_to_record_it() -> None:
    evidence = section(render_report(synthetic_run()), "Retrieved evidence")
    assert evidence.count(NO_TEXT) == 2 and "Text shown" not in evidence


def test_questions_and_ids_from_the_run_are_escaped() -> None:
    run = synthetic_run()
    run["cases"][0]["id"] = "<b>id</b>"
    run["cases"][0]["question"] = SCRIPT
    run["cases"][0]["ranking"][0]["key"][0] = "<img src=x>"
    html = render_report(run)
    assert "<script" not in html and "<img" not in html and "<b>id</b>" not in html


# --- answers ----------------------------------------------------------------------


def test_an_answered_case_shows_answer_citations_reference_and_scores() -> None:
    run = synthetic_run(cases=[case("a", (1.0, 0.9), answer=answer("answered"))])
    details = section(render_report(run), "Retrieved evidence")
    assert "<span class='status ok'>answered</span>" in details
    assert "<blockquote>Drain the queue first [S1].</blockquote>" in details
    assert "<code>S1</code> worker-shutdown / drain/p0" in details
    assert "Drain queued work before stopping." in details
    assert "<dt>token F1</dt><dd>0.500</dd>" in details
    assert "<dt>gold evidence cited</dt><dd>yes</dd>" in details
    assert "not an answer" not in details


def test_a_citation_of_a_paged_source_shows_its_file_and_pages() -> None:
    cited = [
        {
            "label": "S1",
            "document_id": "runbooks/payment-retries.pdf",
            "chunk_id": "manual-retry/p0",
            "location": "payment-retries.pdf p. 2",
        }
    ]
    run = synthetic_run(cases=[case("a", (1.0, 0.9), answer=answer("answered", citations=cited))])
    details = section(render_report(run), "Retrieved evidence")
    assert (
        "<code>S1</code> runbooks/payment-retries.pdf / manual-retry/p0 "
        "<span class='muted'>(payment-retries.pdf p. 2)</span>"
    ) in details


@pytest.mark.parametrize(
    "status", ["insufficient", "unsupported", "evidence_only", "no_eligible_evidence"]
)
def test_a_reply_that_is_not_an_answer_is_labelled_so(status: str) -> None:
    reply = answer(status, text="", withheld="The model said: reboot.", citations=[])
    reply.update(token_f1=None, rouge_l=None, gold_cited=None)
    run = synthetic_run(cases=[case("a", (1.0, 0.9), answer=reply)])
    details = section(render_report(run), "Retrieved evidence")
    assert f"<span class='status miss'>not an answer: {status}</span>" in details
    assert "<h4>Reply " in details and "<h4>Answer " not in details
    assert "Withheld text (not shown to the user as an answer)" in details
    assert "The model said: reboot." in details
    assert "<dt>token F1</dt><dd>–</dd>" in details


def test_answer_text_is_escaped() -> None:
    reply = answer("answered", text=SCRIPT, references=[SCRIPT], withheld=SCRIPT)
    html = render_report(synthetic_run(cases=[case("a", (1.0, 0.9), answer=reply)]))
    assert "<script" not in html and html.count("&lt;script&gt;") == 3


def test_the_answers_summary_is_a_table_when_present() -> None:
    summary = {"answered": 7, "insufficient": 2, "token_f1": 0.41234, "gold_cited_rate": 0.75}
    html = render_report(synthetic_run(answers=summary))
    table = section(html, "Answers")
    assert "<td>answered</td><td class='num'>7</td>" in table
    assert "<td>token_f1</td><td class='num'>0.412</td>" in table
    assert "<h2>Answers</h2>" not in render_report(synthetic_run())


def test_nested_answer_figures_are_rows_named_by_their_path() -> None:
    summary = {"answerable": {"token_f1": {"answered": 0.5, "all": 0.25}}, "cases": 3}
    table = section(render_report(synthetic_run(answers=summary)), "Answers")
    assert "<td>answerable.token_f1.answered</td><td class='num'>0.500</td>" in table
    assert "<td>answerable.token_f1.all</td><td class='num'>0.250</td>" in table
    assert "<td>cases</td><td class='num'>3</td>" in table


def test_answers_to_unsupported_questions_are_shown() -> None:
    run = synthetic_run()
    run["unsupported"]["results"][0]["answer"] = answer("no_eligible_evidence", text="")
    unsupported = section(render_report(run), "Unsupported questions")
    assert "not an answer: no_eligible_evidence" in unsupported


# --- configuration ----------------------------------------------------------------


def test_the_summary_comes_first_and_the_configuration_is_folded_at_the_end() -> None:
    html = render_report(synthetic_run())
    headings = re.findall(r"<h2>([^<]+)", html)
    assert headings[0] == "Summary"
    assert headings[-1] == "Configuration"
    folded = html[html.rindex("<details") :]
    assert folded.startswith('<details id="configuration"><summary><h2>Configuration</h2>')


def test_configuration_renders_values_not_python_reprs() -> None:
    config = section(render_report(synthetic_run()), "Configuration")
    text = re.sub(r"<[^>]+>", " ", config)
    assert not {"[", "{", "'"} & set(text), text
    assert "<dt>document_types</dt><dd><code>runbook</code>, <code>note</code></dd>" in config
    assert "<dt>tenant</dt><dd>none</dd>" in config
    assert "<dt>with_rerank</dt><dd>no</dd>" in config
    assert "<dt>document_ids</dt><dd>empty</dd>" in config
    assert "<dt>thresholds</dt><dd><dl><dt>dense</dt><dd>none</dd>" in config


# --- plots ------------------------------------------------------------------------


def test_precision_recall_and_ndcg_are_plotted_against_k() -> None:
    html = render_report(synthetic_run())
    for label, points in (("Precision", ("1.00", "0.50")), ("Recall", ("0.50", "1.00"))):
        svg = re.search(rf'<svg role="img" aria-label="{label} at K".*?</svg>', html, re.S)
        assert svg is not None
        assert all(f">{p}</text>" in svg.group(0) for p in points)
    assert 'aria-label="nDCG at K"' in html and "<title>nDCG@3 = 0.900</title>" in html


# --- comparison -------------------------------------------------------------------


def earlier_run() -> dict[str, Any]:
    run = synthetic_run(execution_id="20261130T000000Z-bbbbbb")
    run["config"]["mode"] = "dense"
    run["summary"]["K"]["1"] = metrics(1, 0.25, 1, 0.7)
    run["cases"] = [case("a", (0.5, 0.9)), case("b", (0.8, 0.9))]
    run["cases"][1]["metrics"]["3"]["recall"] = 0.5
    return run


def test_a_comparison_shows_summary_deltas_at_each_k_and_per_case_changes() -> None:
    html = render_report(synthetic_run(), earlier=earlier_run())
    compared = section(html, "Compared with")
    assert "<code>20261130T000000Z-bbbbbb</code>" in compared
    assert "mode differs: dense → hybrid" in compared
    # Recall@1 0.25 -> 0.50 and nDCG@1 0.70 -> 0.80; K=3 unchanged.
    assert (
        "<td class='num'>0.500</td><td class='num'>0.250</td><td class='num ok'>+0.250</td>"
        in compared
    )
    assert "<td class='num ok'>+0.100</td>" in compared
    assert "<td class='num muted'>+0.000</td>" in compared
    # At K=3: a is unchanged; b's recall rose 0.5 -> 1.0.
    assert "Cases that changed at K=3" in compared
    assert "0 regressed, 1 improved, 0 mixed" in compared
    assert "<td>b</td><td>Question b?</td><td class='ok'>improved</td>" in compared
    assert "0.500 → 1.000" in compared and "<td>a</td>" not in compared


def test_a_comparison_lists_regressions_first() -> None:
    later = synthetic_run()
    later["config"]["ks"] = [1]
    later["summary"]["K"] = {"1": later["summary"]["K"]["1"]}
    compared = section(render_report(later, earlier=earlier_run()), "Compared with")
    # At K=1: a improved (nDCG 0.5 -> 1.0), b regressed (0.8 -> 0.6).
    assert "1 regressed, 1 improved, 0 mixed" in compared
    regressed = compared.index("<td>b</td><td>Question b?</td><td class='miss'>regressed</td>")
    improved = compared.index("<td>a</td><td>Question a?</td><td class='ok'>improved</td>")
    assert regressed < improved
    assert "<td class='num miss'>0.800 → 0.600</td>" in compared


def test_the_earlier_run_is_drawn_dashed_in_the_plots() -> None:
    assert "stroke-dasharray" not in render_report(synthetic_run())
    html = render_report(synthetic_run(), earlier=earlier_run())
    assert html.count("stroke-dasharray") == 3


def test_runs_without_a_shared_cutoff_say_there_is_nothing_to_compare() -> None:
    earlier = copy.deepcopy(earlier_run())
    earlier["config"]["ks"] = [10]
    earlier["summary"]["K"] = {"10": metrics(0.1, 1, 1, 1)}
    compared = section(render_report(synthetic_run(), earlier=earlier), "Compared with")
    assert "share no cutoff" in compared
