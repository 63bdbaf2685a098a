"""The persisted calibration: ``calibration.json`` beside the index.

``eval calibrate --write`` records the thresholds it recommends, with what they were
chosen on and how they fared, in ``<home>/index/<collection>/calibration.json``;
``search``, ``ask`` and ``eval run`` then apply them to every stage that neither the
request nor a setting sets (:meth:`ragwright.application.Application.thresholds`).
``eval calibrate --clear`` removes the file.

The file is one JSON object (:class:`CalibrationRecord`), written atomically (a temporary
file in the same directory, then a rename) and validated whole on every read: a damaged
or hand-edited file raises :class:`~ragwright.errors.CalibrationError` naming the file
and the field, and is never skipped. A new calibration replaces the whole record,
``answerability`` included: that section belongs to the calibration it was made with.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from ragwright.errors import CalibrationError

CALIBRATION_FILE = "calibration.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RecordThresholds(_Strict):
    """Minimum dense (cosine) and BM25 scores; ``None``: that leg is not thresholded."""

    dense: float | None
    sparse: float | None


class Figures(_Strict):
    """How thresholds fared on a set of labelled questions (Recall@K and nDCG@K on the
    answerable ones; ``refused_answerable`` of them were left with no evidence)."""

    answerable: int = Field(ge=0)
    unsupported: int = Field(ge=0)
    false_acceptance_rate: float = Field(ge=0, le=1)
    recall: float = Field(ge=0, le=1)
    ndcg: float = Field(ge=0, le=1)
    refused_answerable: int = Field(ge=0)


class HeldOutFigures(Figures):
    """``k-fold``: the pooled figures of ``folds`` folds, each judged under the thresholds
    recommended on the others (``fold_thresholds``); ``holdout``: a separate dataset
    (``dataset``, ``dataset_sha256``) judged under the recommendation."""

    method: Literal["k-fold", "holdout"]
    folds: int | None = Field(ge=2)
    dataset: str | None
    dataset_sha256: str | None = Field(pattern=r"^[0-9a-f]{64}$")
    fold_thresholds: tuple[RecordThresholds, ...]


class RecordAnswerabilityFigures(_Strict):
    """What the answerability threshold declines on a set of questions."""

    answerable: int = Field(ge=0)
    unsupported: int = Field(ge=0)
    answerable_declined: int = Field(ge=0)
    unsupported_declined: int = Field(ge=0)
    answerable_declined_rate: float | None = Field(ge=0, le=1)
    unsupported_declined_rate: float | None = Field(ge=0, le=1)


class RecordAnswerability(_Strict):
    """The answerability threshold ``ask`` applies by default (the least similarity
    between the question and its best evidence sentence), how it was chosen and what it
    did in-sample and on held-out questions."""

    threshold: float = Field(ge=-1, le=1)
    max_answerable_loss: float = Field(ge=0, le=1)
    style: Literal["quoted", "evidence"]
    in_sample: RecordAnswerabilityFigures
    held_out: RecordAnswerabilityFigures


class CalibrationRecord(_Strict):
    """The persisted calibration; its JSON form is the file (docs/evaluation.md)."""

    format: Literal["ragwright-calibration"] = "ragwright-calibration"
    version: Literal[1] = 1
    calibrated_at: AwareDatetime
    code_revision: str
    collection: str
    embedding_profile: str
    lexical_profile: str
    chunking_version: str
    document_types: tuple[str, ...]
    publication_states: tuple[str, ...]
    tenant: str | None
    mode: Literal["dense", "sparse", "hybrid"]
    k: int = Field(ge=1)
    max_recall_loss: float = Field(ge=0)
    dataset: str
    dataset_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    forced: bool
    thresholds: RecordThresholds
    in_sample: Figures
    held_out: HeldOutFigures
    answerability: RecordAnswerability | None = None

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (every field, ``answerability`` ``null`` when unset)."""
        return self.model_dump(mode="json")


def calibration_path(index_path: Path) -> Path:
    """Where the calibration of the index at ``index_path`` lives."""
    return index_path / CALIBRATION_FILE


def read_calibration(path: Path) -> CalibrationRecord | None:
    """The record at ``path``, or ``None`` when there is none.

    Raises:
        CalibrationError: the file cannot be read, is not JSON, or breaks the record's
            shape; ``field`` names the first offending field (``record`` for the file).
    """
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise CalibrationError(str(path), "record", f"cannot be read ({error})") from error
    try:
        data = json.loads(text)
    except ValueError as error:
        raise CalibrationError(str(path), "record", f"is not JSON ({error})") from error
    if not isinstance(data, dict):
        raise CalibrationError(str(path), "record", "must be a JSON object")
    try:
        return CalibrationRecord.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
        ).lstrip(".")
        raise CalibrationError(str(path), field or "record", first["msg"]) from error


def write_calibration(path: Path, record: CalibrationRecord) -> None:
    """Replace the record at ``path`` atomically: readers see the old file or the new
    one, never a part (a temporary file in the same directory, flushed, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(record.to_json(), file, indent=2, ensure_ascii=False)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def clear_calibration(path: Path) -> bool:
    """Remove the record at ``path`` (damaged or not); ``False`` when there was none."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def calibrated_at_text(moment: datetime) -> str:
    """The record's date as shown to people: ISO 8601 in UTC to the second (``...Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
