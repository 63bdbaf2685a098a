"""``eval run --answers`` saves each answer as it completes and ``--resume`` finishes an
interrupted run (issue 24: "an interrupted hour is lost"); each case's record holds its
quotes and answerability score, so an evidence-style run scores its sentences.

The model is a scripted OpenAI-compatible endpoint (tests/scripted_openai.py) that
quotes the first source's longest sentence; an interruption is a Ctrl-C it delivers to
this process, or a SIGKILL it sends to a ``ragwright`` child process, while it answers a
chosen question.
"""

from __future__ import annotations

import _thread
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli import copy_home, ragwright

CASES = Path(__file__).resolve().parents[1] / "samples" / "eval" / "cases.jsonl"
NOTES = ("--type", "runbook", "--type", "note")  # the sample cases label notes too


@pytest.fixture
def home(indexed_home: Path, tmp_path: Path) -> Path:
    """The indexed sample corpus, this test's own: its unfinished runs are its own."""
    return copy_home(indexed_home, tmp_path / "home")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Six answerable and two unsupported sample cases: eight questions."""
    rows = [json.loads(line) for line in CASES.read_text("utf-8").splitlines() if line.strip()]
    chosen = [r for r in rows if not r.get("unsupported")][:6]
    chosen += [r for r in rows if r.get("unsupported")][:2]
    path = tmp_path / "eight.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in chosen), "utf-8")
    return path


def _quote_s1(evidence: list[dict[str, str]]) -> dict[str, object]:
    sentences = re.split(r"(?<=[.!?])\s+|\n+", evidence[0]["text"])
    return {"status": "answered", "answer": max(sentences, key=len), "sourceIds": ["S1"]}


def _interrupting_at(call: int) -> Any:
    """A reply that presses Ctrl-C (in this process's main thread) on its ``call``-th
    request, as a user would while the run waits for that answer."""
    calls = []

    def reply(evidence: list[dict[str, str]]) -> dict[str, object]:
        calls.append(1)
        if len(calls) == call:
            _thread.interrupt_main()
        return _quote_s1(evidence)

    return reply


# These tests are about resuming runs: every question reaches the model (or the evidence
# stage), so the answerability gate (the profile's uncalibrated default) is off.
NO_GATE = {"RAGWRIGHT_ANSWERABILITY_THRESHOLD": "-1"}


def _eval(home: Path, dataset: Path, reply: Any, *options: str) -> tuple[Any, list[str]]:
    """``eval run DATASET --answers`` against the scripted model; (result, questions
    the model was asked)."""
    from tests.scripted_openai import scripted_openai

    with scripted_openai(reply) as (base_url, requests):
        result = ragwright(
            "eval",
            "run",
            str(dataset),
            *NOTES,
            "--answers",
            *options,
            home=home,
            RAGWRIGHT_CHAT_PROVIDER="openai",
            RAGWRIGHT_CHAT_MODEL="scripted",
            RAGWRIGHT_CHAT_BASE_URL=base_url,
            RAGWRIGHT_DRAFT_MAX_AGE="0",
            **NO_GATE,
        )
    asked = [json.loads(r["body"]["messages"][-1]["content"])["question"] for r in requests]
    return result, asked


def _without_latency(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_latency(v) for k, v in value.items() if k != "latency_ms"}
    if isinstance(value, list):
        return [_without_latency(v) for v in value]
    return value


@pytest.mark.slow
def test_an_interrupted_answer_run_keeps_its_answers_and_resumes_where_it_stopped(
    home: Path, dataset: Path
) -> None:
    questions = {
        json.loads(line)["id"]: json.loads(line)["question"]
        for line in dataset.read_text("utf-8").splitlines()
    }
    interrupted, first_asked = _eval(home, dataset, _interrupting_at(4))
    assert interrupted.returncode == 1, interrupted.stdout + interrupted.stderr
    said = re.search(
        r"interrupted: (\d+) of 8 cases are answered and saved in (\S+);"
        r" the same `eval run` with `--resume (\S+)` answers the rest",
        interrupted.stderr,
    )
    assert said, interrupted.stderr
    done, directory, run_id = int(said[1]), Path(said[2]), said[3]
    saved = [json.loads(line) for line in (directory / "answers.jsonl").read_text().splitlines()]
    assert 0 < done == len(saved) < 8
    assert [questions[entry["id"]] for entry in saved] == first_asked[:done]
    assert all(entry["answer"]["status"] == "answered" for entry in saved)
    assert not (directory / "run.json").exists()
    # An unfinished run is no run to compare or report yet.
    report = ragwright("eval", "report", run_id, home=home)
    assert report.returncode == 1 and "unfinished" in report.stderr

    # Another configuration is refused, naming what differs; nothing is answered.
    for options, named in (
        (("--style", "evidence"), 'answering.style: "generated" → "evidence"'),
        (("--threshold-dense", "0.05"), "thresholds.dense: (none) → 0.05"),
        (("--k", "1,3"), "ks: [1, 3, 5, 10] → [1, 3]"),
        (("--chunking-version", "other-v1"), '(chunking_version: "'),
    ):
        refused, asked = _eval(home, dataset, _quote_s1, "--resume", run_id, *options)
        assert refused.returncode == 1, refused.stdout
        assert refused.stderr.startswith(
            f"error: run {run_id} cannot be resumed: it ran under another configuration ("
        ), refused.stderr
        assert named in refused.stderr, refused.stderr
        assert asked == []
        if options[0] == "--chunking-version":
            assert '" → "other-v1"' in refused.stderr
    assert len((directory / "answers.jsonl").read_text().splitlines()) == done

    resumed, second_asked = _eval(home, dataset, _quote_s1, "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == (
        f"resumed run {run_id}: {done} of 8 cases were already answered, {8 - done} answered now"
    )
    # Only the questions without a recorded answer were asked, once each.
    assert second_asked == [q for i, q in questions.items() if i not in {e["id"] for e in saved}]
    assert f"saved {directory / 'run.json'}" in resumed.stdout
    assert sorted(p.name for p in directory.iterdir()) == ["run.json"]
    run = json.loads((directory / "run.json").read_text("utf-8"))
    assert run["execution_id"] == run_id and run["resumed"][0]["answered"] == done
    # The recorded answers are the run's, unchanged.
    kept = {c["id"]: c["answer"] for c in run["cases"] + run["unsupported"]["results"]}
    assert all(kept[entry["id"]] == entry["answer"] for entry in saved)

    # The same summary as a run that was never interrupted.
    whole, whole_asked = _eval(home, dataset, _quote_s1)
    assert whole.returncode == 0, whole.stderr
    assert whole_asked == list(questions.values())
    path = Path(whole.stdout.splitlines()[-1].removeprefix("saved "))
    uninterrupted = json.loads(path.read_text("utf-8"))
    for part in ("summary", "categories", "answers"):
        assert _without_latency(run[part]) == _without_latency(uninterrupted[part]), part
    assert _without_latency(run["cases"]) == _without_latency(uninterrupted["cases"])
    assert uninterrupted["resumed"] == []
    # A finished run is not resumed.
    again, asked = _eval(home, dataset, _quote_s1, "--resume", run_id)
    assert again.returncode == 1 and "is finished: nothing to resume" in again.stderr
    assert asked == []


@pytest.mark.slow
def test_resume_latest_finishes_the_most_recent_unfinished_run(home: Path, dataset: Path) -> None:
    interrupted, _ = _eval(home, dataset, _interrupting_at(2), "--json")
    assert interrupted.returncode == 1 and "--resume " in interrupted.stderr
    run_id = interrupted.stderr.split("--resume ")[1].split("`")[0]
    resumed, asked = _eval(home, dataset, _quote_s1, "--resume", "latest", "--json")
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["execution_id"] == run_id and out["resumed"] == 8 - len(asked)
    assert out["answers"]["cases"] == 8
    nothing, _ = _eval(home, dataset, _quote_s1, "--resume", "latest")
    assert nothing.returncode == 1 and "no unfinished evaluation run" in nothing.stderr


def test_an_evidence_run_records_quotes_and_answerability_and_scores_its_sentences(
    home: Path, dataset: Path
) -> None:
    result = ragwright(
        "eval",
        "run",
        str(dataset),
        *NOTES,
        "--answers",
        "--style",
        "evidence",
        home=home,
        check=True,
        **NO_GATE,
    )
    path = Path(result.stdout.splitlines()[-1].removeprefix("saved "))
    run = json.loads(path.read_text("utf-8"))
    answers = [c["answer"] for c in run["cases"]]
    declined = [c["answer"] for c in run["unsupported"]["results"]]
    for answer in answers + declined:
        assert answer["quotes"] and all(re.fullmatch(r"S\d+\.\d+", q) for q in answer["quotes"])
        assert 0.0 < answer["answerability"] <= 1.0
        assert answer["sentences"]["selected"] == len(answer["quotes"])
    assert all(0.0 <= a["sentences"]["recall"] <= 1.0 for a in answers)
    assert all(a["sentences"]["precision"] is None for a in declined)
    sentences = run["answers"]["answerable"]["sentences"]
    assert sentences["scored"] == 6 and sentences["recall"] > 0.5
    assert sentences["precision"] == pytest.approx(
        sum(a["sentences"]["precision"] for a in answers) / 6
    )
    assert (
        "    selected sentences vs reference selections: precision "
        f"{sentences['precision']:.3f}, recall {sentences['recall']:.3f} (6 answerable cases)"
    ) in result.stdout.splitlines()


@pytest.mark.slow
def test_a_killed_answer_run_keeps_what_it_answered(home: Path, dataset: Path) -> None:
    # A real process, killed (SIGKILL: nothing runs after it) while it waits for its
    # fourth answer; the answers before it are on disk and `--resume latest` finds the run.
    from tests.scripted_openai import scripted_openai

    child: list[subprocess.Popen[str]] = []

    def kill_at_fourth(evidence: list[dict[str, str]]) -> dict[str, object]:
        calls.append(1)
        if len(calls) == 4:
            child[0].send_signal(signal.SIGKILL)
            child[0].wait(timeout=30)
        return _quote_s1(evidence)

    calls: list[int] = []
    with scripted_openai(kill_at_fourth) as (base_url, _):
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RAGWRIGHT_")},
            "RAGWRIGHT_HOME": str(home),
            "RAGWRIGHT_CHAT_PROVIDER": "openai",
            "RAGWRIGHT_CHAT_MODEL": "scripted",
            "RAGWRIGHT_CHAT_BASE_URL": base_url,
            "RAGWRIGHT_DRAFT_MAX_AGE": "0",
            **NO_GATE,
        }
        command = [sys.executable, "-m", "ragwright", "eval", "run", str(dataset), *NOTES]
        log = home.parent / "eval-run.stderr"
        with log.open("w") as stderr:
            child.append(
                subprocess.Popen(
                    [*command, "--answers"],
                    env=environment,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    text=True,
                )
            )
            status = child[0].wait(timeout=300)
        assert status == -signal.SIGKILL, log.read_text("utf-8")
    (directory,) = [p for p in (home / "evaluations").iterdir() if (p / "pending.json").exists()]
    answered = (directory / "answers.jsonl").read_text("utf-8").splitlines()
    assert len(answered) == 3
    resumed, asked = _eval(home, dataset, _quote_s1, "--resume", "latest")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith(
        f"resumed run {directory.name}: 3 of 8 cases were already answered, 5 answered now\n"
    )
    assert len(asked) == 5
