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

A recommendation judged only on the questions it was chosen on flatters itself, so the
sweep can also report held-out figures (:class:`HeldOut`): with ``folds``, a stratified
k-fold split (:func:`assign_folds`) recommends on the other folds with the same rule and
applies that to each fold in turn, pooling every fold's results into one false-acceptance
rate, Recall@K, nDCG@K and refused count; with ``holdout``, the recommendation on
``cases`` is applied to separate questions. Candidates are fetched once either way.

Fusion and rerank scores are not swept: RRF scores are functions of ranks, not of how
well anything matches, and a reranker is optional. With a reranker, its scores are
computed once per question and text and reused across combinations (rerankers score a
(question, text) pair independently of the other pairs of the same call).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

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

# Called as ("questions", total), ("retrieved", 1) per question (held-out questions
# included), then ("combinations", total), ("swept", 1) per threshold combination (every
# fold's sweep included).
ProgressCallback = Callable[[str, int], None]

# Fewer unsupported questions than this and the false-acceptance rate moves in steps of
# more than 5 points per question: too coarse to choose thresholds on (callers refuse to
# recommend from fewer unless forced).
MIN_UNSUPPORTED = 20

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
class HeldOut:
    """The recommendation rule judged on questions it was not chosen on.

    ``method`` ``k-fold``: every case is judged once, under the thresholds recommended on
    the other ``folds`` (``fold_thresholds[i]`` for fold ``i``), and the figures pool all
    folds. ``holdout``: the ``holdout`` cases judged under the one recommendation
    (``fold_thresholds`` holds it alone; ``folds`` is ``None``).
    """

    method: Literal["k-fold", "holdout"]
    folds: int | None
    answerable: int
    unsupported: int
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int
    fold_thresholds: tuple[Thresholds, ...]


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every combination tried, the unthresholded baseline and the recommendation, and
    (when asked for) the rule's held-out figures."""

    mode: Mode
    k: int
    answerable: int
    unsupported: int
    best_scores: dict[str, dict[str, float | None]]
    rows: tuple[CalibrationRow, ...]
    baseline: CalibrationRow
    recommended: CalibrationRow
    held_out: HeldOut | None = None


def assign_folds(cases: Sequence[EvalCase], folds: int) -> dict[str, int]:
    """Each case id's fold, ``0`` to ``folds - 1``: stratified and independent of order.

    Within each stratum (unsupported, answerable) cases are ordered by the SHA-256 of
    their id and dealt to the folds in turn, so every fold holds ``floor`` or ``ceil`` of
    ``n / folds`` of each stratum, and the same ids always land in the same folds
    whatever the file order.

    Raises:
        EvaluationError: ``folds`` under 2, or fewer answerable or unsupported cases than
            folds (a fold without both kinds cannot be judged or recommended on).
    """
    if folds < 2:
        raise EvaluationError(f"folds must be >= 2, got {folds}")
    assignment: dict[str, int] = {}
    for unsupported in (True, False):
        stratum = sorted(
            (c.case_id for c in cases if c.unsupported is unsupported),
            key=lambda case_id: (hashlib.sha256(case_id.encode()).hexdigest(), case_id),
        )
        if len(stratum) < folds:
            kind = "unsupported" if unsupported else "answerable"
            raise EvaluationError(
                f"{folds} folds need at least {folds} {kind} cases (one per fold), "
                f"got {len(stratum)}; lower --folds or give --holdout FILE"
            )
        assignment.update((case_id, i % folds) for i, case_id in enumerate(stratum))
    return assignment


def calibrate(
    cases: Sequence[EvalCase],
    retriever: Retriever,
    config: EvalConfig,
    corpus: EligibleCorpus,
    *,
    k: int = 5,
    max_recall_loss: float = 0.0,
    max_candidates: int = 8,
    folds: int | None = None,
    holdout: Sequence[EvalCase] | None = None,
    progress: ProgressCallback | None = None,
) -> Calibration:
    """Sweep dense/BM25 thresholds on ``cases`` under ``config``'s eligibility and mode.

    ``max_candidates`` caps the candidates per leg ("none" included; evenly spaced over
    the sorted margins when there are more), so a hybrid sweep ranks at most
    ``max_candidates²`` combinations. Each question is embedded and searched once;
    ``progress`` receives the events listed at :data:`ProgressCallback`. ``holdout``
    (separate cases) or else ``folds`` (k-fold over ``cases``) adds :class:`HeldOut`
    figures; with neither, ``held_out`` is ``None``.

    Raises:
        EvaluationError: no unsupported or no answerable case (nothing to calibrate
            against), a negative ``max_recall_loss``, ``max_candidates`` under 2, a
            labelled key outside ``corpus``, or folds :func:`assign_folds` refuses.
    """
    notify = progress or (lambda _event, _count: None)
    _check_kinds(cases, "calibration")
    if max_recall_loss < 0:
        raise EvaluationError(f"max_recall_loss must be >= 0, got {max_recall_loss}")
    if max_candidates < 2:
        raise EvaluationError(f"max_candidates must be >= 2, got {max_candidates}")
    base = dataclasses.replace(config, ks=(k,), thresholds=Thresholds(), with_text=False)
    validate_labels(cases, corpus, base.eligibility.chunking_version)
    assignment = assign_folds(cases, folds) if holdout is None and folds is not None else None
    if holdout is not None:
        _check_kinds(holdout, "the held-out set")
        validate_labels(holdout, corpus, base.eligibility.chunking_version)
    legs = _LEGS[config.mode]
    ranker = _reusing_rerank_scores(retriever)
    notify("questions", len(cases) + len(holdout or ()))
    fetched = _fetch(cases, ranker, base, notify)
    held_fetched = _fetch(holdout, ranker, base, notify) if holdout is not None else []
    best: dict[str, dict[str, float | None]] = {
        case.case_id: {leg: _top(getattr(found, leg)) for leg in legs}
        for case, found in zip(cases, fetched, strict=True)
    }
    sweep = _Sweep(ranker, base, corpus, k, legs, max_recall_loss, max_candidates, notify)
    everything = list(range(len(cases)))
    splits = []
    if assignment is not None:
        for fold in range(cast(int, folds)):
            splits.append([i for i in everything if assignment[cases[i].case_id] != fold])
    combinations = [sweep.combinations(cases, best, part) for part in (everything, *splits)]
    notify("combinations", sum(map(len, combinations)))
    rows, recommended = sweep.run(cases, fetched, everything, combinations[0])
    held_out = None
    if holdout is not None:
        held_out = _judge(
            "holdout",
            None,
            holdout,
            [ranker.rank(found, recommended.thresholds) for found in held_fetched],
            (recommended.thresholds,),
            base,
            corpus,
            k,
        )
    elif assignment is not None:
        pooled: list[RetrievalResult | None] = [None] * len(cases)
        chosen = []
        for fold, (train, tried) in enumerate(zip(splits, combinations[1:], strict=True)):
            _, fold_pick = sweep.run(cases, fetched, train, tried)
            chosen.append(fold_pick.thresholds)
            for i in everything:
                if assignment[cases[i].case_id] == fold:
                    pooled[i] = ranker.rank(fetched[i], fold_pick.thresholds)
        held_out = _judge(
            "k-fold",
            folds,
            cases,
            [cast(RetrievalResult, r) for r in pooled],
            tuple(chosen),
            base,
            corpus,
            k,
        )
    return Calibration(
        mode=config.mode,
        k=k,
        answerable=sum(1 for c in cases if not c.unsupported),
        unsupported=sum(1 for c in cases if c.unsupported),
        best_scores=best,
        rows=tuple(rows),
        baseline=rows[0],  # every leg's first candidate is "no threshold"
        recommended=recommended,
        held_out=held_out,
    )


def _check_kinds(cases: Sequence[EvalCase], what: str) -> None:
    unsupported = sum(1 for c in cases if c.unsupported)
    answerable = len(cases) - unsupported
    if not unsupported or not answerable:
        raise EvaluationError(
            f"{what} needs answerable and unsupported cases; "
            f"got {answerable} answerable and {unsupported} unsupported"
        )


def _fetch(
    cases: Sequence[EvalCase], ranker: Retriever, base: EvalConfig, notify: ProgressCallback
) -> list[Candidates]:
    """Each case's candidates, searched once without a threshold."""
    fetched = []
    for case in cases:
        fetched.append(
            ranker.fetch(
                ranker.embed(case.question),
                base.eligibility,
                base.scope,
                k=retrieval_depth(case, base),
                mode=base.mode,
            )
        )
        notify("retrieved", 1)
    return fetched


@dataclass(frozen=True, slots=True)
class _Sweep:
    """The sweep and recommendation rule, applicable to any subset of the cases."""

    ranker: Retriever
    base: EvalConfig
    corpus: EligibleCorpus
    k: int
    legs: tuple[Mode, ...]
    max_recall_loss: float
    max_candidates: int
    notify: ProgressCallback

    def combinations(
        self,
        cases: Sequence[EvalCase],
        best: dict[str, dict[str, float | None]],
        part: Sequence[int],
    ) -> list[tuple[float | None, ...]]:
        """The threshold combinations the subset ``part`` (indexes into ``cases``) tries:
        candidates come from its own best scores only."""
        seen = {cases[i].case_id: best[cases[i].case_id] for i in part}
        unsupported = [cases[i] for i in part if cases[i].unsupported]
        candidates = [_candidates(leg, seen, unsupported, self.max_candidates) for leg in self.legs]
        return list(itertools.product(*candidates))

    def run(
        self,
        cases: Sequence[EvalCase],
        fetched: Sequence[Candidates],
        part: Sequence[int],
        combinations: Sequence[tuple[float | None, ...]],
    ) -> tuple[list[CalibrationRow], CalibrationRow]:
        """Every combination's row on the subset ``part``, and the recommended row."""
        subset = [cases[i] for i in part]
        rows = []
        for combination in combinations:
            thresholds = Thresholds(**dict(zip(self.legs, combination, strict=True)))
            swept = dataclasses.replace(self.base, thresholds=thresholds)
            results = [self.ranker.rank(fetched[i], thresholds) for i in part]
            rows.append(_row(subset, results, swept, self.corpus, self.k))
            self.notify("swept", 1)
        baseline = rows[0]
        eligible = [r for r in rows if r.recall >= baseline.recall - self.max_recall_loss - 1e-12]
        recommended = min(
            eligible,
            key=lambda r: (
                r.false_acceptance_rate,
                r.refused_answerable,
                tuple(_value(r.thresholds, leg) for leg in self.legs),
            ),
        )
        return rows, recommended


def _judge(
    method: Literal["k-fold", "holdout"],
    folds: int | None,
    cases: Sequence[EvalCase],
    results: Sequence[RetrievalResult],
    chosen: tuple[Thresholds, ...],
    base: EvalConfig,
    corpus: EligibleCorpus,
    k: int,
) -> HeldOut:
    row = _row(cases, results, base, corpus, k)
    return HeldOut(
        method=method,
        folds=folds,
        answerable=sum(1 for c in cases if not c.unsupported),
        unsupported=sum(1 for c in cases if c.unsupported),
        false_acceptance_rate=row.false_acceptance_rate,
        recall=row.recall,
        ndcg=row.ndcg,
        refused_answerable=row.refused_answerable,
        fold_thresholds=chosen,
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
