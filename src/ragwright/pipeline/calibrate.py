"""Calibrating score thresholds so unsupported questions find no evidence.

Without a threshold, retrieval always returns the k nearest eligible chunks, so a question
the documents cannot answer still reaches the model with evidence that merely looks
related, and a small model answers it anyway. The per-stage thresholds
(:class:`~ragwright.pipeline.retrieve.Thresholds`) stop that at retrieval time, but only a
labelled set says where to put them. This module sweeps them on such a set:

1. every question is searched once per leg the mode uses (dense, BM25) without a
   threshold, and its best score on each leg is noted;
2. the candidate thresholds of a leg are "none" plus, for every unsupported question, the
   midpoint between its best score and the next higher best score of any question on that
   leg: the smallest margins that reject it;
3. every combination of candidates is run through the ordinary evaluation
   (:func:`~ragwright.pipeline.evaluate.run_evaluation`, nothing persisted), recording the
   false-acceptance rate, Recall@K and nDCG@K of the answerable questions, and how many
   answerable questions lost all their evidence;
4. the recommendation is the combination with the lowest false-acceptance rate whose
   Recall@K stays within ``max_recall_loss`` of the unthresholded run; ties go to fewer
   refused answerable questions, then to the lower thresholds.

Fusion and rerank scores are not swept: RRF scores are functions of ranks, not of how
well anything matches, and a reranker is optional.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ragwright.errors import EvaluationError
from ragwright.pipeline.evaluate import EligibleCorpus, EvalConfig, run_evaluation
from ragwright.pipeline.retrieve import Mode, Retriever, Thresholds
from ragwright.types import EvalCase

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
) -> Calibration:
    """Sweep dense/BM25 thresholds on ``cases`` under ``config``'s eligibility and mode.

    ``max_candidates`` caps the candidates per leg ("none" included; evenly spaced over
    the sorted margins when there are more), so a hybrid sweep runs at most
    ``max_candidates²`` evaluations.

    Raises:
        EvaluationError: no unsupported or no answerable case (nothing to calibrate
            against), a negative ``max_recall_loss``, or ``max_candidates`` under 2.
    """
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
    legs = _LEGS[config.mode]
    best: dict[str, dict[str, float | None]] = {}
    for case in cases:
        vectors = retriever.embed(case.question)
        best[case.case_id] = {}
        for leg in legs:
            hits = retriever.search(vectors, config.eligibility, config.scope, k=1, mode=leg).hits
            best[case.case_id][leg] = hits[0].score if hits else None
    candidates = [_candidates(leg, best, unsupported, max_candidates) for leg in legs]
    base = dataclasses.replace(config, ks=(k,), thresholds=Thresholds(), with_text=False)
    rows = []
    for combination in itertools.product(*candidates):
        thresholds = Thresholds(**dict(zip(legs, combination, strict=True)))
        rows.append(
            _row(cases, retriever, dataclasses.replace(base, thresholds=thresholds), corpus, k)
        )
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
    retriever: Retriever,
    config: EvalConfig,
    corpus: EligibleCorpus,
    k: int,
) -> CalibrationRow:
    record = run_evaluation(cases, retriever, config, corpus, run_config={})
    at_k = record.summary["K"][str(k)]
    return CalibrationRow(
        thresholds=config.thresholds,
        false_acceptance_rate=record.unsupported["false_acceptance_rate"],
        recall=at_k["recall"],
        ndcg=at_k["ndcg"],
        refused_answerable=sum(1 for row in record.cases if not row["ranking"]),
    )


def _value(thresholds: Thresholds, leg: str) -> float:
    value = getattr(thresholds, leg)
    return float("-inf") if value is None else float(value)
