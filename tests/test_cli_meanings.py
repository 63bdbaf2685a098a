"""Every number the CLI prints comes with its meaning (issue 24: "rrf 0.0325", the
calibration's FA and refused columns, support verdicts such as not_checked)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_cli import ragwright

CASES = str(Path(__file__).resolve().parents[1] / "samples" / "eval" / "cases.jsonl")
NOTES = ("--type", "runbook", "--type", "note")  # the sample cases label notes too


def test_search_says_what_its_score_measures(indexed_home: Path) -> None:
    hybrid = ragwright("search", "drain the queue", "--k", "2", home=indexed_home, check=True)
    assert " rrf 0." in hybrid.stdout
    assert "score: rrf = reciprocal-rank fusion of the dense and BM25 rankings" in hybrid.stdout
    dense = ragwright(
        "search", "drain the queue", "--k", "2", "--mode", "dense", home=indexed_home, check=True
    )
    assert "score: cosine = similarity of the question's and the chunk's" in dense.stdout
    assert "rrf =" not in dense.stdout


def test_calibrate_explains_its_columns(indexed_home: Path) -> None:
    result = ragwright(
        "eval", "calibrate", CASES, *NOTES, "--force", "--folds", "2", home=indexed_home, check=True
    )
    legend = "FA = share of unsupported questions still given evidence"
    assert legend in result.stdout
    lines = result.stdout.splitlines()
    header = next(n for n, line in enumerate(lines) if line.split()[:3] == ["dense", "bm25", "FA"])
    assert legend in lines[header - 1]


def test_an_answer_run_explains_its_support_verdicts(indexed_home: Path) -> None:
    result = ragwright(
        "eval",
        "run",
        CASES,
        *NOTES,
        "--answers",
        "--style",
        "evidence",
        home=indexed_home,
        check=True,
    )
    assert re.search(r"; support: .*not_checked \d+", result.stdout), result.stdout
    assert "not_checked = no check ran" in result.stdout
