"""Query latency per mode, split into embed / search / validate / fuse (milliseconds).

Two settings, each through the real ``Retriever`` on the embedded Qdrant engine:

* **scifact** — the SciFact collection built by ``scifact_quality.py`` (skipped when it
  is absent), 300 test questions, question embedding included and reported separately;
* **synthetic-100k** — 100,000 synthetic chunks (random unit vectors, Zipf-distributed
  BM25 terms, a quarter of them published runbooks), queried with the default
  eligibility filter; query vectors are precomputed, so figures exclude embedding.

Prints and writes ``benchmarks/results/query_latency.json``. Target: hybrid p50
<= 30 ms excluding the query embedding.

    python benchmarks/query_latency.py [--points 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from ragwright.adapters.datasets import load_beir_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.lexical import LexicalProfile, document_vector, query_vector
from ragwright.pipeline.retrieve import QueryVectors, Retriever
from ragwright.types import ChunkingPolicy, IndexPoint

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
SCIFACT_POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256)
SCIFACT_LEXICAL = LexicalProfile(k1=0.9, b=0.4)
SYNTHETIC_VERSION = "section-paragraphs-80w-overlap1-v1"
STAGES = ("embed", "search", "validate", "fuse")


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
    }


def measure(
    retriever: Retriever, queries: list[str | QueryVectors], eligibility: Eligibility
) -> dict[str, object]:
    out: dict[str, object] = {}
    for mode in ("dense", "sparse", "hybrid"):
        stages: dict[str, list[float]] = {s: [] for s in STAGES}
        totals: list[float] = []
        for query in queries:
            result = retriever.search(query, eligibility, CallerScope(), k=10, mode=mode)  # type: ignore[arg-type]
            for stage in STAGES:
                stages[stage].append(result.timings_ms.get(stage, 0.0))
            totals.append(sum(v for s, v in result.timings_ms.items() if s != "embed"))
        out[mode] = {
            "total_excluding_embed_ms": percentiles(totals),
            **{f"{s}_ms": percentiles(v) for s, v in stages.items()},
        }
        print(mode, json.dumps(out[mode]))
    return out


def synthetic_payload(i: int, rng: random.Random) -> dict[str, object]:
    published_runbook = i % 4 == 0
    return {
        "document_id": f"doc-{i // 4}",
        "chunk_id": f"s/p{i % 4}",
        "chunk_point_id": str(uuid.UUID(int=i)),
        "chunking_version": SYNTHETIC_VERSION,
        "section_id": "s",
        "title": f"Document {i // 4}",
        "heading": "Section",
        "text": f"Section\n\nSynthetic chunk {i}.",
        "document_type": "runbook" if published_runbook or rng.random() < 0.5 else "note",
        "publication_state": "published" if published_runbook else "draft",
        "revision": "r1",
        "content_hash": f"h{i}",
        "index_state": "live",
        "document_digest": f"d{i // 4}",
        "positions": {"section_index": 0, "paragraphs": [i % 4]},
    }


def synthetic(points: int, queries: int) -> dict[str, object]:
    rng = random.Random(13)
    np_rng = np.random.default_rng(13)
    vocabulary = [f"term{i}" for i in range(30_000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    lexical = LexicalProfile()
    path = Path(tempfile.mkdtemp(prefix="ragwright-latency-"))
    index = EdgeIndex(path, contract_for(MINILM_PROFILE, SYNTHETIC_VERSION, lexical))
    started = time.perf_counter()
    for start in range(0, points, 5000):
        count = min(5000, points - start)
        vectors = np_rng.standard_normal((count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = []
        for offset in range(count):
            i = start + offset
            terms = rng.choices(vocabulary, weights=weights, k=60)
            batch.append(
                IndexPoint(
                    uuid.UUID(int=i + 1),
                    vectors[offset].tolist(),
                    synthetic_payload(i, rng),
                    document_vector(terms, lexical, avgdl=60.0),
                )
            )
        index.upsert(batch)
    load_seconds = time.perf_counter() - started

    class Precomputed:
        """Retriever needs an embedder and encoder only for their profiles here."""

        profile = MINILM_PROFILE
        counts_tokens = False

    retriever = Retriever(index, Precomputed(), Bm25Encoder(lexical))  # type: ignore[arg-type]
    query_vectors: list[str | QueryVectors] = []
    for _ in range(queries):
        dense = np_rng.standard_normal(384).astype(np.float32)
        dense /= np.linalg.norm(dense)
        terms = rng.choices(vocabulary, weights=weights, k=6)
        query_vectors.append(QueryVectors("synthetic", tuple(dense.tolist()), query_vector(terms)))
    eligibility = Eligibility(SYNTHETIC_VERSION)
    result = {
        "points": points,
        "eligible_fraction": 0.25,
        "load_seconds": round(load_seconds, 1),
        "modes": measure(retriever, query_vectors, eligibility),
    }
    index.close()
    return result


def scifact(home: Path, queries: int) -> dict[str, object] | None:
    path = home / "index" / "scifact"
    if not (path / "contract.json").exists():
        print("scifact collection absent; run benchmarks/scifact_quality.py first")
        return None
    embedder = OnnxEmbedder()
    index = EdgeIndex(path, contract_for(embedder.profile, SCIFACT_POLICY.version, SCIFACT_LEXICAL))
    retriever = Retriever(index, embedder, Bm25Encoder(SCIFACT_LEXICAL))
    questions: list[str | QueryVectors] = [c.question for c in load_beir_cases(DATA, "test")][
        :queries
    ]
    eligibility = Eligibility(SCIFACT_POLICY.version, ("note",), ("published",))
    result = {
        "points": index.count(),
        "queries": len(questions),
        "modes": measure(retriever, questions, eligibility),
    }
    index.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("RAGWRIGHT_HOME", ".ragwright"))
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "query_latency.json"
    )
    args = parser.parse_args()
    record = {
        "cpus": os.cpu_count(),
        "scifact": scifact(args.home, 300),
        "synthetic": synthetic(args.points, args.queries),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
