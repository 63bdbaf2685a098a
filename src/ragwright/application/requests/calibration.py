"""Requests and results of calibration: the threshold sweep against unsupported
questions, judged on held-out ones, and clearing the persisted calibration."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ragwright.application.requests.evaluation import Dataset
from ragwright.application.requests.evidence import EvidenceFilter
from ragwright.pipeline.retrieve import Mode


@dataclass(frozen=True, slots=True)
class CalibrateRequest:
    """Sweep dense/BM25 thresholds against unsupported questions.

    The recommendation is judged on held-out questions: ``holdout`` (a separate
    dataset) or else a stratified ``folds``-fold split of ``dataset``. Fewer than
    :data:`~ragwright.pipeline.calibrate.MIN_UNSUPPORTED` unsupported questions are
    refused unless ``force``. ``write`` persists the recommendation beside the index
    (``calibration.json``), replacing any earlier one.
    """

    dataset: Dataset
    mode: Mode = "hybrid"
    k: int = 5
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    max_recall_loss: float = 0.0
    max_candidates: int = 8
    folds: int = 5
    holdout: Dataset | None = None
    force: bool = False
    write: bool = False
    max_answerable_loss: float = 0.1


@dataclass(frozen=True, slots=True)
class ClearCalibrationRequest:
    """Remove the persisted calibration (``calibration.json`` beside the index)."""


@dataclass(frozen=True, slots=True)
class ClearCalibrationResult:
    path: Path
    removed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "removed": self.removed}


@dataclass(frozen=True, slots=True)
class AnswerabilityFigures:
    """What an answerability threshold declines on a set of questions."""

    answerable: int
    unsupported: int
    answerable_declined: int
    unsupported_declined: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "answerable_declined_rate": _rate(self.answerable_declined, self.answerable),
            "unsupported_declined_rate": _rate(self.unsupported_declined, self.unsupported),
        }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass(frozen=True, slots=True)
class AnswerabilityResult:
    """The recommended answerability threshold (``None``: no threshold declines an
    unsupported question within ``max_answerable_loss``), chosen under the recommended
    retrieval thresholds, with its in-sample and held-out figures."""

    threshold: float | None
    max_answerable_loss: float
    style: Literal["quoted", "evidence"]
    in_sample: AnswerabilityFigures
    held_out: AnswerabilityFigures

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "max_answerable_loss": self.max_answerable_loss,
            "style": self.style,
            "in_sample": self.in_sample.to_dict(),
            "held_out": self.held_out.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class HeldOutResult:
    """The recommendation rule on questions it was not chosen on: ``k-fold`` (pooled
    over ``folds`` folds, ``fold_thresholds`` recommended for each) or ``holdout``
    (``dataset``, under the one recommendation)."""

    method: Literal["k-fold", "holdout"]
    folds: int | None
    dataset: str | None
    answerable: int
    unsupported: int
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int
    fold_thresholds: tuple[tuple[float | None, float | None], ...]

    def to_dict(self, k: int) -> dict[str, Any]:
        return {
            "method": self.method,
            "folds": self.folds,
            "dataset": self.dataset,
            "answerable": self.answerable,
            "unsupported": self.unsupported,
            "false_acceptance_rate": round(self.false_acceptance_rate, 4),
            f"recall@{k}": round(self.recall, 4),
            f"ndcg@{k}": round(self.ndcg, 4),
            "refused_answerable": self.refused_answerable,
            "fold_thresholds": [
                {"threshold_dense": dense, "threshold_sparse": sparse}
                for dense, sparse in self.fold_thresholds
            ],
        }


@dataclass(frozen=True, slots=True)
class CalibrationRowResult:
    threshold_dense: float | None
    threshold_sparse: float | None
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int
    recommended: bool


@dataclass(frozen=True, slots=True)
class CalibrateResult:
    mode: Mode
    k: int
    answerable: int
    unsupported: int
    rows: tuple[CalibrationRowResult, ...]
    held_out: HeldOutResult | None = None
    forced: bool = False
    written: Path | None = None
    answerability: AnswerabilityResult | None = None

    @property
    def recommended(self) -> CalibrationRowResult:
        return next(r for r in self.rows if r.recommended)

    def to_dict(self) -> dict[str, Any]:
        rows = [_calibration_row(r, self.k) for r in self.rows]
        return {
            "mode": self.mode,
            "k": self.k,
            "answerable": self.answerable,
            "unsupported": self.unsupported,
            "rows": rows,
            "recommended": next(r for r in rows if r["recommended"]),
            "held_out": self.held_out.to_dict(self.k) if self.held_out else None,
            "forced": self.forced,
            "written": str(self.written) if self.written else None,
            "answerability": self.answerability.to_dict() if self.answerability else None,
        }


def _calibration_row(row: CalibrationRowResult, k: int) -> dict[str, Any]:
    return {
        "threshold_dense": row.threshold_dense,
        "threshold_sparse": row.threshold_sparse,
        "false_acceptance_rate": round(row.false_acceptance_rate, 4),
        f"recall@{k}": round(row.recall, 4),
        f"ndcg@{k}": round(row.ndcg, 4),
        "refused_answerable": row.refused_answerable,
        "recommended": row.recommended,
    }
