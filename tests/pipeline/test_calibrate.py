from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from ragwright.adapters.datasets import load_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.eligibility import Eligibility
from ragwright.errors import EvaluationError
from ragwright.pipeline.calibrate import Calibration, CalibrationRow, assign_folds, calibrate
from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus, run_evaluation
from ragwright.pipeline.retrieve import Mode, Retriever, Thresholds
from ragwright.testing.fakes import HashingEmbedder
from ragwright.types import ChunkingPolicy
from tests.conftest import REPO
from tests.pipeline.indexes import hashing_index

POLICY = ChunkingPolicy()
ELIGIBLE = Eligibility(POLICY.version, ("runbook", "note"), ("published",))
CASES = load_cases(REPO / "samples" / "eval" / "cases.jsonl")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeIndex]:
    with hashing_index(tmp_path_factory.mktemp("calibrate") / "i") as opened:
        yield opened


def run(
    index: EdgeIndex, mode: Mode, **kwargs: float | int
) -> tuple[Calibration, Retriever, EvalConfig]:
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())
    config = EvalConfig(ELIGIBLE, mode=mode)
    corpus = eligible_corpus(index, ELIGIBLE, config.scope)
    return calibrate(CASES, retriever, config, corpus, k=5, **kwargs), retriever, config


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_the_recommendation_never_accepts_more_and_keeps_recall(
    index: EdgeIndex, mode: Mode
) -> None:
    result, retriever, config = run(index, mode)
    baseline = result.rows[0]
    recommended = result.recommended
    assert baseline.thresholds == Thresholds()
    # The unthresholded row is an ordinary evaluation of the same cases.
    corpus = eligible_corpus(index, ELIGIBLE, config.scope)
    plain = run_evaluation(
        CASES, retriever, EvalConfig(ELIGIBLE, mode=mode, ks=(5,)), corpus, run_config={}
    )
    assert baseline.false_acceptance_rate == plain.unsupported["false_acceptance_rate"]
    assert baseline.recall == pytest.approx(plain.summary["K"]["5"]["recall"])
    assert recommended.recall >= baseline.recall - 1e-12
    assert recommended.false_acceptance_rate <= baseline.false_acceptance_rate
    keeping = [r for r in result.rows if r.recall >= baseline.recall - 1e-12]
    assert recommended.false_acceptance_rate == min(r.false_acceptance_rate for r in keeping)


def test_only_the_legs_of_the_mode_are_swept(index: EdgeIndex) -> None:
    dense, _, _ = run(index, "dense")
    assert all(r.thresholds.sparse is None for r in dense.rows)
    assert any(r.thresholds.dense is not None for r in dense.rows)
    hybrid, _, _ = run(index, "hybrid")
    dense_values = {r.thresholds.dense for r in hybrid.rows}
    sparse_values = {r.thresholds.sparse for r in hybrid.rows}
    assert len(hybrid.rows) == len(dense_values) * len(sparse_values)
    assert all(r.thresholds.fusion is None and r.thresholds.rerank is None for r in hybrid.rows)


def test_every_candidate_rejects_some_unsupported_question(index: EdgeIndex) -> None:
    result, _, _ = run(index, "dense")
    unsupported_best = [result.best_scores[c.case_id]["dense"] for c in CASES if c.unsupported]
    for row in result.rows[1:]:
        assert any(row.thresholds.dense > s for s in unsupported_best if s is not None)


def test_a_looser_recall_budget_can_only_lower_false_acceptance(index: EdgeIndex) -> None:
    strict, _, _ = run(index, "hybrid")
    loose, _, _ = run(index, "hybrid", max_recall_loss=1.0)
    assert loose.recommended.false_acceptance_rate <= strict.recommended.false_acceptance_rate
    assert loose.recommended.false_acceptance_rate == min(
        r.false_acceptance_rate for r in loose.rows
    )


def test_the_sweep_is_capped_per_leg(index: EdgeIndex) -> None:
    full, _, _ = run(index, "hybrid")
    capped, _, _ = run(index, "hybrid", max_candidates=3)
    for leg in ("dense", "sparse"):
        values = {getattr(r.thresholds, leg) for r in capped.rows}
        assert None in values and len(values) <= 3
        assert values <= {getattr(r.thresholds, leg) for r in full.rows}
    assert len(capped.rows) <= 9 < len(full.rows)


def test_calibration_needs_both_kinds_of_case_and_a_sane_budget(index: EdgeIndex) -> None:
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())
    config = EvalConfig(ELIGIBLE)
    corpus = eligible_corpus(index, ELIGIBLE, config.scope)
    answerable = [c for c in CASES if not c.unsupported]
    with pytest.raises(EvaluationError, match="answerable and unsupported"):
        calibrate(answerable, retriever, config, corpus)
    with pytest.raises(EvaluationError, match="max_recall_loss"):
        calibrate(CASES, retriever, config, corpus, max_recall_loss=-0.1)
    with pytest.raises(EvaluationError, match="max_candidates"):
        calibrate(CASES, retriever, config, corpus, max_candidates=1)


def fresh_row(
    retriever: Retriever, config: EvalConfig, thresholds: Thresholds, index: EdgeIndex
) -> CalibrationRow:
    """What the sweep computed before: one complete evaluation per combination."""
    swept = EvalConfig(config.eligibility, mode=config.mode, ks=(5,), thresholds=thresholds)
    record = run_evaluation(
        CASES, retriever, swept, eligible_corpus(index, ELIGIBLE, config.scope), run_config={}
    )
    return CalibrationRow(
        thresholds=thresholds,
        false_acceptance_rate=record.unsupported["false_acceptance_rate"],
        recall=record.summary["K"]["5"]["recall"],
        ndcg=record.summary["K"]["5"]["ndcg"],
        refused_answerable=sum(1 for row in record.cases if not row["ranking"]),
    )


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_the_one_pass_sweep_equals_an_evaluation_per_combination(
    index: EdgeIndex, mode: Mode
) -> None:
    result, retriever, config = run(index, mode)
    # Best scores are what a top-1 search per leg finds (the old first pass) ...
    legs: tuple[Mode, ...] = ("dense", "sparse")
    for case in CASES:
        vectors = retriever.embed(case.question)
        for leg in (leg for leg in legs if leg in result.best_scores[case.case_id]):
            hits = retriever.search(vectors, ELIGIBLE, config.scope, k=1, mode=leg).hits
            assert result.best_scores[case.case_id][leg] == (hits[0].score if hits else None)
    # ... and every row, exactly, what a fresh evaluation under its thresholds scores.
    assert len(result.rows) > 1
    for row in result.rows:
        assert row == fresh_row(retriever, config, row.thresholds, index)


def test_each_question_is_embedded_once_and_progress_is_reported(index: EdgeIndex) -> None:
    embedder = HashingEmbedder()
    retriever = Retriever(index, embedder, Bm25Encoder())
    config = EvalConfig(ELIGIBLE, mode="hybrid")
    events: list[tuple[str, int]] = []
    result = calibrate(
        CASES,
        retriever,
        config,
        eligible_corpus(index, ELIGIBLE, config.scope),
        progress=lambda event, count: events.append((event, count)),
    )
    assert sorted(embedder.embedded_texts) == sorted(c.question for c in CASES)
    assert events == [
        ("questions", len(CASES)),
        *[("retrieved", 1)] * len(CASES),
        ("combinations", len(result.rows)),
        *[("swept", 1)] * len(result.rows),
    ]


class LengthReranker:
    """Scores a text by its length; records every (question, text) it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        self.asked.extend((question, t) for t in texts)
        return [float(len(t)) for t in texts]


def test_with_a_reranker_each_text_is_reranked_once_and_rows_are_unchanged(
    index: EdgeIndex,
) -> None:
    reranker = LengthReranker()
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder(), reranker=reranker)
    config = EvalConfig(ELIGIBLE, mode="hybrid")
    result = calibrate(
        CASES, retriever, config, eligible_corpus(index, ELIGIBLE, config.scope), max_candidates=3
    )
    assert len(result.rows) > 1
    assert len(reranker.asked) == len(set(reranker.asked))
    # The best scores are the legs' own scores, never rerank scores (text lengths).
    plain = Retriever(index, HashingEmbedder(), Bm25Encoder())
    for case in CASES:
        hits = plain.search(case.question, ELIGIBLE, config.scope, k=1, mode="dense").hits
        assert result.best_scores[case.case_id]["dense"] == (hits[0].score if hits else None)
    for row in result.rows:
        assert row == fresh_row(retriever, config, row.thresholds, index)


# --- held-out figures -------------------------------------------------------------------


def test_folds_are_stratified_and_do_not_depend_on_file_order() -> None:
    folds = assign_folds(CASES, 5)
    assert assign_folds(list(reversed(CASES)), 5) == folds
    assert assign_folds(sorted(CASES, key=lambda c: c.question), 5) == folds
    assert set(folds) == {c.case_id for c in CASES}
    for fold in range(5):
        members = [c for c in CASES if folds[c.case_id] == fold]
        assert sum(c.unsupported for c in members) == 1  # 5 unsupported over 5 folds
        assert sum(not c.unsupported for c in members) == 4  # 20 answerable
    # A case's fold follows its id, not its neighbours: dropping one answerable case
    # moves no unsupported case.
    fewer = assign_folds([c for c in CASES if c.case_id != "q01"], 5)
    assert {k: v for k, v in fewer.items() if k.startswith("u")} == {
        k: v for k, v in folds.items() if k.startswith("u")
    }


def test_folds_need_each_kind_of_case_in_every_fold() -> None:
    with pytest.raises(EvaluationError, match="6 folds need at least 6 unsupported cases"):
        assign_folds(CASES, 6)
    with pytest.raises(EvaluationError, match="folds must be >= 2"):
        assign_folds(CASES, 1)


def test_k_fold_recommends_on_the_other_folds_and_pools_every_case(index: EdgeIndex) -> None:
    result, retriever, config = run(index, "hybrid", folds=5)
    held = result.held_out
    assert held is not None and held.method == "k-fold" and held.folds == 5
    assert (held.answerable, held.unsupported) == (20, 5)
    corpus = eligible_corpus(index, ELIGIBLE, config.scope)
    folds = assign_folds(CASES, 5)
    pooled = {}
    for fold, thresholds in enumerate(held.fold_thresholds):
        train = [c for c in CASES if folds[c.case_id] != fold]
        alone = calibrate(train, retriever, config, corpus, k=5)
        assert alone.recommended.thresholds == thresholds  # the same rule, on the others
        for case in CASES:
            if folds[case.case_id] == fold:
                pooled[case.case_id] = retriever.search(
                    case.question, ELIGIBLE, config.scope, k=5, mode="hybrid", thresholds=thresholds
                ).hits
    unsupported = [c for c in CASES if c.unsupported]
    accepted = sum(1 for c in unsupported if pooled[c.case_id])
    assert held.false_acceptance_rate == accepted / len(unsupported)
    refused = sum(1 for c in CASES if not c.unsupported and not pooled[c.case_id])
    assert held.refused_answerable == refused
    # Shuffled input, same folds, same figures.
    again = calibrate(list(reversed(CASES)), retriever, config, corpus, k=5, folds=5)
    assert again.held_out == held


def test_a_holdout_set_is_judged_under_the_one_recommendation(index: EdgeIndex) -> None:
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())
    config = EvalConfig(ELIGIBLE, mode="hybrid")
    corpus = eligible_corpus(index, ELIGIBLE, config.scope)
    result = calibrate(CASES, retriever, config, corpus, k=5, holdout=CASES)
    held = result.held_out
    assert held is not None and held.method == "holdout" and held.folds is None
    assert held.fold_thresholds == (result.recommended.thresholds,)
    # The same questions as held-out set: exactly the in-sample figures.
    chosen = result.recommended
    assert (held.false_acceptance_rate, held.recall, held.refused_answerable) == (
        chosen.false_acceptance_rate,
        chosen.recall,
        chosen.refused_answerable,
    )
    assert calibrate(CASES, retriever, config, corpus, k=5).held_out is None
