"""Tune hybrid fusion on SciFact's *train* split; report the test split once for the pick.

Grid: RRF k and the dense/BM25 weights. Each question is embedded once and its two
candidate lists are reused for every setting, so the grid costs fusion only. Needs the
collection built by ``scifact_quality.py``. Writes ``benchmarks/results/scifact_tune.json``.

    python benchmarks/scifact_tune.py --home DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path

from ragwright.adapters.datasets import load_beir_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.fusion import rrf
from ragwright.core.metrics import score_ranking
from ragwright.pipeline.retrieve import Retriever
from ragwright.types import EvalCase
from scifact_quality import DATA, LEXICAL, POLICY

KS = (10, 20, 40, 60, 100)
WEIGHTS = ((1.0, 1.0), (1.5, 1.0), (2.0, 1.0), (1.0, 1.5), (1.0, 2.0))


def legs(
    retriever: Retriever, cases: list[EvalCase], eligibility: Eligibility
) -> list[tuple[list[str], list[str]]]:
    """Per case: the dense and BM25 document rankings (first chunk of each document)."""
    out = []
    for case in cases:
        vectors = retriever.embed(case.question)
        pair = []
        for mode in ("dense", "sparse"):
            hits = retriever.search(vectors, eligibility, CallerScope(), k=300, mode=mode).hits  # type: ignore[arg-type]
            seen: list[str] = []
            for hit in hits:
                if hit.payload.document_id not in seen:
                    seen.append(hit.payload.document_id)
            pair.append(seen)
        out.append((pair[0], pair[1]))
    return out


def ndcg10(
    cases: list[EvalCase],
    rankings: list[tuple[list[str], list[str]]],
    k: int,
    weights: tuple[float, float],
) -> float:
    total = 0.0
    for case, (dense, sparse) in zip(cases, rankings, strict=True):
        fused = [doc for doc, _ in rrf([dense, sparse], k=k, weights=weights)][:10]
        labels = {r.document_id: r.grade for r in case.relevant}
        judgments = {**{doc: 0 for doc in fused}, **labels}
        total += score_ranking(fused, judgments, 10).ndcg
    return total / len(cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("RAGWRIGHT_HOME", ".ragwright"))
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "scifact_tune.json"
    )
    args = parser.parse_args()
    embedder = OnnxEmbedder()
    index = EdgeIndex(
        args.home / "index" / "scifact",
        contract_for(embedder.profile, POLICY.version, LEXICAL),
        create=False,
    )
    retriever = Retriever(index, embedder, Bm25Encoder(LEXICAL))
    eligibility = Eligibility(POLICY.version, ("note",), ("published",))
    train = load_beir_cases(DATA, "train")
    train_legs = legs(retriever, train, eligibility)
    grid = {
        f"k={k} w={w}": round(ndcg10(train, train_legs, k, w), 4)
        for k, w in itertools.product(KS, WEIGHTS)
    }
    best = max(grid, key=lambda name: grid[name])
    k_best = int(best.split()[0][2:])
    w_best = next(w for w in WEIGHTS if f"w={w}" in best)
    test = load_beir_cases(DATA, "test")
    test_ndcg = ndcg10(test, legs(retriever, test, eligibility), k_best, w_best)
    index.close()
    record = {
        "train_queries": len(train),
        "grid_train_ndcg@10": grid,
        "default_train_ndcg@10": grid["k=60 w=(1.0, 1.0)"],
        "best": best,
        "test_ndcg@10_for_best": round(test_ndcg, 4),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
