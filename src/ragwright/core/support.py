"""A local, deterministic support check for cited sources (beyond the seeds).

For every sentence of an answer, its content words (lower-case word tokens of three or
more characters, English stop words removed, a plural ``s`` folded) are compared with
the content words of each cited source's *included* text — what the model actually saw.
A citation is supported when it shares at least ``min_shared`` content words with some
answer sentence and covers at least ``min_coverage`` of that sentence's content words.
An answer is flagged when any citation is unsupported or a sentence is supported by no
citation. It is a cheap screen for answers that cite sources which do not contain their
claims, not a proof of faithfulness: paraphrase can defeat it, and word overlap can be
coincidental.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragwright.core.lexical import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class CitationSupport:
    """How well one cited source supports the answer."""

    label: str
    best_coverage: float
    shared_words: int
    supported: bool


@dataclass(frozen=True, slots=True)
class SupportReport:
    """Per-citation support and the overall flag."""

    citations: tuple[CitationSupport, ...]
    unsupported_sentences: tuple[str, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.unsupported_sentences) or any(not c.supported for c in self.citations)


def content_words(text: str) -> frozenset[str]:
    """Lower-case content words of three or more characters, plural ``s`` folded."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        words.add(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return frozenset(words)


def check_support(
    answer: str,
    cited: Sequence[tuple[str, str]],
    *,
    min_shared: int = 2,
    min_coverage: float = 0.3,
) -> SupportReport:
    """Check ``answer`` against ``cited`` (label, included text) pairs."""
    sentences = [s for s in _SENTENCE.split(answer.strip()) if content_words(s)]
    sources = [(label, content_words(text)) for label, text in cited]
    results = []
    supported_sentences: set[int] = set()
    for label, words in sources:
        best, best_shared = 0.0, 0
        for index, sentence in enumerate(sentences):
            claim = content_words(sentence)
            shared = len(claim & words)
            coverage = shared / len(claim)
            if shared >= min_shared and coverage >= min_coverage:
                supported_sentences.add(index)
            if coverage > best:
                best, best_shared = coverage, shared
        results.append(
            CitationSupport(
                label,
                round(best, 3),
                best_shared,
                best_shared >= min_shared and best >= min_coverage,
            )
        )
    unsupported = tuple(s for i, s in enumerate(sentences) if i not in supported_sentences)
    return SupportReport(tuple(results), unsupported)
