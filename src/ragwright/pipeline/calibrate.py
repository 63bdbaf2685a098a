"""Calibrating score thresholds so unsupported questions find no evidence.

Without a threshold, retrieval always returns the k nearest eligible chunks, so a question
the documents cannot answer still reaches the model with evidence that merely looks
related, and a small model answers it anyway. The per-stage thresholds
(:class:`~ragwright.pipeline.retrieve.Thresholds`) stop that at retrieval time, but only a
labelled set says where to put them. This module sweeps them on such a set:

1. every question is embedded and searched once, without a threshold, at the depth the
   ordinary evaluation uses (:meth:`~ragwright.pipeline.retrieve.Retriever.fetch`); each
   leg's scored candidates are kept and its best score on each leg is noted;
2. the candidate thresholds of a leg are "none" plus, for every unsupported question, the
   midpoint between its best score and the next higher best score of any question on that
   leg: the smallest margins that reject it;
3. every combination of candidates ranks the stored candidates again
   (:meth:`~ragwright.pipeline.retrieve.Retriever.rank`: thresholds, fusion, rerank, cut)
   and scores them as the ordinary evaluation does
   (:func:`~ragwright.pipeline.evaluate.score_results`, nothing persisted), recording the
   false-acceptance rate, Recall@K and nDCG@K of the answerable questions, and how many
   answerable questions lost all their evidence. Thresholds only drop candidates, so
   this equals a fresh evaluation per combination without asking the engine again;
4. the recommendation is the combination with the lowest false-acceptance rate whose
   Recall@K stays within ``max_recall_loss`` of the unthresholded run; ties go to fewer
   refused answerable questions, then to the lower thresholds.

Fusion and rerank scores are not swept: RRF scores are functions of ranks, not of how
well anything matches, and a reranker is optional. With a reranker, its scores are
computed once per question and text and reused across combinations (rerankers score a
(question, text) pair independently of the rest of the batch).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragwright.errors import EvaluationError
from ragwright.pipeline.evaluate import (
    EligibleCorpus,
    EvalConfig,
    retrieval_depth,
    score_results,
    validate_labels,
)
from ragwright.pipeline.retrieve import Candidates, Mode, RetrievalResult, Retriever, Thresholds
from ragwright.protocols import Reranker
from ragwright.types import EvalCase

# Called as ("questions", total), ("retrieved", 1) per question, then
# ("combinations", total), ("swept", 1) per threshold combination.
ProgressCallback = Callable[[str, int], None]

_LEGS: dict[Mode, tuple[Mode, ...]] = {
    "dense": ("dense",),
    "sparse": ("sparse",),
    "hybrid": ("dense", "sparse"),
}


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    """One threshold combination and what it did on the labelled set."""

    thresholds: Thresholds
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every combination tried, the unthresholded baseline and the recommendation."""

    mode: Mode
    k: int
    answerable: int
    unsupported: int
    best_scores: dict[str, dict[str, float | None]]
    rows: tuple[CalibrationRow, ...]
    baseline: CalibrationRow
    recommended: CalibrationRow


def calibrate(
    cases: Sequence[EvalCase],
    retriever: Retriever,
    config: EvalConfig,
    corpus: EligibleCorpus,
    *,
    k: int = 5,
    max_recall_loss: float = 0.0,
    max_candidates: int = 8,
    progress: ProgressCallback | None = None,
) -> Calibration:
    """Sweep dense/BM25 thresholds on ``cases`` under ``config``'s eligibility and mode.

    ``max_candidates`` caps the candidates per leg ("none" included; evenly spaced over
    the sorted margins when there are more), so a hybrid sweep ranks at most
    ``max_candidates²`` combinations. Each question is embedded and searched once;
    ``progress`` receives the events listed at :data:`ProgressCallback`.

    Raises:
        EvaluationError: no unsupported or no answerable case (nothing to calibrate
            against), a negative ``max_recall_loss``, ``max_candidates`` under 2, or a
            labelled key outside ``corpus``.
    """
    notify = progress or (lambda _event, _count: None)
    unsupported = [c for c in cases if c.unsupported]
    answerable = [c for c in cases if not c.unsupported]
    if not unsupported or not answerable:
        raise EvaluationError(
            "calibration needs answerable and unsupported cases; "
            f"got {len(answerable)} answerable and {len(unsupported)} unsupported"
        )
    if max_recall_loss < 0:
        raise EvaluationError(f"max_recall_loss must be >= 0, got {max_recall_loss}")
    if max_candidates < 2:
        raise EvaluationError(f"max_candidates must be >= 2, got {max_candidates}")
    base = dataclasses.replace(config, ks=(k,), thresholds=Thresholds(), with_text=False)
    validate_labels(cases, corpus, base.eligibility.chunking_version)
    legs = _LEGS[config.mode]
    ranker = _reusing_rerank_scores(retriever)
    notify("questions", len(cases))
    fetched: list[Candidates] = []
    best: dict[str, dict[str, float | None]] = {}
    for case in cases:
        found = ranker.fetch(
            retriever.embed(case.question),
            base.eligibility,
            base.scope,
            k=retrieval_depth(case, base),
            mode=base.mode,
        )
        fetched.append(found)
        # Each leg lists its points best first, before any threshold.
        best[case.case_id] = {leg: _top(getattr(found, leg)) for leg in legs}
        notify("retrieved", 1)
    candidates = [_candidates(leg, best, unsupported, max_candidates) for leg in legs]
    combinations = list(itertools.product(*candidates))
    notify("combinations", len(combinations))
    rows = []
    for combination in combinations:
        thresholds = Thresholds(**dict(zip(legs, combination, strict=True)))
        swept = dataclasses.replace(base, thresholds=thresholds)
        results = [ranker.rank(found, thresholds) for found in fetched]
        rows.append(_row(cases, results, swept, corpus, k))
        notify("swept", 1)
    baseline = rows[0]  # every leg's first candidate is "no threshold"
    eligible = [r for r in rows if r.recall >= baseline.recall - max_recall_loss - 1e-12]
    recommended = min(
        eligible,
        key=lambda r: (
            r.false_acceptance_rate,
            r.refused_answerable,
            tuple(_value(r.thresholds, leg) for leg in legs),
        ),
    )
    return Calibration(
        mode=config.mode,
        k=k,
        answerable=len(answerable),
        unsupported=len(unsupported),
        best_scores=best,
        rows=tuple(rows),
        baseline=baseline,
        recommended=recommended,
    )


def _candidates(
    leg: str,
    best: dict[str, dict[str, float | None]],
    unsupported: Sequence[EvalCase],
    limit: int,
) -> list[float | None]:
    observed = sorted({s for scores in best.values() if (s := scores[leg]) is not None})
    values: set[float] = set()
    for case in unsupported:
        score = best[case.case_id][leg]
        if score is None:
            continue  # nothing on this leg to reject
        higher = [s for s in observed if s > score]
        values.add((score + higher[0]) / 2 if higher else score + abs(score) * 1e-6 + 1e-9)
    ordered = sorted(values)
    room = limit - 1
    if len(ordered) > room:
        step = (len(ordered) - 1) / max(room - 1, 1)
        ordered = sorted({ordered[round(i * step)] for i in range(room)})
    return [None, *ordered]


def _row(
    cases: Sequence[EvalCase],
    results: Sequence[RetrievalResult],
    config: EvalConfig,
    corpus: EligibleCorpus,
    k: int,
) -> CalibrationRow:
    record = score_results(cases, results, config, corpus, run_config={})
    at_k = record.summary["K"][str(k)]
    return CalibrationRow(
        thresholds=config.thresholds,
        false_acceptance_rate=record.unsupported["false_acceptance_rate"],
        recall=at_k["recall"],
        ndcg=at_k["ndcg"],
        refused_answerable=sum(1 for row in record.cases if not row["ranking"]),
    )


def _top(scored: Sequence[tuple[object, float]]) -> float | None:
    return max((score for _, score in scored), default=None)


def _reusing_rerank_scores(retriever: Retriever) -> Retriever:
    """``retriever`` itself, or without a reranker call per combination: a copy whose
    reranker remembers each (question, text) score."""
    if retriever.reranker is None:
        return retriever
    return Retriever(
        retriever.index,
        retriever.embedder,
        retriever.sparse_encoder,
        reranker=_RememberingReranker(retriever.reranker),
        rrf_k=retriever.rrf_k,
        rrf_weights=retriever.rrf_weights,
        candidates=retriever.candidates,
        rerank_depth=retriever.rerank_depth,
    )


class _RememberingReranker:
    """Asks the wrapped reranker only about texts it has not scored for the question."""

    def __init__(self, reranker: Reranker) -> None:
        self._reranker = reranker
        self._scores: dict[tuple[str, str], float] = {}

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        new = list(dict.fromkeys(t for t in texts if (question, t) not in self._scores))
        if new:
            scores = self._reranker.rerank(question, new)
            if len(scores) != len(new):
                raise ValueError(f"reranker returned {len(scores)} scores for {len(new)} texts")
            self._scores.update(((question, t), s) for t, s in zip(new, scores, strict=True))
        return [self._scores[(question, t)] for t in texts]


def _value(thresholds: Thresholds, leg: str) -> float:
    value = getattr(thresholds, leg)
    return float("-inf") if value is None else float(value)
