"""Precision and recall of the support check on the labelled set.

``samples/eval/support_cases.jsonl`` pairs answers written for this project with the
sample-corpus chunks they cite (looked up by id) and a human label: does the cited text
support the answer? "Flagged" is the positive class (the check says the citation does
not support the claim). Writes ``benchmarks/results/support_check.json``.

    python benchmarks/support_check.py
"""

from __future__ import annotations

import json
from pathlib import Path

from ragwright.adapters.sources import load_sources
from ragwright.core.chunking import build_chunks
from ragwright.core.support import check_support
from ragwright.types import ChunkingPolicy

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    chunks = {
        (c.document_id, c.chunk_id): c.text.split("\n\n", 1)[1]
        for d in load_sources([ROOT / "samples" / "corpus"])
        for c in build_chunks(d, ChunkingPolicy())
    }
    cases = [
        json.loads(line)
        for line in (ROOT / "samples" / "eval" / "support_cases.jsonl").read_text().splitlines()
    ]
    outcomes = {"true_flag": 0, "false_flag": 0, "missed": 0, "passed": 0}
    rows = []
    for case in cases:
        cited = [
            (f"S{i + 1}", chunks[(c["document_id"], c["chunk_id"])])
            for i, c in enumerate(case["cited"])
        ]
        flagged = check_support(case["answer"], cited).flagged
        unsupported = not case["supported"]
        key = {(True, True): "true_flag", (True, False): "false_flag", (False, True): "missed"}.get(
            (flagged, unsupported), "passed"
        )
        outcomes[key] += 1
        rows.append({"id": case["id"], "flagged": flagged, "labelled_unsupported": unsupported})
    flagged_total = outcomes["true_flag"] + outcomes["false_flag"]
    unsupported_total = outcomes["true_flag"] + outcomes["missed"]
    record = {
        "cases": len(cases),
        **outcomes,
        "precision": round(outcomes["true_flag"] / flagged_total, 3) if flagged_total else None,
        "recall": round(outcomes["true_flag"] / unsupported_total, 3)
        if unsupported_total
        else None,
        "rows": rows,
    }
    out = Path(__file__).parent / "results" / "support_check.json"
    out.write_text(json.dumps(record, indent=2))
    print(json.dumps({k: v for k, v in record.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()
