"""Calibrate the support check's thresholds on the labelled set; report a held-out split.

``samples/eval/support_cases.jsonl`` pairs answers written for this project with the
sample-corpus chunks they cite (looked up by id) and a human label: does the cited text
support the answer? The decision measured is the one the answer use case acts on: an
answer is *withheld* (status ``unsupported``) when ``check_support(...).supported`` is
false. "Withheld" is the positive class; precision and recall are of "unsupported".

Split: fixed and deterministic, the same rule as ``answers.py`` uses for ClapNQ — a case
is ``tune`` when the first byte of SHA-256 of its id (UTF-8) is even, else ``test``.
Adding cases never moves an existing case between splits.

Sweep: ``min_shared`` in {1, 2, 3} and ``min_coverage`` from 0.10 to 0.70 in steps of
0.05 (``min_echo`` is left alone: no case here carries text addressed to the model; the
injection benchmark covers it). The pair chosen is the one with the highest *balanced
accuracy* on ``tune`` — the mean of recall on unsupported answers and recall on supported
ones. Balanced accuracy rather than F1 of "unsupported": F1 ignores true negatives, so it
does not count a correct answer wrongly withheld as a cost unless it also lowers
precision, and it depends on the share of unsupported cases in a hand-written set, which
says nothing about the share in real traffic; balanced accuracy weighs the two errors
(withholding a supported answer, passing an unsupported one) equally whatever the class
mix. Ties go to the hand-chosen defaults (2, 0.3) when they are among the best, else to
the best pair nearest to them (fewest ``min_shared`` steps, then smallest coverage
difference), so the defaults change only when the tune split says they are worse.

The chosen pair and the hand-chosen defaults are then reported on both splits (``tune``
is in-sample for the choice, ``test`` is held out) and on all cases. The rule for
``check_support``'s defaults: adopt the chosen pair only when its held-out balanced
accuracy is not worse than the hand-chosen defaults' (``held_out_not_worse``). Writes
``benchmarks/results/support_check.json`` and prints a table.

    python benchmarks/support_check.py
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragwright.adapters.sources import load_sources
from ragwright.core.chunking import build_chunks
from ragwright.core.support import check_support
from ragwright.types import ChunkingPolicy

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "samples" / "eval" / "support_cases.jsonl"
OUT = Path(__file__).parent / "results" / "support_check.json"
HAND_DEFAULTS = (2, 0.3)
MIN_SHARED = (1, 2, 3)
MIN_COVERAGE = tuple(round(0.1 + 0.05 * step, 2) for step in range(13))


@dataclass(frozen=True, slots=True)
class Case:
    """One labelled answer with the (label, chunk text) pairs it cites."""

    id: str
    answer: str
    cited: tuple[tuple[str, str], ...]
    supported: bool


def split_of(case_id: str) -> str:
    """``tune`` when the first byte of SHA-256 of ``case_id`` is even, else ``test``."""
    return "tune" if hashlib.sha256(case_id.encode()).digest()[0] % 2 == 0 else "test"


def load_cases() -> list[Case]:
    """The labelled cases with the sample-corpus chunk text they cite."""
    chunks = {
        (c.document_id, c.chunk_id): c.text.split("\n\n", 1)[1]
        for d in load_sources([ROOT / "samples" / "corpus"])
        for c in build_chunks(d, ChunkingPolicy())
    }
    cases = []
    for line in CASES.read_text().splitlines():
        raw = json.loads(line)
        cited = tuple(
            (f"S{i + 1}", chunks[(c["document_id"], c["chunk_id"])])
            for i, c in enumerate(raw["cited"])
        )
        cases.append(Case(raw["id"], raw["answer"], cited, raw["supported"]))
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{CASES.name}: case ids must be unique")
    return cases


def withheld(case: Case, min_shared: int, min_coverage: float) -> bool:
    """Whether the answer use case would withhold ``case``'s answer at these thresholds."""
    report = check_support(
        case.answer, case.cited, min_shared=min_shared, min_coverage=min_coverage
    )
    return not report.supported


def score(cases: Sequence[Case], min_shared: int, min_coverage: float) -> dict[str, Any]:
    """Confusion counts, precision and recall of "unsupported", and balanced accuracy."""
    tp = fp = fn = tn = 0
    for case in cases:
        flag = withheld(case, min_shared, min_coverage)
        if flag and not case.supported:
            tp += 1
        elif flag:
            fp += 1
        elif not case.supported:
            fn += 1
        else:
            tn += 1
    recall = tp / (tp + fn) if tp + fn else None
    specificity = tn / (tn + fp) if tn + fp else None
    balanced = (
        (recall + specificity) / 2 if recall is not None and specificity is not None else None
    )
    return {
        "cases": len(cases),
        "withheld_unsupported": tp,
        "withheld_supported": fp,
        "passed_unsupported": fn,
        "passed_supported": tn,
        "precision": _round(tp / (tp + fp) if tp + fp else None),
        "recall": _round(recall),
        "specificity": _round(specificity),
        "balanced_accuracy": _round(balanced),
    }


def choose(sweep: Sequence[dict[str, Any]]) -> tuple[int, float]:
    """The pair with the highest tune balanced accuracy; ties as the module docstring says."""
    best = max(row["tune"]["balanced_accuracy"] for row in sweep)
    tied = [
        (row["min_shared"], row["min_coverage"])
        for row in sweep
        if row["tune"]["balanced_accuracy"] == best
    ]
    return min(
        tied,
        key=lambda pair: (
            abs(pair[0] - HAND_DEFAULTS[0]),
            round(abs(pair[1] - HAND_DEFAULTS[1]), 2),
            pair,
        ),
    )


def score_of(sweep: Sequence[dict[str, Any]], pair: tuple[int, float]) -> float:
    """The tune balanced accuracy of ``pair`` in ``sweep``."""
    return next(
        float(row["tune"]["balanced_accuracy"])
        for row in sweep
        if (row["min_shared"], row["min_coverage"]) == pair
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def main() -> None:
    cases = load_cases()
    splits = {
        "tune": [c for c in cases if split_of(c.id) == "tune"],
        "test": [c for c in cases if split_of(c.id) == "test"],
        "all": cases,
    }
    sweep: list[dict[str, Any]] = [
        {
            "min_shared": shared,
            "min_coverage": coverage,
            "tune": score(splits["tune"], shared, coverage),
        }
        for shared in MIN_SHARED
        for coverage in MIN_COVERAGE
    ]
    chosen = choose(sweep)
    best = score_of(sweep, chosen)
    settings = {"chosen": chosen, "hand_defaults": HAND_DEFAULTS}
    reported = {
        name: {split: score(subset, *pair) for split, subset in splits.items()}
        for name, pair in settings.items()
    }
    parameters = inspect.signature(check_support).parameters
    current = (parameters["min_shared"].default, parameters["min_coverage"].default)
    record = {
        "split_rule": "tune when the first byte of SHA-256 of the case id is even, else test",
        "objective": "balanced accuracy on tune (ties: hand defaults, then nearest to them)",
        "positive_class": "withheld (check_support(...).supported is false)",
        "labels": {
            split: {
                "supported": sum(c.supported for c in subset),
                "unsupported": sum(not c.supported for c in subset),
            }
            for split, subset in splits.items()
        },
        "chosen": {"min_shared": chosen[0], "min_coverage": chosen[1]},
        "tied_on_tune": [
            [row["min_shared"], row["min_coverage"]]
            for row in sweep
            if row["tune"]["balanced_accuracy"] == best
        ],
        "held_out_not_worse": reported["chosen"]["test"]["balanced_accuracy"]
        >= reported["hand_defaults"]["test"]["balanced_accuracy"],
        "hand_defaults": {"min_shared": HAND_DEFAULTS[0], "min_coverage": HAND_DEFAULTS[1]},
        "current_defaults": {"min_shared": current[0], "min_coverage": current[1]},
        "reported": reported,
        "sweep": sweep,
        "rows": [
            {
                "id": c.id,
                "split": split_of(c.id),
                "labelled_unsupported": not c.supported,
                "withheld_chosen": withheld(c, *chosen),
                "withheld_hand_defaults": withheld(c, *HAND_DEFAULTS),
            }
            for c in cases
        ],
    }
    OUT.write_text(json.dumps(record, indent=2) + "\n")
    _print_table(record, settings)


def _print_table(record: dict[str, Any], settings: dict[str, tuple[int, float]]) -> None:
    labels = record["labels"]
    print(
        "labels (supported/unsupported): "
        + ", ".join(
            f"{split} {counts['supported']}/{counts['unsupported']}"
            for split, counts in labels.items()
        )
    )
    header = f"{'setting':<26}{'split':<6}{'cases':>6}{'TP':>4}{'FP':>4}{'FN':>4}{'TN':>4}"
    print(header + f"{'precision':>10}{'recall':>8}{'spec.':>7}{'bal.acc':>8}")
    for name, pair in settings.items():
        for split, row in record["reported"][name].items():
            print(
                f"{name + f' ({pair[0]}, {pair[1]})':<26}{split:<6}{row['cases']:>6}"
                f"{row['withheld_unsupported']:>4}{row['withheld_supported']:>4}"
                f"{row['passed_unsupported']:>4}{row['passed_supported']:>4}"
                f"{row['precision']!s:>10}{row['recall']!s:>8}{row['specificity']!s:>7}"
                f"{row['balanced_accuracy']!s:>8}"
            )
    current = record["current_defaults"]
    print(
        f"{len(record['tied_on_tune'])} pairs tie on tune; held-out balanced accuracy of the"
        f" chosen pair not worse than the hand defaults: {record['held_out_not_worse']}"
    )
    print(f"check_support defaults now: ({current['min_shared']}, {current['min_coverage']})")


if __name__ == "__main__":
    main()
