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


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (0, {"a": 1 / 1 + 1 / 2, "c": 1 / 3 + 1 / 1, "b": 1 / 2}),
        (1, {"a": 1 / 2 + 1 / 3, "c": 1 / 4 + 1 / 2, "b": 1 / 3}),
        (10, {"a": 1 / 11 + 1 / 12, "c": 1 / 13 + 1 / 11, "b": 1 / 12}),
        (60, {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62}),
    ],
)
def test_hand_computed_scores_for_each_k(k: int, expected: dict[str, float]) -> None:
    fused = rrf([["a", "b", "c"], ["c", "a"]], k=k)
    assert dict(fused) == pytest.approx(expected)
    assert [item for item, _ in fused] == ["a", "c", "b"]


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        # x and q lead one ranking each; y is third in both: 1/(k+1) against 2/(k+3).
        (0, [("q", 1 / 1), ("x", 1 / 1), ("y", 2 / 3), ("p", 1 / 2), ("r", 1 / 2)]),
        (1, [("q", 1 / 2), ("x", 1 / 2), ("y", 2 / 4), ("p", 1 / 3), ("r", 1 / 3)]),
        (10, [("y", 2 / 13), ("q", 1 / 11), ("x", 1 / 11), ("p", 1 / 12), ("r", 1 / 12)]),
        (60, [("y", 2 / 63), ("q", 1 / 61), ("x", 1 / 61), ("p", 1 / 62), ("r", 1 / 62)]),
    ],
)
def test_k_decides_whether_agreement_beats_one_first_place(
    k: int, expected: list[tuple[str, float]]
) -> None:
    fused = rrf([["x", "p", "y"], ["q", "r", "y"]], k=k)
    assert [item for item, _ in fused] == [item for item, _ in expected]
    assert [score for _, score in fused] == pytest.approx([score for _, score in expected])


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
