from __future__ import annotations

import random

import ir_measures
import pytest
from ir_measures import RR, P, R, nDCG

from ragwright.core.metrics import score_ranking
from ragwright.errors import MetricInputError

SEED = {"C": 0, "A": 2, "B": 1}


@pytest.mark.parametrize(
    ("ranked", "judgments", "k", "expected"),
    [
        (["C", "A", "B"], SEED, 3, (2 / 3, 1.0, 0.5, 0.659)),
        (["A", "B", "C"], SEED, 3, (2 / 3, 1.0, 1.0, 1.0)),
        (["C", "A", "B"], SEED, 1, (0.0, 0.0, 0.0, 0.0)),
        (["A"], SEED, 5, (0.2, 0.5, 1.0, 0.826)),  # denominator is always K
        ([], SEED, 3, (0.0, 0.0, 0.0, 0.0)),
        (["B", "A"], {"A": 2, "B": 1, "D": 2}, 2, (1.0, 2 / 3, 1.0, 0.591)),
    ],
)
def test_hand_computed_values(
    ranked: list[str], judgments: dict[str, int], k: int, expected: tuple[float, ...]
) -> None:
    s = score_ranking(ranked, judgments, k)
    assert (s.precision, s.recall, s.reciprocal_rank, s.ndcg) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("ranked", "judgments", "k", "fragment"),
    [
        (["A", "A"], SEED, 3, "twice"),
        (["Z"], SEED, 3, "no judgment"),
        (["A"], {"A": 3}, 3, "grade"),
        (["A"], {"A": -1}, 3, "grade"),
        (["A"], {"A": 0}, 3, "no relevant item"),
        (["A"], SEED, 0, "positive"),
    ],
)
def test_input_errors_are_distinct_from_misses(
    ranked: list[str], judgments: dict[str, int], k: int, fragment: str
) -> None:
    with pytest.raises(MetricInputError) as caught:
        score_ranking(ranked, judgments, k)
    assert fragment in str(caught.value)


def test_matches_ir_measures_on_random_rankings() -> None:
    rng = random.Random(7)
    for case in range(200):
        docs = [f"d{i}" for i in range(rng.randint(2, 25))]
        judgments = {d: rng.choice([0, 0, 0, 1, 2]) for d in docs}
        if not any(judgments.values()):
            judgments[docs[0]] = 1
        ranked = rng.sample(docs, rng.randint(1, len(docs)))
        k = rng.choice([1, 3, 5, 10])
        qrels = [ir_measures.Qrel("q", d, g) for d, g in judgments.items()]
        run = [ir_measures.ScoredDoc("q", d, float(len(ranked) - i)) for i, d in enumerate(ranked)]
        measures = [P @ k, R @ k, RR @ k, nDCG(gains={0: 0, 1: 1, 2: 3}) @ k]
        ref = ir_measures.calc_aggregate(measures, qrels, run)
        ours = score_ranking(ranked, judgments, k)
        assert ours.precision == pytest.approx(ref[P @ k]), case
        assert ours.recall == pytest.approx(ref[R @ k]), case
        assert ours.reciprocal_rank == pytest.approx(ref[RR @ k]), case
        assert ours.ndcg == pytest.approx(ref[nDCG(gains={0: 0, 1: 1, 2: 3}) @ k]), case
