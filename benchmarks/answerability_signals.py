"""Answerability signals on ClapNQ: what separates answerable from unanswerable questions.

Every ClapNQ question goes through the product's answer path with the ``evidence`` style
(no model, no thresholds); the assembled evidence's sentences, their similarities to the
question and the retrieved candidates are captured at the scoring stage, and the
candidate signals (``answerability_features.py``) are computed from them.

Then, for each signal alone and for logistic-regression combinations (standardised
inputs, L2, fitted by gradient descent in numpy), calibrated on one split and applied to
the other (both directions): the held-out ROC AUC, and the operating point the product's
rule would choose (the threshold declining the most unanswerable questions while
declining at most ``--max-answerable-loss`` of the answerable ones, chosen on out-of-fold
scores of the calibration split, 5 stratified folds) applied to the held-out split.

Writes the figures (no text) to ``benchmarks/results/answerability_signals.json`` and
the per-question signal values (ids, labels, numbers) to ``--signals`` for a re-fit
without re-running the questions (``--reuse``).

    python benchmarks/answerability_signals.py [--signals PATH] [--reuse]
        [--max-answerable-loss 0.1] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

import ragwright.pipeline.answer as answer_module
from answerability_features import signal_values
from answers import CLAPNQ, CLAPNQ_CHUNKING, clapnq_split
from ragwright.application import AnswerRequest, EvidenceFilter, IngestRequest
from ragwright.runtime import build_application
from ragwright.settings import load_settings

COMBINATIONS = {
    "best + coverage_best": ["best", "coverage_best"],
    "best + second": ["best", "second"],
    "best + top3_mean": ["best", "top3_mean"],
    "best + coverage_best + title_similarity": ["best", "coverage_best", "title_similarity"],
    "best + coverage_best + candidate_top": ["best", "coverage_best", "candidate_top"],
    "best + best_position": ["best", "best_position"],
    "ten signals": [
        "best",
        "top3_mean",
        "margin",
        "coverage_best",
        "coverage_top3",
        "expected_type_best",
        "expected_type_top3",
        "best_minus_title",
        "candidate_top",
        "candidate_gap",
    ],
}


def collect(path: Path) -> list[dict[str, Any]]:
    """Run every ClapNQ question through the answer path (evidence style) and keep the
    signal values computed at its scoring stage."""
    questions = [
        json.loads(line) for line in (CLAPNQ / "questions.jsonl").read_text("utf-8").splitlines()
    ]
    captured: dict[str, Any] = {}
    original = answer_module.score

    async def capturing(plan: Any, retrieved: Any, prepared: Any, *rest: Any) -> Any:
        evidence = await original(plan, retrieved, prepared, *rest)
        captured["values"] = signal_values(
            plan.question, retrieved, prepared.context, evidence.sentences, evidence.scores
        )
        return evidence

    answer_module.score = capturing  # type: ignore[assignment]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ragwright-signals-") as tmp:
        app = build_application(load_settings(home=Path(tmp) / "home", **CLAPNQ_CHUNKING))
        app.ingest(IngestRequest(sources=(CLAPNQ / "markdown",)))
        evidence = EvidenceFilter(types=("note",))

        async def run() -> None:
            for number, question in enumerate(questions, start=1):
                captured.clear()
                request = AnswerRequest(question["question"], evidence=evidence, style="evidence")
                await app.answer(request)
                rows.append(
                    {
                        "id": question["id"],
                        "split": clapnq_split(question["id"]),
                        "answerable": bool(question["answerable"]),
                        "values": captured.get("values"),
                    }
                )
                if number % 25 == 0:
                    print(f"{number}/{len(questions)}", flush=True)

        asyncio.run(run())
    path.write_text(json.dumps(rows, indent=1), "utf-8")
    return rows


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random answerable question scores above a random unanswerable
    one (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    above = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(above / (len(pos) * len(neg)))


Model = tuple[np.ndarray, np.ndarray, np.ndarray, float]


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 3000) -> Model:
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / scale
    weights, bias = np.zeros(z.shape[1]), 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ weights + bias)))
        weights -= 0.5 * (z.T @ (p - y) + l2 * weights) / len(y)
        bias -= 0.5 * float((p - y).mean())
    return mean, scale, weights, bias


def predict(model: Model, x: np.ndarray) -> np.ndarray:
    mean, scale, weights, bias = model
    return np.asarray(((x - mean) / scale) @ weights + bias)


def out_of_fold(x: np.ndarray, y: np.ndarray, folds: int = 5) -> np.ndarray:
    """Each question's score from a model fitted without its fold (stratified)."""
    rng = np.random.RandomState(0)
    fold = np.zeros(len(y), int)
    for label in (0, 1):
        members = np.flatnonzero(y == label)
        rng.shuffle(members)
        fold[members] = np.arange(len(members)) % folds
    scores = np.zeros(len(y))
    for k in range(folds):
        scores[fold == k] = predict(fit(x[fold != k], y[fold != k]), x[fold == k])
    return scores


def operating_threshold(scores: np.ndarray, labels: np.ndarray, loss: float) -> float:
    """The product's rule: the highest midpoint threshold declining at most ``loss`` of
    the answerable questions."""
    values = sorted(set(scores.tolist()))
    chosen = -np.inf
    for low, high in zip([-np.inf, *values], values, strict=False):
        threshold = high if low == -np.inf else (low + high) / 2
        if ((scores < threshold) & (labels == 1)).sum() <= loss * (labels == 1).sum():
            chosen = threshold
    return float(chosen)


def judged(rows: list[dict[str, Any]], names: list[str], loss: float) -> dict[str, Any]:
    """Calibrated on one split, applied to the other, both ways."""
    figures: dict[str, Any] = {}
    for calibrate_on, apply_to in (("tune", "test"), ("test", "tune")):
        parts = {}
        for split in (calibrate_on, apply_to):
            part = [r for r in rows if r["split"] == split]
            parts[split] = (
                np.array([[r["values"][n] for n in names] for r in part]),
                np.array([float(r["answerable"]) for r in part]),
            )
        (xc, yc), (xa, ya) = parts[calibrate_on], parts[apply_to]
        threshold = operating_threshold(out_of_fold(xc, yc), yc, loss)
        scores = predict(fit(xc, yc), xa)
        figures[f"{calibrate_on}->{apply_to}"] = {
            "auc": round(auc(scores, ya), 3),
            "answerable_answered": round(
                float(((scores >= threshold) & (ya == 1)).sum() / (ya == 1).sum()), 3
            ),
            "unanswerable_declined": round(
                float(((scores < threshold) & (ya == 0)).sum() / (ya == 0).sum()), 3
            ),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--signals", type=Path, default=Path("/tmp/answerability_signals.json"))
    parser.add_argument("--reuse", action="store_true", help="Re-fit from --signals.")
    parser.add_argument("--max-answerable-loss", type=float, default=0.1)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parent / "results" / "answerability_signals.json",
    )
    args = parser.parse_args()
    if not (CLAPNQ / "questions.jsonl").is_file():
        sys.exit(f"ClapNQ not found at {CLAPNQ}: see ../shared/data/README.md")
    rows = json.loads(args.signals.read_text("utf-8")) if args.reuse else collect(args.signals)
    # Questions with no eligible evidence are declined whatever the decision: left out.
    rows = [r for r in rows if r["values"]]
    names = sorted(rows[0]["values"])
    results = {
        "config": {
            "questions": len(rows),
            "max_answerable_loss": args.max_answerable_loss,
            "split_rule": "tune when sha256(question id)[0] is even, else test",
        },
        "single": {n: judged(rows, [n], args.max_answerable_loss) for n in names},
        "combined": {
            label: judged(rows, chosen, args.max_answerable_loss)
            for label, chosen in {**COMBINATIONS, "all signals": names}.items()
        },
    }
    for group in ("single", "combined"):
        for label, figures in results[group].items():
            print(
                f"{label:<42}"
                + "  ".join(
                    f"{way}: AUC {f['auc']:.3f} answered {f['answerable_answered']:.2f} "
                    f"declined {f['unanswerable_declined']:.2f}"
                    for way, f in figures.items()
                )
            )
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
