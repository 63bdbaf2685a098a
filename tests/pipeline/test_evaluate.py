from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import pytest

from ragwright.adapters.datasets import load_beir_cases, load_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.contracts import contract_for
from ragwright.core.eligibility import Eligibility
from ragwright.errors import EvaluationError
from ragwright.pipeline.answer_log import AnswerLog
from ragwright.pipeline.evaluate import (
    EvalConfig,
    compare_runs,
    eligible_corpus,
    load_run,
    run_evaluation,
    save_run,
)
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.retrieve import Retriever, Thresholds
from ragwright.report import NO_TEXT, render_report
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, EvalCase, RelevantKey
from tests.conftest import REPO
from tests.pipeline.indexes import hashing_index

POLICY = ChunkingPolicy()
ELIGIBLE = Eligibility(POLICY.version, ("runbook", "note"), ("published",))
DATASET = REPO / "samples" / "eval" / "cases.jsonl"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[EdgeIndex]:
    with hashing_index(tmp_path / "i") as opened:
        yield opened


def evaluate(index: EdgeIndex, cases: list[EvalCase], **config: object):  # type: ignore[no-untyped-def]
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())
    return run_evaluation(
        cases,
        retriever,
        EvalConfig(eligibility=ELIGIBLE, **config),  # type: ignore[arg-type]
        eligible_corpus(index, ELIGIBLE, EvalConfig(ELIGIBLE).scope),
        run_config={"embedding_profile": "hashing-64-v1", "chunking_version": POLICY.version},
        clock=lambda: datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        token=lambda: "abc123",
    )


def write(tmp_path: Path, *lines: dict[str, object]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_sample_dataset_has_enough_cases_in_several_categories() -> None:
    cases = load_cases(DATASET)
    answerable = [c for c in cases if not c.unsupported]
    assert len(answerable) >= 15 and sum(c.unsupported for c in cases) >= 5
    assert {"multi-passage", "paraphrase"} <= {c.category for c in answerable}


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        ([{"id": "a", "category": "c", "question": "q", "relevant": []}], "empty relevant set"),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "relevant": [{"document_id": "d", "grade": 3}],
                }
            ],
            "grade",
        ),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "unsupported": True,
                    "relevant": [{"document_id": "d", "grade": 1}],
                }
            ],
            "unsupported",
        ),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "relevant": [{"document_id": "d", "grade": 1}],
                }
            ]
            * 2,
            "duplicate case id",
        ),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "relevant": [{"document_id": "d", "grade": 1}] * 2,
                }
            ],
            "twice",
        ),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "relevant": [
                        {"document_id": "d", "grade": 1},
                        {"document_id": "d", "chunk_id": "s/p0", "grade": 1},
                    ],
                }
            ],
            "mixes",
        ),
        (
            [
                {
                    "id": "a",
                    "category": "c",
                    "question": "q",
                    "colour": "red",
                    "relevant": [{"document_id": "d", "grade": 1}],
                }
            ],
            "colour",
        ),
    ],
)
def test_dataset_problems_are_reported_before_running(
    tmp_path: Path, lines: list[dict[str, object]], fragment: str
) -> None:
    with pytest.raises(EvaluationError) as caught:
        load_cases(write(tmp_path, *lines))
    assert fragment in str(caught.value)


ANSWERABLE = {"category": "c", "question": "q", "relevant": [{"document_id": "d", "grade": 1}]}


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"reference_answers": [""]}, "field 'reference_answers.0'"),
        ({"reference_answers": ["ok", "  "]}, "field 'reference_answers.1'"),
        ({"reference_answers": "one answer"}, "field 'reference_answers'"),
        ({"reference_sentences": [[]]}, "field 'reference_sentences.0'"),
        ({"reference_sentences": [["ok"], ["ok", " "]]}, "field 'reference_sentences.1.1'"),
        ({"reference_sentences": ["not a list"]}, "field 'reference_sentences.0'"),
    ],
)
def test_reference_fields_are_validated_naming_line_and_field(
    tmp_path: Path, extra: dict[str, object], fragment: str
) -> None:
    path = write(tmp_path, {"id": "a", **ANSWERABLE}, {"id": "b", **ANSWERABLE, **extra})
    with pytest.raises(EvaluationError) as caught:
        load_cases(path)
    assert f"{path}:2: {fragment}" in str(caught.value)


def test_an_unsupported_case_with_references_is_refused(tmp_path: Path) -> None:
    unsupported = {"id": "u", "category": "c", "question": "q", "unsupported": True}
    path = write(tmp_path, {**unsupported, "reference_answers": ["no"]})
    with pytest.raises(EvaluationError, match=r":1: unsupported case 'u' must not list"):
        load_cases(path)


def test_reference_fields_reach_the_case(tmp_path: Path) -> None:
    extra = {"reference_answers": ["A", "B"], "reference_sentences": [["s1", "s2"], ["s3"]]}
    (case,) = load_cases(write(tmp_path, {"id": "a", **ANSWERABLE, **extra}))
    assert case.reference_answers == ("A", "B")
    assert case.reference_sentences == (("s1", "s2"), ("s3",))


def test_sample_answerable_cases_carry_reference_answers() -> None:
    cases = {c.case_id: c for c in load_cases(DATASET)}
    assert all(c.reference_answers for c in cases.values() if not c.unsupported)
    (drain,) = cases["q01"].reference_answers
    for condition in ("deadline", "in-flight", "retry"):
        assert condition in drain


def test_labels_outside_the_eligible_corpus_stop_the_run(index: EdgeIndex) -> None:
    draft_only = EvalCase(
        "x", "c", "restore a tenant", (RelevantKey("backup-restore", 2, "restore/p0"),)
    )
    embedder = HashingEmbedder()
    with pytest.raises(EvaluationError) as caught:
        run_evaluation(
            [draft_only],
            Retriever(index, embedder, Bm25Encoder()),
            EvalConfig(ELIGIBLE),
            eligible_corpus(index, ELIGIBLE, EvalConfig(ELIGIBLE).scope),
            run_config={},
        )
    assert "outside the eligible corpus" in str(caught.value)
    assert embedder.calls == []  # nothing ran


def test_run_scores_answerable_cases_and_tracks_unsupported_separately(index: EdgeIndex) -> None:
    cases = load_cases(DATASET)
    record = evaluate(index, cases)
    assert record.execution_id == "20261129T120000Z-abc123"
    assert record.summary["cases"] == 20
    assert set(record.summary["K"]) == {"1", "3", "5", "10"}
    for metrics in record.summary["K"].values():
        assert 0 < metrics["ndcg"] <= 1
    assert sum(c["cases"] for c in record.categories.values()) == 20
    assert record.unsupported["cases"] == 5
    assert record.unsupported["false_acceptance_rate"] == 1.0  # no threshold: everything accepted
    precision_at_10 = record.summary["K"]["10"]["precision"]
    assert precision_at_10 == pytest.approx(
        sum(c["metrics"]["10"]["precision"] for c in record.cases) / 20
    )


def test_a_threshold_rejects_unsupported_questions(index: EdgeIndex) -> None:
    record = evaluate(index, load_cases(DATASET), thresholds=Thresholds(fusion=1.0), mode="hybrid")
    assert record.unsupported["false_acceptance_rate"] == 0.0
    assert record.summary["K"]["10"]["recall"] == 0.0


def test_each_question_is_embedded_once_for_every_k(index: EdgeIndex) -> None:
    embedder = HashingEmbedder()
    cases = load_cases(DATASET)
    run_evaluation(
        cases,
        Retriever(index, embedder, Bm25Encoder()),
        EvalConfig(ELIGIBLE, ks=(1, 3, 5, 10)),
        eligible_corpus(index, ELIGIBLE, EvalConfig(ELIGIBLE).scope),
        run_config={},
    )
    assert len(embedder.calls) == len(cases)


def test_runs_persist_and_compare(index: EdgeIndex, tmp_path: Path) -> None:
    dense = evaluate(index, load_cases(DATASET), mode="dense")
    hybrid = evaluate(index, load_cases(DATASET), mode="hybrid")
    hybrid.execution_id += "-b"
    save_run(dense, tmp_path)
    save_run(hybrid, tmp_path)
    first, second = load_run(dense.execution_id, tmp_path), load_run(hybrid.execution_id, tmp_path)
    assert first["config"]["corpus_fingerprint"].startswith("sha256:")
    assert first["cases"][0]["ranking"][0].keys() >= {"key", "score", "grade"}
    regressions, improvements, notes = compare_runs(first, second, k=3)
    expected = {
        c["id"]
        for c, d in zip(first["cases"], second["cases"], strict=True)
        if c["metrics"]["3"]["ndcg"] != d["metrics"]["3"]["ndcg"]
    }
    assert {c.case_id for c in regressions + improvements} == expected
    assert any("mode differs" in n for n in notes)
    with pytest.raises(EvaluationError):
        load_run("missing", tmp_path)


def test_an_answer_log_keeps_each_answer_through_a_kill_until_the_run_is_saved(
    index: EdgeIndex, tmp_path: Path
) -> None:
    record = evaluate(index, load_cases(DATASET))
    log = AnswerLog.start(record, 25, tmp_path)
    log.record("q01", {"status": "answered"})
    log.record("q02", {"status": "insufficient"})
    with (log.directory / "answers.jsonl").open("a") as handle:
        handle.write('{"id": "q03", "answ')  # the line being written when killed
    with pytest.raises(EvaluationError, match="unfinished.*--resume " + record.execution_id):
        load_run(record.execution_id, tmp_path)
    reopened = AnswerLog.open(record.execution_id, tmp_path)
    assert reopened.answered == {"q01": {"status": "answered"}, "q02": {"status": "insufficient"}}
    assert (reopened.execution_id, reopened.cases) == (record.execution_id, 25)
    assert AnswerLog.open("latest", tmp_path).directory == log.directory
    assert reopened.differences(record.config) == []
    changed = {**record.config, "mode": "dense", "code_revision": "elsewhere"}
    assert reopened.differences(changed) == ['mode: "hybrid" → "dense"']
    directory = save_run(record, tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["run.json"]
    assert load_run(record.execution_id, tmp_path)["execution_id"] == record.execution_id
    with pytest.raises(EvaluationError, match="is finished: nothing to resume"):
        AnswerLog.open(record.execution_id, tmp_path)
    with pytest.raises(EvaluationError, match="no unfinished evaluation run"):
        AnswerLog.open("latest", tmp_path)


def test_beir_cases_collapse_chunks_to_documents(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Queues", "text": "Drain the queue before shutdown. " * 30},
        {"_id": "d2", "title": "Certificates", "text": "Rotate certificates before expiry."},
        {"_id": "d3", "title": "Refunds", "text": "Refunds take ten days."},
    ]
    (beir / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus))
    (beir / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "drain the queue at shutdown"})
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    cases = load_beir_cases(beir, "test")
    assert cases[0].level == "document"
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=40)
    eligible = Eligibility(policy.version, ("note",), ("published",))
    with EdgeIndex(tmp_path / "i", contract_for(HASHING_PROFILE, policy.version)) as idx:
        ingest(
            load_sources([beir / "corpus.jsonl"], SourceDefaults("note", "published")),
            policy=policy,
            embedder=HashingEmbedder(),
            sparse_encoder=Bm25Encoder(),
            index=idx,
        )
        assert idx.count() > 3  # d1 became several chunks
        corpus = eligible_corpus(idx, eligible, EvalConfig(eligible).scope)
        record = run_evaluation(
            cases,
            Retriever(idx, HashingEmbedder(), Bm25Encoder()),
            EvalConfig(eligible, ks=(1, 3)),
            corpus,
            run_config={},
        )
    ranking = [tuple(item["key"]) for item in record.cases[0]["ranking"]]
    assert ranking[0] == ("d1",) and len(ranking) == len(set(ranking)) == 3
    assert record.summary["K"]["1"]["reciprocal_rank"] == 1.0
    for item in record.cases[0]["ranking"]:  # the chunk that placed each document
        assert (item["key"][0], policy.version, item["chunk_id"]) in corpus.chunks


@pytest.mark.parametrize(
    ("mode", "kinds"),
    [("dense", {"cosine"}), ("sparse", {"bm25"}), ("hybrid", {"rrf"})],
)
def test_ranked_items_keep_every_stage_score_by_kind(
    index: EdgeIndex, mode: str, kinds: set[str]
) -> None:
    record = evaluate(index, load_cases(DATASET), mode=mode)
    items = [item for c in record.cases for item in c["ranking"]]
    assert all(kinds <= item["scores"].keys() <= {"cosine", "bm25", "rrf"} for item in items)
    final = "rrf" if mode == "hybrid" else next(iter(kinds))
    assert all(item["score"] == item["scores"][final] for item in items)
    if mode == "hybrid":  # a fused chunk keeps the leg scores that placed it
        assert any({"cosine", "bm25"} <= item["scores"].keys() for item in items)


@pytest.mark.parametrize("with_text", [False, True])
def test_chunk_text_is_stored_only_with_text(index: EdgeIndex, with_text: bool) -> None:
    record = evaluate(index, load_cases(DATASET), with_text=with_text)
    items = [item for c in record.cases for item in c["ranking"]]
    assert all(("text" in item) is with_text for item in items)
    html = render_report(record.to_json())
    assert (NO_TEXT in html) is not with_text
    if with_text:
        assert escape(items[0]["text"]) in html


def test_report_contains_the_key_numbers(index: EdgeIndex) -> None:
    record = evaluate(index, load_cases(DATASET)).to_json()
    html = render_report(record)
    assert f"{record['summary']['K']['10']['ndcg']:.3f}" in html
    assert "false-acceptance rate" in html and "<svg" in html
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_report_renders_in_headless_chromium(index: EdgeIndex, tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    record = evaluate(index, load_cases(DATASET), with_text=True).to_json()
    earlier = evaluate(index, load_cases(DATASET), mode="dense").to_json()
    page = tmp_path / "report.html"
    page.write_text(render_report(record, earlier=earlier))
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,1600",
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()],
        env=env,
        capture_output=True,
        timeout=120,
        check=True,
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a rendered page, not a blank one
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert f"{record['summary']['K']['10']['ndcg']:.3f}" in dom
    assert f"{record['summary']['K']['1']['recall']:.3f}" in dom
    assert "Unsupported questions" in dom
    assert "mode differs: dense → hybrid" in dom and dom.count("<svg") == 3
    # One folded block per case, and the run's configuration folded at the end.
    assert dom.count("<details") == len(record["cases"]) + 1
    assert dom.count('<details id="configuration">') == 1


def test_a_case_that_cannot_be_scored_fails_the_run(index: EdgeIndex) -> None:
    real = Retriever(index, HashingEmbedder(), Bm25Encoder())

    class DuplicatingRetriever:
        """Returns its first hit twice: an input error, not a miss."""

        def embed(self, question: str):  # type: ignore[no-untyped-def]
            return real.embed(question)

        def search(self, query, eligibility, scope, **kwargs):  # type: ignore[no-untyped-def]
            result = real.search(query, eligibility, scope, **kwargs)
            return dataclasses.replace(result, hits=(result.hits[0], *result.hits))

    cases = [c for c in load_cases(DATASET) if not c.unsupported][:3]
    corpus = eligible_corpus(index, ELIGIBLE, EvalConfig(ELIGIBLE).scope)
    with pytest.raises(EvaluationError) as caught:
        run_evaluation(cases, DuplicatingRetriever(), EvalConfig(ELIGIBLE), corpus, run_config={})  # type: ignore[arg-type]
    assert "could not be scored" in str(caught.value)
