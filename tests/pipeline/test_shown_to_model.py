"""What a quoted request shows the model: the evidence selection's candidates, best first."""

from __future__ import annotations

from ragwright.core.sentences import EvidenceSentence
from ragwright.pipeline.answerability import QUOTE_CANDIDATES, select_evidence, shown_to_model


def sentence(source: str, number: int, text: str, paragraph: int = 1) -> EvidenceSentence:
    return EvidenceSentence(f"{source}.{number}", source, text, paragraph)


SENTENCES = [
    sentence("S1", 1, "Queues hold work."),
    sentence("S2", 1, "Workers start at boot."),
    sentence("S2", 2, "Drain the jobs only while the deadline allows it."),
    sentence("S2", 3, "If the deadline expires, cancel the I/O."),
    sentence("S2", 4, "Log the count."),
    sentence("S2", 5, "Page the owner."),
    sentence("S2", 6, "Close the files."),
]
SCORES = {
    "S1.1": 0.80,  # on topic, but its source's best is below S2's
    "S2.1": 0.30,
    "S2.2": 0.90,
    "S2.3": 0.10,  # low: shown only as the exception of S2.2
    "S2.4": 0.70,
    "S2.5": 0.60,
    "S2.6": 0.20,
}


def test_the_model_sees_the_best_sources_most_similar_sentences_best_first() -> None:
    shown = [s.label for s in shown_to_model(SENTENCES, SCORES)]
    # S2 holds the best sentence; its three most similar, in order of similarity, the
    # rule followed by the exception that governs it; nothing of S1.
    assert shown == ["S2.2", "S2.3", "S2.4", "S2.5"]
    assert len([label for label in shown if label != "S2.3"]) == QUOTE_CANDIDATES


def test_what_the_model_sees_is_what_the_evidence_style_selects() -> None:
    shown = shown_to_model(SENTENCES, SCORES)
    assert {s.label for s in shown} == {s.label for s in select_evidence(SENTENCES, SCORES)}


def test_a_sentence_that_is_both_picked_and_a_condition_is_shown_once() -> None:
    scores = {**SCORES, "S2.3": 0.85}
    shown = [s.label for s in shown_to_model(SENTENCES, scores)]
    assert shown == ["S2.2", "S2.3", "S2.4"]


def test_nothing_to_show_without_sentences() -> None:
    assert shown_to_model([], {}) == []


def test_the_benchmarks_alternatives_rank_more_sentences_or_every_source() -> None:
    # benchmarks/answers.py --shown ranked / source-ranked: the same rule, wider.
    every_source = [s.label for s in shown_to_model(SENTENCES, SCORES, count=3, one_source=False)]
    assert every_source == ["S2.2", "S2.3", "S1.1", "S2.4"]
    five = [s.label for s in shown_to_model(SENTENCES, SCORES, count=5)]
    assert five == ["S2.2", "S2.3", "S2.4", "S2.5", "S2.1", "S2.6"]
