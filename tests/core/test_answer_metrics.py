"""Answer metrics against hand-computed values (formulas in the module docstring)."""

from __future__ import annotations

import pytest

from ragwright.core.answer_metrics import (
    answer_tokens,
    longest_common_subsequence,
    normalize_answer,
    rouge_l,
    sentence_selection,
    sentences_match,
    token_f1,
)
from ragwright.errors import MetricInputError

SIRENS = "They see three women washing clothes and singing ."
DELMAR = "Delmar is convinced the women were Sirens and transformed Pete into the toad ."


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Sirens .", "sirens"),
        ("An apple, a pear; the END!", "apple pear end"),
        ("  there  theatre  ", "there theatre"),  # articles only as whole words
        ("", ""),
    ],
)
def test_normalize_answer_follows_squad(text: str, normalized: str) -> None:
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize(
    ("prediction", "references", "expected"),
    [
        # cat sat on mat vs cat sat: common 2, P 2/4, R 2/2 -> 2/3
        ("The cat sat on the mat.", ["a cat sat"], 2 / 3),
        # the best reference counts
        ("cat sat", ["dog ran", "cat sat"], 1.0),
        # tokenised spacing and case do not matter
        ("Sirens .", ["sirens"], 1.0),
        # multiset intersection: go x3 vs go: common 1, P 1/3, R 1 -> 1/2
        ("go go go", ["go"], 0.5),
        # word order does not matter for F1
        ("mat on cat", ["cat on mat"], 1.0),
        ("", ["the"], 1.0),  # both empty after normalisation
        ("", ["cat"], 0.0),
        ("dog", ["cat"], 0.0),
    ],
)
def test_token_f1(prediction: str, references: list[str], expected: float) -> None:
    assert token_f1(prediction, references) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "references", "expected"),
    [
        # [cat sat on mat] vs [cat on mat]: LCS 3, P 3/4, R 1 -> 6/7
        ("cat sat on mat", ["cat on the mat"], 6 / 7),
        # order matters: [mat on cat] vs [cat on mat]: LCS 1, P = R = 1/3
        ("mat on cat", ["cat on mat"], 1 / 3),
        ("mat on cat", ["cat on mat", "mat on cat"], 1.0),
        ("", ["cat"], 0.0),
        ("dog", ["cat"], 0.0),
    ],
)
def test_rouge_l(prediction: str, references: list[str], expected: float) -> None:
    assert rouge_l(prediction, references) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "length"),
    [("abcbdab", "bdcaba", 4), ("abc", "abc", 3), ("abc", "", 0), ("abc", "def", 0)],
)
def test_longest_common_subsequence(a: str, b: str, length: int) -> None:
    assert longest_common_subsequence(list(a), list(b)) == length


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ("one two three four five", "one two three four five six", True),  # 5/6
        ("one two three four", "one two three four five", True),  # 4/5 = 0.8 exactly
        ("one two three four five", "one two three four five six seven", False),  # 5/7
        ("two one", "one two", True),  # equal sets
        ("", "", True),
        ("", "one", False),
    ],
)
def test_sentences_match_at_jaccard_point_eight(a: str, b: str, match: bool) -> None:
    assert sentences_match(answer_tokens(a), answer_tokens(b)) is match


def test_sentence_selection_counts_matches_each_way() -> None:
    selected = ["They see three women washing clothes and singing.", "Pete is turned into a toad."]
    scores = sentence_selection(selected, [[SIRENS, DELMAR]])
    assert (scores.precision, scores.recall) == (0.5, 0.5)


def test_sentence_selection_keeps_the_reference_with_the_best_f1() -> None:
    scores = sentence_selection([SIRENS], [[DELMAR], [SIRENS, DELMAR], [SIRENS]])
    assert (scores.precision, scores.recall) == (1.0, 1.0)
    # A sentence counted once even when it matches twice; a duplicate selection counts twice.
    assert sentence_selection([SIRENS, SIRENS], [[SIRENS, SIRENS + " ."]]).recall == 1.0
    assert sentence_selection([SIRENS, DELMAR], [[SIRENS]]).precision == 0.5


def test_an_empty_selection_scores_zero() -> None:
    scores = sentence_selection([], [[SIRENS]])
    assert (scores.precision, scores.recall, scores.f1) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: token_f1("a", []),
        lambda: rouge_l("a", []),
        lambda: sentence_selection(["a"], []),
        lambda: sentence_selection(["a"], [[]]),
    ],
)
def test_no_reference_is_an_input_error_not_a_zero(call: object) -> None:
    with pytest.raises(MetricInputError):
        call()  # type: ignore[operator]
