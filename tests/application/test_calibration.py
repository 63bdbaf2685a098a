"""The persisted calibration: written by ``calibrate(write=True)``, validated on every read,
applied by search, answer and evaluate below request options and settings, and shown by
status (issue 10)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.application import (
    AnswerRequest,
    Application,
    CalibrateRequest,
    Dataset,
    EvaluateRequest,
    EvidenceFilter,
    IngestRequest,
    SearchRequest,
    ThresholdOverrides,
    calibration,
)
from ragwright.application.calibration import read_calibration
from ragwright.errors import CalibrationError, EvaluationError
from ragwright.pipeline.calibrate import MIN_UNSUPPORTED
from tests.application.components import fake_application
from tests.cli import copy_tree
from tests.conftest import SAMPLES

CASES = SAMPLES.parent / "eval" / "cases.jsonl"
EVIDENCE = EvidenceFilter(types=("runbook", "note"))
QUESTION = "Should I drain all queued work during shutdown?"
RECORD_KEYS = {
    "format",
    "version",
    "calibrated_at",
    "code_revision",
    "collection",
    "embedding_profile",
    "lexical_profile",
    "chunking_version",
    "document_types",
    "publication_states",
    "tenant",
    "mode",
    "k",
    "max_recall_loss",
    "dataset",
    "dataset_sha256",
    "forced",
    "thresholds",
    "in_sample",
    "held_out",
    "answerability",
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    app, _ = fake_application(home)
    app.ingest(IngestRequest(sources=(SAMPLES,)))
    return home


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory, indexed: Path) -> Path:
    """A home whose index carries a calibration written from the sample set."""
    home = tmp_path_factory.mktemp("calibrated") / "home"
    copy_tree(indexed, home)
    fake_application(home)[0].calibrate(
        CalibrateRequest(Dataset(CASES), evidence=EVIDENCE, force=True, write=True)
    )
    return home


@pytest.fixture
def home(tmp_path: Path, calibrated: Path) -> Iterator[Path]:
    copy = tmp_path / "home"
    copy_tree(calibrated, copy)
    yield copy


def _app(home: Path, **settings: object) -> Application:
    return fake_application(home, **settings)[0]


def _record_file(app: Application) -> Path:
    return app.settings.index_path / "calibration.json"


def _edit(app: Application, change: Any) -> None:
    path = _record_file(app)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# --- the record -------------------------------------------------------------------------


def test_write_persists_every_field_of_the_record(home: Path) -> None:
    app = _app(home)
    data = json.loads(_record_file(app).read_text())
    assert set(data) == RECORD_KEYS
    assert data["format"] == "ragwright-calibration" and data["version"] == 1
    assert data["dataset"] == str(CASES) and len(data["dataset_sha256"]) == 64
    assert data["mode"] == "hybrid" and data["k"] == 5 and data["forced"] is True
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["calibrated_at"])
    assert set(data["in_sample"]) == {
        "answerable",
        "unsupported",
        "false_acceptance_rate",
        "recall",
        "ndcg",
        "refused_answerable",
    }
    held = data["held_out"]
    assert held["method"] == "k-fold" and held["folds"] == 5
    assert (held["answerable"], held["unsupported"]) == (20, 5)
    assert len(held["fold_thresholds"]) == 5
    answerability = data["answerability"]
    assert set(answerability) == {
        "threshold",
        "max_answerable_loss",
        "style",
        "in_sample",
        "held_out",
    }
    assert answerability["in_sample"]["answerable"] == 20
    assert answerability["in_sample"]["unsupported"] == 5
    assert not [p for p in _record_file(app).parent.iterdir() if p.name.startswith(".calib")]


def test_the_record_holds_what_the_calibration_recommended(home: Path, tmp_path: Path) -> None:
    app = _app(home)
    result = app.calibrate(
        CalibrateRequest(Dataset(CASES), evidence=EVIDENCE, force=True, write=True)
    )
    record = read_calibration(_record_file(app))
    assert record is not None
    chosen = result.recommended
    assert (record.thresholds.dense, record.thresholds.sparse) == (
        chosen.threshold_dense,
        chosen.threshold_sparse,
    )
    assert record.in_sample.false_acceptance_rate == chosen.false_acceptance_rate
    assert result.held_out is not None
    assert record.held_out.false_acceptance_rate == result.held_out.false_acceptance_rate


def test_answerability_round_trips_and_a_new_calibration_replaces_it(home: Path) -> None:
    app = _app(home)
    figures = {
        "answerable": 1,
        "unsupported": 1,
        "answerable_declined": 0,
        "unsupported_declined": 1,
        "answerable_declined_rate": 0.0,
        "unsupported_declined_rate": 1.0,
    }
    section = {
        "threshold": 0.99,
        "max_answerable_loss": 0.2,
        "style": "evidence",
        "in_sample": figures,
        "held_out": figures,
    }
    _edit(app, lambda d: d.update(answerability=section))
    record = read_calibration(_record_file(app))
    assert record is not None and record.answerability is not None
    assert record.answerability.threshold == 0.99
    assert record.to_json()["answerability"] == section
    # A hand-edited section with an unknown field is refused, naming it.
    _edit(app, lambda d: d.update(answerability={**section, "model": "m1"}))
    with pytest.raises(CalibrationError, match=r"answerability\.model"):
        read_calibration(_record_file(app))
    app.calibrate(CalibrateRequest(Dataset(CASES), evidence=EVIDENCE, force=True, write=True))
    again = read_calibration(_record_file(app))
    assert again is not None and again.answerability is not None
    assert again.answerability.threshold != 0.99 and again.answerability.max_answerable_loss == 0.1


def test_a_failed_write_leaves_the_previous_record_and_no_temporary_file(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _record_file(_app(home))
    before = path.read_bytes()
    record = read_calibration(path)
    assert record is not None

    def full_disk(source: str, target: str) -> None:
        raise OSError(28, "No space left on device", source)

    monkeypatch.setattr(calibration.os, "replace", full_disk)
    with pytest.raises(OSError):
        calibration.write_calibration(path, record.model_copy(update={"k": 9}))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if "calibration" in p.name) == [
        "calibration.json"
    ]


DAMAGE: list[tuple[str, str, str]] = [
    ("not json", "{ truncated", "record"),
    ("a list", "[]", "record"),
    ("a bad threshold", 'thresholds.dense="high"', "thresholds.dense"),
    ("a missing section", "del held_out", "held_out"),
    ("an unknown field", 'extra="x"', "extra"),
    ("a bad digest", 'dataset_sha256="abc"', "dataset_sha256"),
    ("a naive date", 'calibrated_at="2026-01-01T00:00:00"', "calibrated_at"),
    ("a rate above 1", "held_out.false_acceptance_rate=1.5", "held_out.false_acceptance_rate"),
    ("a bad answerability", 'answerability={"threshold": "x"}', "answerability.threshold"),
]


def _damage(path: Path, edit: str) -> None:
    if not edit[0].isalpha() or edit == "[]":
        path.write_text(edit)
        return
    data = json.loads(path.read_text())
    if edit.startswith("del "):
        del data[edit[4:]]
    else:
        key, value = edit.split("=", 1)
        *parents, leaf = key.split(".")
        target = data
        for parent in parents:
            target = target[parent]
        target[leaf] = json.loads(value)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("case", "edit", "field"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_record_is_an_error_naming_the_file_and_field(
    home: Path, case: str, edit: str, field: str
) -> None:
    app = _app(home)
    path = _record_file(app)
    _damage(path, "{ truncated" if edit == "{ truncated" else edit)
    for use in (
        lambda: app.search(SearchRequest(QUESTION)),
        lambda: app.evaluate(EvaluateRequest(Dataset(CASES), evidence=EVIDENCE)),
        app.status,
    ):
        with pytest.raises(CalibrationError) as error:
            use()
        assert error.value.path == str(path) and error.value.field == field
        assert str(path) in str(error.value) and "--clear" in str(error.value)
    # Clearing needs no readable record, and afterwards nothing is applied.
    assert app.clear_calibration().removed
    assert app.search(SearchRequest(QUESTION)).threshold_origin.source == "none"


def test_a_record_of_another_embedding_profile_is_refused_where_it_would_apply(
    home: Path,
) -> None:
    app = _app(home)
    _edit(app, lambda d: d.update(embedding_profile="another-model"))
    with pytest.raises(CalibrationError) as error:
        app.search(SearchRequest(QUESTION))
    assert error.value.field == "embedding_profile" and "another-model" in error.value.rule
    # Every stage it could supply is set above it: it is not used, so not in the way.
    both = ThresholdOverrides(dense=0.1, sparse=0.1)
    assert app.search(SearchRequest(QUESTION, thresholds=both)).threshold_origin.source == (
        "request"
    )


# --- precedence -------------------------------------------------------------------------


def _calibrated_thresholds(app: Application) -> tuple[float | None, float | None]:
    record = read_calibration(_record_file(app))
    assert record is not None
    return record.thresholds.dense, record.thresholds.sparse


def test_search_applies_the_persisted_thresholds_by_default(home: Path) -> None:
    app = _app(home)
    dense, sparse = _calibrated_thresholds(app)
    assert dense is not None or sparse is not None, "the sample calibration thresholds a leg"
    result = app.search(SearchRequest(QUESTION, k=10, evidence=EVIDENCE))
    assert (result.thresholds.dense, result.thresholds.sparse) == (dense, sparse)
    origin = result.threshold_origin
    assert origin.source == "calibration"
    assert origin.calibration is not None
    record = read_calibration(_record_file(app))
    assert record is not None and origin.calibration.dataset_sha256 == record.dataset_sha256
    data = result.to_dict()
    assert data["thresholds_source"] == "calibration"
    assert data["calibration"]["calibrated_at"] == origin.calibration.calibrated_at
    # A record no chunk clears leaves search empty; dropping it brings the hits back.
    _edit(app, lambda d: d.update(thresholds={"dense": 0.999, "sparse": 1000.0}))
    assert app.search(SearchRequest(QUESTION, k=10, evidence=EVIDENCE)).hits == ()
    app.clear_calibration()
    plain = app.search(SearchRequest(QUESTION, k=10, evidence=EVIDENCE))
    assert plain.threshold_origin.source == "none" and plain.threshold_origin.calibration is None
    assert plain.thresholds.dense is None and plain.thresholds.sparse is None
    assert len(plain.hits) == 10


@pytest.mark.parametrize(
    ("settings", "overrides", "dense_source", "sparse_source", "source"),
    [
        ({}, ThresholdOverrides(), "calibration", "calibration", "calibration"),
        ({"threshold_dense": 0.05}, ThresholdOverrides(), "settings", "calibration", "mixed"),
        (
            {"threshold_dense": 0.05, "threshold_sparse": 0.5},
            ThresholdOverrides(),
            "settings",
            "settings",
            "settings",
        ),
        (
            {"threshold_dense": 0.05},
            ThresholdOverrides(dense=0.07),
            "request",
            "calibration",
            "mixed",
        ),
        (
            {"threshold_dense": 0.05, "threshold_sparse": 0.5},
            ThresholdOverrides(dense=0.07, sparse=0.6),
            "request",
            "request",
            "request",
        ),
    ],
)
def test_request_beats_settings_beats_calibration(
    home: Path,
    settings: dict[str, float],
    overrides: ThresholdOverrides,
    dense_source: str,
    sparse_source: str,
    source: str,
) -> None:
    app = _app(home, **settings)
    # Both legs thresholded, so each stage's source shows.
    _edit(app, lambda d: d.update(thresholds={"dense": 0.11, "sparse": 1.5}))
    calibrated = {"dense": 0.11, "sparse": 1.5}
    applied = app.thresholds(overrides)
    expected = {
        "request": {"dense": overrides.dense, "sparse": overrides.sparse},
        "settings": {
            "dense": settings.get("threshold_dense"),
            "sparse": settings.get("threshold_sparse"),
        },
        "calibration": calibrated,
    }
    assert applied.thresholds.dense == expected[dense_source]["dense"]
    assert applied.thresholds.sparse == expected[sparse_source]["sparse"]
    assert applied.origin.sources["dense"] == dense_source
    assert applied.origin.sources["sparse"] == sparse_source
    assert applied.origin.sources["fusion"] == applied.origin.sources["rerank"] == "none"
    assert applied.origin.source == source
    assert (applied.origin.calibration is not None) == (
        "calibration" in (dense_source, sparse_source)
    )


def test_without_a_record_settings_then_nothing(home: Path) -> None:
    _app(home).clear_calibration()
    assert _app(home).thresholds().origin.source == "none"
    applied = _app(home, threshold_rerank=0.3).thresholds()
    assert applied.thresholds.rerank == 0.3 and applied.origin.source == "settings"


def test_answer_and_evaluate_record_where_their_thresholds_came_from(home: Path) -> None:
    app = _app(home)
    outcome = asyncio.run(app.answer(AnswerRequest(QUESTION, evidence=EVIDENCE, preview=True)))
    options = outcome.to_dict()["options"]
    assert options["thresholds_source"] == "calibration"
    dense, sparse = _calibrated_thresholds(app)
    assert (options["thresholds"]["dense"], options["thresholds"]["sparse"]) == (dense, sparse)
    run = app.evaluate(EvaluateRequest(Dataset(CASES), evidence=EVIDENCE))
    assert run.to_dict()["thresholds_source"] == "calibration"
    saved = json.loads((run.path / "run.json").read_text())["config"]
    assert saved["thresholds_source"] == "calibration"
    assert saved["thresholds"]["dense"] == dense
    # The persisted thresholds change the run: fewer unsupported questions accepted.
    app.clear_calibration()
    plain = app.evaluate(EvaluateRequest(Dataset(CASES), evidence=EVIDENCE))
    assert plain.unsupported["accepted"] > run.unsupported["accepted"]


def test_status_shows_the_persisted_calibration_or_none(home: Path) -> None:
    app = _app(home)
    record = read_calibration(_record_file(app))
    assert record is not None
    shown = app.status().calibration
    assert shown is not None
    assert shown.dataset_sha256 == record.dataset_sha256
    assert (shown.threshold_dense, shown.threshold_sparse) == _calibrated_thresholds(app)
    assert app.status().to_dict()["calibration"]["calibrated_at"] == shown.calibrated_at
    app.clear_calibration()
    assert app.status().calibration is None and app.status().to_dict()["calibration"] is None
    assert not app.clear_calibration().removed


# --- the 20-question rule ---------------------------------------------------------------


def _with_unsupported(tmp_path: Path, count: int) -> Path:
    """The sample's answerable cases and ``count`` unsupported questions."""
    rows = [json.loads(line) for line in CASES.read_text().splitlines()]
    answerable = [r for r in rows if not r.get("unsupported")]
    topics = ["payroll", "parking", "espresso", "holiday", "badge", "laptop", "travel"]
    unsupported = [
        {
            "id": f"x{i:02d}",
            "category": "unsupported",
            "question": f"What is the {topics[i % len(topics)]} policy number {i} for visitors?",
            "unsupported": True,
        }
        for i in range(count)
    ]
    path = tmp_path / f"u{count}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in answerable + unsupported))
    return path


def test_fewer_than_20_unsupported_questions_are_refused_unless_forced(
    home: Path, tmp_path: Path
) -> None:
    app = _app(home)
    app.clear_calibration()
    short = _with_unsupported(tmp_path, MIN_UNSUPPORTED - 1)
    request = CalibrateRequest(Dataset(short), evidence=EVIDENCE, write=True)
    with pytest.raises(EvaluationError) as error:
        app.calibrate(request)
    assert f"{MIN_UNSUPPORTED - 1} unsupported" in str(error.value)
    assert f"at least {MIN_UNSUPPORTED}" in str(error.value) and "--force" in str(error.value)
    assert not _record_file(app).exists(), "a refused calibration writes nothing"
    forced = app.calibrate(CalibrateRequest(Dataset(short), evidence=EVIDENCE, force=True))
    assert forced.forced and forced.unsupported == MIN_UNSUPPORTED - 1
    enough = app.calibrate(
        CalibrateRequest(Dataset(_with_unsupported(tmp_path, MIN_UNSUPPORTED)), evidence=EVIDENCE)
    )
    assert not enough.forced and enough.unsupported == MIN_UNSUPPORTED
