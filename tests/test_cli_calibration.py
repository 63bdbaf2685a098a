"""Calibrated thresholds through the CLI: `eval calibrate` and what `search`, `ask`
and `eval run` do with the thresholds it writes. Apart from tests/test_cli.py so the
test processes share out these long tests (pytest-xdist runs a file in one process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from tests.cli import copy_home, ragwright
from tests.conftest import SAMPLES


@pytest.mark.slow
def test_calibrated_thresholds_make_search_ask_and_eval_refuse_unsupported_questions(
    indexed_home: Path, tmp_path: Path
) -> None:
    cases_path = SAMPLES.parent / "eval" / "cases.jsonl"
    eligible = ("--type", "runbook", "--type", "note")
    out = json.loads(
        ragwright(
            "eval",
            "calibrate",
            str(cases_path),
            *eligible,
            "--force",
            "--json",
            home=indexed_home,
            check=True,
        ).stdout
    )
    baseline, chosen = out["rows"][0], out["recommended"]
    assert baseline["threshold_dense"] is None and baseline["false_acceptance_rate"] == 1.0
    assert chosen["false_acceptance_rate"] < baseline["false_acceptance_rate"]
    assert chosen["recall@5"] == baseline["recall@5"]  # the default allows no recall loss
    env = {
        f"RAGWRIGHT_THRESHOLD_{leg.upper()}": str(chosen[f"threshold_{leg}"])
        for leg in ("dense", "sparse")
        if chosen[f"threshold_{leg}"] is not None
    }
    # Settings apply the thresholds to search: exactly the unsupported questions the
    # calibration counted as rejected now find nothing.
    unsupported = [
        json.loads(line)["question"]
        for line in cases_path.read_text().splitlines()
        if json.loads(line).get("unsupported")
    ]
    refused = [
        q
        for q in unsupported
        if json.loads(
            ragwright("search", q, *eligible, "--json", home=indexed_home, check=True, **env).stdout
        )["hits"]
        == []
    ]
    assert len(refused) == round((1 - chosen["false_acceptance_rate"]) * len(unsupported))
    # ask ends such a question before generation: the local model is never even assembled.
    home = tmp_path / "home"
    copy_home(indexed_home, home)
    answer = json.loads(
        ragwright("ask", refused[0], *eligible, "--json", home=home, check=True, **env).stdout
    )
    assert answer["status"] == "no_eligible_evidence" and answer["sources"] == []
    assert not (home / "models").exists()
    # ... and eval run takes them as its defaults.
    run = json.loads(
        ragwright(
            "eval",
            "run",
            str(cases_path),
            *eligible,
            "--json",
            home=indexed_home,
            check=True,
            **env,
        ).stdout
    )
    assert run["unsupported"]["false_acceptance_rate"] == chosen["false_acceptance_rate"]


@pytest.mark.slow
def test_a_written_calibration_is_what_search_applies_until_cleared(
    indexed_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    copy_home(indexed_home, home)
    cases_path = SAMPLES.parent / "eval" / "cases.jsonl"
    eligible = ("--type", "runbook", "--type", "note")
    # The sample set holds 5 unsupported questions: refused without --force, nothing written.
    refused = ragwright("eval", "calibrate", str(cases_path), *eligible, "--write", home=home)
    assert refused.returncode == 1
    assert "5 unsupported questions" in refused.stderr and "at least 20" in refused.stderr
    record_path = home / "index" / "support-documents" / "calibration.json"
    assert not record_path.exists()
    written = ragwright(
        "eval", "calibrate", str(cases_path), *eligible, "--force", "--write", home=home, check=True
    ).stdout
    assert f"written to {record_path}" in written and "held-out (5 folds): FA" in written
    record = json.loads(record_path.read_text())
    assert record["held_out"]["method"] == "k-fold" and record["forced"] is True
    unsupported = [
        json.loads(line)["question"]
        for line in cases_path.read_text().splitlines()
        if json.loads(line).get("unsupported")
    ]

    def search(question: str, *options: str, **env: str) -> dict[str, Any]:
        found = ragwright(
            "search", question, *eligible, *options, "--json", home=home, check=True, **env
        )
        return cast(dict[str, Any], json.loads(found.stdout))

    # The record alone makes some unsupported question find nothing: no env thresholds.
    rejected = [q for q in unsupported if search(q)["hits"] == []]
    assert rejected, "the recommendation rejects at least one unsupported question"
    applied = search(rejected[0])
    assert applied["thresholds_source"] == "calibration"
    assert applied["calibration"]["dataset_sha256"] == record["dataset_sha256"]
    assert applied["thresholds"]["dense"] == record["thresholds"]["dense"]
    text = ragwright("search", rejected[0], *eligible, home=home, check=True).stdout
    assert "(calibration)" in text.splitlines()[-1]
    assert record["calibrated_at"] in text.splitlines()[-1]
    # Settings beat the record, and an option beats settings.
    low = {"RAGWRIGHT_THRESHOLD_DENSE": "-1", "RAGWRIGHT_THRESHOLD_SPARSE": "-1"}
    by_settings = search(rejected[0], **low)
    assert by_settings["thresholds_source"] == "settings" and by_settings["hits"]
    by_option = search(
        rejected[0], "--threshold-dense", "0.999", "--threshold-sparse", "1000", **low
    )
    assert by_option["thresholds_source"] == "request" and by_option["hits"] == []
    status = ragwright("status", home=home, check=True).stdout
    assert f"calibration: {record['calibrated_at']}" in status
    # A hand-edited record that breaks the shape is an error naming file and field.
    damaged = {**record, "thresholds": {"dense": "high", "sparse": None}}
    record_path.write_text(json.dumps(damaged))
    failed = ragwright("search", rejected[0], home=home)
    assert failed.returncode == 1
    assert str(record_path) in failed.stderr and "thresholds.dense" in failed.stderr
    cleared = ragwright("eval", "calibrate", "--clear", home=home, check=True).stdout
    assert cleared.strip() == f"removed {record_path}"
    assert search(rejected[0])["hits"] and search(rejected[0])["thresholds_source"] == "none"
    assert "calibration: none" in ragwright("status", home=home, check=True).stdout
