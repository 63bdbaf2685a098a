"""Answer metrics: token F1, ROUGE-L and sentence selection against references.

Every text is compared as the tokens of :func:`normalize_answer`, the SQuAD v1.1
evaluation script's normalisation (Rajpurkar et al. 2016): lower-case, drop ASCII
punctuation, drop the articles *a*, *an*, *the*, split on whitespace.

* ``token F1`` (SQuAD): with ``common`` the multiset intersection of prediction and
  reference tokens, ``P = |common| / |prediction|``, ``R = |common| / |reference|``,
  ``F1 = 2PR / (P + R)``; two empty token lists score 1, one empty list 0.
* ``ROUGE-L`` F-measure (Lin 2004, β = 1): ``LCS`` the longest common subsequence of
  the two token lists, ``P = LCS / |prediction|``, ``R = LCS / |reference|``,
  ``F = 2PR / (P + R)``; empty lists as for F1.
* ``sentence selection``: a selected sentence *matches* a reference sentence when their
  token sequences are equal or their token sets have a Jaccard index of at least
  :data:`SENTENCE_MATCH_JACCARD` (0.8) — ClapNQ's sentences carry tokenised spacing
  ("Sirens .") that normalisation removes, and the Jaccard floor absorbs a quote that
  drops or adds a word. ``precision = matched selected / |selected|``,
  ``recall = matched reference / |reference|`` (each sentence counts once, however
  many it matches).

Each metric takes several references and returns the best: the maximum for F1 and
ROUGE-L, the reference with the highest sentence F1 (first on ties) for selection. No
reference at all is an input error (:class:`MetricInputError`), not a zero.

ROUGE-L is computed here rather than with the ``rouge-score`` package because the core
imports only the standard library (``tests/test_imports.py``); a differential test
checks this implementation against ``rouge-score`` given the same tokens.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragwright.errors import MetricInputError

SENTENCE_MATCH_JACCARD = 0.8
R = TypeVar("R")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True, slots=True)
class SentenceScores:
    """Sentence selection against the best-matching reference selection."""

    precision: float
    recall: float

    @property
    def f1(self) -> float:
        return _f_measure(self.precision, self.recall)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The whitespace tokens of :func:`normalize_answer`."""
    return normalize_answer(text).split()


def token_f1(prediction: str, references: Sequence[str]) -> float:
    """SQuAD token F1 of ``prediction`` against its best reference."""
    predicted = answer_tokens(prediction)
    return max(_token_f1(predicted, answer_tokens(r)) for r in _required(references))


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (β = 1) of ``prediction`` against its best reference."""
    predicted = answer_tokens(prediction)
    return max(_rouge_l(predicted, answer_tokens(r)) for r in _required(references))


def sentence_selection(
    selected: Sequence[str], references: Sequence[Sequence[str]]
) -> SentenceScores:
    """Precision and recall of ``selected`` sentences against the reference selection
    with the highest sentence F1. An empty selection scores 0 and 0."""
    chosen = [answer_tokens(s) for s in selected]
    scored = []
    for reference in _required(references):
        wanted = [answer_tokens(s) for s in reference]
        if not wanted:
            raise MetricInputError("a reference sentence selection is empty")
        hits = sum(1 for s in chosen if any(sentences_match(s, w) for w in wanted))
        found = sum(1 for w in wanted if any(sentences_match(s, w) for s in chosen))
        scored.append(SentenceScores(hits / len(chosen) if chosen else 0.0, found / len(wanted)))
    return max(scored, key=lambda scores: scores.f1)  # max keeps the first of equals


def sentences_match(a: Sequence[str], b: Sequence[str]) -> bool:
    """Equal token sequences, or token sets with Jaccard ≥ :data:`SENTENCE_MATCH_JACCARD`."""
    if list(a) == list(b):
        return True
    left, right = set(a), set(b)
    union = left | right
    return bool(union) and len(left & right) / len(union) >= SENTENCE_MATCH_JACCARD


def longest_common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(|a|·|b|))."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _token_f1(predicted: list[str], reference: list[str]) -> float:
    if not predicted or not reference:
        return float(predicted == reference)
    common = sum((Counter(predicted) & Counter(reference)).values())
    return _f_measure(common / len(predicted), common / len(reference))


def _rouge_l(predicted: list[str], reference: list[str]) -> float:
    if not predicted or not reference:
        return float(predicted == reference)
    lcs = longest_common_subsequence(predicted, reference)
    return _f_measure(lcs / len(predicted), lcs / len(reference))


def _f_measure(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _required(references: Sequence[R]) -> Sequence[R]:
    if not references:
        raise MetricInputError("no reference to score against")
    return references
