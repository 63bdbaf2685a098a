from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import ragwright
from tests.conftest import SAMPLES

__all__ = ["ragwright"]  # tests elsewhere import it from here


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


def _tenant_doc(path: Path, tenant: str, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\ndocument_type: runbook\npublication_state: published\ntenant: {tenant}\n---\n"
        f"# Refunds\n\n## Steps\n\n{text}\n",
        "utf-8",
    )


@pytest.mark.slow
def test_one_tenants_ingest_and_prune_leave_another_tenants_same_named_file(
    tmp_path: Path,
) -> None:
    _tenant_doc(tmp_path / "acme" / "faq.md", "acme", "Acme refunds go to the card.")
    _tenant_doc(tmp_path / "globex" / "faq.md", "globex", "Globex refunds are store credit.")
    home = tmp_path / "home"
    ragwright("ingest", str(tmp_path / "acme"), home=home, check=True)
    result = ragwright("ingest", str(tmp_path / "globex"), "--prune", home=home, check=True)
    assert ", 0 deleted," in result.stdout
    assert f"scope: tenants globex; pruned 0 documents missing from {tmp_path / 'globex'}" in (
        result.stdout
    )
    assert "'faq' (globex) is also indexed for acme: left as it is" in result.stdout
    status = json.loads(ragwright("status", "--json", home=home, check=True).stdout)
    assert {(row["tenant"], row["document_id"]) for row in status["documents"]} == {
        ("acme", "faq"),
        ("globex", "faq"),
    }
    text = ragwright("status", home=home, check=True).stdout
    assert "\n2 documents, 2 points (2 live)\n" in text


def test_invalid_input_exits_non_zero_with_the_error_on_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text(
        "---\ndocument_id: x\ndocument_type: runbook\n"
        "publication_state: Published\n---\n# T\n\nText.\n"
    )
    result = ragwright("ingest", str(bad), home=tmp_path / "h")
    assert result.returncode == 1
    assert "publication_state 'Published'" in result.stderr
    assert "did you mean 'published'?" in result.stderr
    assert result.stdout == ""


def test_an_oversize_paragraph_is_split_and_marked_in_chunks(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("# T\n\n## Long\n\n" + "Word after word goes on. " * 40 + "\n")
    result = ragwright("chunks", str(big), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "big/long/p0 (" in result.stdout and ", split at sentences" in result.stdout
    assert "long paragraphs of 1 document (big)" in result.stdout


def test_a_heading_over_the_budget_names_document_and_section(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("# T\n\n## " + "word " * 100 + "\n\nText.\n")
    result = ragwright("chunks", str(big), home=tmp_path)
    assert result.returncode == 1
    assert "document 'big', section 'word-word" in result.stderr
    assert "the heading alone has 100 words" in result.stderr


def test_invalid_setting_is_named(tmp_path: Path) -> None:
    result = ragwright("chunks", str(SAMPLES), home=tmp_path, RAGWRIGHT_MAX_WORDS="-3")
    assert result.returncode == 1
    assert "RAGWRIGHT_MAX_WORDS" in result.stderr


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = ragwright("--help", home=tmp_path, check=True)
    for command in ("chunks", "ingest", "status"):
        assert command in result.stdout


def test_ingest_help_names_every_file_type_ingestion_reads(tmp_path: Path) -> None:
    # The command line imports no adapter (start-up time), so its help spells the types
    # out; this keeps the spelled list and the converters' registry the same.
    from ragwright.adapters.sources import SUPPORTED_SUFFIXES

    result = ragwright("ingest", "--help", home=tmp_path, check=True)
    text = " ".join(result.stdout.split())
    named = {s for s in SUPPORTED_SUFFIXES if re.search(re.escape(s) + r"(?![a-z])", text)}
    assert named == set(SUPPORTED_SUFFIXES)


@pytest.mark.slow
def test_search_json_returns_only_eligible_chunks(indexed_home: Path) -> None:
    question = "Should I drain all queued work during shutdown?"
    out = json.loads(
        ragwright("search", question, "--json", "--k", "5", home=indexed_home, check=True).stdout
    )
    rows = out["hits"]
    assert out["score_kind"] == "rrf" and out["mode"] == "hybrid"
    assert rows and {r["publication_state"] for r in rows} == {"published"}
    assert {r["document_type"] for r in rows} == {"runbook"}
    assert set(rows[0]) >= {
        "rank",
        "document_id",
        "chunk_id",
        "chunking_version",
        "document_type",
        "publication_state",
        "score",
        "score_kind",
        "text",
    }
    assert rows[0]["document_id"] == "worker-shutdown"
    drafts = json.loads(
        ragwright(
            "search", question, "--json", "--state", "draft", home=indexed_home, check=True
        ).stdout
    )["hits"]
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
    out = json.loads(result.stdout)
    assert out["hits"] == [] and out["no_eligible_evidence"] is True
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
    assert set(compared) == {"k", "metric", "regressions", "improvements", "notes"}
    assert any("mode differs" in note for note in compared["notes"])


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
    assert out["style"] == "quoted"  # the embedded model's default
    system, user = out["request"]["messages"]
    assert system["role"] == "system" and "selecting evidence sentences" in system["content"]
    message = json.loads(user["content"])
    assert message["question"] == "Should I drain all queued work during shutdown?"
    assert all("sentences" in item for item in message["evidence"])
    assert {"outcome", "label", "removed_paragraphs"} <= set(out["decisions"][0])


def test_ask_evidence_style_shows_sentences_and_says_it_is_not_an_answer(
    indexed_home: Path,
) -> None:
    question = "What happens to unfinished jobs when the shutdown deadline expires?"
    by_option = ragwright("ask", question, "--style", "evidence", home=indexed_home, check=True)
    by_setting = ragwright(
        "ask", question, home=indexed_home, check=True, RAGWRIGHT_ANSWER_STYLE="evidence"
    )
    for out in (by_option.stdout, by_setting.stdout):
        lines = out.splitlines()
        assert lines[0] == (
            "[evidence only] NOT AN ANSWER (no model was asked). "
            "The most relevant evidence sentences:"
        )
        assert any("leave unfinished jobs for the durable retry path" in line for line in lines)
        assert not any(line.startswith("  answered by") for line in lines)
    assert by_option.stdout == by_setting.stdout


def test_ask_below_the_answerability_threshold_is_insufficient_without_a_model(
    indexed_home: Path,
) -> None:
    result = ragwright(
        "ask",
        "Should I drain all queued work during shutdown?",
        home=indexed_home,
        check=True,
        RAGWRIGHT_ANSWERABILITY_THRESHOLD="0.99",
        # A model that cannot start: the gate must decide before any model is needed.
        RAGWRIGHT_CHAT_PROVIDER="openai",
        RAGWRIGHT_CHAT_MODEL="none",
        RAGWRIGHT_CHAT_BASE_URL="http://127.0.0.1:9",
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "[insufficient] (the evidence is insufficient)"
    assert "threshold 0.990; the model was not called" in lines[1]


UNSUPPORTED_CLAIM = "Refunds are paid in cash at the branch office."


def _cite_s1_for_an_unrelated_claim(evidence: list[dict[str, str]]) -> dict[str, object]:
    return {"status": "answered", "answer": UNSUPPORTED_CLAIM, "sourceIds": ["S1"]}


def _quote_s1(evidence: list[dict[str, str]]) -> dict[str, object]:
    import re

    sentences = re.split(r"(?<=[.!?])\s+|\n+", evidence[0]["text"])
    return {"status": "answered", "answer": max(sentences, key=len), "sourceIds": ["S1"]}


def _ask_scripted(home: Path, reply: object, *options: str) -> list[str]:
    # The real command line against a scripted OpenAI-compatible model, so the answer,
    # and with it the support verdict, is known before the run.
    from tests.scripted_openai import scripted_openai

    with scripted_openai(reply) as (base_url, requests):  # type: ignore[arg-type]
        out = ragwright(
            "ask",
            "Should I drain all queued work during shutdown?",
            *options,
            home=home,
            check=True,
            RAGWRIGHT_CHAT_PROVIDER="openai",
            RAGWRIGHT_CHAT_MODEL="scripted",
            RAGWRIGHT_CHAT_BASE_URL=base_url,
        ).stdout
    assert len(requests) == 1
    return out.splitlines()


@pytest.mark.slow
def test_ask_checks_support_by_default_and_shows_a_supported_answer(indexed_home: Path) -> None:
    lines = _ask_scripted(indexed_home, _quote_s1)
    assert lines[0].startswith("[answered] ")
    assert lines[1] == "  answered by scripted via openai"
    assert lines[2].startswith("  S1: worker-shutdown/")
    assert lines[lines.index("support check: ok") + 1] == "decisions:"
    assert lines[-3].startswith("input tokens (o200k_base estimate): ")
    assert lines[-3].endswith("provider usage: 100 in / 20 out")
    assert lines[-2] == "thresholds: none"
    # No calibration: the bundled profile's default applied, and the answer says so.
    assert lines[-1].startswith("answerability threshold: 0.4800, uncalibrated")


@pytest.mark.slow
def test_ask_withholds_an_unsupported_answer_and_explains_it(indexed_home: Path) -> None:
    lines = _ask_scripted(indexed_home, _cite_s1_for_an_unrelated_claim)
    assert lines[0].startswith("[unsupported] ")
    assert lines[1] == f"  withheld answer: {UNSUPPORTED_CLAIM!r}"
    assert f"  no cited source supports: {UNSUPPORTED_CLAIM}" in lines
    evidence = lines[lines.index("evidence:") + 1 : lines.index("decisions:")]
    assert evidence and evidence[0].startswith("  S1: worker-shutdown/")
    assert evidence[0].endswith("(cited)")
    # Turned off, the same answer is returned as answered (the operator's choice).
    unchecked = _ask_scripted(indexed_home, _cite_s1_for_an_unrelated_claim, "--no-check-support")
    assert unchecked[0] == f"[answered] {UNSUPPORTED_CLAIM}"
    assert not any(line.startswith("support check") for line in unchecked)


@pytest.mark.slow
def test_ask_offers_the_approved_template_when_the_model_is_unreachable(
    indexed_home: Path, tmp_path: Path
) -> None:
    templates = tmp_path / "templates.yaml"
    templates.write_text(
        "templates:\n  - id: shutdown-ack\n    version: '1'\n    phrases: [shutdown]\n"
        "    text: Shutdown questions go to the on-call engineer.\n"
    )
    down = {
        "RAGWRIGHT_CHAT_PROVIDER": "openai",
        "RAGWRIGHT_CHAT_MODEL": "primary-model",
        "RAGWRIGHT_CHAT_BASE_URL": "http://127.0.0.1:9/v1",
    }
    question = "Should I drain all queued work during shutdown?"
    # Drafts off: an earlier answer to this question in the shared home would come first.
    down["RAGWRIGHT_DRAFT_MAX_AGE"] = "0"
    offered = ragwright(
        "ask", question, home=indexed_home, RAGWRIGHT_TEMPLATES=str(templates), **down
    )
    assert offered.returncode == 0, offered.stderr
    lines = offered.stdout.splitlines()
    assert lines[0] == (
        "[approved template shutdown-ack v1] NOT A GENERATED ANSWER "
        "(the model could not answer: transient):"
    )
    assert lines[1] == "  Shutdown questions go to the on-call engineer."
    assert lines[2].startswith("[evidence only] NOT AN ANSWER")
    refused = ragwright(
        "ask",
        question,
        "--json",
        home=indexed_home,
        RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE="false",
        **down,
    )
    outcome = json.loads(refused.stdout)
    assert (outcome["mode"], outcome["reason"]) == ("unavailable", "model_unavailable")
    assert outcome["quotes"] == [] and outcome["citations"] == []
    broken = ragwright(
        "ask", question, home=indexed_home, RAGWRIGHT_TEMPLATES=str(tmp_path / "none.yaml"), **down
    )
    assert broken.returncode == 1
    assert broken.stderr.strip().startswith("error: setting 'RAGWRIGHT_TEMPLATES': cannot read")


@pytest.mark.slow
def test_ask_shows_the_previous_draft_labelled_with_its_age_when_the_model_is_down(
    indexed_home: Path,
) -> None:
    answered = _ask_scripted(indexed_home, _quote_s1)  # stored as the draft
    assert answered[0].startswith("[answered] ")
    down = ragwright(
        "ask",
        "Should I drain all queued work during shutdown?",
        home=indexed_home,
        check=True,
        RAGWRIGHT_CHAT_PROVIDER="openai",
        RAGWRIGHT_CHAT_MODEL="scripted",
        RAGWRIGHT_CHAT_BASE_URL="http://127.0.0.1:9/v1",
    ).stdout.splitlines()
    assert down[0].startswith("[previous draft of ")
    assert "NOT A NEW ANSWER (the model could not answer: transient)" in down[0]
    assert down[1] == "  " + answered[0].removeprefix("[answered] ")
    assert any(line.startswith("  S1: worker-shutdown/") for line in down)


@pytest.mark.slow
def test_ask_fails_over_to_the_configured_alternate_prepared_for_it(indexed_home: Path) -> None:
    # The primary is unreachable (a closed loopback port: a transient failure); the
    # alternate named in RAGWRIGHT_CHAT_FALLBACKS answers, with a request assembled for
    # its own smaller window and its own schema style, and the result says so.
    from tests.scripted_openai import scripted_openai

    question = "Should I drain all queued work during shutdown?"
    primary = {
        "RAGWRIGHT_CHAT_PROVIDER": "openai",
        "RAGWRIGHT_CHAT_MODEL": "primary-model",
        "RAGWRIGHT_CHAT_BASE_URL": "http://127.0.0.1:9/v1",
        "RAGWRIGHT_CHAT_SCHEMA_STYLE": "variants",
        # Drafts off: an earlier answer to this question in the shared home would be shown.
        "RAGWRIGHT_DRAFT_MAX_AGE": "0",
    }
    alone = ragwright("ask", question, "--k", "8", home=indexed_home, **primary)
    # Alone, the unreachable primary degrades the answer to evidence, labelled as such.
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.startswith(
        "[evidence only] NOT AN ANSWER (the model could not answer: transient)"
    )
    preview = json.loads(
        ragwright(
            "ask",
            question,
            "--k",
            "8",
            "--preview",
            "--json",
            home=indexed_home,
            check=True,
            **primary,
        ).stdout
    )
    with scripted_openai(_quote_s1) as (base_url, requests):  # type: ignore[arg-type]
        fallback = {
            "provider": "openai",
            "model": "scripted",
            "name": "backup",
            "base_url": base_url,
            "context_window": 1200,
            "output_limit": 200,
            "schema_style": "object",
        }
        out = json.loads(
            ragwright(
                "ask",
                question,
                "--k",
                "8",
                "--json",
                home=indexed_home,
                check=True,
                RAGWRIGHT_CHAT_FALLBACKS=json.dumps([fallback]),
                **primary,
            ).stdout
        )
    assert out["status"] == "answered" and out["fallback"] is True
    assert out["provider"] == "backup" and out["model"] == "scripted"
    (sent,) = requests
    schema = sent["body"]["response_format"]["json_schema"]["schema"]
    assert "anyOf" not in schema and schema["type"] == "object"  # the alternate's style
    assert sent["body"]["max_tokens"] == 200
    assert len(out["sources"]) < len(preview["sources"])  # re-assembled for 1,200 tokens
    assert out["citations"][0]["label"] in {s["label"] for s in out["sources"]}


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
    assert summary["skipped_documents"] == [
        {
            "document_id": "471",
            "source": f"{corpus}:2",
            "field": "sections[0].paragraphs",
            "reason": "section 'text' has no paragraphs",
        }
    ]


def test_read_commands_write_nothing_to_the_index(indexed_home: Path) -> None:
    contract = next(indexed_home.rglob("contract.json"))
    before = contract.stat()
    for command in (("status",), ("search", "drain the queue", "--k", "2"), ("verify",)):
        ragwright(*command, home=indexed_home, check=True)
    after = contract.stat()
    # Rewritten atomically, the file would have a new inode and modification time.
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_ask_on_the_embedded_defaults_loads_no_optional_client_library(
    indexed_home: Path,
) -> None:
    # What a command does not use, it does not import: the OpenAI SDK (the local model
    # speaks llama.cpp's API over httpx), PostgreSQL and Redis clients (not configured),
    # the document converters (nothing is ingested). Together about a second of every
    # command's start on two cores (docs/answers.md).
    optional = ("openai", "psycopg", "redis", "bs4", "docx", "pypdfium2", "markdown_it")
    code = (
        "import runpy, sys\n"
        "sys.argv = ['ragwright', 'ask', 'What should I do when a disk is full?',"
        " '--type', 'policy', '--json']\n"
        "try:\n"
        "    runpy.run_module('ragwright', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {optional!r} if m in sys.modules), file=sys.stderr)\n"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAGWRIGHT_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**environment, "RAGWRIGHT_HOME": str(indexed_home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert json.loads(done.stdout)["status"] == "no_eligible_evidence", done.stderr
    assert done.stderr.strip().splitlines()[-1] == "LOADED []"
