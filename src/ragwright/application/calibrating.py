"""``eval calibrate``: sweep retrieval thresholds so unsupported questions find no
evidence, choose the answerability threshold, judge both on held-out questions, and
persist the recommendation beside the index (:mod:`ragwright.application.calibration`
stores it; :mod:`ragwright.application.thresholds` reads it back)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal

from ragwright.application.calibration import (
    CalibrationRecord,
    Figures,
    HeldOutFigures,
    RecordAnswerability,
    RecordAnswerabilityFigures,
    RecordThresholds,
    clear_calibration,
    write_calibration,
)
from ragwright.application.evaluation import LabelledParts, dataset_digest
from ragwright.application.requests.calibration import (
    AnswerabilityFigures,
    AnswerabilityResult,
    CalibrateRequest,
    CalibrateResult,
    CalibrationRowResult,
    ClearCalibrationRequest,
    ClearCalibrationResult,
    HeldOutResult,
)
from ragwright.chat.contract import ModelProfile
from ragwright.core.eligibility import CallerScope
from ragwright.errors import EvaluationError
from ragwright.pipeline.answer import AnswerPlan, Budget, answer_question
from ragwright.pipeline.answerability import (
    SignalCase,
    ThresholdFigures,
    choose_threshold,
    held_out_threshold,
    judge_threshold,
)
from ragwright.pipeline.calibrate import (
    MIN_UNSUPPORTED,
    Calibration,
    HeldOut,
    assign_folds,
    calibrate,
)
from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus
from ragwright.pipeline.planning import ProgressCallback
from ragwright.pipeline.retrieve import Retriever, Thresholds
from ragwright.protocols import TokenCounter, VectorIndex
from ragwright.types import EvalCase


class Calibrating:
    """Threshold calibration over labelled cases, and clearing the persisted one."""

    def __init__(
        self,
        parts: LabelledParts,
        *,
        token_counter: Callable[[], TokenCounter],
        chat_profiles: Callable[[], Sequence[ModelProfile]],
    ) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.decisions = parts.decisions
        self.thresholds = parts.thresholds
        self._token_counter = token_counter
        self._chat_profiles = chat_profiles

    def calibrate(
        self, request: CalibrateRequest, *, progress: ProgressCallback | None = None
    ) -> CalibrateResult:
        """Sweep thresholds so unsupported questions find no evidence; recommend one,
        judge it on held-out questions, and with ``write`` persist it beside the index.

        Raises:
            EvaluationError: fewer than ``MIN_UNSUPPORTED`` unsupported questions without
                ``force`` (checked before anything is embedded), or what the sweep refuses.
        """
        cases = self.parts.cases(request.dataset)
        unsupported = _count_unsupported(cases, request)
        holdout = self.parts.cases(request.holdout) if request.holdout is not None else None
        scope = CallerScope(tenant=request.tenant)
        index = self.parts.open_for_queries()
        try:
            config = EvalConfig(
                eligibility=self.decisions.evidence_scope(
                    index, request.evidence, scope
                ).eligibility,
                scope=scope,
                mode=request.mode,
                ks=(request.k,),
            )
            result = calibrate(
                cases,
                self.parts.deep_retriever(index, config),
                config,
                eligible_corpus(index, config.eligibility, config.scope),
                k=request.k,
                max_recall_loss=request.max_recall_loss,
                max_candidates=request.max_candidates,
                folds=request.folds,
                holdout=holdout,
                progress=progress,
            )
            answerability = self._calibrate_answerability(
                request, config, index, result.recommended.thresholds, cases, holdout, progress
            )
        finally:
            index.close()
        written = None
        if request.write:
            written = self.thresholds.calibration_file()
            write_calibration(
                written, self._calibration_record(request, config, result, answerability)
            )
        return CalibrateResult(
            mode=result.mode,
            k=request.k,
            answerable=result.answerable,
            unsupported=result.unsupported,
            rows=_rows(result),
            held_out=(
                None if result.held_out is None else _held_out_result(result.held_out, request)
            ),
            forced=unsupported < MIN_UNSUPPORTED,
            written=written,
            answerability=answerability,
        )

    def _calibrate_answerability(
        self,
        request: CalibrateRequest,
        config: EvalConfig,
        index: VectorIndex,
        thresholds: Thresholds,
        cases: Sequence[EvalCase],
        holdout: Sequence[EvalCase] | None,
        progress: ProgressCallback | None,
    ) -> AnswerabilityResult:
        """Score every question's answerability signal as ``ask`` would compute it (same
        retrieval, recommended thresholds, assembly and budget; no model call), then
        choose the threshold and judge it on held-out questions."""
        style: Literal["quoted", "evidence"] = (
            "quoted" if self.decisions.answer_style() == "quoted" else "evidence"
        )
        signals = _Signals(
            request,
            config,
            self.parts.retriever(index),
            self._token_counter(),
            Budget.for_profile(self._chat_profiles()[0]),
            style,
            thresholds,
            progress,
        )
        labelled = signals.score(cases)
        chosen = choose_threshold(labelled, request.max_answerable_loss)
        if holdout is not None:
            held = judge_threshold(signals.score(holdout), chosen.threshold)
        else:
            held = held_out_threshold(
                labelled, assign_folds(cases, request.folds), request.max_answerable_loss
            )
        return AnswerabilityResult(
            threshold=chosen.threshold,
            max_answerable_loss=request.max_answerable_loss,
            style=style,
            in_sample=_figures(chosen),
            held_out=_figures(held),
        )

    def _calibration_record(
        self,
        request: CalibrateRequest,
        config: EvalConfig,
        result: Calibration,
        answerability: AnswerabilityResult | None = None,
    ) -> CalibrationRecord:
        chosen, held = result.recommended, result.held_out
        if held is None:  # the use case always asks for held-out figures
            raise EvaluationError("a calibration is persisted only with held-out figures")
        return CalibrationRecord(
            calibrated_at=datetime.now(UTC).replace(microsecond=0),
            code_revision=self.parts.code_revision(),
            collection=self.settings.index.collection,
            embedding_profile=self.parts.embedding_profile().profile_id,
            lexical_profile=self.parts.sparse_encoder().profile.profile_id,
            chunking_version=config.eligibility.chunking_version,
            document_types=config.eligibility.document_types,
            publication_states=config.eligibility.publication_states,
            tenant=request.tenant,
            mode=result.mode,
            k=result.k,
            max_recall_loss=request.max_recall_loss,
            dataset=str(request.dataset.path),
            dataset_sha256=dataset_digest(request.dataset),
            forced=result.unsupported < MIN_UNSUPPORTED,
            thresholds=RecordThresholds(
                dense=chosen.thresholds.dense, sparse=chosen.thresholds.sparse
            ),
            in_sample=Figures(
                answerable=result.answerable,
                unsupported=result.unsupported,
                false_acceptance_rate=chosen.false_acceptance_rate,
                recall=chosen.recall,
                ndcg=chosen.ndcg,
                refused_answerable=chosen.refused_answerable,
            ),
            held_out=_held_out_figures(held, request),
            answerability=_answerability_record(answerability),
        )

    def clear_calibration(
        self, request: ClearCalibrationRequest | None = None
    ) -> ClearCalibrationResult:
        """Remove the persisted calibration, readable or not; thresholds then come from
        requests and settings only."""
        path = self.thresholds.calibration_file()
        return ClearCalibrationResult(path, clear_calibration(path))


class _Signals:
    """Each labelled question's answerability signal, computed as ``ask`` would (a
    preview: retrieval, assembly and budget, no model call)."""

    def __init__(
        self,
        request: CalibrateRequest,
        config: EvalConfig,
        retriever: Retriever,
        counter: TokenCounter,
        budget: Budget,
        style: Literal["quoted", "evidence"],
        thresholds: Thresholds,
        progress: ProgressCallback | None,
    ) -> None:
        self.request, self.config, self.retriever = request, config, retriever
        self.counter, self.budget, self.style = counter, budget, style
        self.thresholds, self.progress = thresholds, progress

    def score(self, labelled: Sequence[EvalCase]) -> list[SignalCase]:
        if self.progress:
            self.progress("signals", len(labelled))
        scored = []
        for case in labelled:
            plan = AnswerPlan(
                case.question,
                retriever=self.retriever,
                eligibility=self.config.eligibility,
                scope=self.config.scope,
                chat=None,
                counter=self.counter,
                k=self.request.k,
                mode=self.request.mode,
                budget=self.budget,
                preview=True,
                style=self.style,
                thresholds=self.thresholds,
            )
            result = asyncio.run(answer_question(plan))
            signal = result.answerability
            score = signal.score if signal is not None and result.status == "preview" else None
            scored.append(SignalCase(case.case_id, not case.unsupported, score))
            if self.progress:
                self.progress("scored", 1)
        return scored


def _count_unsupported(cases: Sequence[EvalCase], request: CalibrateRequest) -> int:
    """How many of ``cases`` are unsupported; too few for a recommendation is refused
    (before anything is embedded) unless ``force``."""
    unsupported = sum(1 for c in cases if c.unsupported)
    if unsupported < MIN_UNSUPPORTED and not request.force:
        raise EvaluationError(
            f"{request.dataset.path} has {unsupported} unsupported questions; a "
            f"recommendation needs at least {MIN_UNSUPPORTED} (each one moves the "
            "false-acceptance rate by more than 5 points); label more, or pass --force "
            "to recommend anyway"
        )
    return unsupported


def _rows(result: Calibration) -> tuple[CalibrationRowResult, ...]:
    return tuple(
        CalibrationRowResult(
            threshold_dense=r.thresholds.dense,
            threshold_sparse=r.thresholds.sparse,
            false_acceptance_rate=r.false_acceptance_rate,
            recall=r.recall,
            ndcg=r.ndcg,
            refused_answerable=r.refused_answerable,
            recommended=r is result.recommended,
        )
        for r in result.rows
    )


# The held-out figures the pipeline's ``HeldOut``, the result's ``HeldOutResult`` and the
# stored ``HeldOutFigures`` share: the result is derived from the first, the stored
# figures from the result.
_HELD_OUT_FIGURES = (
    "method",
    "folds",
    "answerable",
    "unsupported",
    "false_acceptance_rate",
    "recall",
    "ndcg",
    "refused_answerable",
)


def _held_out_result(held: HeldOut, request: CalibrateRequest) -> HeldOutResult:
    return HeldOutResult(
        **{name: getattr(held, name) for name in _HELD_OUT_FIGURES},
        dataset=str(request.holdout.path) if request.holdout is not None else None,
        fold_thresholds=tuple((t.dense, t.sparse) for t in held.fold_thresholds),
    )


def _held_out_figures(held: HeldOut, request: CalibrateRequest) -> HeldOutFigures:
    result = _held_out_result(held, request)
    holdout = request.holdout
    return HeldOutFigures(
        **{name: getattr(result, name) for name in (*_HELD_OUT_FIGURES, "dataset")},
        dataset_sha256=dataset_digest(holdout) if holdout is not None else None,
        fold_thresholds=tuple(
            RecordThresholds(dense=dense, sparse=sparse) for dense, sparse in result.fold_thresholds
        ),
    )


def _answerability_record(result: AnswerabilityResult | None) -> RecordAnswerability | None:
    if result is None or result.threshold is None:
        return None
    return RecordAnswerability(
        threshold=result.threshold,
        max_answerable_loss=result.max_answerable_loss,
        style=result.style,
        in_sample=RecordAnswerabilityFigures(**result.in_sample.to_dict()),
        held_out=RecordAnswerabilityFigures(**result.held_out.to_dict()),
    )


def _figures(figures: ThresholdFigures) -> AnswerabilityFigures:
    return AnswerabilityFigures(
        figures.answerable,
        figures.unsupported,
        figures.answerable_declined,
        figures.unsupported_declined,
    )
