"""Requests and results of evaluation: a run over a labelled dataset, the comparison of
two persisted runs, and the HTML report of one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragwright.application.left_out import LeftOut
from ragwright.application.requests.evidence import (
    EvidenceFilter,
    ThresholdOrigin,
    ThresholdOverrides,
)
from ragwright.core.answers import AnswerStyle
from ragwright.errors import RequestError
from ragwright.pipeline.retrieve import Mode, Thresholds


@dataclass(frozen=True, slots=True)
class Dataset:
    """A JSONL dataset file, or a BEIR directory with a qrels split."""

    path: Path
    beir: bool = False
    split: str = "test"


@dataclass(frozen=True, slots=True)
class EvaluateRequest:
    """Score retrieval on labelled questions and persist the run; ``report`` also writes
    report.html, compared with the earlier run ``compare`` names (which needs ``report``).

    ``answers`` also runs the answer use case for every case, one after another, under
    the run's mode, evidence, tenant and thresholds, in answer style ``style`` (``None``:
    the configured default), and scores the answers (docs/evaluation.md). ``style``
    without ``answers`` is refused: it would change nothing.

    An answer run records each case's answer as it completes; ``resume`` names an
    unfinished one (execution id, directory, or ``latest``: the most recently started)
    to finish under the same configuration, answering only the cases it has no answer
    for. It needs ``answers``.
    """

    dataset: Dataset
    mode: Mode = "hybrid"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    thresholds: ThresholdOverrides = ThresholdOverrides()
    with_text: bool = False
    report: bool = False
    compare: str | None = None
    answers: bool = False
    style: AnswerStyle | None = None
    resume: str | None = None

    def __post_init__(self) -> None:
        if self.resume is not None and not self.answers:
            raise RequestError("resume", "applies only to answer runs (answers / --answers)")
        if self.compare is not None and not self.report:
            raise RequestError(
                "compare", "needs report (--report): the comparison is part of the HTML report"
            )
        if self.style is not None and not self.answers:
            raise RequestError("style", "applies only to answer runs (answers / --answers)")


@dataclass(frozen=True, slots=True)
class EvaluateResult:
    execution_id: str
    path: Path
    summary: Mapping[str, Any]
    categories: Mapping[str, Any]
    unsupported: Mapping[str, Any]
    report_path: Path | None = None
    thresholds: Thresholds = Thresholds()
    threshold_origin: ThresholdOrigin = ThresholdOrigin()
    answers: Mapping[str, Any] | None = None
    chunking_version: str | None = None
    left_out: LeftOut = field(default_factory=LeftOut)
    resumed: int | None = None
    """Resumed runs: how many cases the run had answered before this resumption."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "path": str(self.path),
            "resumed": self.resumed,
            "report": str(self.report_path) if self.report_path else None,
            "thresholds": asdict(self.thresholds),
            **self.threshold_origin.to_dict(),
            "summary": dict(self.summary),
            "categories": dict(self.categories),
            "unsupported": {k: v for k, v in self.unsupported.items() if k != "results"},
            "answers": dict(self.answers) if self.answers is not None else None,
            "chunking_version": self.chunking_version,
            **self.left_out.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class CompareRequest:
    """Per-case changes of one metric at one cutoff between two persisted runs."""

    before: str
    after: str
    k: int = 10
    metric: Literal["precision", "recall", "reciprocal_rank", "ndcg"] = "ndcg"


@dataclass(frozen=True, slots=True)
class CaseChangeResult:
    case_id: str
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class CompareResult:
    k: int
    metric: str
    regressions: tuple[CaseChangeResult, ...]
    improvements: tuple[CaseChangeResult, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "metric": self.metric,
            "regressions": [asdict(c) for c in self.regressions],
            "improvements": [asdict(c) for c in self.improvements],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """Render report.html for a persisted run; ``compare`` names an earlier run to show
    summary deltas and per-case changes against."""

    run: str
    compare: str | None = None


@dataclass(frozen=True, slots=True)
class ReportResult:
    execution_id: str
    path: Path
    compared_with: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "path": str(self.path),
            "compared_with": self.compared_with,
        }
