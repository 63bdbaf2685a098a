"""Evaluation use cases: run labelled cases (retrieval, and answers when asked), compare
two persisted runs, and write a run's HTML report."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ragwright.application.answering import score_kind
from ragwright.application.components import MakeRetriever, OpenIndex
from ragwright.application.decisions import Decisions, QueryEvidence
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.requests.evaluation import (
    CaseChangeResult,
    CompareRequest,
    CompareResult,
    Dataset,
    EvaluateRequest,
    EvaluateResult,
    ReportRequest,
    ReportResult,
)
from ragwright.application.requests.evidence import AppliedThresholds
from ragwright.application.requests.questions import AnswerRequest
from ragwright.application.thresholds import ThresholdResolver
from ragwright.core.eligibility import CallerScope
from ragwright.errors import (
    AnswerContractError,
    ChatError,
    EvaluationError,
    EvaluationInterrupted,
)
from ragwright.pipeline.answer_log import AnswerLog
from ragwright.pipeline.answer_scoring import attach_answers, error_outcome, score_answer
from ragwright.pipeline.evaluate import (
    EvalConfig,
    compare_runs,
    eligible_corpus,
    load_run,
    run_evaluation,
    save_run,
)
from ragwright.pipeline.planning import ProgressCallback
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import SparseEncoder, VectorIndex
from ragwright.report import render_report
from ragwright.settings import Settings
from ragwright.types import EmbeddingProfile, EvalCase

LoadCases = Callable[..., list[EvalCase]]
AnswerCall = Callable[..., Awaitable[AnswerOutcome]]


@dataclass(frozen=True, slots=True)
class LabelledParts:
    """What the use cases over labelled cases (evaluation and calibration) read."""

    settings: Settings
    decisions: Decisions
    thresholds: ThresholdResolver
    load_cases: LoadCases
    embedding_profile: Callable[[], EmbeddingProfile]
    sparse_encoder: Callable[[], SparseEncoder]
    code_revision: Callable[[], str]
    open_index: OpenIndex
    retriever: MakeRetriever

    def cases(self, dataset: Dataset) -> list[EvalCase]:
        """The labelled cases of ``dataset`` (BEIR or ragwright's own form)."""
        return self.load_cases(dataset.path, beir=dataset.beir, split=dataset.split)

    def deep_retriever(self, index: VectorIndex, config: EvalConfig) -> Retriever:
        """A retriever for scoring: document-level scoring ranks chunks deeper than the
        largest cutoff."""
        depth = max(
            self.settings.retrieval.hybrid_candidates, max(config.ks) * config.document_depth_factor
        )
        return self.retriever(index, candidates=depth)

    def open_for_queries(self) -> VectorIndex:
        """The index, open for reading under whichever chunking version the run picks
        (:meth:`Decisions.evidence_scope`)."""
        return self.open_index(
            self.decisions.chunking_policy().version, write=False, any_chunking_version=True
        )


class Evaluation:
    """Evaluation runs over labelled cases, their comparison and reports."""

    def __init__(
        self,
        parts: LabelledParts,
        *,
        answer: AnswerCall,
        chat_kept_open: Callable[[], AbstractAsyncContextManager[None]],
    ) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.decisions = parts.decisions
        self.thresholds = parts.thresholds
        self._answer = answer
        self._chat_kept_open = chat_kept_open

    def evaluate(
        self, request: EvaluateRequest, *, progress: ProgressCallback | None = None
    ) -> EvaluateResult:
        """Score retrieval on labelled cases (and with ``request.answers`` their answers);
        persist the run (and its HTML report, compared with ``request.compare`` when given:
        that run is loaded before anything runs).

        An answer run drives the asynchronous answer use case on an event loop of its
        own: call this from synchronous code (the command line), never from inside a
        running event loop.
        """
        if not request.ks or any(k <= 0 for k in request.ks):
            raise EvaluationError(f"cutoffs must be positive, got {list(request.ks)}")
        home = self.settings.storage.home
        earlier = load_run(request.compare, home) if request.compare else None
        # The run to finish is read (and its configuration checked) before anything runs.
        resuming = AnswerLog.open(request.resume, home) if request.resume is not None else None
        cases = self.parts.cases(request.dataset)
        applied = self.thresholds.thresholds(request.thresholds)
        scope = CallerScope(tenant=request.tenant)
        profile = self.parts.embedding_profile()
        style = self.decisions.answer_style(request.style)
        index = self.parts.open_for_queries()
        try:
            chosen = self.decisions.evidence_scope(index, request.evidence, scope)
            config = EvalConfig(
                eligibility=chosen.eligibility,
                scope=scope,
                mode=request.mode,
                ks=request.ks,
                thresholds=applied.thresholds,
                with_text=request.with_text,
            )
            retriever = self.parts.deep_retriever(index, config)
            run_config = self._run_config(request, chosen, profile, retriever, applied)
            if request.answers:
                run_config["answering"] = self._answering_config(style)
            if resuming is not None:
                # What the run record will hold that is known before retrieval runs.
                known = {
                    **run_config,
                    "mode": config.mode,
                    "thresholds": asdict(config.thresholds),
                    "eligibility": asdict(config.eligibility),
                    "tenant": config.scope.tenant,
                }
                _check_resumable(resuming, known, partial=True)
            record = run_evaluation(
                cases,
                retriever,
                config,
                eligible_corpus(index, config.eligibility, config.scope),
                run_config=run_config,
            )
        finally:
            index.close()
        resumed = None
        if request.answers:
            if resuming is None:
                log = AnswerLog.start(record, len(cases), home)
            else:
                _check_resumable(resuming, record.config)
                log = resuming
                record.execution_id, record.created_at = log.execution_id, log.created_at
                resumed = len(log.answered)
                record.resumed.append({"at": datetime.now(UTC).isoformat(), "answered": resumed})
            try:
                rows = asyncio.run(self._answer_cases(cases, request, config, log, progress))
            except KeyboardInterrupt:
                raise EvaluationInterrupted(
                    log.execution_id, log.directory, len(log.answered), len(cases)
                ) from None
            attach_answers(record, cases, rows, style=style)
        directory = save_run(record, self.settings.storage.home)
        report_path = None
        if request.report:
            report_path = directory / "report.html"
            report_path.write_text(render_report(record.to_json(), earlier=earlier), "utf-8")
        return EvaluateResult(
            execution_id=record.execution_id,
            path=directory,
            summary=record.summary,
            categories=record.categories,
            unsupported=record.unsupported,
            report_path=report_path,
            thresholds=applied.thresholds,
            threshold_origin=applied.origin,
            answers=record.answers,
            chunking_version=config.eligibility.chunking_version,
            left_out=chosen.left_out,
            resumed=resumed,
        )

    def _answering_config(self, style: str) -> dict[str, Any]:
        """What an answer run records of what shaped its answers (a resumed run must
        match it)."""
        threshold, origin = self.thresholds.answerability_threshold()
        return {
            "style": style,
            "chat_provider": self.settings.chat.provider,
            "chat_model": self.settings.chat.model,
            "answerability_threshold": threshold,
            "answerability_threshold_source": origin,
            "support_check": self.settings.answers.support_check,
        }

    def _run_config(
        self,
        request: EvaluateRequest,
        chosen: QueryEvidence,
        profile: EmbeddingProfile,
        retriever: Retriever,
        applied: AppliedThresholds,
    ) -> dict[str, Any]:
        """What a run records of the configuration it ran under."""
        return {
            "dataset": str(request.dataset.path),
            "dataset_sha256": dataset_digest(request.dataset),
            "embedding_profile": profile.profile_id,
            "model_digest": profile.artifact_digest,
            "lexical_profile": self.parts.sparse_encoder().profile.profile_id,
            "chunking_version": chosen.eligibility.chunking_version,
            "chunking_version_source": chosen.left_out.version_source,
            "rrf_k": self.settings.retrieval.rrf_k,
            "rrf_weights": list(self.settings.retrieval.rrf_weights),
            "reranker": self.settings.retrieval.reranker,
            "score_kind": score_kind(request.mode, reranked=retriever.reranker is not None),
            "collection": self.settings.index.collection,
            "code_revision": self.parts.code_revision(),
            **applied.origin.to_dict(),
        }

    async def _answer_cases(
        self,
        cases: list[EvalCase],
        request: EvaluateRequest,
        config: EvalConfig,
        log: AnswerLog,
        progress: ProgressCallback | None = None,
    ) -> list[dict[str, Any]]:
        """Answer every case ``log`` has no answer for, in turn (one local model at a
        time), score the outcome and record it in ``log`` before the next case; a
        provider failure or a broken answer contract is recorded as an ``error`` outcome,
        not the run's end. ``progress`` hears ``("answers", cases left)`` and then
        ``("answered", 1)`` per case."""
        remaining = [case for case in cases if case.case_id not in log.answered]
        if progress is not None:
            progress("answers", len(remaining))
        if remaining:
            async with self._chat_kept_open():
                for case in remaining:
                    log.record(case.case_id, await self._answer_case(case, request, config))
                    if progress is not None:
                        progress("answered", 1)
        return [log.answered[case.case_id] for case in cases]

    async def _answer_case(
        self, case: EvalCase, request: EvaluateRequest, config: EvalConfig
    ) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            outcome = (
                await self._answer(
                    AnswerRequest(
                        case.question,
                        mode=request.mode,
                        # The version the retrieval run read, whatever the index holds.
                        evidence=dataclasses.replace(
                            request.evidence,
                            chunking_version=config.eligibility.chunking_version,
                        ),
                        tenant=request.tenant,
                        thresholds=request.thresholds,
                        style=request.style,
                    ),
                    drafts=False,
                )
            ).to_dict()
        except ChatError as error:
            outcome = error_outcome(f"{error.category.value}: {error}", request.style)
        except AnswerContractError as error:
            outcome = error_outcome(str(error), request.style)
        return score_answer(
            case,
            outcome,
            latency_ms=(time.perf_counter() - started) * 1000,
            chunking_version=config.eligibility.chunking_version,
        )

    def compare(self, request: CompareRequest) -> CompareResult:
        """Per-case regressions and improvements between two persisted runs."""
        home = self.settings.storage.home
        regressions, improvements, notes = compare_runs(
            load_run(request.before, home),
            load_run(request.after, home),
            k=request.k,
            metric=request.metric,
        )
        return CompareResult(
            k=request.k,
            metric=request.metric,
            regressions=tuple(CaseChangeResult(c.case_id, c.before, c.after) for c in regressions),
            improvements=tuple(
                CaseChangeResult(c.case_id, c.before, c.after) for c in improvements
            ),
            notes=tuple(notes),
        )

    def report(self, request: ReportRequest) -> ReportResult:
        """Write report.html for a persisted run, compared with ``request.compare`` when
        given."""
        home = self.settings.storage.home
        data = load_run(request.run, home)
        earlier = load_run(request.compare, home) if request.compare else None
        target = home / "evaluations" / data["execution_id"] / "report.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_report(data, earlier=earlier), "utf-8")
        return ReportResult(
            data["execution_id"], target, earlier["execution_id"] if earlier else None
        )


def _check_resumable(log: AnswerLog, config: dict[str, Any], *, partial: bool = False) -> None:
    """Refuse to resume ``log``'s run under ``config`` when they differ (``partial``:
    compare only the keys ``config`` has), naming every difference."""
    differences = log.differences(config, partial=partial)
    if differences:
        raise EvaluationError(
            f"run {log.execution_id} cannot be resumed: it ran under another "
            f"configuration ({'; '.join(differences)})"
        )


def dataset_digest(dataset: Dataset) -> str:
    """SHA-256 of the labelled file a run scored (a BEIR split's qrels)."""
    path = dataset.path / "qrels" / f"{dataset.split}.tsv" if dataset.beir else dataset.path
    return hashlib.sha256(path.read_bytes()).hexdigest()
