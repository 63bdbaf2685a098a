"""Ranking metrics at a cutoff K, as the seeds' evaluation article defines them.

For a ranking ``r_1 … r_n`` and graded judgments ``g(d) ∈ {0, 1, 2}`` (relevant: g ≥ 1):

* ``Precision@K = |relevant ∩ top K| / K`` — the denominator is always K, even when
  fewer than K items were returned;
* ``Recall@K = |relevant ∩ top K| / |relevant|`` over every labelled relevant item;
* ``ReciprocalRank@K = 1 / rank`` of the first relevant item within K, else 0;
* ``nDCG@K = DCG@K / IDCG@K`` with ``DCG@K = Σ_{i ≤ K} (2^{g(r_i)} − 1) / log2(i + 1)``
  (Burges et al. 2005 exponential gain) and IDCG from the ideal ordering of *all*
  judgments.

Input errors are not scored misses: a ranking listing an item twice, a ranked item with
no judgment, a grade outside 0–2, or judgments with no relevant item raise
:class:`MetricInputError`. An empty ranking with valid judgments scores zero.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragwright.errors import MetricInputError

MAX_GRADE = 2
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class RankingScores:
    """The four metrics for one ranking at one cutoff."""

    precision: float
    recall: float
    reciprocal_rank: float
    ndcg: float


def validate(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> None:
    """Raise :class:`MetricInputError` for inputs that cannot be scored."""
    if k <= 0:
        raise MetricInputError(f"cutoff K must be positive, got {k}")
    for item, grade in judgments.items():
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= MAX_GRADE:
            raise MetricInputError(
                f"grade of {item!r} must be an integer 0-{MAX_GRADE}, got {grade!r}"
            )
    if not any(grade > 0 for grade in judgments.values()):
        raise MetricInputError("judgments contain no relevant item")
    seen: set[K] = set()
    for item in ranked:
        if item in seen:
            raise MetricInputError(f"the ranking lists {item!r} twice")
        seen.add(item)
        if item not in judgments:
            raise MetricInputError(f"ranked item {item!r} has no judgment")


def precision_at_k(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> float:
    """Relevant items in the top K, divided by K."""
    return sum(1 for item in ranked[:k] if judgments[item] > 0) / k


def recall_at_k(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> float:
    """Relevant items in the top K, divided by all relevant items."""
    relevant = sum(1 for grade in judgments.values() if grade > 0)
    return sum(1 for item in ranked[:k] if judgments[item] > 0) / relevant


def reciprocal_rank_at_k(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> float:
    """1 / rank of the first relevant item within K; 0 when there is none."""
    for rank, item in enumerate(ranked[:k], start=1):
        if judgments[item] > 0:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> float:
    """Normalised discounted cumulative gain with gain 2^grade − 1."""
    dcg = sum(
        (2 ** judgments[item] - 1) / math.log2(rank + 1)
        for rank, item in enumerate(ranked[:k], start=1)
    )
    ideal = sorted(judgments.values(), reverse=True)[:k]
    idcg = sum((2**grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(ideal, start=1))
    return float(dcg / idcg)


def score_ranking(ranked: Sequence[K], judgments: Mapping[K, int], k: int) -> RankingScores:
    """All four metrics at cutoff ``k`` after validating the inputs.

    Example:
        >>> s = score_ranking(["C", "A", "B"], {"C": 0, "A": 2, "B": 1}, 3)
        >>> round(s.precision, 3), s.recall, s.reciprocal_rank, round(s.ndcg, 3)
        (0.667, 1.0, 0.5, 0.659)
    """
    validate(ranked, judgments, k)
    return RankingScores(
        precision=precision_at_k(ranked, judgments, k),
        recall=recall_at_k(ranked, judgments, k),
        reciprocal_rank=reciprocal_rank_at_k(ranked, judgments, k),
        ndcg=ndcg_at_k(ranked, judgments, k),
    )
