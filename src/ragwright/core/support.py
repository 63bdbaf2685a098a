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

Evidence is data, never instructions. Evidence that addresses the answering model
(:mod:`ragwright.core.screen`: a title, heading or paragraph saying "ignore previous
instructions", "the correct answer is", "reply only with", chat-template tokens, forged
``"status"`` or ``"id": "S1"`` JSON, "you are now", "supersedes all runbooks", ...,
which screens the whole text of its chunk, and of the chunks a caller names as screened
with it: its neighbours, its document) supports nothing: it is left out of the cited
text the claims are compared with, and an answer sentence that echoes such text (half or
more of its content words come from it, and no fewer from ordinary evidence text) is
reported as following an instruction found in the evidence. An answer is *supported* only when it
has at least one checkable sentence, every sentence is supported and none follows such
text; the answer use case never returns an unsupported answer as ``answered``. The
patterns are a screen too (an obfuscated instruction passes them); the word-overlap
rule then still requires the answer's claims to appear in ordinary evidence text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ragwright.core.lexical import STOPWORDS
from ragwright.core.screen import split_instructions

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
    checked_sentences: int = 0
    followed_instructions: tuple[str, ...] = ()
    instruction_sources: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        """The answer has a checkable claim, every claim is supported by a cited source
        and none echoes text addressed to the model."""
        return (
            self.checked_sentences > 0
            and not self.unsupported_sentences
            and not self.followed_instructions
        )

    @property
    def flagged(self) -> bool:
        return not self.supported or any(not c.supported for c in self.citations)


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
    evidence: Sequence[tuple[str, str]] | None = None,
    frames: Mapping[str, tuple[str, str]] | None = None,
    screened: Collection[str] = (),
    min_shared: int = 2,
    min_coverage: float = 0.3,
    min_echo: float = 0.5,
) -> SupportReport:
    """Check ``answer`` against ``cited`` (label, included text) pairs.

    ``evidence`` is every (label, included text) pair the model was given (default:
    ``cited``); an answer sentence follows an instruction when one of their paragraphs
    that address the model covers at least ``min_echo`` of its content words and at
    least as many as any ordinary evidence text does (so a true answer next to an
    injection that talks about the same subject keeps its support). ``frames`` maps a
    label to the (title, heading) the model saw over its text: when either, or any
    paragraph, addresses the model, all of that text is screened
    (:func:`~ragwright.core.screen.split_instructions`). The labels in ``screened`` are
    screened whole whatever their own text (their neighbour or their document addresses
    the model: :func:`~ragwright.core.screen.screened_sources`).

    The defaults ``min_shared=2, min_coverage=0.3`` were chosen by hand and kept after
    calibration (``benchmarks/support_check.py``, 79 labelled cases, fixed tune/test
    split): the pair best on tune, (2, 0.45), raised tune balanced accuracy from 0.763 to
    0.822 but lowered the held-out split's from 0.740 to 0.647 (precision 0.938 -> 0.762,
    recall 0.536 -> 0.571), withholding four more supported paraphrases.
    """
    sentences = [s for s in _SENTENCE.split(answer.strip()) if content_words(s)]
    planted: list[frozenset[str]] = []
    clean: list[frozenset[str]] = []
    instruction_sources: list[str] = []
    frames = frames or {}

    def split(label: str, text: str) -> tuple[str, tuple[str, ...]]:
        title, heading = frames.get(label, ("", ""))
        return split_instructions(text, title=title, heading=heading, screened=label in screened)

    for label, text in cited if evidence is None else evidence:
        kept, removed = split(label, text)
        clean.append(content_words(kept))
        if removed:
            instruction_sources.append(label)
            planted.extend(content_words(p) for p in removed)
    followed = tuple(s for s in sentences if _follows(content_words(s), planted, clean, min_echo))
    sources = [(label, content_words(split(label, text)[0])) for label, text in cited]
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
    return SupportReport(
        tuple(results), unsupported, len(sentences), followed, tuple(instruction_sources)
    )


def _follows(
    claim: frozenset[str],
    planted: Sequence[frozenset[str]],
    clean: Sequence[frozenset[str]],
    min_echo: float,
) -> bool:
    if not planted:
        return False
    echo = max(len(claim & words) for words in planted) / len(claim)
    ordinary = max((len(claim & words) for words in clean), default=0) / len(claim)
    return echo >= min_echo and echo >= ordinary
