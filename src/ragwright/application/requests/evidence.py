"""Which evidence a request may use, and under which thresholds: the one place of the
default eligibility, per-request threshold overrides, and where each stage's threshold
came from (request, setting or persisted calibration)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragwright.pipeline.retrieve import Mode, Thresholds

# The one place the default eligibility lives: published runbooks. Requests that name no
# type or state get these; an entry point never repeats them.
DEFAULT_ELIGIBLE_TYPES: tuple[str, ...] = ("runbook",)
DEFAULT_ELIGIBLE_STATES: tuple[str, ...] = ("published",)


@dataclass(frozen=True, slots=True)
class EvidenceFilter:
    """Which indexed evidence a request may use (applied inside every engine query).

    Empty ``types``/``states`` mean the defaults (published runbooks); ``documents``
    restricts to those ids; ``chunking_version`` ``None`` means the only version holding
    chunks the caller may see, else the one the settings' chunking policy produces
    (:mod:`ragwright.application.left_out`).

    ``also_visible_types``/``also_visible_states`` are trusted context, like a request's
    tenant: the other types and states the caller may see, within which a result counts
    the chunks the default types and states left out. Empty (the default, and an API
    key's caller, whose grant is exactly its filter): none are counted; ``None``: every
    one (the operator's command line). ``granted`` true says ``types`` and ``states`` are
    the caller's API key's grant, not the request's choice (a result says where what it
    searched came from).
    """

    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    chunking_version: str | None = None
    also_visible_types: tuple[str, ...] | None = ()
    also_visible_states: tuple[str, ...] | None = ()
    granted: bool = False

    @property
    def effective_types(self) -> tuple[str, ...]:
        return self.types or DEFAULT_ELIGIBLE_TYPES

    @property
    def effective_states(self) -> tuple[str, ...]:
        return self.states or DEFAULT_ELIGIBLE_STATES


@dataclass(frozen=True, slots=True)
class ThresholdOverrides:
    """Per-stage minimum scores given with a request; ``None`` keeps the configured one
    (``RAGWRIGHT_THRESHOLD_*``, else the persisted calibration's)."""

    dense: float | None = None
    sparse: float | None = None
    fusion: float | None = None
    rerank: float | None = None


# Where a stage's threshold came from, highest precedence first; "none": not thresholded.
ThresholdSource = Literal["request", "settings", "calibration", "none"]

# Where the answerability threshold came from, highest precedence first: the
# ``answerability_threshold`` setting, the persisted calibration, the embedding profile's
# measured default (not calibrated on this index's questions, and every result says so),
# or none (the profile has no measured default: nothing is declined).
UNCALIBRATED_DEFAULT: Literal["uncalibrated-default"] = "uncalibrated-default"
AnswerabilitySource = Literal["settings", "calibration", "uncalibrated-default", "none"]
ANSWERABILITY_SOURCES: tuple[AnswerabilitySource, ...] = (
    "settings",
    "calibration",
    UNCALIBRATED_DEFAULT,
    "none",
)
STAGES: tuple[str, ...] = ("dense", "sparse", "fusion", "rerank")


@dataclass(frozen=True, slots=True)
class CalibrationStamp:
    """Which persisted calibration (``calibration.json``) this is: when it was made, on
    which dataset (path and SHA-256), under which mode and K, and its thresholds."""

    path: str
    calibrated_at: str
    dataset: str
    dataset_sha256: str
    mode: Mode
    k: int
    threshold_dense: float | None
    threshold_sparse: float | None
    answerability_threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ThresholdOrigin:
    """Where each stage's threshold came from (request option > setting > persisted
    calibration > none) and, when the calibration supplied any, which one it was."""

    sources: Mapping[str, ThresholdSource] = field(
        default_factory=lambda: dict.fromkeys(STAGES, "none")
    )
    calibration: CalibrationStamp | None = None

    @property
    def source(self) -> str:
        """The one source of every thresholded stage, ``none`` when no stage is
        thresholded, or ``mixed`` when stages came from different sources."""
        used = {s for s in self.sources.values() if s != "none"}
        if not used:
            return "none"
        return used.pop() if len(used) == 1 else "mixed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds_source": self.source,
            "thresholds_sources": dict(self.sources),
            "calibration": self.calibration.to_dict() if self.calibration else None,
        }


@dataclass(frozen=True, slots=True)
class AppliedThresholds:
    """The thresholds a query applies and where they came from."""

    thresholds: Thresholds
    origin: ThresholdOrigin = ThresholdOrigin()
