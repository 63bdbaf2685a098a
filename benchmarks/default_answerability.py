"""The default answerability threshold (issue 47 item 6): chosen on ClapNQ's tune split,
reported on its test split, with and without retrieval floors.

A new team has no labelled questions, so nothing is calibrated; the embedding profile's
default answerability threshold applies (``docs/answers.md``, "A default before
calibration"). This measures where that default comes from:

1. ClapNQ's 274 passages are ingested into a fresh RAGWRIGHT_HOME (``--chunking
   default``: no chunking setting, the path a newcomer's ``ragwright ingest`` takes;
   ``sentence-blocks``: sentence windows of 80 words under 256 tokens, the flags the
   default path needed before oversize paragraphs were split; ``clapnq``:
   ``answers.py``'s 400 words, 256 tokens).
2. Every question (275; split by ``answers.py``'s fixed rule: tune 140 = 83 answerable +
   57 unanswerable, test 135 = 60 + 75) goes through ``Application.answer`` with the
   ``evidence`` style (no model: the gate is decided before any model call, so its
   decisions are the same as for ``quoted``), and its answerability signal (the best
   question-sentence similarity) is recorded; a question with no eligible evidence has
   none (declined whatever the threshold).
3. Retrieval floors: ``Application.calibrate`` on tune (held out: test) recommends the
   dense and BM25 floors by the product's rule; the questions are answered again under
   those floors, and under the dense floor alone.
4. For each configuration, the threshold the product's rule chooses on tune (the
   highest share of unanswerable declined with at most ``--max-answerable-loss`` of the
   answerable declined) is judged on tune and test; so is the shipped default (the
   profile's ``default_answerability_threshold``), and the curve over a grid of
   thresholds.

The results keep question ids, labels, signals and statuses, never ClapNQ text. Writes
``benchmarks/results/default_answerability.json`` (``--out``), with the load average at
the start and end.

    python benchmarks/default_answerability.py [--chunking default|sentence-blocks|clapnq]
        [--max-answerable-loss 0.1] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from answers import CLAPNQ, CLAPNQ_CHUNKING, clapnq_rows, write_cases
from ragwright.application import (
    AnswerRequest,
    Application,
    CalibrateRequest,
    Dataset,
    EvidenceFilter,
    IngestRequest,
)
from ragwright.application.requests.evidence import ThresholdOverrides
from ragwright.pipeline.answerability import SignalCase, choose_threshold, judge_threshold
from ragwright.runtime import build_application
from ragwright.settings import load_settings
from ragwright.types import EvalCase

ROOT = Path(__file__).resolve().parents[1]
CHUNKINGS: dict[str, dict[str, object]] = {
    "default": {},
    "sentence-blocks": {"chunking": "sentence-blocks", "max_tokens": 256},
    "clapnq": CLAPNQ_CHUNKING,
}
EVIDENCE = EvidenceFilter(types=("note",))  # ClapNQ's passages are notes
GRID = [round(0.30 + 0.02 * n, 2) for n in range(21)]  # 0.30 .. 0.70


async def signals(
    app: Application, cases: Sequence[EvalCase], overrides: ThresholdOverrides, label: str
) -> list[dict[str, Any]]:
    """Each case's signal and status through the answer path (evidence style)."""
    rows = []
    started = time.perf_counter()
    for case in cases:
        outcome = (
            await app.answer(
                AnswerRequest(
                    case.question, evidence=EVIDENCE, style="evidence", thresholds=overrides
                )
            )
        ).to_dict()
        signal = outcome.get("answerability")
        rows.append(
            {
                "id": case.case_id,
                "answerable": not case.unsupported,
                "status": outcome["status"],
                "score": None if signal is None else round(signal["score"], 6),
                "threshold": outcome["options"]["answerability_threshold"],
                "source": outcome["options"]["answerability_source"],
            }
        )
    print(f"  {label}: {len(rows)} questions in {time.perf_counter() - started:.0f} s", flush=True)
    return rows


def cases_of(rows: Sequence[dict[str, Any]]) -> list[SignalCase]:
    return [SignalCase(r["id"], r["answerable"], r["score"]) for r in rows]


def figures(rows: Sequence[dict[str, Any]], threshold: float | None) -> dict[str, Any]:
    """Answered answerable and declined unanswerable at ``threshold``."""
    judged = judge_threshold(cases_of(rows), threshold)
    answered = (
        judged.answerable
        - judged.answerable_declined
        - sum(1 for r in rows if r["answerable"] and r["score"] is None)
    )
    return {
        "threshold": threshold,
        "answerable": judged.answerable,
        "answered_answerable": answered,
        "answered_rate": round(answered / judged.answerable, 4),
        "unanswerable": judged.unsupported,
        "declined_unanswerable": judged.unsupported_declined,
        "declined_rate": round(judged.unsupported_declined_rate, 4),
    }


def declined(score: float | None, threshold: float | None) -> bool:
    return score is None or (threshold is not None and score < threshold)


def by_split(rows: Sequence[dict[str, Any]], split_ids: dict[str, set[str]]) -> dict[str, list]:
    return {split: [r for r in rows if r["id"] in ids] for split, ids in split_ids.items()}


def judged(
    rows: dict[str, list[dict[str, Any]]], max_loss: float, shipped: float | None
) -> dict[str, Any]:
    """The tune-chosen threshold and the shipped default judged on both splits."""
    chosen = choose_threshold(cases_of(rows["tune"]), max_loss).threshold
    return {
        "chosen_on_tune": chosen,
        "at_chosen": {split: figures(r, chosen) for split, r in rows.items()},
        "at_shipped_default": {split: figures(r, shipped) for split, r in rows.items()},
        "no_threshold": {split: figures(r, None) for split, r in rows.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunking", choices=sorted(CHUNKINGS), default="default")
    parser.add_argument("--max-answerable-loss", type=float, default=0.1)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "default_answerability.json"
    )
    args = parser.parse_args()
    if not (CLAPNQ / "questions.jsonl").is_file():
        sys.exit(f"ClapNQ not found at {CLAPNQ} (see ../shared/data/README.md)")
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="ragwright-default-answerability-") as tmp:
        home = Path(tmp) / "home"
        app = build_application(load_settings(home=home, **CHUNKINGS[args.chunking]))
        ingested = app.ingest(IngestRequest(sources=(CLAPNQ / "markdown",)))
        print(f"clapnq ({args.chunking}): {ingested.documents} documents, {ingested.chunks} chunks")
        split_rows = {split: clapnq_rows(split) for split in ("tune", "test")}
        split_cases = {s: write_cases(r, Path(tmp), s) for s, r in split_rows.items()}
        split_ids = {s: {c.case_id for c in cases} for s, cases in split_cases.items()}
        every = [*split_cases["tune"], *split_cases["test"]]
        shipped, source = app.answerability_threshold()
        print(f"answerability threshold in force: {shipped} ({source})")

        calibration = app.calibrate(
            CalibrateRequest(
                Dataset(Path(tmp) / "tune.jsonl"),
                evidence=EVIDENCE,
                holdout=Dataset(Path(tmp) / "test.jsonl"),
                max_answerable_loss=args.max_answerable_loss,
            )
        ).to_dict()
        floors = calibration["recommended"]
        dense, sparse = floors["threshold_dense"], floors["threshold_sparse"]
        print(f"floors recommended on tune: dense {dense}, sparse {sparse}")

        configurations = {
            "no floors": ThresholdOverrides(),
            "dense floor": ThresholdOverrides(dense=dense),
            "dense and sparse floors": ThresholdOverrides(dense=dense, sparse=sparse),
        }
        results: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        for name, overrides in configurations.items():
            rows = asyncio.run(signals(app, every, overrides, name))
            raw[name] = rows
            split = by_split(rows, split_ids)
            results[name] = judged(split, args.max_answerable_loss, shipped)
            chosen = results[name]["chosen_on_tune"]
            print(
                f"  {name}: chosen on tune {chosen}; "
                + "; ".join(
                    f"{s} answered {f['answered_answerable']}/{f['answerable']}, declined "
                    f"{f['declined_unanswerable']}/{f['unanswerable']}"
                    for s, f in results[name]["at_chosen"].items()
                )
            )
        # Which decisions the floors changed, at each configuration's own chosen threshold.
        base = {r["id"]: r for r in raw["no floors"]}
        base_threshold = results["no floors"]["chosen_on_tune"]
        for name in ("dense floor", "dense and sparse floors"):
            threshold = results[name]["chosen_on_tune"]
            changed: dict[str, dict[str, int]] = {}
            for row in raw[name]:
                split = "tune" if row["id"] in split_ids["tune"] else "test"
                now = declined(row["score"], threshold)
                before = declined(base[row["id"]]["score"], base_threshold)
                if now != before:
                    kind = "answerable" if row["answerable"] else "unanswerable"
                    key = f"{kind}_{'declined' if now else 'answered'}_only_with_floors"
                    changed.setdefault(split, {}).setdefault(key, 0)
                    changed[split][key] += 1
            results[name]["changed_against_no_floors"] = changed
            results[name]["no_evidence"] = sum(1 for r in raw[name] if r["score"] is None)
        curve = {
            split: [figures(r, t) for t in GRID]
            for split, r in by_split(raw["no floors"], split_ids).items()
        }
        # What the shipped default did as the product applied it (statuses, not the
        # offline judgement): declined = any status but evidence_only.
        applied = {
            split: {
                "answerable": sum(1 for r in rows if r["answerable"]),
                "answered_answerable": sum(
                    1 for r in rows if r["answerable"] and r["status"] == "evidence_only"
                ),
                "unanswerable": sum(1 for r in rows if not r["answerable"]),
                "declined_unanswerable": sum(
                    1 for r in rows if not r["answerable"] and r["status"] != "evidence_only"
                ),
            }
            for split, rows in by_split(raw["no floors"], split_ids).items()
        }
    out = {
        "config": {
            "data": str(CLAPNQ),
            "chunking": args.chunking,
            "chunking_settings": CHUNKINGS[args.chunking],
            "documents": ingested.documents,
            "chunks": ingested.chunks,
            "split_rule": "tune when sha256(question id)[0] is even, else test",
            "max_answerable_loss": args.max_answerable_loss,
            "style": "evidence (the gate's decisions, no model)",
            "threshold_in_force": shipped,
            "threshold_source": source,
        },
        "calibration_on_tune": {
            key: calibration[key] for key in ("recommended", "held_out", "answerability")
        },
        "results": results,
        "applied_as_shipped": applied,
        "curve_no_floors": curve,
        "questions": raw,
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
