"""``benchmarks/answers.py`` on any ClapNQ-shaped folder (``--data``) and over an existing
index (``--home``), issue 24, item 7. The evidence style asks no model, so these runs
cost an ingestion and retrieval only."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli import copy_home
from tests.conftest import REPO
from tests.processes import CHILD_TIMEOUT

PASSAGES = {
    "p-queue": ("Queues", "Drain the queue before the worker stops. Then close the socket."),
    "p-certs": ("Certificates", "Rotate the certificates a week before they expire."),
    "p-refunds": ("Refunds", "Refunds are paid within ten working days."),
}
QUESTIONS = [
    ("q-drain", "What do I do with the queue before the worker stops?", "p-queue"),
    ("q-rotate", "When are certificates rotated?", "p-certs"),
    ("q-refund", "How long do refunds take?", "p-refunds"),
    ("q-close", "What is closed after draining the queue?", "p-queue"),
    ("q-moon", "How far away is the moon?", None),
    ("q-tea", "Which tea is best with breakfast?", None),
]


def _clapnq_folder(root: Path) -> Path:
    (root / "markdown").mkdir(parents=True)
    for passage, (title, text) in PASSAGES.items():
        (root / "markdown" / f"{passage}.md").write_text(
            f"---\ndocument_id: {passage}\ntitle: {title}\ndocument_type: note\n"
            f"publication_state: published\n---\n\n# {title}\n\n## Passage\n\n{text}\n",
            "utf-8",
        )
    rows = []
    for question_id, question, gold in QUESTIONS:
        row: dict[str, object] = {"id": question_id, "question": question}
        if gold is None:
            row["answerable"] = False
        else:
            sentence = PASSAGES[gold][1].split(". ")[0].rstrip(".") + "."
            row.update(
                answerable=True,
                gold_passage_ids=[gold],
                reference_answers=[sentence],
                reference_selected_sentences=[[sentence]],
            )
        rows.append(json.dumps(row))
    (root / "questions.jsonl").write_text("\n".join(rows) + "\n", "utf-8")
    return root


def _bench(*args: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("RAGWRIGHT_")
    }  # the benchmark's homes and settings are its own, but for ``settings``
    environment.update(settings)
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "src"), environment.get("PYTHONPATH")) if p
    )
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "answers.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        check=False,
        timeout=CHILD_TIMEOUT,
    )


def _split(question_id: str) -> str:
    return "tune" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "test"


def test_the_answer_benchmark_reads_any_clapnq_shaped_folder(tmp_path: Path) -> None:
    data = _clapnq_folder(tmp_path / "mine")
    out = tmp_path / "answers.json"
    args = ("--dataset", "clapnq", "--data", str(data), "--styles", "evidence")
    # No answerability gate (a threshold of -1): every question's selection is scored.
    # Without it the bundled profile's uncalibrated default would apply.
    run = _bench(
        *args, "--no-calibrate", "--out", str(out), cwd=tmp_path,
        RAGWRIGHT_ANSWERABILITY_THRESHOLD="-1",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "clapnq: 3 documents" in run.stdout
    written = json.loads(out.read_text("utf-8"))
    assert written["config"]["data"] == str(data) and written["config"]["home"] is None
    splits = written["results"]["clapnq"]
    for split in ("tune", "test"):
        expected = [q for q, _, gold in QUESTIONS if _split(q) == split and gold]
        expected += [q for q, _, gold in QUESTIONS if _split(q) == split and not gold]
        assert [c["id"] for c in splits[split]["evidence"]["cases"]] == expected
    scored = [c for split in splits.values() for c in split["evidence"]["cases"]]
    assert all(c["status"] == "evidence_only" for c in scored)
    # Every answerable question's passage is its one gold document, and it is found.
    assert all(c["gold_cited"] is True for c in scored if c["id"] in dict.fromkeys(
        q for q, _, gold in QUESTIONS if gold
    ))  # fmt: skip
    # The no-model baseline: each answerable case's selection is scored against its
    # reference (the first sentence of its passage, which the selection holds).
    answerable = [c for c in scored if c["id"] in {q for q, _, gold in QUESTIONS if gold}]
    assert answerable and all(c["selection_f1"] > 0.5 for c in answerable)
    assert all(c["selection_f1"] is None for c in scored if c not in answerable)
    summary = splits["test"]["evidence"]["summary"]["sentences"]
    assert summary["selection_f1_cases"] == len(
        [c for c in splits["test"]["evidence"]["cases"] if c in answerable]
    )
    assert written["config"]["shown"] == "product"
    missing = _bench(*args, "--data", str(tmp_path / "none"), cwd=tmp_path)
    assert missing.returncode != 0 and "no ClapNQ-shaped folder at" in missing.stderr


def test_the_answer_benchmark_reuses_an_existing_index(indexed_home: Path, tmp_path: Path) -> None:
    home = copy_home(indexed_home, tmp_path / "home")
    out = tmp_path / "answers.json"
    run = _bench(
        "--dataset", "samples", "--home", str(home), "--styles", "evidence",
        "--limit", "4", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    documents = len(list((REPO / "samples" / "corpus").glob("*.md")))
    assert f"samples: reusing {home}: {documents} documents" in run.stdout
    written = json.loads(out.read_text("utf-8"))
    assert written["config"]["home"] == str(home)
    assert written["config"]["calibrated"] == "the home's own thresholds"
    cases = written["results"]["samples"]["all"]["evidence"]["cases"]
    # The home has no calibration, so the bundled profile's uncalibrated default applies:
    # the two answerable questions pass it, the two unanswerable ones are declined.
    assert [c["status"] for c in cases] == ["evidence_only"] * 2 + ["insufficient"] * 2
    # No calibration was written into the home (without --no-calibrate: a fresh home
    # would have been calibrated on the sample questions).
    assert not list(home.rglob("calibration.json"))
    both = _bench("--home", str(home), cwd=tmp_path)
    assert both.returncode == 2 and "name the one --dataset" in both.stderr
