"""The project's BM25 analysis against the vector engine's own (qdrant-edge ``Bm25``).

Issue 25 looked for write-path work that could leave the interpreter: BM25 analysis and
encoding of a chunk is pure Python (tokens, stop words, Snowball stems, BLAKE2b term
indexes). qdrant-edge ships a BM25 model in its native code. Two questions:

* **Quality.** SciFact's 5,183 abstracts (title + text, whole, no chunking) are encoded
  by each analysis with the project's k1 and b and the corpus mean length, stored as
  ``bm25`` sparse vectors with the engine's IDF modifier in a fresh shard, and the 300
  test claims are run as BM25-only queries: nDCG@10, Recall@10 and MRR@10 (ir-measures).
* **Cost.** Microseconds a text (median of 5 rounds over 3,000 synthetic chunk texts
  shaped like ``benchmarks/ingest_scale.py``'s) for: the project's terms + vector; the
  engine's vector; the engine's term counts (``b=0`` and a huge ``k`` make each weight
  the term frequency) with the project's BM25 weights computed from them, which is what
  ingestion would need, since it records each point's term count; each analysis's count
  alone (the validation pass's).

Prints JSON and writes ``benchmarks/results/bm25_engine.json`` (or ``--out``); no text.

    python benchmarks/bm25_engine.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ir_measures
import qdrant_edge as qe
from ir_measures import RR, R, nDCG

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.lexical import count_terms, document_vector

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
RESULTS = ROOT / "benchmarks" / "results" / "bm25_engine.json"
VOCABULARY = tuple(f"term{n:04d}" for n in range(5000))
COUNTING_K = 1e9  # with b = 0, weight = tf (k + 1) / (tf + k): the term frequency


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    encoder = Bm25Encoder()
    k1, b = encoder.profile.k1, encoder.profile.b
    result: dict[str, Any] = {
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "k1": k1,
        "b": b,
        "quality_scifact_test": quality(encoder),
        "us_per_text": cost(encoder),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))


def _engine(k: float, b: float, avg_len: float) -> Any:
    return qe.Bm25(qe.Bm25Config(k=k, b=b, avg_len=avg_len, language="english"))


def quality(encoder: Bm25Encoder) -> dict[str, Any]:
    documents = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    texts = [(d["_id"], (d["title"] + "\n\n" + d["text"]).strip()) for d in documents]
    claims = {
        (q := json.loads(line))["_id"]: q["text"]
        for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8")
    }
    rows = [
        line.rstrip("\n").split("\t")
        for line in (SCIFACT / "qrels" / "test.tsv").open(encoding="utf-8")
    ]
    qrels = [ir_measures.Qrel(q, d, int(s)) for q, d, s in rows[1:]]
    tested = sorted({q.query_id for q in qrels})
    k1, b = encoder.profile.k1, encoder.profile.b

    terms = [(i, encoder.terms(t)) for i, t in texts]
    mean = sum(len(t) for _, t in terms) / len(terms)
    project = [(i, document_vector(t, encoder.profile, mean)) for i, t in terms]
    counting = _engine(COUNTING_K, 0.0, 100.0)
    engine_mean = sum(sum(counting.embed_document(t).values) for _, t in texts) / len(texts)
    engine = _engine(k1, b, engine_mean)
    native = [(i, engine.embed_document(t)) for i, t in texts]

    def as_engine(vector: Any) -> Any:
        if isinstance(vector, qe.SparseVector):
            return vector
        return qe.SparseVector(list(vector.indices), list(vector.values))

    figures = {}
    for name, vectors, encode_query, avgdl in (
        ("project", project, encoder.encode_query, mean),
        ("engine", native, engine.embed_query, engine_mean),
    ):
        run = []
        with tempfile.TemporaryDirectory(prefix="ragwright-bm25-") as workdir:
            config = qe.EdgeConfig(
                vectors={},
                sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            )
            shard = qe.EdgeShard.create(workdir, config)
            points = [qe.Point(int(i), {"bm25": as_engine(v)}, {}) for i, v in vectors]
            for start in range(0, len(points), 512):
                shard.update(qe.UpdateOperation.upsert_points(points[start : start + 512]))
            for query_id in tested:
                request = qe.QueryRequest(
                    query=qe.Query.Nearest(as_engine(encode_query(claims[query_id])), using="bm25"),
                    limit=10,
                    with_payload=False,
                    with_vector=False,
                )
                run += [
                    ir_measures.ScoredDoc(query_id, str(hit.id), hit.score)
                    for hit in shard.query(request)
                ]
            shard.close()
        measured = ir_measures.calc_aggregate([nDCG @ 10, R @ 10, RR @ 10], qrels, run)
        figures[name] = {
            "mean_terms": round(avgdl, 1),
            **{str(measure): round(value, 4) for measure, value in measured.items()},
        }
    return {"documents": len(texts), "claims": len(tested), **figures}


def cost(encoder: Bm25Encoder) -> dict[str, float]:
    texts = []
    for number in range(3000):
        draw = random.Random(number)
        words = " ".join(draw.choices(VOCABULARY, k=draw.randint(60, 120)))
        texts.append(f"Synthetic document {number}\n\nBody\n\n{words}.")
    mean = 90.0
    k1, b = encoder.profile.k1, encoder.profile.b
    engine, counting = _engine(k1, b, mean), _engine(COUNTING_K, 0.0, 100.0)

    def project() -> None:
        for text in texts:
            terms = encoder.terms(text)
            document_vector(terms, encoder.profile, mean)

    def engine_vector() -> None:
        for text in texts:
            engine.embed_document(text)

    def engine_counts_project_weights() -> None:
        scale = k1 + 1.0
        for text in texts:
            found = counting.embed_document(text)
            frequencies = [round(x) for x in found.values]
            norm = k1 * (1.0 - b + b * sum(frequencies) / mean)
            [tf * scale / (tf + norm) for tf in frequencies]

    def project_count() -> None:
        for text in texts:
            count_terms(text)

    def engine_count() -> None:
        for text in texts:
            sum(counting.embed_document(text).values)

    cases: dict[str, Callable[[], None]] = {
        "project_terms_and_vector": project,
        "engine_vector": engine_vector,
        "engine_counts_with_project_weights": engine_counts_project_weights,
        "project_count": project_count,
        "engine_count": engine_count,
    }
    for case in cases.values():  # warm the caches (stems, term indexes)
        case()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(5):
        for name, case in cases.items():
            started = time.process_time()
            case()
            samples[name].append((time.process_time() - started) / len(texts) * 1e6)
    return {name: round(statistics.median(values), 1) for name, values in samples.items()}


if __name__ == "__main__":
    main()
