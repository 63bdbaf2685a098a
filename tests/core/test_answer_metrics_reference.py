"""ROUGE-L against the ``rouge-score`` package, given the same normalised tokens."""

from __future__ import annotations

import random

import pytest
from rouge_score import rouge_scorer

from ragwright.core.answer_metrics import answer_tokens, rouge_l

WORDS = ["drain", "shutdown", "deadline", "jobs", "retry", "queue", "worker", "of"]


class _SquadTokens:
    """rouge-score's tokenizer protocol over our normalisation."""

    def tokenize(self, text: str) -> list[str]:
        return answer_tokens(text)


@pytest.mark.parametrize("seed", range(40))
def test_rouge_l_equals_rouge_score(seed: int) -> None:
    rng = random.Random(seed)
    prediction = " ".join(rng.choices(WORDS, k=rng.randint(1, 15)))
    reference = " ".join(rng.choices(WORDS, k=rng.randint(1, 15)))
    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_SquadTokens())
    expected = scorer.score(reference, prediction)["rougeL"].fmeasure
    assert rouge_l(prediction, [reference]) == pytest.approx(expected)
