from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES


def ragwright(
    *args: str, home: Path, check: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "RAGWRIGHT_HOME": str(home), **env}
    result = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if check and result.returncode != 0:
        # Show what the command said: a bare CalledProcessError hides the reason.
        pytest.fail(
            f"ragwright {' '.join(args)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def test_chunks_json_previews_without_an_index(tmp_path: Path) -> None:
    result = ragwright(
        "chunks", str(SAMPLES / "worker-shutdown.md"), "--json", home=tmp_path / "h", check=True
    )
    rows = json.loads(result.stdout)
    assert [r["chunk_id"] for r in rows] == [
        "shutdown-and-the-queue/p0",
        "shutdown-and-the-queue/p1",
        "queue-capacity/p0",
    ]
    assert set(rows[0]) >= {
        "document_id",
        "chunk_id",
        "point_id",
        "section_id",
        "chunking_version",
        "word_count",
        "text",
    }
    assert rows[0]["chunking_version"] == "section-paragraphs-80w-overlap1-v1"
    assert not (tmp_path / "h").exists()


def test_chunks_options_change_the_version(tmp_path: Path) -> None:
    result = ragwright(
        "chunks",
        str(SAMPLES / "worker-shutdown.md"),
        "--json",
        "--max-words",
        "40",
        "--no-overlap",
        home=tmp_path,
        check=True,
    )
    rows = json.loads(result.stdout)
    assert {r["chunking_version"] for r in rows} == {"section-paragraphs-40w-overlap0-v1"}
    assert all(r["word_count"] <= 40 for r in rows)


@pytest.mark.slow
def test_ingest_then_rerun_then_status(tmp_path: Path) -> None:
    first = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path, check=True).stdout
    )
    assert first["embedded"] == first["chunks"] == first["verified"] > 0
    again = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path, check=True).stdout
    )
    assert (again["embedded"], again["unchanged"]) == (0, first["chunks"])
    status = json.loads(ragwright("status", "--json", home=tmp_path, check=True).stdout)
    ids = {row["document_id"] for row in status["documents"]}
    assert {"worker-shutdown", "worker-shutdown-draft", "queue-capacity-note"} <= ids
    assert status["points"] == {"live": first["chunks"]}


def test_invalid_input_exits_non_zero_with_the_error_on_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text(
        "---\ndocument_id: x\ndocument_type: runbook\n"
        "publication_state: Published\n---\n# T\n\nText.\n"
    )
    result = ragwright("ingest", str(bad), home=tmp_path / "h")
    assert result.returncode == 1
    assert "publication_state" in result.stderr and "exact spelling" in result.stderr
    assert result.stdout == ""


def test_oversize_paragraph_names_document_section_and_index(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text(
        "---\ndocument_type: note\npublication_state: draft\n---\n# T\n\n## Long\n\n"
        + "word " * 100
        + "\n"
    )
    result = ragwright("chunks", str(big), home=tmp_path)
    assert result.returncode == 1
    assert "document 'big', section 'long', paragraph 0" in result.stderr


def test_invalid_setting_is_named(tmp_path: Path) -> None:
    result = ragwright("chunks", str(SAMPLES), home=tmp_path, RAGWRIGHT_MAX_WORDS="-3")
    assert result.returncode == 1
    assert "RAGWRIGHT_MAX_WORDS" in result.stderr


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = ragwright("--help", home=tmp_path, check=True)
    for command in ("chunks", "ingest", "status"):
        assert command in result.stdout


@pytest.fixture(scope="module")
def indexed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    ragwright("ingest", str(SAMPLES), home=home, check=True)
    return home


@pytest.mark.slow
def test_search_json_returns_only_eligible_chunks(indexed_home: Path) -> None:
    question = "Should I drain all queued work during shutdown?"
    rows = json.loads(
        ragwright("search", question, "--json", "--k", "5", home=indexed_home, check=True).stdout
    )
    assert rows and {r["publication_state"] for r in rows} == {"published"}
    assert {r["document_type"] for r in rows} == {"runbook"}
    assert set(rows[0]) == {
        "document_id",
        "chunk_id",
        "chunking_version",
        "document_type",
        "publication_state",
        "score",
        "text",
    }
    assert rows[0]["document_id"] == "worker-shutdown"
    drafts = json.loads(
        ragwright(
            "search", question, "--json", "--state", "draft", home=indexed_home, check=True
        ).stdout
    )
    assert {r["document_id"] for r in drafts} <= {"worker-shutdown-draft", "backup-restore"}


@pytest.mark.slow
def test_search_with_nothing_eligible_prints_an_empty_list(indexed_home: Path) -> None:
    result = ragwright(
        "search",
        "drain",
        "--json",
        "--document",
        "worker-shutdown-draft",
        home=indexed_home,
        check=True,
    )
    assert json.loads(result.stdout) == []
    text = ragwright(
        "search", "drain", "--document", "worker-shutdown-draft", home=indexed_home, check=True
    )
    assert "No eligible evidence" in text.stdout


def test_search_rejects_an_unknown_mode(indexed_home: Path) -> None:
    result = ragwright("search", "x", "--mode", "fuzzy", home=indexed_home)
    assert result.returncode == 2
    assert "--mode" in result.stderr


@pytest.mark.slow
def test_eval_run_report_and_compare(indexed_home: Path) -> None:
    dataset = str(SAMPLES.parent / "eval" / "cases.jsonl")
    runs = []
    for mode in ("dense", "hybrid"):
        result = ragwright(
            "eval",
            "run",
            dataset,
            "--type",
            "runbook",
            "--type",
            "note",
            "--mode",
            mode,
            "--report",
            "--json",
            home=indexed_home,
            check=True,
        )
        summary = json.loads(result.stdout)
        assert summary["summary"]["cases"] == 20
        assert summary["unsupported"]["cases"] == 5
        assert (Path(summary["path"]) / "run.json").is_file()
        assert (Path(summary["path"]) / "report.html").is_file()
        runs.append(summary["execution_id"])
    compared = json.loads(
        ragwright(
            "eval", "compare", *runs, "--k", "3", "--json", home=indexed_home, check=True
        ).stdout
    )
    assert set(compared) == {"regressions", "improvements", "notes"}
    assert any("mode differs" in note for note in compared["notes"])


@pytest.mark.slow
def test_calibrated_thresholds_make_search_ask_and_eval_refuse_unsupported_questions(
    indexed_home: Path, tmp_path: Path
) -> None:
    cases_path = SAMPLES.parent / "eval" / "cases.jsonl"
    eligible = ("--type", "runbook", "--type", "note")
    out = json.loads(
        ragwright(
            "eval", "calibrate", str(cases_path), *eligible, "--json", home=indexed_home, check=True
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
        )
        == []
    ]
    assert len(refused) == round((1 - chosen["false_acceptance_rate"]) * len(unsupported))
    # ask ends such a question before generation: the local model is never even assembled.
    home = tmp_path / "home"
    shutil.copytree(indexed_home, home, ignore=shutil.ignore_patterns("models"))
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


def test_eval_rejects_a_bad_dataset(indexed_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "category": "c", "question": "q", "relevant": []}\n')
    result = ragwright("eval", "run", str(bad), home=indexed_home)
    assert result.returncode == 1
    assert "empty relevant set" in result.stderr


def test_read_commands_do_not_create_an_index(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    for args in (("status",), ("search", "anything")):
        result = ragwright(*args, home=home)
        assert result.returncode == 1
        assert "run 'ragwright ingest' first" in result.stderr
    assert not home.exists()


@pytest.mark.slow
def test_status_lists_every_chunking_version_without_changing_the_contract(tmp_path: Path) -> None:
    home = tmp_path / "h"
    ragwright("ingest", str(SAMPLES / "worker-shutdown.md"), home=home, check=True)
    contract = (home / "index" / "support-documents" / "contract.json").read_text()
    status = json.loads(
        ragwright("status", "--json", home=home, check=True, RAGWRIGHT_MAX_WORDS="40").stdout
    )
    assert status["chunking_versions"] == ["section-paragraphs-80w-overlap1-v1"]
    assert (home / "index" / "support-documents" / "contract.json").read_text() == contract


@pytest.mark.slow
def test_eval_beir_runs_document_level(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    corpus = [
        {
            "_id": "d1",
            "title": "Draining queues",
            "text": "Drain the queue before the shutdown deadline.",
        },
        {"_id": "d2", "title": "Certificates", "text": "Rotate certificates before they expire."},
    ]
    (beir / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus))
    (beir / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "when do I drain the queue"})
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    home = tmp_path / "home"
    env = {"RAGWRIGHT_CHUNKING": "sentence-blocks", "RAGWRIGHT_COLLECTION": "beir"}
    ragwright(
        "ingest",
        str(beir / "corpus.jsonl"),
        "--type",
        "note",
        "--state",
        "published",
        home=home,
        check=True,
        **env,
    )
    result = ragwright(
        "eval",
        "run",
        "--beir",
        str(beir),
        "--split",
        "test",
        "--type",
        "note",
        "--k",
        "1,2",
        "--json",
        home=home,
        check=True,
        **env,
    )
    summary = json.loads(result.stdout)["summary"]
    assert summary["cases"] == 1
    assert summary["K"]["1"]["reciprocal_rank"] == 1.0


def test_ask_preview_json_shows_the_exact_message_without_a_model(indexed_home: Path) -> None:
    result = ragwright(
        "ask",
        "Should I drain all queued work during shutdown?",
        "--preview",
        "--json",
        home=indexed_home,
        check=True,
    )
    out = json.loads(result.stdout)
    assert out["status"] == "preview" and out["sources"][0]["label"] == "S1"
    message = json.loads(out["user_message"])
    assert message["question"] == "Should I drain all queued work during shutdown?"
    assert {"outcome", "label", "removed_paragraphs"} <= set(out["decisions"][0])


@pytest.mark.slow
def test_ask_answers_with_the_local_model(indexed_home: Path) -> None:
    result = ragwright(
        "ask",
        "How long do refunds take?",
        "--type",
        "note",
        "--check-support",
        "--json",
        home=indexed_home,
        check=True,
    )
    out = json.loads(result.stdout)
    assert out["status"] in ("answered", "insufficient")
    labels = {s["label"] for s in out["sources"]}
    assert set(out["citations"]) <= labels
    assert ("support" in out) == (out["status"] == "answered")
    assert out["provider"] == "local" and out["options"]["schema_style"] == "variants"
    assert out["options"]["temperature"] == 0.0 and out["options"]["thresholds"]["dense"] is None
    assert out["usage"] is None or out["usage"]["input_tokens"] > 0


@pytest.mark.slow
def test_ask_text_output_explains_a_flagged_answer(indexed_home: Path) -> None:
    out = ragwright(
        "ask",
        "Should I drain all queued work during shutdown?",
        "--check-support",
        home=indexed_home,
        check=True,
    ).stdout
    first = out.splitlines()[0]
    assert first.startswith(("[answered]", "[insufficient]"))
    if first.startswith("[answered]"):
        verdict = next(line for line in out.splitlines() if line.startswith("support check:"))
        if verdict.endswith("FLAGGED"):
            assert "cited but supporting no sentence" in out or "no cited source supports" in out
    assert "decisions:" in out and "input tokens (o200k_base estimate)" in out


def test_ingest_skip_invalid_leaves_out_empty_beir_documents_and_lists_them(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "1", "title": "Queues", "text": "Drain queues at shutdown."},
        {"_id": "471", "title": "Empty", "text": ""},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = ("--type", "note", "--state", "published")
    strict = ragwright("ingest", str(corpus), *meta, home=tmp_path / "a")
    assert strict.returncode == 1 and "'471'" in strict.stderr
    result = ragwright(
        "ingest", str(corpus), *meta, "--skip-invalid", "--json",
        home=tmp_path / "b", check=True,
    )  # fmt: skip
    summary = json.loads(result.stdout)
    assert summary["documents"] == 1 and summary["bm25_avgdl"] == 4.0
    assert summary["skipped"] == [
        {
            "document_id": "471",
            "source": f"{corpus}:2",
            "field": "sections[0].paragraphs",
            "reason": "section 'text' has no paragraphs",
        }
    ]
