"""SciFact retrieval quality: nDCG@10, Recall@100 and MRR@10 for dense, sparse and hybrid.

Document-level BEIR evaluation through the real pipeline (embedded Qdrant engine,
bundled MiniLM, BM25 sparse vectors, RRF), on the test split unless ``--split train``
(tune on train; report test once per setting). Ingests the corpus into
``$RAGWRIGHT_HOME/index/scifact`` first when that collection is empty.

References (published; see ../shared/data/README.md): BM25 0.665-0.676,
all-MiniLM-L6-v2 0.645, bge-small 0.713; a plain reference run on this machine measured
BM25 0.676, dense 0.647, hybrid 0.714.

    python benchmarks/scifact_quality.py [--split test] [--modes dense sparse hybrid]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragwright.adapters.datasets import load_beir_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.contracts import contract_for
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.lexical import LexicalProfile
from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus, run_evaluation
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import Embedder
from ragwright.types import ChunkingPolicy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
# Whole abstracts where they fit MiniLM's 256 tokens (title + text), split at sentence
# ends where they do not: no truncation, unlike the reference run.
POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256)
# avgdl is the collection's own mean chunk length, computed at ingestion.
LEXICAL = LexicalProfile(k1=0.9, b=0.4)
REFERENCE = {"dense": 0.647, "sparse": 0.676, "hybrid": 0.714}
TARGET = {"dense": "within 0.02 of 0.645", "sparse": ">= 0.66", "hybrid": ">= 0.71"}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--split", default="test", choices=("test", "train"))
    parser.add_argument("--modes", nargs="+", default=["dense", "sparse", "hybrid"])
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("RAGWRIGHT_HOME", ".ragwright"))
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "scifact_quality.json"
    )
    args = parser.parse_args()
    if not DATA.exists():
        raise SystemExit(f"missing benchmark data: {DATA}")

    embedder = OnnxEmbedder()
    record = evaluate_scifact(
        embedder, POLICY, args.home / "index" / "scifact", args.split, args.modes
    )
    results = record["results"]
    for mode, figures in results.items():
        figures["reference_ndcg@10_this_machine"] = REFERENCE.get(mode)
        figures["target"] = TARGET.get(mode)
        print(mode, json.dumps(figures))
    record_out = {"split": args.split, **record}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record_out, indent=2))
    print(json.dumps(record_out, indent=2))


def evaluate_scifact(
    embedder: Embedder,
    policy: ChunkingPolicy,
    index_path: Path,
    split: str = "test",
    modes: Sequence[str] = ("dense", "sparse", "hybrid"),
) -> dict[str, Any]:
    """SciFact figures for one embedder: ingests the corpus into ``index_path`` first when
    that collection is empty (``ingest_seconds`` is then the time it took, else None)."""
    encoder = Bm25Encoder(LEXICAL)
    index = EdgeIndex(index_path, contract_for(embedder.profile, policy.version, LEXICAL))
    ingest_seconds = None
    if index.count() == 0:
        started = time.perf_counter()
        documents = load_sources([DATA / "corpus.jsonl"], SourceDefaults("note", "published"))
        ingest(documents, policy=policy, embedder=embedder, sparse_encoder=encoder, index=index)
        ingest_seconds = round(time.perf_counter() - started, 1)

    eligibility = Eligibility(policy.version, ("note",), ("published",))
    corpus = eligible_corpus(index, eligibility, CallerScope())
    cases = load_beir_cases(DATA, split)
    retriever = Retriever(index, embedder, encoder, candidates=300)
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        started = time.perf_counter()
        record = run_evaluation(
            cases,
            retriever,
            EvalConfig(eligibility, mode=mode, ks=(10, 100)),  # type: ignore[arg-type]
            corpus,
            run_config={"dataset": f"scifact/{split}"},
        )
        k10, k100 = record.summary["K"]["10"], record.summary["K"]["100"]
        results[mode] = {
            "ndcg@10": round(k10["ndcg"], 4),
            "recall@100": round(k100["recall"], 4),
            "mrr@10": round(k10["reciprocal_rank"], 4),
            "queries": record.summary["cases"],
            "seconds": round(time.perf_counter() - started, 1),
        }
    index.close()
    return {
        "chunking_version": policy.version,
        "lexical_profile": LEXICAL.profile_id,
        "embedding_profile": embedder.profile.profile_id,
        "eligible_chunks": len(corpus.chunks),
        "ingest_seconds": ingest_seconds,
        "results": results,
    }


if __name__ == "__main__":
    main()
