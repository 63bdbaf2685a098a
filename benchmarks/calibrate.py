"""``eval calibrate``: one retrieval per question vs one evaluation per combination.

The sample set (``samples/eval/cases.jsonl`` over ``samples/corpus``, bundled MiniLM,
hybrid, K=5, ``--max-candidates`` 8) is calibrated twice in one process:

* **old** — the sweep as it was: a top-1 search per leg and question for the best
  scores, then a complete :func:`run_evaluation` (embed and search every question) for
  every threshold combination;
* **new** — :func:`ragwright.pipeline.calibrate.calibrate`: each question embedded and
  searched once, every combination ranked from the stored leg candidates.

Reports both wall times, the speed ratio, and whether every row and the recommendation
are identical. Writes ``benchmarks/results/calibrate.json``.

    python benchmarks/calibrate.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ragwright.adapters.datasets import load_cases
from ragwright.core.eligibility import Eligibility
from ragwright.pipeline.calibrate import Calibration, CalibrationRow, calibrate
from ragwright.pipeline.evaluate import EligibleCorpus, EvalConfig, eligible_corpus, run_evaluation
from ragwright.pipeline.retrieve import Retriever, Thresholds
from ragwright.types import ChunkingPolicy, EvalCase
from sample_index import sample_retriever

ROOT = Path(__file__).resolve().parents[1]
POLICY = ChunkingPolicy()
LEGS = ("dense", "sparse")
K = 5
MAX_CANDIDATES = 8


def old_calibrate(
    cases: Sequence[EvalCase], retriever: Retriever, config: EvalConfig, corpus: EligibleCorpus
) -> tuple[list[CalibrationRow], CalibrationRow]:
    """The previous implementation (hybrid legs, no recall loss allowed), kept verbatim in
    what it computes: the reference the new sweep must equal."""
    best: dict[str, dict[str, float | None]] = {}
    for case in cases:
        vectors = retriever.embed(case.question)
        best[case.case_id] = {}
        for leg in LEGS:
            hits = retriever.search(vectors, config.eligibility, config.scope, k=1, mode=leg).hits
            best[case.case_id][leg] = hits[0].score if hits else None
    unsupported = [c for c in cases if c.unsupported]
    candidates = [_old_candidates(leg, best, unsupported) for leg in LEGS]
    base = dataclasses.replace(config, ks=(K,), thresholds=Thresholds(), with_text=False)
    rows = []
    for combination in itertools.product(*candidates):
        thresholds = Thresholds(**dict(zip(LEGS, combination, strict=True)))
        record = run_evaluation(
            cases,
            retriever,
            dataclasses.replace(base, thresholds=thresholds),
            corpus,
            run_config={},
        )
        at_k = record.summary["K"][str(K)]
        rows.append(
            CalibrationRow(
                thresholds=thresholds,
                false_acceptance_rate=record.unsupported["false_acceptance_rate"],
                recall=at_k["recall"],
                ndcg=at_k["ndcg"],
                refused_answerable=sum(1 for row in record.cases if not row["ranking"]),
            )
        )
    eligible = [r for r in rows if r.recall >= rows[0].recall - 1e-12]
    recommended = min(
        eligible,
        key=lambda r: (
            r.false_acceptance_rate,
            r.refused_answerable,
            tuple(
                float("-inf") if v is None else v for v in (r.thresholds.dense, r.thresholds.sparse)
            ),
        ),
    )
    return rows, recommended


def _old_candidates(
    leg: str, best: dict[str, dict[str, float | None]], unsupported: Sequence[EvalCase]
) -> list[float | None]:
    observed = sorted({s for scores in best.values() if (s := scores[leg]) is not None})
    values: set[float] = set()
    for case in unsupported:
        score = best[case.case_id][leg]
        if score is None:
            continue
        higher = [s for s in observed if s > score]
        values.add((score + higher[0]) / 2 if higher else score + abs(score) * 1e-6 + 1e-9)
    ordered = sorted(values)
    room = MAX_CANDIDATES - 1
    if len(ordered) > room:
        step = (len(ordered) - 1) / max(room - 1, 1)
        ordered = sorted({ordered[round(i * step)] for i in range(room)})
    return [None, *ordered]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="Timed runs of each arm.")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "calibrate.json"
    )
    args = parser.parse_args()
    cases = load_cases(ROOT / "samples" / "eval" / "cases.jsonl")
    eligibility = Eligibility(POLICY.version, ("runbook", "note"), ("published",))
    config = EvalConfig(eligibility, mode="hybrid")
    with tempfile.TemporaryDirectory() as home, sample_retriever(Path(home)) as retriever:
        corpus = eligible_corpus(retriever.index, eligibility, config.scope)
        old_seconds, new_seconds = [], []
        new: Calibration | None = None
        old_rows: list[CalibrationRow] = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            old_rows, old_recommended = old_calibrate(cases, retriever, config, corpus)
            old_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            new = calibrate(cases, retriever, config, corpus, k=K, max_candidates=MAX_CANDIDATES)
            new_seconds.append(time.perf_counter() - started)
    assert new is not None
    old_median, new_median = statistics.median(old_seconds), statistics.median(new_seconds)
    result = {
        "dataset": "samples/eval/cases.jsonl over samples/corpus",
        "embedder": "bundled MiniLM (onnx)",
        "mode": "hybrid",
        "k": K,
        "max_candidates": MAX_CANDIDATES,
        "cases": len(cases),
        "combinations": len(new.rows),
        "old_seconds": [round(s, 3) for s in old_seconds],
        "new_seconds": [round(s, 3) for s in new_seconds],
        "old_median_seconds": round(old_median, 3),
        "new_median_seconds": round(new_median, 3),
        "speedup": round(old_median / new_median, 1),
        "identical_rows": [dataclasses.astuple(r) for r in new.rows]
        == [dataclasses.astuple(r) for r in old_rows],
        "identical_recommendation": dataclasses.astuple(new.recommended)
        == dataclasses.astuple(old_recommended),
        "recommended": {
            "threshold_dense": new.recommended.thresholds.dense,
            "threshold_sparse": new.recommended.thresholds.sparse,
            "false_acceptance_rate": new.recommended.false_acceptance_rate,
            f"recall@{K}": new.recommended.recall,
        },
    }
    print(json.dumps(result, indent=2))
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
