"""One resolver for the thresholds a request runs under: per-stage retrieval thresholds,
the answerability threshold, and the stamp of the persisted calibration they may come
from (``calibration.json`` beside the index, written by ``eval calibrate --write``).

Before any calibration the answerability threshold is the embedding profile's measured
default (source ``uncalibrated-default``); the retrieval stages have no default: a
retrieval floor measured on one corpus does not carry to another (BM25 scores grow with
the corpus's term statistics), and on ClapNQ the calibrated floors declined no more
unanswerable questions than the answerability threshold alone (docs/answers.md, "A
default before calibration")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragwright.application.calibration import (
    CalibrationRecord,
    calibrated_at_text,
    calibration_path,
    read_calibration,
)
from ragwright.application.requests.evidence import (
    STAGES,
    UNCALIBRATED_DEFAULT,
    AnswerabilitySource,
    AppliedThresholds,
    CalibrationStamp,
    ThresholdOrigin,
    ThresholdOverrides,
    ThresholdSource,
)
from ragwright.errors import CalibrationError
from ragwright.pipeline.retrieve import Thresholds
from ragwright.protocols import SparseEncoder
from ragwright.settings import Settings
from ragwright.types import EmbeddingProfile


class ThresholdResolver:
    """Where each threshold comes from: the request, else the settings, else the
    persisted calibration (checked against the profiles the settings select)."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedding_profile: Callable[[], EmbeddingProfile],
        sparse_encoder: Callable[[], SparseEncoder],
    ) -> None:
        self.settings = settings
        self._embedding_profile = embedding_profile
        self._sparse_encoder = sparse_encoder

    def calibration_file(self) -> Path:
        """Where this collection's persisted calibration lives (beside the index)."""
        return calibration_path(self.settings.index_path)

    def calibration(self) -> CalibrationRecord | None:
        """The persisted calibration, validated (``None`` when there is none).

        Raises:
            CalibrationError: the file is damaged or out of shape, naming the field.
        """
        return read_calibration(self.calibration_file())

    def answerability_threshold(self) -> tuple[float | None, AnswerabilitySource]:
        """The answerability threshold and where it came from: the
        ``answerability_threshold`` setting, else the persisted calibration's
        (``eval calibrate --write``), else the embedding profile's measured default
        (``uncalibrated-default``: chosen on public questions, not the team's), else none
        (a profile with no measured default declines nothing before a calibration).

        Raises:
            CalibrationError: the persisted calibration is damaged.
        """
        if self.settings.answers.answerability_threshold is not None:
            return self.settings.answers.answerability_threshold, "settings"
        record = self.calibration()
        if record is not None and record.answerability is not None:
            self.check_profiles(record)
            return record.answerability.threshold, "calibration"
        default = self._embedding_profile().default_answerability_threshold
        if default is not None:
            return default, UNCALIBRATED_DEFAULT
        return None, "none"

    def thresholds(self, overrides: ThresholdOverrides = ThresholdOverrides()) -> AppliedThresholds:
        """Per-stage thresholds and where each came from: the request's value, else the
        setting's (``RAGWRIGHT_THRESHOLD_*`` or ragwright.toml; unset is ``None``), else
        the persisted calibration's (dense and sparse only), else none.

        Raises:
            CalibrationError: the persisted calibration is damaged, or was made under
                another embedding or lexical profile than the settings select while it
                supplies a stage.
        """
        s = self.settings.retrieval
        configured = {
            "dense": s.threshold_dense,
            "sparse": s.threshold_sparse,
            "fusion": s.threshold_fusion,
            "rerank": s.threshold_rerank,
        }
        record = self.calibration()
        calibrated = {
            "dense": record.thresholds.dense if record else None,
            "sparse": record.thresholds.sparse if record else None,
        }
        values: dict[str, float | None] = {}
        sources: dict[str, ThresholdSource] = {}
        for stage in STAGES:
            for source, value in (
                ("request", getattr(overrides, stage)),
                ("settings", configured[stage]),
                ("calibration", calibrated.get(stage)),
            ):
                if value is not None:
                    values[stage], sources[stage] = value, source  # type: ignore[assignment]
                    break
            else:
                values[stage], sources[stage] = None, "none"
        stamp = None
        if record is not None and "calibration" in sources.values():
            self.check_profiles(record)
            stamp = self.stamp(record)
        return AppliedThresholds(Thresholds(**values), ThresholdOrigin(sources, stamp))

    def check_profiles(self, record: CalibrationRecord) -> None:
        """Scores of another embedding model or BM25 parameters are on another scale."""
        current = {
            "embedding_profile": self._embedding_profile().profile_id,
            "lexical_profile": self._sparse_encoder().profile.profile_id,
        }
        for name, now in current.items():
            then = getattr(record, name)
            if then != now:
                raise CalibrationError(
                    str(self.calibration_file()),
                    name,
                    f"calibrated under {then!r}, the settings now select {now!r}; its "
                    "thresholds are on another score scale",
                )

    def stamp(self, record: CalibrationRecord | None) -> CalibrationStamp | None:
        """What results say of the calibration in force (``None``: there is none)."""
        if record is None:
            return None
        return CalibrationStamp(
            path=str(self.calibration_file()),
            calibrated_at=calibrated_at_text(record.calibrated_at),
            dataset=record.dataset,
            dataset_sha256=record.dataset_sha256,
            mode=record.mode,
            k=record.k,
            threshold_dense=record.thresholds.dense,
            threshold_sparse=record.thresholds.sparse,
            answerability_threshold=(
                record.answerability.threshold if record.answerability is not None else None
            ),
        )
