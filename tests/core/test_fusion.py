from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragwright.core.fusion import rrf


def test_hand_computed_scores() -> None:
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)


def test_ties_break_by_the_tie_key() -> None:
    fused = rrf([["b", "a"], ["a", "b"]], k=60, tie_key=lambda item: item)
    assert [item for item, _ in fused] == ["a", "b"]


def test_duplicate_in_a_ranking_is_an_error() -> None:
    with pytest.raises(ValueError):
        rrf([["a", "a"]])


@given(st.lists(st.lists(st.integers(0, 30), unique=True), max_size=4), st.integers(0, 100))
def test_fusion_is_a_permutation_of_the_union_sorted_by_score(
    rankings: list[list[int]], k: int
) -> None:
    fused = rrf(rankings, k=k)
    assert sorted(item for item, _ in fused) == sorted({i for r in rankings for i in r})
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)


def test_weights_scale_each_ranking() -> None:
    fused = dict(rrf([["a"], ["b"]], k=60, weights=[2.0, 1.0]))
    assert fused["a"] == pytest.approx(2 / 61) and fused["b"] == pytest.approx(1 / 61)
    with pytest.raises(ValueError):
        rrf([["a"], ["b"]], weights=[1.0])
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[-1.0])
