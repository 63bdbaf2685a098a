"""The local model answering through the CLI on the embedded defaults: one question,
the drain question's condition, and every sample question judged by its written
references (the main job end to end). Apart from tests/test_cli.py so the test
processes share out these long tests (pytest-xdist runs a file in one process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import copy_home, ragwright
from tests.conftest import SAMPLES


@pytest.mark.slow
def test_ask_answers_with_the_local_model(indexed_home: Path) -> None:
    result = ragwright(
        "ask",
        "How long do refunds take?",
        "--type",
        "note",
        "--json",
        home=indexed_home,
        check=True,
    )
    out = json.loads(result.stdout)
    # The embedded model answers in the quoted style: evidence sentences, verbatim.
    assert out["style"] == "quoted" and out["options"]["style"] == "quoted"
    assert out["status"] in ("answered", "insufficient") and out["support"] is None
    labels = {s["label"] for s in out["sources"]}
    assert {c["label"] for c in out["citations"]} <= labels
    assert {q["source"] for q in out["quotes"]} == {c["label"] for c in out["citations"]}
    assert out["answer"] == " ".join(q["text"] for q in out["quotes"])
    assert out["provider"] == "local" and out["options"]["schema_style"] == "variants"
    assert out["options"]["temperature"] == 0.0 and out["options"]["thresholds"]["dense"] is None
    assert out["usage"] is None or out["usage"]["input_tokens"] > 0


def _reference(case_id: str) -> list[str]:
    for line in (SAMPLES.parent / "eval" / "cases.jsonl").read_text("utf-8").splitlines():
        case = json.loads(line)
        if case["id"] == case_id:
            return list(case["reference_answers"])
    raise AssertionError(f"no case {case_id}")


@pytest.mark.slow
def test_the_drain_question_is_answered_with_its_deadline_condition(indexed_home: Path) -> None:
    # The main job's first sample question, judged by its written reference: the answer
    # must carry the condition (only while the shutdown deadline allows), not "yes".
    from ragwright.core.answer_metrics import token_f1

    # As in the demo, a threshold gates the question (here the setting, 0.34: what the
    # demo's calibration recommends); past the gate the model selects sentences.
    result = ragwright(
        "ask",
        "Should I drain all queued work during shutdown?",
        "--json",
        home=indexed_home,
        check=True,
        RAGWRIGHT_ANSWERABILITY_THRESHOLD="0.34",
    )
    out = json.loads(result.stdout)
    assert out["status"] == "answered" and out["style"] == "quoted"
    assert "only while the shutdown deadline allows" in out["answer"]
    assert token_f1(out["answer"], _reference("q01")) >= 0.3
    assert {c["document_id"] for c in out["citations"]} >= {"worker-shutdown"}


@pytest.mark.slow
def test_the_sample_questions_are_judged_by_their_written_references(
    indexed_home: Path, tmp_path: Path
) -> None:
    # The main job end to end on the embedded defaults: the sample corpus indexed,
    # calibrated on every sample question (5 unsupported: forced), then every other
    # answerable question and every unsupported one answered by the local model and
    # scored against the reference answers written for them (half of the answerable
    # ones: the model's answers are the suite's largest cost on two cores; `make demo`
    # answers all 20). The floors sit below what the 2-core development machine
    # measured (20/20 answered, token F1 0.40, 5/5 declined): they catch a regression,
    # not a rounding.
    home = tmp_path / "home"
    copy_home(indexed_home, home)
    all_cases = SAMPLES.parent / "eval" / "cases.jsonl"
    lines = all_cases.read_text("utf-8").splitlines()
    answerable = [line for line in lines if not json.loads(line).get("unsupported")]
    unsupported = [line for line in lines if json.loads(line).get("unsupported")]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(answerable[::2] + unsupported) + "\n", "utf-8")
    eligible = ("--type", "runbook", "--type", "note")
    ragwright(
        "eval", "calibrate", str(all_cases), *eligible, "--force", "--write", home=home, check=True
    )
    out = json.loads(
        ragwright(
            "eval", "run", str(cases), *eligible, "--answers", "--json", home=home, check=True
        ).stdout
    )
    answers = out["answers"]
    assert answers["style"] == "quoted" and answers["invalid_citations"] == 0
    assert answers["answerable"]["cases"] == len(answerable[::2]) == 10
    assert answers["answerable"]["answered"] >= 8
    assert answers["answerable"]["gold_cited_rate"] >= 0.9
    assert answers["answerable"]["token_f1"]["answered"] >= 0.3
    assert answers["unsupported"]["declined"] >= 4
