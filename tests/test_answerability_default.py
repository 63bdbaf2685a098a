"""Declining before anyone calibrates (issue 47 item 6): the embedding profile's default
answerability threshold applies when neither the setting nor a persisted calibration
gives one, and every result says it is uncalibrated.

Resolution order through the application (hashing embedder, a profile with a default),
then the labels through the command line with the bundled MiniLM profile."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.embedders.e5 import E5_SMALL_PROFILE
from ragwright.adapters.embedders.onnx import MINILM_PROFILE
from ragwright.application import AnswerRequest, Application, IngestRequest
from ragwright.application.calibration import calibration_path
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import EmbeddingProfile
from tests.application.components import FakeComponents, fake_application
from tests.cli import copy_home, ragwright

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "samples" / "corpus"
ANSWERED = "Should I drain all queued work during shutdown?"
OFF_TOPIC = "How tall is the CEO?"


def test_the_bundled_minilm_profile_has_a_measured_default_and_e5_has_none() -> None:
    assert MINILM_PROFILE.default_answerability_threshold == 0.48
    assert E5_SMALL_PROFILE.default_answerability_threshold is None


# --- resolution order: setting > calibration > the profile's default > none ------------


@pytest.fixture
def defaulted(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """Fake components whose embedding profile has a default above every signal of
    the sample corpus under the hashing embedder (cosines of bag-of-words vectors)."""
    default = 0.999
    profile = dataclasses.replace(HASHING_PROFILE, default_answerability_threshold=default)

    def embedding_profile(self: FakeComponents) -> EmbeddingProfile:
        return profile

    monkeypatch.setattr(FakeComponents, "embedding_profile", embedding_profile)
    yield default


def _answer(app: Application, question: str = ANSWERED, **options: Any) -> dict[str, Any]:
    return asyncio.run(app.answer(AnswerRequest(question, **options))).to_dict()


def _record(home: Path, threshold: float) -> None:
    """A persisted calibration with an answerability threshold (retrieval legs none)."""
    from ragwright.application import CalibrateRequest, Dataset

    app, _ = fake_application(home)
    cases = home / "cases.jsonl"
    rows = [
        {"id": "a1", "category": "c", "question": ANSWERED,
         "relevant": [{"document_id": "worker-shutdown", "grade": 2}]},
        {"id": "a2", "category": "c", "question": "How do I rotate the TLS certificate?",
         "relevant": [{"document_id": "certificate-rotation", "grade": 2}]},
        {"id": "u1", "category": "u", "question": "Which regions host us?", "unsupported": True},
        {"id": "u2", "category": "u", "question": "How tall is the CEO?", "unsupported": True},
    ]  # fmt: skip
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    app.calibrate(CalibrateRequest(Dataset(cases), force=True, write=True, folds=2))
    path = calibration_path(app.settings.index_path)
    record = json.loads(path.read_text("utf-8"))
    record["thresholds"] = {"dense": None, "sparse": None}
    figures = {
        "answerable": 2, "unsupported": 2, "answerable_declined": 0,
        "unsupported_declined": 1, "answerable_declined_rate": 0.0,
        "unsupported_declined_rate": 0.5,
    }  # fmt: skip
    record["answerability"] = {
        "threshold": threshold,
        "max_answerable_loss": 0.1,
        "style": "evidence",
        "in_sample": figures,
        "held_out": figures,
    }
    path.write_text(json.dumps(record), "utf-8")


def test_the_profile_default_applies_when_nothing_else_sets_a_threshold(
    tmp_path: Path, defaulted: float
) -> None:
    home = tmp_path / "home"
    app, components = fake_application(home)
    app.ingest(IngestRequest((CORPUS,)))
    assert app.answerability_threshold() == (defaulted, "uncalibrated-default")
    outcome = _answer(app)
    # Below the default: declined without a model call, and the result says why.
    assert outcome["status"] == "insufficient"
    assert components.model.calls == 0  # type: ignore[attr-defined]
    assert outcome["answerability"]["threshold"] == defaulted
    assert outcome["options"]["answerability_threshold"] == defaulted
    assert outcome["options"]["answerability_source"] == "uncalibrated-default"


def test_a_calibration_wins_over_the_default_and_a_setting_over_both(
    tmp_path: Path, defaulted: float
) -> None:
    home = tmp_path / "home"
    app, _ = fake_application(home)
    app.ingest(IngestRequest((CORPUS,)))
    _record(home, -1.0)
    app, _ = fake_application(home)
    assert app.answerability_threshold() == (-1.0, "calibration")
    outcome = _answer(app, style="evidence")
    assert outcome["status"] == "evidence_only"
    assert outcome["options"]["answerability_source"] == "calibration"
    app, _ = fake_application(home, answerability_threshold=0.25)
    assert app.answerability_threshold() == (0.25, "settings")
    assert (_answer(app, style="evidence"))["options"]["answerability_source"] == "settings"


def test_a_profile_without_a_default_declines_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app, _ = fake_application(home)
    app.ingest(IngestRequest((CORPUS,)))
    assert app.answerability_threshold() == (None, "none")
    outcome = _answer(app, OFF_TOPIC, style="evidence")
    assert outcome["status"] == "evidence_only"
    assert outcome["options"]["answerability_source"] == "none"


# --- through the command line, with the bundled MiniLM profile -------------------------


@pytest.fixture(scope="module")
def home(indexed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_home(indexed_home, tmp_path_factory.mktemp("default") / "home")


def test_ask_declines_an_off_topic_question_under_the_uncalibrated_default(home: Path) -> None:
    result = ragwright("ask", OFF_TOPIC, "--style", "evidence", home=home, check=True)
    assert result.stdout.startswith("[insufficient]")
    assert "threshold 0.480 (the uncalibrated default); the model was not called" in result.stdout
    assert (
        "answerability threshold: 0.4800, uncalibrated (the embedding profile's default,"
        in result.stdout
    )
    assert "ragwright eval calibrate CASES.jsonl --write" in result.stdout
    data = json.loads(
        ragwright("ask", OFF_TOPIC, "--style", "evidence", "--json", home=home).stdout
    )
    assert data["status"] == "insufficient"
    assert data["options"]["answerability_threshold"] == 0.48
    assert data["options"]["answerability_source"] == "uncalibrated-default"


def test_ask_answers_an_answerable_question_under_the_default_and_says_so(home: Path) -> None:
    result = ragwright("ask", ANSWERED, "--style", "evidence", home=home, check=True)
    assert result.stdout.startswith("[evidence only]")
    assert "answerability threshold: 0.4800, uncalibrated" in result.stdout


def test_the_setting_replaces_the_default_and_the_text_names_it(home: Path) -> None:
    result = ragwright(
        "ask", OFF_TOPIC, "--style", "evidence", home=home, check=True,
        RAGWRIGHT_ANSWERABILITY_THRESHOLD="0.1",
    )  # fmt: skip
    assert result.stdout.startswith("[evidence only]")
    assert (
        "answerability threshold: 0.1000 (setting RAGWRIGHT_ANSWERABILITY_THRESHOLD)"
        in result.stdout
    )
    assert "uncalibrated" not in result.stdout


def test_status_suggests_calibrating_while_the_default_applies(home: Path) -> None:
    result = ragwright("status", home=home, check=True)
    assert (
        "answerability threshold: 0.4800, the embedding profile's uncalibrated default"
        in result.stdout
    )
    assert "ragwright eval calibrate CASES.jsonl --write" in result.stdout
    configured = ragwright("status", home=home, check=True, RAGWRIGHT_ANSWERABILITY_THRESHOLD="0.5")
    assert "uncalibrated" not in configured.stdout
