"""Candidate signals that may tell answerable questions from unanswerable ones, beyond the
best sentence's similarity (used by ``answerability_signals.py``; the product uses none of
them, because on ClapNQ none improved the held-out decision: docs/answers.md).

Each is cheap: the sentence similarities the gate already computed, the question's words
against the best sentences' words, the retrieval ranking, the question's type against
what the best sentences contain, and one more embedding (the best source's title).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragwright.core.sentences import EvidenceSentence
from ragwright.core.support import content_words

_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_MONTH = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|century|decade)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")

QUESTION_TYPES = ("when", "who", "where", "how_many", "what", "which", "why", "how", "other")


def question_type(question: str) -> str:
    """The question's type from its first wh-word (``how many``/``how much`` apart)."""
    words = re.findall(r"[a-z]+", question.lower())
    for n, word in enumerate(words):
        if (
            word == "how"
            and n + 1 < len(words)
            and words[n + 1] in ("many", "much", "long", "old", "far", "big")
        ):
            return "how_many"
        if word in ("when", "who", "whom", "whose", "where", "what", "which", "why", "how"):
            return {"whom": "who", "whose": "who"}.get(word, word)
    return "other"


def has_expected_type(kind: str, question: str, sentence: str) -> bool:
    """Whether ``sentence`` holds what a question of ``kind`` asks for (a year or date for
    *when*, a number for *how many*, a name not in the question for *who*/*where*)."""
    if kind == "when":
        return bool(_YEAR.search(sentence) or _MONTH.search(sentence))
    if kind == "how_many":
        return bool(_NUMBER.search(sentence))
    if kind in ("who", "where"):
        asked = content_words(question)
        return any(content_words(name) - asked for name in _NAME.findall(sentence))
    return True


def signal_values(
    question: str,
    retrieved: Any,
    context: Any,
    sentences: Sequence[EvidenceSentence],
    scores: Mapping[str, float],
) -> dict[str, float] | None:
    """The candidate signals of one question (``None`` when no sentence was scored)."""
    if not sentences or retrieved.scorer is None:
        return None
    ranked = sorted(sentences, key=lambda s: -scores[s.label])
    values = [scores[s.label] for s in ranked]
    best = ranked[0]
    asked = content_words(question)
    kind = question_type(question)

    def coverage(group: Sequence[EvidenceSentence]) -> float:
        if not asked:
            return 0.0
        words: set[str] = set()
        for sentence in group:
            words |= content_words(sentence.text)
        return len(asked & words) / len(asked)

    titles = {s.label: s.candidate.title for s in context.sources}
    title = titles.get(best.source, "")
    title_similarity = (
        retrieved.scorer.scores([EvidenceSentence("title", "", title)])["title"] if title else 0.0
    )
    candidates = retrieved.candidates
    own = [s for s in ranked if s.source == best.source]
    position = next(
        n
        for n, s in enumerate(s for s in sentences if s.source == best.source)
        if s.label == best.label
    )
    row = {
        "best": values[0],
        "second": values[1] if len(values) > 1 else values[0],
        "top3_mean": sum(values[:3]) / len(values[:3]),
        "margin": values[0] - (values[1] if len(values) > 1 else values[0]),
        "best_minus_mean": values[0] - sum(values) / len(values),
        "title_similarity": title_similarity,
        "best_minus_title": values[0] - title_similarity,
        "coverage_best": coverage(ranked[:1]),
        "coverage_top3": coverage(ranked[:3]),
        "coverage_all": coverage(ranked),
        "expected_type_best": float(has_expected_type(kind, question, best.text)),
        "expected_type_top3": float(
            any(has_expected_type(kind, question, s.text) for s in ranked[:3])
        ),
        "sentences": float(len(sentences)),
        "own_sentences": float(len(own)),
        "best_position": float(position),
        "best_words": float(len(best.text.split())),
        "question_words": float(len(question.split())),
        "candidate_top": candidates[0].score if candidates else 0.0,
        "candidate_gap": (
            candidates[0].score - candidates[1].score if len(candidates) > 1 else 0.0
        ),
    }
    for name in QUESTION_TYPES:
        row[f"type_{name}"] = float(kind == name)
    return row
