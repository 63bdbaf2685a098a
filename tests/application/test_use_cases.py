"""Every request field changes what its use case does (issue 8: an option that changes
nothing is a defect). Each case runs one use case twice, with the field at its default and
with another value, and names the difference that must appear."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ragwright.application import (
    AnswerRequest,
    Application,
    CalibrateRequest,
    ChatMessage,
    ChunkingOptions,
    ChunksRequest,
    CompareRequest,
    Dataset,
    EvaluateRequest,
    EvidenceFilter,
    IngestRequest,
    ReportRequest,
    SearchRequest,
    ThresholdOverrides,
)
from ragwright.errors import (
    AssemblyError,
    ConfigError,
    ContractMismatch,
    DocumentError,
    EvaluationError,
    FailureCategory,
    RequestError,
)
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel
from tests.application.components import answered, fake_application, quoted
from tests.cli import copy_tree
from tests.conftest import SAMPLES

QUESTION = "Should I drain all queued work during shutdown?"
HISTORY = (
    ChatMessage("user", "Who gets paged?"),
    ChatMessage("assistant", "The on-call engineer."),
)
CASES = SAMPLES.parent / "eval" / "cases.jsonl"
INSUFFICIENT = json.dumps({"status": "insufficient", "answer": "", "sourceIds": []})
TENANT_DOC = """---
document_id: acme-escalation
document_type: runbook
publication_state: published
tenant: acme
---
# Acme escalation

## Escalate

Acme incidents escalate to the acme duty manager after fifteen minutes of shutdown drain.
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    shutil.copytree(SAMPLES, root / "samples")
    (root / "samples" / "acme-escalation.md").write_text(TENANT_DOC, "utf-8")
    (root / "samples" / "notes.csv").write_text("not a document", "utf-8")
    return root / "samples"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    home = tmp_path_factory.mktemp("home")
    app, _ = fake_application(home)
    app.ingest(IngestRequest(sources=(corpus,)))
    return home


@pytest.fixture
def home(tmp_path: Path, indexed: Path) -> Iterator[Path]:
    copy = tmp_path / "home"
    copy_tree(indexed, copy)
    yield copy


def _app(home: Path, **settings: object) -> Application:
    return fake_application(home, **settings)[0]


# --- chunks ----------------------------------------------------------------------------

CHUNKS_CHANGES: list[tuple[str, dict[str, Any], Callable[[Any], Any]]] = [
    (
        "sources",
        {"sources": (SAMPLES / "refund-policy.md",)},
        lambda r: {c.document_id for c in r.chunks},
    ),
    (
        "chunking.policy",
        {"chunking": ChunkingOptions(policy="sentence-blocks")},
        lambda r: r.chunking_version,
    ),
    ("chunking.max_words", {"chunking": ChunkingOptions(max_words=30)}, lambda r: len(r.chunks)),
    (
        "chunking.max_tokens",
        {"chunking": ChunkingOptions(max_tokens=200)},
        lambda r: r.chunking_version,
    ),
    (
        "chunking.overlap",
        {"chunking": ChunkingOptions(overlap=False)},
        lambda r: [c.text for c in r.chunks],
    ),
    ("document_type", {"document_type": "note"}, lambda r: {c.document_type for c in r.chunks}),
    (
        "publication_state",
        {"publication_state": "draft"},
        lambda r: {c.publication_state for c in r.chunks},
    ),
]


@pytest.mark.parametrize(
    ("field", "change", "observe"), CHUNKS_CHANGES, ids=[c[0] for c in CHUNKS_CHANGES]
)
def test_chunks_request_fields_change_the_preview(
    tmp_path: Path, field: str, change: dict[str, Any], observe: Callable[[Any], Any]
) -> None:
    source = tmp_path / "plain.md"
    source.write_text(
        "# Plain\n\n## Body\n\n"
        + "\n\n".join(f"Sentence {i} " * 12 + "ends here." for i in range(4)),
        "utf-8",
    )
    app = _app(tmp_path / "h")
    base = ChunksRequest(sources=(source,), document_type="runbook", publication_state="published")
    assert observe(app.chunks(base)) != observe(app.chunks(replace(base, **change)))


def test_chunks_lists_the_files_it_skipped_and_why(corpus: Path, tmp_path: Path) -> None:
    result = _app(tmp_path / "h").chunks(ChunksRequest(sources=(corpus,)))
    reasons = {Path(s.path).name: s.reason for s in result.skipped_files}
    assert "unsupported file type '.csv'" in reasons["notes.csv"]


def test_chunking_overrides_are_validated_like_settings(tmp_path: Path) -> None:
    app = _app(tmp_path / "h")
    with pytest.raises(ConfigError) as error:
        app.chunks(ChunksRequest(sources=(SAMPLES,), chunking=ChunkingOptions(max_words=5000)))
    assert error.value.setting == "RAGWRIGHT_MAX_WORDS"


# --- ingest ----------------------------------------------------------------------------


def test_ingest_prune_deletes_documents_missing_from_the_sources(home: Path) -> None:
    app = _app(home)
    only = (SAMPLES / "refund-policy.md",)
    kept = app.ingest(IngestRequest(sources=only))
    pruned = app.ingest(IngestRequest(sources=only, prune=True))
    assert kept.deleted == 0 and kept.documents_pruned == 0
    # Every untenanted sample but refund-policy goes; acme's document is outside the scope.
    assert pruned.tenants == (None,) and pruned.documents_pruned == 9 and pruned.deleted > 0
    held = {(d.tenant, d.document_id) for d in app.status().documents}
    assert held == {(None, "refund-policy"), ("acme", "acme-escalation")}


def test_ingest_chunking_and_add_version_reach_the_index(home: Path) -> None:
    app = _app(home)
    other = ChunkingOptions(max_words=40)
    with pytest.raises(ContractMismatch):
        app.ingest(IngestRequest(sources=(SAMPLES,), chunking=other))
    result = app.ingest(
        IngestRequest(sources=(SAMPLES,), chunking=other, add_chunking_version=True)
    )
    assert result.chunking_version == "section-paragraphs-40w-overlap1-v1" and result.embedded > 0
    status = app.status()
    assert set(status.chunking_versions) == {
        "section-paragraphs-80w-overlap1-v1",
        "section-paragraphs-40w-overlap1-v1",
    }
    assert [
        v.queried
        for v in status.versions
        if v.chunking_version.startswith("section-paragraphs-40w")
    ] == [False]


@pytest.mark.parametrize(
    ("field", "value", "attribute"),
    [
        ("document_type", "note", "document_type"),
        ("publication_state", "draft", "publication_state"),
    ],
)
def test_ingest_metadata_defaults_reach_the_stored_documents(
    tmp_path: Path, field: str, value: str, attribute: str
) -> None:
    source = tmp_path / "bare.md"
    source.write_text("# Bare\n\n## Body\n\nA paragraph without front matter.\n", "utf-8")
    app = _app(tmp_path / "h")
    defaults = {"document_type": "runbook", "publication_state": "published", field: value}
    app.ingest(IngestRequest(sources=(source,), **defaults))
    (document,) = app.status().documents
    assert getattr(document, attribute) == value


def test_ingest_reports_skipped_files(corpus: Path, tmp_path: Path) -> None:
    result = _app(tmp_path / "h").ingest(IngestRequest(sources=(corpus,)))
    assert [Path(s.path).name for s in result.skipped_files] == ["notes.csv"]
    assert result.to_dict()["skipped_files"][0]["reason"].startswith("unsupported file type")


# --- search ----------------------------------------------------------------------------

SEARCH_CHANGES: list[tuple[str, dict[str, Any], Callable[[Any], Any]]] = [
    (
        "question",
        {"question": "How do I rotate the TLS certificate?"},
        lambda r: r.hits[0].document_id,
    ),
    ("k", {"k": 2}, lambda r: len(r.hits)),
    ("mode", {"mode": "dense"}, lambda r: r.score_kind),
    (
        "evidence.types",
        {"evidence": EvidenceFilter(types=("note",))},
        lambda r: {h.document_type for h in r.hits},
    ),
    (
        "evidence.states",
        {"evidence": EvidenceFilter(states=("draft",))},
        lambda r: {h.publication_state for h in r.hits},
    ),
    (
        "evidence.documents",
        {"evidence": EvidenceFilter(documents=("disk-full-logs",))},
        lambda r: {h.document_id for h in r.hits},
    ),
    (
        "evidence.chunking_version",
        {"evidence": EvidenceFilter(chunking_version="other-v1")},
        lambda r: (len(r.hits), dict(r.excluded_versions)),
    ),
    ("tenant", {"tenant": "acme"}, lambda r: {h.document_id for h in r.hits}),
    ("thresholds", {"thresholds": ThresholdOverrides(dense=0.99)}, lambda r: len(r.hits)),
]


@pytest.mark.parametrize(
    ("field", "change", "observe"), SEARCH_CHANGES, ids=[c[0] for c in SEARCH_CHANGES]
)
def test_search_request_fields_change_the_result(
    home: Path, field: str, change: dict[str, Any], observe: Callable[[Any], Any]
) -> None:
    app = _app(home)
    base = SearchRequest(QUESTION, k=10)
    assert observe(app.search(base)) != observe(app.search(replace(base, **change)))


def test_tenant_documents_are_visible_only_to_their_tenant(home: Path) -> None:
    app = _app(home)
    anonymous = {h.document_id for h in app.search(SearchRequest(QUESTION, k=20)).hits}
    acme = {h.document_id for h in app.search(SearchRequest(QUESTION, k=20, tenant="acme")).hits}
    assert "acme-escalation" in acme and "acme-escalation" not in anonymous


def test_search_says_which_chunking_versions_it_left_out(home: Path) -> None:
    app = _app(home)
    app.ingest(
        IngestRequest(
            sources=(SAMPLES,), chunking=ChunkingOptions(max_words=40), add_chunking_version=True
        )
    )
    result = app.search(SearchRequest(QUESTION))
    assert result.chunking_version == "section-paragraphs-80w-overlap1-v1"
    assert result.excluded_versions["section-paragraphs-40w-overlap1-v1"] > 0
    other = app.search(
        SearchRequest(
            QUESTION, evidence=EvidenceFilter(chunking_version="section-paragraphs-40w-overlap1-v1")
        )
    )
    assert {h.chunking_version for h in other.hits} == {"section-paragraphs-40w-overlap1-v1"}
    # The count is a hint about stored documents: a caller's allowlist bounds it too.
    allowlisted = app.search(SearchRequest(QUESTION, allowed_documents=("worker-shutdown",)))
    narrowed = allowlisted.excluded_versions["section-paragraphs-40w-overlap1-v1"]
    assert 0 < narrowed < result.excluded_versions["section-paragraphs-40w-overlap1-v1"]


def test_search_json_form_is_stable(home: Path) -> None:
    data = _app(home).search(SearchRequest(QUESTION, k=3)).to_dict()
    assert set(data) == {
        "question",
        "mode",
        "score_kind",
        "chunking_version",
        "chunking_version_source",
        "thresholds",
        "thresholds_source",
        "thresholds_sources",
        "calibration",
        "no_eligible_evidence",
        "searched",
        "excluded_versions",
        "excluded_types",
        "excluded_states",
        "hits",
    }
    assert json.loads(json.dumps(data)) == data


# --- answer ----------------------------------------------------------------------------


def _answer(app: Application, request: AnswerRequest) -> dict[str, Any]:
    return asyncio.run(app.answer(request)).to_dict()


ANSWER_CHANGES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], Any]]] = [
    (
        "question",
        {"question": "How do I rotate the TLS certificate?"},
        lambda r: r["sources"][0]["document_id"],
    ),
    ("k", {"k": 1}, lambda r: len(r["decisions"])),
    ("mode", {"mode": "sparse"}, lambda r: [d["chunk_id"] for d in r["decisions"]]),
    ("policy", {"policy": "whole-or-marked-fragment+edges"}, lambda r: r["policy"]),
    (
        "evidence",
        {"evidence": EvidenceFilter(types=("note",))},
        lambda r: {s["document_id"] for s in r["sources"]},
    ),
    ("tenant", {"tenant": "acme"}, lambda r: {s["document_id"] for s in r["sources"]}),
    (
        "history",
        {"history": HISTORY},
        lambda r: r["request"]["messages"][1]["content"],
    ),
    ("preview", {"preview": True}, lambda r: (r["status"], r["usage"])),
    ("check_support", {"check_support": False}, lambda r: r["support"] is None),
    (
        "thresholds",
        {"thresholds": ThresholdOverrides(dense=0.99, sparse=50.0)},
        lambda r: r["status"],
    ),
    ("style", {"style": "evidence"}, lambda r: (r["status"], r["style"], len(r["quotes"]))),
]


@pytest.mark.parametrize(
    ("provider", "setting", "expected"),
    [
        ("local", "auto", "quoted"),
        ("openai", "auto", "generated"),
        ("ollama", "auto", "generated"),
        ("local", "generated", "generated"),
        ("openai", "evidence", "evidence"),
    ],
)
def test_the_answer_style_follows_the_setting_and_the_provider(
    home: Path, provider: str, setting: str, expected: str
) -> None:
    app, _ = fake_application(home, chat_provider=provider, answer_style=setting)
    assert app.answer_style() == expected
    assert app.answer_style("quoted") == "quoted"  # a request's style wins


def test_a_quoted_answer_through_the_application(home: Path) -> None:
    preview = _answer(
        fake_application(home, answer_style="quoted")[0], AnswerRequest(QUESTION, preview=True)
    )
    body = json.loads(preview["request"]["messages"][1]["content"])
    first = body["evidence"][0]["sentences"][0]
    app, _ = fake_application(home, ScriptedChatModel([quoted(first["id"])]), answer_style="quoted")
    outcome = _answer(app, AnswerRequest(QUESTION))
    assert outcome["status"] == "answered" and outcome["style"] == "quoted"
    assert outcome["answer"] == first["text"] and outcome["quotes"][0]["id"] == first["id"]
    assert outcome["options"]["style"] == "quoted"


def test_an_unknown_answer_style_is_refused_naming_the_field() -> None:
    with pytest.raises(RequestError) as caught:
        AnswerRequest(QUESTION, style="poetic")  # type: ignore[arg-type]
    assert caught.value.field == "style" and "quoted, generated, evidence" in str(caught.value)


def test_evidence_style_opens_no_chat_session(home: Path) -> None:
    app, components = fake_application(home)
    outcome = _answer(app, AnswerRequest(QUESTION, style="evidence"))
    assert outcome["status"] == "evidence_only" and components.sessions == 0
    assert outcome["answer"] == "" and outcome["quotes"]


def test_the_answerability_threshold_comes_from_settings_then_calibration(home: Path) -> None:
    app, components = fake_application(home, ScriptedChatModel([answered("S1")] * 4))
    assert app.answerability_threshold() == (None, "none")
    signal = _answer(app, AnswerRequest(QUESTION, style="evidence"))["answerability"]
    # Persist a calibration whose answerability threshold is above this question's signal.
    cases = home / "cases.jsonl"
    _write_calibration_cases(cases)
    app.calibrate(CalibrateRequest(Dataset(cases), force=True, write=True, folds=2))
    record = json.loads(app.calibration_file().read_text("utf-8"))
    assert record["answerability"] is None or "threshold" in record["answerability"]
    record["answerability"] = {
        "threshold": signal["score"] + 0.01,
        "max_answerable_loss": 0.1,
        "style": "evidence",
        "in_sample": _FIGURES,
        "held_out": _FIGURES,
    }
    app.calibration_file().write_text(json.dumps(record), "utf-8")
    calls = components.model.calls  # type: ignore[attr-defined]
    outcome = _answer(app, AnswerRequest(QUESTION))
    assert outcome["status"] == "insufficient" and components.model.calls == calls  # type: ignore[attr-defined]
    assert outcome["options"]["answerability_source"] == "calibration"
    # An explicit setting wins over the record.
    app2, _ = fake_application(home, answerability_threshold=-1.0)
    assert app2.answerability_threshold() == (-1.0, "settings")
    assert _answer(app2, AnswerRequest(QUESTION))["status"] == "answered"


_FIGURES = {
    "answerable": 2,
    "unsupported": 2,
    "answerable_declined": 0,
    "unsupported_declined": 1,
    "answerable_declined_rate": 0.0,
    "unsupported_declined_rate": 0.5,
}


def _write_calibration_cases(path: Path) -> None:
    lines = [
        {
            "id": "a1",
            "category": "c",
            "question": QUESTION,
            "relevant": [{"document_id": "worker-shutdown", "grade": 2}],
        },
        {
            "id": "a2",
            "category": "c",
            "question": "How do I rotate the TLS certificate?",
            "relevant": [{"document_id": "certificate-rotation", "grade": 2}],
        },
        {"id": "u1", "category": "u", "question": "Which regions host us?", "unsupported": True},
        {"id": "u2", "category": "u", "question": "How tall is the CEO?", "unsupported": True},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")


def test_calibrate_recommends_an_answerability_threshold_with_held_out_figures(
    home: Path,
) -> None:
    app, _ = fake_application(home)
    cases = home / "cases.jsonl"
    _write_calibration_cases(cases)
    result = app.calibrate(CalibrateRequest(Dataset(cases), force=True, folds=2)).to_dict()
    signal = result["answerability"]
    assert signal["style"] == "evidence" and signal["max_answerable_loss"] == 0.1
    assert signal["in_sample"]["answerable"] == 2 and signal["held_out"]["unsupported"] == 2
    loose = app.calibrate(
        CalibrateRequest(Dataset(cases), force=True, folds=2, max_answerable_loss=1.0)
    ).to_dict()["answerability"]
    # Allowed to decline every answerable question, it declines every unsupported one.
    assert loose["in_sample"]["unsupported_declined"] == 2


@pytest.mark.parametrize(
    ("field", "change", "observe"), ANSWER_CHANGES, ids=[c[0] for c in ANSWER_CHANGES]
)
def test_answer_request_fields_change_the_outcome(
    home: Path, field: str, change: dict[str, Any], observe: Callable[[dict[str, Any]], Any]
) -> None:
    app = _app(home)
    base = AnswerRequest(QUESTION, mode="hybrid")
    assert observe(_answer(app, base)) != observe(_answer(app, replace(base, **change)))


@pytest.mark.parametrize(
    ("setting", "requested", "checked"),
    [(True, None, True), (False, None, False), (False, True, True), (True, False, False)],
)
def test_the_support_check_follows_the_setting_unless_the_request_says(
    home: Path, setting: bool, requested: bool | None, checked: bool
) -> None:
    app = _app(home, answer_support_check=setting)
    outcome = _answer(app, AnswerRequest(QUESTION, check_support=requested))
    assert (outcome["support"] is not None) is checked
    assert outcome["options"]["support_check"] is checked


def test_an_unsupported_answer_is_withheld_with_its_evidence(home: Path) -> None:
    claim = "Refunds are paid in cash at the branch office."
    app, _ = fake_application(home, ScriptedChatModel([answered("S1", text=claim)]))
    outcome = _answer(app, AnswerRequest(QUESTION))
    assert (outcome["status"], outcome["answer"]) == ("unsupported", "")
    assert outcome["withheld_answer"] == claim and outcome["sources"]
    assert outcome["support"]["unsupported_sentences"] == [claim]


def test_history_reaches_the_model_even_under_a_policy_without_a_history_share(home: Path) -> None:
    app, components = fake_application(home)
    outcome = _answer(app, AnswerRequest(QUESTION, history=HISTORY))
    model = components.model
    assert isinstance(model, ScriptedChatModel)
    sent = json.loads(model.requests[-1].messages[-1].content)
    assert sent["history"] == [{"question": "Who gets paged?", "answer": "The on-call engineer."}]
    assert outcome["options"]["policy"] == "seed-baseline+history=0.25"


def test_current_revisions_drop_evidence_stored_under_another_revision(home: Path) -> None:
    app = _app(home)
    policy = "seed-baseline+prefer-current-revision"
    stored = _answer(
        app, AnswerRequest(QUESTION, policy=policy, preview=True, current_revisions={})
    )
    revision = next(
        s["revision"] for s in stored["sources"] if s["document_id"] == "worker-shutdown"
    )
    same = {"worker-shutdown": revision}
    newer = {"worker-shutdown": "a-newer-revision"}
    kept = _answer(
        app, AnswerRequest(QUESTION, policy=policy, preview=True, current_revisions=same)
    )
    dropped = _answer(
        app, AnswerRequest(QUESTION, policy=policy, preview=True, current_revisions=newer)
    )
    assert "worker-shutdown" in {s["document_id"] for s in kept["sources"]}
    assert "worker-shutdown" not in {s["document_id"] for s in dropped["sources"]}
    assert {
        d["outcome"] for d in dropped["decisions"] if d["document_id"] == "worker-shutdown"
    } == {"stale_revision"}


def test_prefer_current_revision_without_revisions_names_the_option(home: Path) -> None:
    request = AnswerRequest(QUESTION, policy="seed-baseline+prefer-current-revision")
    with pytest.raises(AssemblyError, match="--current-revision DOC=REV"):
        _answer(_app(home), request)


def test_history_must_alternate_user_and_assistant(home: Path) -> None:
    app = _app(home)
    with pytest.raises(AssemblyError, match=r"history\[0\]\.role"):
        _answer(
            app,
            AnswerRequest(
                QUESTION, history=(ChatMessage("assistant", "hi"), ChatMessage("user", "x"))
            ),
        )


def test_preview_never_opens_a_chat_session(home: Path) -> None:
    app, components = fake_application(home)
    outcome = _answer(app, AnswerRequest(QUESTION, preview=True))
    assert outcome["status"] == "preview" and components.sessions == 0
    assert [m["role"] for m in outcome["request"]["messages"]] == ["system", "user"]


def test_deadline_seconds_bounds_the_whole_answer(home: Path) -> None:
    app, _ = fake_application(home, ScriptedChatModel([Hang()]))
    started = time.monotonic()
    outcome = _answer(app, AnswerRequest(QUESTION, deadline_seconds=0.2))
    # The model never answered in time: the evidence is shown, never as an answer.
    assert time.monotonic() - started < 5
    assert outcome["status"] == "evidence_only" and outcome["answer"] == ""
    assert outcome["degraded"] == "deadline_exhausted" and outcome["quotes"]
    assert outcome["options"]["deadline_seconds"] == 0.2


def test_answer_deadline_setting_is_the_default(home: Path) -> None:
    app, _ = fake_application(home, ScriptedChatModel([answered("S1")]), answer_deadline=7.5)
    assert _answer(app, AnswerRequest(QUESTION))["options"]["deadline_seconds"] == 7.5


# --- evaluate, calibrate, compare, report ----------------------------------------------

EVALUATE_CHANGES: list[tuple[str, dict[str, Any], Callable[[Any], Any]]] = [
    ("mode", {"mode": "sparse"}, lambda r: r.summary["K"]["10"]["ndcg"]),
    ("ks", {"ks": (2,)}, lambda r: sorted(r.summary["K"])),
    (
        "evidence",
        {"evidence": EvidenceFilter(types=("runbook", "note"), states=("published", "draft"))},
        lambda r: r.summary,
    ),
    (
        "thresholds",
        {"thresholds": ThresholdOverrides(dense=0.5)},
        lambda r: r.unsupported["accepted"],
    ),
    (
        "with_text",
        {"with_text": True},
        lambda r: "text" in json.dumps(json.loads((r.path / "run.json").read_text())["cases"]),
    ),
    ("report", {"report": True}, lambda r: r.report_path is not None and r.report_path.is_file()),
    ("answers", {"answers": True}, lambda r: r.answers is not None),
]


@pytest.mark.parametrize(
    ("field", "change", "observe"), EVALUATE_CHANGES, ids=[c[0] for c in EVALUATE_CHANGES]
)
def test_evaluate_request_fields_change_the_run(
    home: Path, field: str, change: dict[str, Any], observe: Callable[[Any], Any]
) -> None:
    app = _app(home)
    base = EvaluateRequest(Dataset(CASES), evidence=EvidenceFilter(types=("runbook", "note")))
    assert observe(app.evaluate(base)) != observe(app.evaluate(replace(base, **change)))


def _answer_run_dataset(tmp_path: Path) -> Path:
    dataset = tmp_path / "answers.jsonl"
    lines = [
        {
            "id": "drain",
            "category": "condition",
            "question": QUESTION,
            "relevant": [{"document_id": "worker-shutdown", "grade": 2}],
            "reference_answers": ["Drain only while the deadline allows it"],
        },
        {"id": "2fa", "category": "unsupported", "question": "Reset 2FA?", "unsupported": True},
    ]
    dataset.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return dataset


def test_an_answer_run_persists_each_answer_and_the_summary(home: Path, tmp_path: Path) -> None:
    model = ScriptedChatModel([answered("S1"), Reply(INSUFFICIENT)])
    app, _ = fake_application(home, model, answer_support_check=False)
    only_shutdown = EvidenceFilter(documents=("worker-shutdown",))
    result = app.evaluate(
        EvaluateRequest(
            Dataset(_answer_run_dataset(tmp_path)),
            evidence=only_shutdown,
            answers=True,
            style="generated",
            report=True,
        )
    )
    run = json.loads((result.path / "run.json").read_text("utf-8"))
    (case,) = run["cases"]
    (declined,) = run["unsupported"]["results"]
    answer = case["answer"]
    # [drain only while shutdown deadline allows it] vs [drain only while deadline allows it]:
    # 6 common tokens, P 6/7, R 1 -> F1 12/13; the LCS is the same 6 tokens.
    assert answer["token_f1"] == pytest.approx(12 / 13) == answer["rouge_l"]
    assert answer["status"] == "answered" and answer["gold_cited"] is True
    assert answer["text"] == "Drain only while the shutdown deadline allows it."
    assert answer["citations"][0]["document_id"] == "worker-shutdown"
    assert set(answer) >= {
        "style", "status", "text", "withheld", "citations", "references",
        "token_f1", "rouge_l", "gold_cited", "latency_ms",
    }  # fmt: skip
    assert declined["answer"]["status"] == "insufficient"
    assert declined["answer"]["gold_cited"] is None
    summary = run["answers"]
    assert summary == result.answers == result.to_dict()["answers"]
    assert summary["answerable"]["answered"] == 1 and summary["answerable"]["gold_cited"] == 1
    assert summary["answerable"]["token_f1"]["all"] == pytest.approx(12 / 13)
    assert summary["unsupported"] == {"cases": 1, "declined": 1, "declined_rate": 1.0}
    assert summary["statuses"] == {"answered": 1, "insufficient": 1}
    assert summary["invalid_citations"] == 0
    assert summary["support"]["not_checked"] == 2
    assert result.report_path is not None
    assert "answerable.token_f1.all" in result.report_path.read_text("utf-8")


def test_a_provider_failure_is_recorded_as_an_error_answer(home: Path, tmp_path: Path) -> None:
    model = ScriptedChatModel([Fail(FailureCategory.REFUSAL), Fail(FailureCategory.REFUSAL)])
    app, _ = fake_application(home, model, answer_support_check=False)
    result = app.evaluate(
        EvaluateRequest(Dataset(_answer_run_dataset(tmp_path)), answers=True, style="generated")
    )
    assert result.answers is not None and result.answers["statuses"] == {"error": 2}
    run = json.loads((result.path / "run.json").read_text("utf-8"))
    assert run["cases"][0]["answer"]["error"].startswith("refusal")


def test_the_answer_style_reaches_every_answer(home: Path, tmp_path: Path) -> None:
    app = _app(home, answer_support_check=False)
    base = EvaluateRequest(Dataset(_answer_run_dataset(tmp_path)), answers=True)
    generated = app.evaluate(replace(base, style="generated"))
    evidence = app.evaluate(replace(base, style="evidence"))
    assert generated.answers is not None and evidence.answers is not None
    assert (generated.answers["style"], evidence.answers["style"]) == ("generated", "evidence")
    assert generated.answers["statuses"] == {"answered": 2}
    assert evidence.answers["statuses"] == {"evidence_only": 2}
    run = json.loads((evidence.path / "run.json").read_text("utf-8"))
    assert run["cases"][0]["answer"]["style"] == "evidence"


def test_an_answer_run_reports_its_progress_one_answer_at_a_time(
    home: Path, tmp_path: Path
) -> None:
    app = _app(home, answer_support_check=False)
    events: list[tuple[str, int]] = []
    request = EvaluateRequest(Dataset(_answer_run_dataset(tmp_path)), answers=True)
    app.evaluate(replace(request, style="evidence"), progress=lambda e, n: events.append((e, n)))
    assert events == [("answers", 2), ("answered", 1), ("answered", 1)]


def test_a_style_without_answers_is_refused() -> None:
    with pytest.raises(RequestError, match="style"):
        EvaluateRequest(Dataset(CASES), style="quoted")


def test_evaluate_tenant_changes_the_eligible_corpus(home: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "acme.jsonl"
    dataset.write_text(
        json.dumps(
            {
                "id": "a1",
                "category": "procedure",
                "question": "Who handles acme incidents?",
                "relevant": [
                    {"document_id": "acme-escalation", "chunk_id": "escalate/p0", "grade": 2}
                ],
            }
        )
        + "\n"
    )
    app = _app(home)
    found = app.evaluate(EvaluateRequest(Dataset(dataset), tenant="acme"))
    assert found.summary["K"]["10"]["recall"] == 1.0
    with pytest.raises(Exception, match="acme-escalation"):
        app.evaluate(EvaluateRequest(Dataset(dataset)))


CALIBRATE_CHANGES: list[tuple[str, dict[str, Any], Callable[[Any], Any]]] = [
    ("mode", {"mode": "dense"}, lambda r: (r.mode, len(r.rows))),
    ("k", {"k": 1}, lambda r: [row.recall for row in r.rows]),
    ("evidence", {}, lambda r: [(row.recall, row.ndcg) for row in r.rows]),
    ("max_recall_loss", {"max_recall_loss": 0.5}, lambda r: r.recommended),
    ("max_candidates", {"max_candidates": 2}, lambda r: len(r.rows)),
    ("folds", {"folds": 2}, lambda r: (r.held_out.folds, len(r.held_out.fold_thresholds))),
    (
        "holdout",
        {},  # the dataset itself, written by the test
        lambda r: (r.held_out.method, r.held_out.dataset, r.held_out.folds),
    ),
    ("write", {"write": True}, lambda r: r.written is not None and r.written.is_file()),
]


@pytest.mark.parametrize(
    ("field", "change", "observe"), CALIBRATE_CHANGES, ids=[c[0] for c in CALIBRATE_CHANGES]
)
def test_calibrate_request_fields_change_the_sweep(
    home: Path, field: str, change: dict[str, Any], observe: Callable[[Any], Any], tmp_path: Path
) -> None:
    runbooks = tmp_path / "runbooks.jsonl"
    rows = [json.loads(line) for line in CASES.read_text().splitlines()]
    runbook_docs = {
        "worker-shutdown",
        "api-rate-limits",
        "certificate-rotation",
        "database-failover",
        "disk-full-logs",
    }
    kept = [
        r
        for r in rows
        if r.get("unsupported") or {k["document_id"] for k in r["relevant"]} <= runbook_docs
    ]
    runbooks.write_text("\n".join(json.dumps(r) for r in kept) + "\n")
    app = _app(home)
    # The sample set holds 5 unsupported questions: below the rule, hence force.
    base = CalibrateRequest(Dataset(runbooks), force=True)
    if field == "holdout":
        change = {"holdout": Dataset(runbooks)}
    if field == "evidence":
        base = CalibrateRequest(
            Dataset(CASES), evidence=EvidenceFilter(types=("runbook", "note")), force=True
        )
        change = {
            "evidence": EvidenceFilter(types=("runbook", "note"), states=("published", "draft"))
        }
    assert observe(app.calibrate(base)) != observe(app.calibrate(replace(base, **change)))


def _expected_changes(
    before: Path, after: Path, k: int, metric: str
) -> tuple[list[str], list[str]]:
    old = {c["id"]: c["metrics"][str(k)][metric] for c in json.loads(before.read_text())["cases"]}
    new = {c["id"]: c["metrics"][str(k)][metric] for c in json.loads(after.read_text())["cases"]}
    worse = sorted(case for case in new if new[case] < old[case] - 1e-9)
    better = sorted(case for case in new if new[case] > old[case] + 1e-9)
    return worse, better


def test_compare_fields_select_runs_cutoff_and_metric(home: Path) -> None:
    app = _app(home)
    evidence = EvidenceFilter(types=("runbook", "note"))
    dense = app.evaluate(EvaluateRequest(Dataset(CASES), mode="dense", evidence=evidence))
    sparse = app.evaluate(EvaluateRequest(Dataset(CASES), mode="sparse", evidence=evidence))
    seen = set()
    for k, metric in ((10, "ndcg"), (1, "ndcg"), (10, "precision"), (3, "reciprocal_rank")):
        result = app.compare(CompareRequest(dense.execution_id, sparse.execution_id, k, metric))  # type: ignore[arg-type]
        got = (
            sorted(c.case_id for c in result.regressions),
            sorted(c.case_id for c in result.improvements),
        )
        assert got == _expected_changes(
            dense.path / "run.json", sparse.path / "run.json", k, metric
        )
        seen.add(tuple(map(tuple, got)))
        backward = app.compare(CompareRequest(sparse.execution_id, dense.execution_id, k, metric))  # type: ignore[arg-type]
        assert sorted(c.case_id for c in backward.improvements) == got[0]
    assert len(seen) > 1, "cutoff and metric must change which cases moved"
    assert any("mode differs" in note for note in result.notes)


def test_report_writes_the_named_run(home: Path) -> None:
    app = _app(home)
    run = app.evaluate(
        EvaluateRequest(Dataset(CASES), evidence=EvidenceFilter(types=("runbook", "note")))
    )
    report = app.report(ReportRequest(run.execution_id))
    assert report.path == run.path / "report.html" and report.path.is_file()
    assert run.execution_id in report.path.read_text()
    assert report.compared_with is None and "Compared with" not in report.path.read_text()


def _dense_and_sparse(app: Application) -> tuple[Any, Any]:
    evidence = EvidenceFilter(types=("runbook", "note"))
    dense = app.evaluate(EvaluateRequest(Dataset(CASES), mode="dense", evidence=evidence))
    sparse = app.evaluate(EvaluateRequest(Dataset(CASES), mode="sparse", evidence=evidence))
    return dense, sparse


def test_report_compare_shows_deltas_and_the_cases_that_moved(home: Path) -> None:
    app = _app(home)
    dense, sparse = _dense_and_sparse(app)
    report = app.report(ReportRequest(sparse.execution_id, compare=dense.execution_id))
    assert report.compared_with == dense.execution_id
    assert report.to_dict()["compared_with"] == dense.execution_id
    html = report.path.read_text()
    assert f"Compared with <code>{dense.execution_id}</code>" in html
    assert "mode differs: dense → sparse" in html
    delta = sparse.summary["K"]["10"]["ndcg"] - dense.summary["K"]["10"]["ndcg"]
    assert f"{delta:+.3f}</td>" in html
    moved = app.compare(CompareRequest(dense.execution_id, sparse.execution_id, k=10))
    assert moved.regressions and moved.improvements
    changed = html[html.index("Cases that changed at K=10") :]
    for change in moved.regressions + moved.improvements:
        assert f"<td>{change.case_id}</td>" in changed
        assert f"{change.before:.3f} → {change.after:.3f}" in changed


def test_evaluate_report_compares_with_the_named_run(home: Path) -> None:
    app = _app(home)
    dense, _ = _dense_and_sparse(app)
    request = EvaluateRequest(
        Dataset(CASES), evidence=EvidenceFilter(types=("runbook", "note")), report=True
    )
    plain = app.evaluate(request)
    compared = app.evaluate(replace(request, compare=dense.execution_id))
    assert plain.report_path is not None and compared.report_path is not None
    assert "Compared with" not in plain.report_path.read_text()
    html = compared.report_path.read_text()
    assert f"Compared with <code>{dense.execution_id}</code>" in html
    assert "mode differs: dense → hybrid" in html


def test_evaluate_compare_needs_the_report() -> None:
    with pytest.raises(RequestError, match="compare: needs report"):
        EvaluateRequest(Dataset(CASES), compare="earlier")


def test_an_unknown_earlier_run_is_refused_before_the_evaluation_runs(home: Path) -> None:
    app = _app(home)
    with pytest.raises(EvaluationError, match="no evaluation run 'missing'"):
        app.evaluate(EvaluateRequest(Dataset(CASES), report=True, compare="missing"))
    assert not (home / "evaluations").exists() or not any((home / "evaluations").iterdir())


@pytest.mark.parametrize(
    ("mode", "kind"), [("dense", "cosine"), ("sparse", "bm25"), ("hybrid", "rrf")]
)
def test_the_run_records_what_its_scores_measure(home: Path, mode: str, kind: str) -> None:
    run = _app(home).evaluate(
        EvaluateRequest(
            Dataset(CASES),
            mode=mode,
            evidence=EvidenceFilter(types=("runbook", "note")),  # type: ignore[arg-type]
        )
    )
    assert json.loads((run.path / "run.json").read_text())["config"]["score_kind"] == kind


def test_skip_invalid_leaves_out_invalid_beir_documents_and_lists_them(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "1", "title": "Queues", "text": "Drain queues at shutdown."},
        {"_id": "471", "title": "Empty", "text": ""},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    app = _app(tmp_path / "h")
    request = IngestRequest(sources=(corpus,), document_type="note", publication_state="published")
    with pytest.raises(DocumentError, match="'471'"):
        app.ingest(request)
    result = app.ingest(replace(request, skip_invalid=True))
    assert result.documents == 1
    assert [(d.document_id, d.field) for d in result.skipped_documents] == [
        ("471", "sections[0].paragraphs")
    ]
    preview = app.chunks(
        ChunksRequest(
            sources=(corpus,),
            document_type="note",
            publication_state="published",
            skip_invalid=True,
        )
    )
    assert [d.document_id for d in preview.skipped_documents] == ["471"]


def test_calibrate_reports_progress_per_question_and_combination(home: Path) -> None:
    events: list[tuple[str, int]] = []
    _app(home).calibrate(
        CalibrateRequest(
            Dataset(CASES), evidence=EvidenceFilter(types=("runbook", "note")), force=True
        ),
        progress=lambda event, count: events.append((event, count)),
    )
    assert events[0] == ("questions", 25)
    assert sum(c for e, c in events if e == "retrieved") == 25
    # The in-sample sweep and one sweep per fold, announced together.
    (total,) = [c for e, c in events if e == "combinations"]
    assert sum(c for e, c in events if e == "swept") == total
