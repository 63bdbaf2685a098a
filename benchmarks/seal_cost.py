"""What sealing an appendable segment costs a point, by payload index (issue 25).

Fills a fresh qdrant-edge shard (the project's shard configuration, the hashing
profile's 64-dimension vectors) with synthetic chunk payloads shaped like the ones
ingestion writes, with 0 to 6 of the project's keyword payload indexes, and times the
one ``optimize()`` call that seals it (CPU seconds of this process: the engine holds the
GIL while it seals). Each configuration runs in a fresh child, ``--rounds`` times, the
configurations alternating; the median is reported. A second series repeats it with short
texts, to separate what the payload's size costs from what its number of fields costs.

Prints JSON and writes ``benchmarks/results/seal_cost.json`` (or ``--out``).

    python benchmarks/seal_cost.py [--points 20000] [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "seal_cost.json"
WORDS = ("queue", "drain", "deadline", "shutdown", "writer", "certificate", "rotate", "lease")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        indexes, words = args.child
        print(json.dumps(seal_once(args.points, indexes, words)))
        return
    configurations = [(n, 150) for n in (0, 1, 3, 6)] + [(n, 10) for n in (0, 6)]
    samples: dict[tuple[int, int], list[float]] = {c: [] for c in configurations}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for indexes, words in configurations:
            command = [sys.executable, __file__, "--points", str(args.points)]
            done = subprocess.run(
                [*command, "--child", str(indexes), str(words)],
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            )
            samples[(indexes, words)].append(json.loads(done.stdout)["us_per_point"])
    rows = [
        {
            "keyword_indexes": indexes,
            "text_words": words,
            "seal_us_per_point": round(statistics.median(values), 1),
            "samples": values,
        }
        for (indexes, words), values in samples.items()
    ]
    long_texts = {
        indexes: statistics.median(values)
        for (indexes, words), values in samples.items()
        if words == 150
    }
    slope = (long_texts[6] - long_texts[0]) / 6
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "points": args.points,
        "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
        "us_per_point_per_keyword_index": round(slope, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))


def seal_once(points: int, indexes: int, words: int) -> dict[str, Any]:
    import qdrant_edge as qe

    from ragwright.adapters.edge import engine
    from ragwright.core.contracts import contract_for
    from ragwright.core.points import KEYWORD_INDEX_FIELDS
    from ragwright.testing import HASHING_PROFILE

    # A threshold the points pass, so the one optimize() seals them all.
    engine.SEAL_POINTS = max(1, points // 5)
    contract = contract_for(HASHING_PROFILE, "seal-cost-v1")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="ragwright-seal-") as workdir:
        shard_path = Path(workdir) / "shard"
        shard_path.mkdir()
        shard = qe.EdgeShard.create(str(shard_path), engine.edge_config(contract))
        for field in KEYWORD_INDEX_FIELDS[:indexes]:
            params = qe.KeywordIndexParams(memory=qe.Memory.Cold)
            shard.update(qe.UpdateOperation.create_field_index(field, params))
        for start in range(0, points, 256):
            batch = [
                qe.Point(
                    uuid.UUID(int=rng.getrandbits(128)),
                    {contract.vector_name: [rng.random() for _ in range(contract.dimensions)]},
                    _payload(start + i, words, rng),
                )
                for i in range(min(256, points - start))
            ]
            shard.update(qe.UpdateOperation.upsert_points(batch))
        started = time.process_time()
        sealed = shard.optimize()
        seconds = time.process_time() - started
        shard.close()
    if not sealed:
        raise SystemExit("the segment was not sealed: raise --points")
    return {"us_per_point": round(seconds / points * 1e6, 2)}


def _payload(i: int, words: int, rng: random.Random) -> dict[str, Any]:
    """A chunk payload with the fields and value types ingestion writes."""
    document = f"doc-{i // 3:06d}"
    return {
        "document_id": document,
        "chunk_id": f"{document}#{i % 3}",
        "chunk_point_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "chunking_version": "seal-cost-v1",
        "section_id": "s1",
        "title": "Draining a queue at shutdown",
        "heading": "Steps",
        "text": " ".join(rng.choice(WORDS) for _ in range(words)),
        "document_type": "runbook",
        "publication_state": "published",
        "revision": "r1",
        "tenant": "acme",
        "content_hash": "sha256:" + "a" * 64,
        "source_digest": "sha256:" + "b" * 64,
        "document_digest": "sha256:" + "c" * 64,
        "chunk_count": 3,
        "positions": {"section_index": 1, "paragraphs": [0, 1, 2]},
        "index_state": "live",
        "lexical_terms": words,
    }


if __name__ == "__main__":
    main()
