"""Does the evidence answer the question? A sentence-level signal, and evidence selection.

Retrieval scores say a chunk is *about* the question's subject; an unanswerable question
whose evidence is on-topic (the same article, the same runbook) scores just as well. What
differs is whether any single sentence says what was asked. The signal is the highest
cosine similarity between the question and an evidence sentence, both embedded with the
model retrieval already loaded (no new dependency; the question is formatted as a query,
sentences as bare text). Measured on ClapNQ (answerable vs unanswerable questions with a
passage from the same article), its ROC AUC is 0.88, above the best chunk's dense score
(0.86), BM25 score (0.71) and the share of the question's content words found in a
sentence (0.76); ``docs/answers.md`` has the figures. Its threshold is calibrated on
labelled questions (``eval calibrate``), never chosen by hand.

The same similarities pick evidence deterministically: the sentences shown to a model in
a quoted request (the most similar ones, a bounded number) and the sentences of an
evidence-only result (the most similar ones within the source holding the best
sentence, read in order).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pysbd

from ragwright.core.answers import MAX_QUOTES
from ragwright.core.conditions import conditions_for
from ragwright.core.points import format_query_input
from ragwright.core.sentences import EvidenceSentence, in_reading_order
from ragwright.protocols import Embedder

QUOTE_CANDIDATES = 3
"""Sentences a quoted request shows the model (before the sentences that qualify them):
the evidence selection's, from the source holding the most similar sentence."""


@functools.cache
def _segmenter() -> pysbd.Segmenter:
    # Character spans, sliced from the text: the segments pysbd returns can differ from
    # the text (it drops tokenised quote marks such as ``), and a quote must be verbatim.
    return pysbd.Segmenter(language="en", clean=False, char_span=True)


# Tokenised text (corpora derived from Wikipedia dumps write "depression . Benvolio")
# puts a terminal mark between spaces, which pysbd does not always take for a sentence
# end (inside quotes it merges many): a mark standing alone, followed by a capitalised
# word, a digit or an opening quote (tokenised text opens with ``), ends one; a closing
# '' stays with its sentence. Ordinary prose never has a space before its full stop, so
# it is unaffected. On ClapNQ's passages this finds 89% of the human-selected sentences
# exactly (80% without).
_TOKENISED_END = re.compile(r"(?<=\s[.!?])\s+(?=[A-Z0-9`(])|(?<=\s[.!?] '')\s+(?=[A-Z])")


def split_sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (``pysbd``: rule-based, so abbreviations such as
    "e.g." and "U.S." and decimal numbers do not end a sentence; then a terminal mark
    standing alone between spaces, as tokenised text writes it), stripped.

    Example:
        >>> split_sentences("Drain jobs, e.g. retries. Stop at 2.5 s. Exit.")
        ['Drain jobs, e.g. retries.', 'Stop at 2.5 s.', 'Exit.']
        >>> split_sentences("It drains jobs . Then it stops .")
        ['It drains jobs .', 'Then it stops .']
    """
    return [
        part.strip()
        for span in _segmenter().segment(paragraph)
        for part in _TOKENISED_END.split(paragraph[span.start : span.end])
        if part.strip()
    ]


@dataclass(frozen=True, slots=True)
class Answerability:
    """The signal for one question: the best sentence's similarity against a threshold.

    ``threshold`` ``None`` means not calibrated: the signal is recorded, nothing declined.
    """

    score: float
    best_sentence: str
    threshold: float | None = None

    @property
    def answerable(self) -> bool:
        return self.threshold is None or self.score >= self.threshold


class SentenceScorer:
    """Cosine similarity of one question with evidence sentences, each text embedded once
    (an alternate model's assembly reuses the sentences already scored)."""

    def __init__(
        self, embedder: Embedder, question: str, query_vector: Sequence[float] | None = None
    ) -> None:
        """``query_vector``: the question's dense query vector when retrieval has already
        embedded it (same model, same query format), so it is not embedded twice."""
        self._embedder = embedder
        if query_vector is None:
            query_vector = embedder.embed_query(format_query_input(embedder.profile, question))
        self._question = _unit(query_vector)
        self._known: dict[str, float] = {}

    def scores(self, sentences: Sequence[EvidenceSentence]) -> dict[str, float]:
        """Sentence label → similarity with the question."""
        missing = list(dict.fromkeys(s.text for s in sentences if s.text not in self._known))
        if missing:
            vectors = np.asarray(self._embedder.embed_documents(missing), dtype=np.float64)
            norms = np.linalg.norm(vectors, axis=1)
            similarities = vectors @ self._question / np.where(norms == 0, 1.0, norms)
            self._known.update(zip(missing, (float(v) for v in similarities), strict=True))
        return {s.label: self._known[s.text] for s in sentences}


def answerability(
    sentences: Sequence[EvidenceSentence],
    scores: dict[str, float],
    threshold: float | None,
) -> Answerability:
    """The best sentence's similarity (ties: the first in reading order)."""
    if not sentences:
        return Answerability(-1.0, "", threshold)
    best = max(sentences, key=lambda s: scores[s.label])
    return Answerability(scores[best.label], best.label, threshold)


def most_similar(
    sentences: Sequence[EvidenceSentence], scores: dict[str, float], count: int
) -> list[EvidenceSentence]:
    """The ``count`` sentences most similar to the question, in reading order (ties go
    to the earlier sentence, so the choice is repeatable)."""
    ranked = sorted(range(len(sentences)), key=lambda n: (-scores[sentences[n].label], n))[:count]
    return in_reading_order([sentences[n] for n in ranked])


def best_source(
    sentences: Sequence[EvidenceSentence], scores: dict[str, float]
) -> list[EvidenceSentence]:
    """The sentences of the source holding the most similar sentence (ties: the first in
    reading order), in reading order; none when there are none."""
    if not sentences:
        return []
    best = max(sentences, key=lambda s: scores[s.label])
    return [s for s in sentences if s.source == best.source]


def shown_to_model(
    sentences: Sequence[EvidenceSentence],
    scores: dict[str, float],
    *,
    count: int = QUOTE_CANDIDATES,
    one_source: bool = True,
) -> list[EvidenceSentence]:
    """The sentences a quoted request shows the model, best first: the source holding
    the most similar sentence, its ``count`` sentences most similar to the question in
    order of similarity, each followed by the sentences that qualify it (conditions and
    exceptions, so a chosen rule can bring them). The model confirms or drops sentences
    of the selection the product makes without it (the evidence style's) instead of
    searching a wider set: on ClapNQ's tune split this raised the quoted answers' token
    F1 from 0.47 to 0.54, and a small model reads the best first (docs/answers.md, "What
    the model is shown"). ``one_source`` ``False`` ranks every source's sentences
    together (``benchmarks/answers.py --shown`` compares the choices)."""
    own = best_source(sentences, scores) if one_source else list(sentences)
    ranked = sorted(range(len(own)), key=lambda n: (-scores[own[n].label], n))
    shown: list[EvidenceSentence] = []
    for n in ranked[:count]:
        for sentence in (own[n], *conditions_for([own[n]], own)):
            if sentence not in shown:
                shown.append(sentence)
    return shown


def select_evidence(
    sentences: Sequence[EvidenceSentence], scores: dict[str, float], count: int = MAX_QUOTES
) -> list[EvidenceSentence]:
    """Evidence-only selection: the source holding the most similar sentence, and its
    ``count`` sentences most similar to the question, with the sentences that qualify them
    (:func:`ragwright.core.conditions.conditions_for`), in reading order. One source keeps
    the selection coherent (on ClapNQ it scored token F1 0.55 against the human answers,
    0.52 when the sentences may come from any source)."""
    own = best_source(sentences, scores)
    picked = most_similar(own, scores, count)
    # Conditions and exceptions right after a picked sentence go with it.
    return in_reading_order([*picked, *conditions_for(picked, own)])


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


# --- calibration -----------------------------------------------------------------------

DEFAULT_MAX_ANSWERABLE_LOSS = 0.1
"""Share of answerable questions (with evidence) the threshold may decline by default."""


@dataclass(frozen=True, slots=True)
class SignalCase:
    """One labelled question's signal: ``score`` ``None`` when no evidence was eligible
    (declined before the signal, whatever the threshold)."""

    case_id: str
    answerable: bool
    score: float | None


@dataclass(frozen=True, slots=True)
class ThresholdFigures:
    """What a threshold does on a set of questions."""

    threshold: float | None
    answerable: int
    unsupported: int
    answerable_declined: int  # by the threshold; those without evidence are not counted
    unsupported_declined: int  # no evidence, or below the threshold

    @property
    def answerable_declined_rate(self) -> float:
        return self.answerable_declined / self.answerable if self.answerable else 0.0

    @property
    def unsupported_declined_rate(self) -> float:
        return self.unsupported_declined / self.unsupported if self.unsupported else 0.0


def judge_threshold(cases: Sequence[SignalCase], threshold: float | None) -> ThresholdFigures:
    """Count what ``threshold`` declines among ``cases``."""

    def below(case: SignalCase) -> bool:
        return threshold is not None and case.score is not None and case.score < threshold

    answerable = [c for c in cases if c.answerable]
    unsupported = [c for c in cases if not c.answerable]
    return ThresholdFigures(
        threshold,
        len(answerable),
        len(unsupported),
        sum(1 for c in answerable if below(c)),
        sum(1 for c in unsupported if c.score is None or below(c)),
    )


def choose_threshold(
    cases: Sequence[SignalCase], max_answerable_loss: float = DEFAULT_MAX_ANSWERABLE_LOSS
) -> ThresholdFigures:
    """The threshold that declines the most unsupported questions while declining at
    most ``max_answerable_loss`` of the answerable ones; ties go to the lower threshold.

    Candidates are "none" and the midpoints between consecutive distinct scores (the
    smallest margins that change a decision), so the choice depends only on the order
    of the scores and lands between two observed questions, never on one.
    """
    scores = sorted({c.score for c in cases if c.score is not None})
    best = judge_threshold(cases, None)
    for low, high in itertools.pairwise(scores):
        figures = judge_threshold(cases, (low + high) / 2)
        if figures.answerable_declined_rate > max_answerable_loss + 1e-12:
            break  # higher thresholds only decline more answerable questions
        if figures.unsupported_declined > best.unsupported_declined:
            best = figures
    return best


def held_out_threshold(
    cases: Sequence[SignalCase], folds: dict[str, int], max_answerable_loss: float
) -> ThresholdFigures:
    """Pooled figures of choosing on all folds but one and judging on that one."""
    totals = [0, 0, 0, 0]
    for fold in sorted(set(folds.values())):
        train = [c for c in cases if folds[c.case_id] != fold]
        test = [c for c in cases if folds[c.case_id] == fold]
        figures = judge_threshold(test, choose_threshold(train, max_answerable_loss).threshold)
        for n, value in enumerate(
            (
                figures.answerable,
                figures.unsupported,
                figures.answerable_declined,
                figures.unsupported_declined,
            )
        ):
            totals[n] += value
    return ThresholdFigures(None, *totals)
