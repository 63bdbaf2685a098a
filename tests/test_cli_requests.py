"""Every command-line option reaches its typed request (the CLI holds no other logic).

The application is replaced by a recorder that keeps the request and stops the command;
the tests in tests/application show that each request field changes the outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ragwright.runtime
from ragwright.application import (
    ChatMessage,
    ChunkingOptions,
    ClearCalibrationRequest,
    EvidenceFilter,
    ThresholdOverrides,
)
from ragwright.cli import app
from ragwright.errors import RequestError, SourceError
from tests.conftest import SAMPLES

CASES = str(SAMPLES.parent / "eval" / "cases.jsonl")


class Recorded(Exception):
    def __init__(self, method: str, request: Any, **extra: Any) -> None:
        self.method, self.request, self.extra = method, request, extra


class RecordingApplication:
    def __init__(self, settings: Any = None) -> None:
        self.built_with = settings

    def __getattr__(self, method: str) -> Any:
        def record(request: Any = None, **extra: Any) -> Any:
            raise Recorded(method, request, **extra)

        return record


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(ragwright.runtime, "build_application", RecordingApplication)

    def run(*argv: str) -> Recorded:
        result = CliRunner().invoke(app, list(argv))
        assert isinstance(result.exception, Recorded), result.output
        return result.exception

    return run


def _field(request: Any, path: str) -> Any:
    for part in path.split("."):
        request = getattr(request, part)
    return request


OPTIONS: list[tuple[tuple[str, ...], str, str, Any]] = [
    # chunks
    (("chunks", "a.md", "b.md"), "chunks", "sources", (Path("a.md"), Path("b.md"))),
    (("chunks", "a.md", "--max-words", "40"), "chunks", "chunking.max_words", 40),
    (("chunks", "a.md", "--max-tokens", "128"), "chunks", "chunking.max_tokens", 128),
    (("chunks", "a.md", "--no-overlap"), "chunks", "chunking.overlap", False),
    (
        ("chunks", "a.md", "--policy", "sentence-blocks"),
        "chunks",
        "chunking.policy",
        "sentence-blocks",
    ),
    (("chunks", "a.md", "--type", "note"), "chunks", "document_type", "note"),
    (("chunks", "a.md", "--state", "draft"), "chunks", "publication_state", "draft"),
    # ingest
    (("ingest", "a.md"), "ingest", "chunking", ChunkingOptions()),
    (("ingest", "a.md", "--prune"), "ingest", "prune", True),
    (("ingest", "a.md", "--max-words", "40"), "ingest", "chunking.max_words", 40),
    (("ingest", "a.md", "--max-tokens", "64"), "ingest", "chunking.max_tokens", 64),
    (("ingest", "a.md", "--no-overlap"), "ingest", "chunking.overlap", False),
    (
        ("ingest", "a.md", "--policy", "sentence-blocks"),
        "ingest",
        "chunking.policy",
        "sentence-blocks",
    ),
    (("ingest", "a.md", "--type", "note"), "ingest", "document_type", "note"),
    (("ingest", "a.md", "--state", "draft"), "ingest", "publication_state", "draft"),
    (("ingest", "a.md", "--add-chunking-version"), "ingest", "add_chunking_version", True),
    (("ingest", "c.jsonl", "--skip-invalid"), "ingest", "skip_invalid", True),
    (("ingest", "a.md"), "ingest", "tenant", None),
    (("ingest", "a.md", "--tenant", "acme"), "ingest", "tenant", "acme"),
    (("chunks", "c.jsonl", "--skip-invalid"), "chunks", "skip_invalid", True),
    # search
    # The operator may see every type and state: a result counts what the defaults left out.
    (
        ("search", "q?"),
        "search",
        "evidence",
        EvidenceFilter(also_visible_types=None, also_visible_states=None),
    ),
    (("search", "q?", "--k", "7"), "search", "k", 7),
    (("search", "q?", "--mode", "sparse"), "search", "mode", "sparse"),
    (
        ("search", "q?", "--type", "note", "--type", "runbook"),
        "search",
        "evidence.types",
        ("note", "runbook"),
    ),
    (("search", "q?", "--state", "draft"), "search", "evidence.states", ("draft",)),
    (("search", "q?", "--document", "d1"), "search", "evidence.documents", ("d1",)),
    (("search", "q?", "--chunking-version", "v9"), "search", "evidence.chunking_version", "v9"),
    (("search", "q?", "--tenant", "acme"), "search", "tenant", "acme"),
    (("search", "q?"), "search", "thresholds", ThresholdOverrides()),
    (("search", "q?", "--threshold-dense", "0.3"), "search", "thresholds.dense", 0.3),
    (("search", "q?", "--threshold-sparse", "2"), "search", "thresholds.sparse", 2.0),
    (("search", "q?", "--threshold-fusion", "0.01"), "search", "thresholds.fusion", 0.01),
    (("search", "q?", "--threshold-rerank", "0.5"), "search", "thresholds.rerank", 0.5),
    # ask
    (("ask", "q?", "--k", "3"), "answer", "k", 3),
    (("ask", "q?", "--mode", "dense"), "answer", "mode", "dense"),
    (("ask", "q?", "--policy", "seed-baseline+edges"), "answer", "policy", "seed-baseline+edges"),
    (("ask", "q?", "--type", "note"), "answer", "evidence.types", ("note",)),
    (("ask", "q?", "--state", "draft"), "answer", "evidence.states", ("draft",)),
    (("ask", "q?", "--document", "d1"), "answer", "evidence.documents", ("d1",)),
    (("ask", "q?", "--chunking-version", "v9"), "answer", "evidence.chunking_version", "v9"),
    (("ask", "q?", "--tenant", "acme"), "answer", "tenant", "acme"),
    (("ask", "q?", "--deadline", "9.5"), "answer", "deadline_seconds", 9.5),
    (
        ("ask", "q?", "--current-revision", "d1=r2", "--current-revision", "d2=r7"),
        "answer",
        "current_revisions",
        {"d1": "r2", "d2": "r7"},
    ),
    (("ask", "q?", "--preview"), "answer", "preview", True),
    (("ask", "q?", "--check-support"), "answer", "check_support", True),
    (("ask", "q?", "--no-check-support"), "answer", "check_support", False),
    (("ask", "q?"), "answer", "thresholds", ThresholdOverrides()),
    (("ask", "q?", "--threshold-dense", "0.3"), "answer", "thresholds.dense", 0.3),
    (("ask", "q?", "--threshold-sparse", "2"), "answer", "thresholds.sparse", 2.0),
    (("ask", "q?", "--threshold-fusion", "0.01"), "answer", "thresholds.fusion", 0.01),
    (("ask", "q?", "--threshold-rerank", "0.5"), "answer", "thresholds.rerank", 0.5),
    (("ask", "q?"), "answer", "style", None),
    (("ask", "q?", "--style", "quoted"), "answer", "style", "quoted"),
    (("ask", "q?", "--style", "evidence"), "answer", "style", "evidence"),
    # eval run
    (("eval", "run", CASES), "evaluate", "dataset.path", Path(CASES)),
    (("eval", "run", "--beir", "dir", "--split", "dev"), "evaluate", "dataset.split", "dev"),
    (("eval", "run", CASES, "--mode", "dense"), "evaluate", "mode", "dense"),
    (("eval", "run", CASES, "--k", "2,4"), "evaluate", "ks", (2, 4)),
    (("eval", "run", CASES, "--type", "note"), "evaluate", "evidence.types", ("note",)),
    (("eval", "run", CASES, "--state", "draft"), "evaluate", "evidence.states", ("draft",)),
    (
        ("eval", "run", CASES, "--chunking-version", "v9"),
        "evaluate",
        "evidence.chunking_version",
        "v9",
    ),
    (("eval", "run", CASES, "--tenant", "acme"), "evaluate", "tenant", "acme"),
    (
        (
            "eval",
            "run",
            CASES,
            "--threshold-dense",
            "0.3",
            "--threshold-sparse",
            "2",
            "--threshold-fusion",
            "0.01",
            "--threshold-rerank",
            "0.5",
        ),
        "evaluate",
        "thresholds",
        ThresholdOverrides(dense=0.3, sparse=2.0, fusion=0.01, rerank=0.5),
    ),
    (("eval", "run", CASES, "--with-text"), "evaluate", "with_text", True),
    (("eval", "run", CASES), "evaluate", "with_text", True),  # texts by default
    (("eval", "run", CASES, "--without-text"), "evaluate", "with_text", False),
    (("eval", "run", CASES, "--report"), "evaluate", "report", True),
    (("eval", "run", CASES, "--report", "--compare", "r0"), "evaluate", "compare", "r0"),
    (("eval", "run", CASES, "--answers"), "evaluate", "answers", True),
    (("eval", "run", CASES, "--answers", "--style", "evidence"), "evaluate", "style", "evidence"),
    (("eval", "run", CASES, "--answers"), "evaluate", "resume", None),
    (("eval", "run", CASES, "--answers", "--resume", "r1"), "evaluate", "resume", "r1"),
    # eval calibrate
    (("eval", "calibrate", CASES, "--mode", "dense"), "calibrate", "mode", "dense"),
    (("eval", "calibrate", CASES, "--k", "3"), "calibrate", "k", 3),
    (("eval", "calibrate", CASES, "--type", "note"), "calibrate", "evidence.types", ("note",)),
    (("eval", "calibrate", CASES, "--state", "draft"), "calibrate", "evidence.states", ("draft",)),
    (
        ("eval", "calibrate", CASES, "--chunking-version", "v9"),
        "calibrate",
        "evidence.chunking_version",
        "v9",
    ),
    (("eval", "calibrate", CASES, "--tenant", "acme"), "calibrate", "tenant", "acme"),
    (("eval", "calibrate", CASES, "--max-recall-loss", "0.1"), "calibrate", "max_recall_loss", 0.1),
    (("eval", "calibrate", CASES, "--max-candidates", "4"), "calibrate", "max_candidates", 4),
    (("eval", "calibrate", CASES), "calibrate", "folds", 5),
    (("eval", "calibrate", CASES, "--folds", "3"), "calibrate", "folds", 3),
    (("eval", "calibrate", CASES), "calibrate", "holdout", None),
    (
        ("eval", "calibrate", CASES, "--holdout", "h.jsonl"),
        "calibrate",
        "holdout.path",
        Path("h.jsonl"),
    ),
    (("eval", "calibrate", CASES), "calibrate", "force", False),
    (("eval", "calibrate", CASES, "--force"), "calibrate", "force", True),
    (("eval", "calibrate", CASES), "calibrate", "write", False),
    (("eval", "calibrate", CASES, "--write"), "calibrate", "write", True),
    (("eval", "calibrate", CASES), "calibrate", "max_answerable_loss", 0.1),
    (
        ("eval", "calibrate", CASES, "--max-answerable-loss", "0.2"),
        "calibrate",
        "max_answerable_loss",
        0.2,
    ),
    # eval compare / report
    (("eval", "compare", "r1", "r2"), "compare", "before", "r1"),
    (("eval", "compare", "r1", "r2"), "compare", "after", "r2"),
    (("eval", "compare", "r1", "r2", "--k", "3"), "compare", "k", 3),
    (("eval", "compare", "r1", "r2", "--metric", "recall"), "compare", "metric", "recall"),
    (("eval", "report", "r1"), "report", "run", "r1"),
    (("eval", "report", "r1", "--compare", "r0"), "report", "compare", "r0"),
    # keys
    (("keys", "add", "--scope", "search", "--tenant", "acme"), "add_key", "tenant", "acme"),
    (("keys", "add", "--scope", "search", "--no-tenant"), "add_key", "tenant", None),
    (
        ("keys", "add", "--no-tenant", "--scope", "answer", "--scope", "search"),
        "add_key",
        "scopes",
        ("answer", "search"),
    ),
    (("keys", "add", "--scope", "search", "--no-tenant"), "add_key", "documents", ()),
    (
        ("keys", "add", "--scope", "search", "--no-tenant", "--document", "d1", "--document", "d2"),
        "add_key",
        "documents",
        ("d1", "d2"),
    ),
    (("keys", "add", "--scope", "search", "--no-tenant"), "add_key", "types", ()),
    (
        ("keys", "add", "--scope", "search", "--no-tenant", "--type", "note"),
        "add_key",
        "types",
        ("note",),
    ),
    (("keys", "add", "--scope", "search", "--no-tenant"), "add_key", "states", ()),
    (
        ("keys", "add", "--scope", "search", "--no-tenant", "--state", "draft"),
        "add_key",
        "states",
        ("draft",),
    ),
    (("keys", "add", "--scope", "search", "--no-tenant"), "add_key", "name", ""),
    (
        ("keys", "add", "--scope", "search", "--no-tenant", "--name", "bot"),
        "add_key",
        "name",
        "bot",
    ),
    (("keys", "revoke", "0123456789ab"), "revoke_key", "key_id", "0123456789ab"),
]


@pytest.mark.parametrize(
    ("argv", "method", "path", "expected"), OPTIONS, ids=[" ".join(o[0]) for o in OPTIONS]
)
def test_each_option_reaches_its_request_field(
    invoke: Any, argv: tuple[str, ...], method: str, path: str, expected: Any
) -> None:
    recorded = invoke(*argv)
    assert recorded.method == method
    assert _field(recorded.request, path) == expected


def test_calibrate_clear_removes_the_persisted_calibration(invoke: Any) -> None:
    recorded = invoke("eval", "calibrate", "--clear")
    assert recorded.method == "clear_calibration"
    assert recorded.request == ClearCalibrationRequest()


def test_ingest_server_reads_the_documents_through_the_application(
    invoke: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGWRIGHT_API_KEY", "rwk_key")
    recorded = invoke("ingest", "a.md", "--server", "http://127.0.0.1:9", "--prune")
    assert recorded.method == "load_documents"
    assert (recorded.request.sources, recorded.request.prune) == ((Path("a.md"),), True)


def test_serve_host_and_port_reach_the_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn

    from tests.application.components import fake_application

    application, _ = fake_application(tmp_path)
    built: list[Any] = []
    monkeypatch.setattr(
        ragwright.runtime,
        "build_application",
        lambda settings=None: built.append(settings) or application,
    )
    monkeypatch.delenv("RAGWRIGHT_EMBEDDING_THREADS", raising=False)
    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(options, app=app))
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert (served["host"], served["port"]) == ("0.0.0.0", 8123)
    assert served["app"].state.ragwright.application is application
    # A service runs one intra-op thread per query embedding unless told otherwise.
    assert built[0].embedding.threads == 1


def test_keys_list_asks_for_every_key(invoke: Any) -> None:
    recorded = invoke("keys", "list")
    assert (recorded.method, recorded.request) == ("list_keys", None)


def test_calibrate_force_help_names_the_rule_the_application_applies() -> None:
    from ragwright.pipeline.calibrate import MIN_UNSUPPORTED

    result = CliRunner().invoke(app, ["eval", "calibrate", "--help"], env={"COLUMNS": "200"})
    assert f"fewer than {MIN_UNSUPPORTED} unsupported" in result.output


def test_history_file_becomes_turns(invoke: Any, tmp_path: Path) -> None:
    qa = tmp_path / "qa.json"
    qa.write_text('[{"question": "Who is paged?", "answer": "On-call."}]')
    chat = tmp_path / "chat.json"
    chat.write_text(
        '[{"role": "user", "content": "Who is paged?"},'
        ' {"role": "assistant", "content": "On-call."}]'
    )
    for path in (qa, chat):
        assert invoke("ask", "q?", "--history", str(path)).request.history == (
            ChatMessage("user", "Who is paged?"),
            ChatMessage("assistant", "On-call."),
        )


@pytest.mark.parametrize(
    "content", ['{"question": "x"}', '[{"role": "system", "content": "x"}]', "not json"]
)
def test_a_malformed_history_file_is_refused_naming_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "history.json"
    path.write_text(content)
    result = CliRunner().invoke(app, ["ask", "q?", "--history", str(path)])
    assert isinstance(result.exception, SourceError)
    assert result.exception.source == str(path) and "history" in result.exception.reason


def test_eval_run_compare_without_report_is_refused_naming_compare(invoke: Any) -> None:
    result = CliRunner().invoke(app, ["eval", "run", CASES, "--compare", "r0"])
    assert isinstance(result.exception, RequestError) and result.exception.field == "compare"


@pytest.mark.parametrize(
    "argv",
    [
        ("ingest", "a.md", "--progress"),
        ("eval", "calibrate", CASES, "--progress"),
        ("eval", "run", CASES, "--answers", "--progress"),
    ],
)
def test_progress_flag_forces_line_progress(invoke: Any, argv: tuple[str, ...]) -> None:
    display = invoke(*argv).extra["progress"]
    assert display._lines is True


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (("search", "q?", "--mode", "fuzzy"), "--mode"),
        (("ask", "q?", "--mode", "fuzzy"), "--mode"),
        (("ingest", "a.md", "--policy", "paragraphs"), "--policy"),
        (("ask", "q?", "--policy", "nonsense"), "--policy"),
        (("ask", "q?", "--policy", "seed-baseline+foo"), "--policy"),
        (("eval", "run"), "DATASET"),
        (("eval", "compare", "a", "b", "--metric", "f1"), "--metric"),
        (("eval", "run", CASES, "--k", "0,3"), "--k"),
        (("eval", "calibrate"), "DATASET"),
        (("eval", "calibrate", CASES, "--clear"), "--clear"),
        (("eval", "calibrate", "--clear", "--write"), "--clear"),
        (("eval", "calibrate", CASES, "--folds", "3", "--holdout", "h.jsonl"), "--holdout"),
        (("eval", "calibrate", CASES, "--folds", "1"), "--folds"),
        (("eval", "run", CASES, "--answers", "--style", "verbose"), "--style"),
        (("eval", "run", CASES, "--style", "quoted"), "--style"),
        (("eval", "run", CASES, "--resume", "latest"), "--resume"),
        (("ask", "q?", "--style", "poetic"), "--style"),
        (("eval", "calibrate", CASES, "--max-answerable-loss", "2"), "--max-answerable-loss"),
        (("keys", "add", "--no-tenant", "--scope", "write"), "--scope"),
        (("keys", "add", "--no-tenant"), "--scope"),
        (("keys", "add", "--no-tenant", "--scope", "search", "--state", "live"), "--state"),
        (("keys", "add", "--scope", "search"), "--no-tenant"),
        (("keys", "add", "--scope", "search", "--tenant", "a", "--no-tenant"), "--no-tenant"),
    ],
)
def test_invalid_choices_are_usage_errors_naming_the_option(
    invoke: Any, argv: tuple[str, ...], option: str
) -> None:
    result = CliRunner().invoke(app, list(argv))
    assert result.exit_code == 2 and option in result.output
