"""The answerability threshold: chosen from labelled signals, judged on held-out folds."""

from __future__ import annotations

from ragwright.pipeline.answerability import (
    Answerability,
    SignalCase,
    choose_threshold,
    held_out_threshold,
    judge_threshold,
    split_sentences,
)


def cases(answerable: list[float | None], unsupported: list[float | None]) -> list[SignalCase]:
    return [SignalCase(f"a{n}", True, s) for n, s in enumerate(answerable)] + [
        SignalCase(f"u{n}", False, s) for n, s in enumerate(unsupported)
    ]


def test_the_threshold_declines_the_most_unsupported_within_the_allowed_loss() -> None:
    labelled = cases([0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.44, 0.43, 0.42, 0.3], [0.2, 0.35, 0.46])
    chosen = choose_threshold(labelled, max_answerable_loss=0.1)
    # Between 0.35 and 0.42 it declines one answerable question (10%: 0.3) and two
    # unsupported ones (0.2, 0.35); above 0.42 it would decline two answerable (20%).
    assert chosen.threshold is not None and 0.35 < chosen.threshold < 0.42
    assert (chosen.answerable_declined, chosen.unsupported_declined) == (1, 2)
    looser = choose_threshold(labelled, max_answerable_loss=0.5)
    assert looser.unsupported_declined == 3 and looser.answerable_declined <= 5


def test_no_evidence_counts_as_declined_and_no_threshold_is_chosen_when_nothing_helps() -> None:
    labelled = cases([0.2, 0.3], [None, 0.9])
    chosen = choose_threshold(labelled, max_answerable_loss=0.0)
    assert chosen.threshold is None and chosen.unsupported_declined == 1


def test_judging_counts_answerable_declines_by_the_threshold_only() -> None:
    figures = judge_threshold(cases([None, 0.2, 0.8], [0.1, 0.7]), 0.5)
    assert (figures.answerable_declined, figures.unsupported_declined) == (1, 1)
    assert figures.answerable_declined_rate == 1 / 3


def test_held_out_figures_never_judge_a_fold_with_its_own_threshold() -> None:
    # Fold 1 holds the only unsupported question scoring 0.4: chosen on fold 0 alone the
    # threshold stays below it, so held out it is accepted, while in-sample it is declined.
    labelled = cases([0.9, 0.8, 0.7, 0.6], [0.1, 0.4])
    folds = {"a0": 0, "a1": 1, "a2": 0, "a3": 1, "u0": 0, "u1": 1}
    in_sample = choose_threshold(labelled, 0.0)
    held = held_out_threshold(labelled, folds, 0.0)
    assert in_sample.unsupported_declined == 2
    assert held.unsupported_declined == 1 and held.answerable == 4 and held.unsupported == 2


def test_sentences_split_at_real_boundaries_only() -> None:
    assert split_sentences("Use e.g. retries on the U.S. region. Wait 2.5 s. Exit.") == [
        "Use e.g. retries on the U.S. region.",
        "Wait 2.5 s.",
        "Exit.",
    ]


def test_tokenised_text_ends_a_sentence_at_a_mark_standing_alone() -> None:
    text = "He said `` stop . Romeo meets Juliet . Tybalt is enraged . 5 are here ."
    sentences = split_sentences(text)
    assert sentences == [
        "He said `` stop .",
        "Romeo meets Juliet .",
        "Tybalt is enraged .",
        "5 are here .",
    ]
    # Verbatim: the sentences are the text's own characters (pysbd alone drops the ``).
    assert " ".join(sentences) == text


def test_a_score_exactly_at_the_threshold_is_answerable_in_the_gate_and_in_calibration() -> None:
    # The gate and the calibration that chose the threshold must agree on the equal case:
    # ">=" answers it; a ">" in either would decline what the other counted as kept.
    assert Answerability(0.5, "S1.1", 0.5).answerable
    assert not Answerability(0.4999, "S1.1", 0.5).answerable
    assert Answerability(-1.0, "", None).answerable  # not calibrated: nothing declined
    figures = judge_threshold(cases([0.5], [0.5]), 0.5)
    assert (figures.answerable_declined, figures.unsupported_declined) == (0, 0)
