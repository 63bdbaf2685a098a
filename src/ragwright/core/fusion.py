"""Reciprocal rank fusion.

RRF (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
individual Rank Learning Methods", SIGIR 2009) scores an item by its ranks in several
rankings::

    rrf(d) = Σ_r w_r / (k + rank_r(d))      ranks start at 1; k = 60 and w_r = 1 in the paper

Optional per-ranking weights ``w_r`` give the weighted variant (as in ranx's
``rrf`` with weights). An item missing from a ranking contributes nothing for it. Ties
are broken by ``tie_key`` so the fused order is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)


def rrf(
    rankings: Sequence[Sequence[K]],
    *,
    k: int = 60,
    weights: Sequence[float] | None = None,
    tie_key: Callable[[K], Any] | None = None,
) -> list[tuple[K, float]]:
    """Fuse rankings; returns (item, score) best first. Raises on duplicates in a ranking."""
    if k < 0:
        raise ValueError(f"rrf k must be non-negative, got {k}")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings) or any(w < 0 for w in weights):
        raise ValueError("rrf needs one non-negative weight per ranking")
    scores: dict[K, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranking lists the same item twice")
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    key = tie_key or (lambda item: item)
    return sorted(scores.items(), key=lambda pair: (-pair[1], key(pair[0])))
