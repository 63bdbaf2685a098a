"""Ingestion throughput: the whole pipeline vs the raw embedder on the same texts.

For each corpus (SciFact's 5,183 abstracts; the OpenShift runbooks), in one process:

1. **embedder** - the bundled model embeds exactly the pipeline's embedding inputs, in
   length-sorted batches (the padding-free reference rate), then once in corpus order
   (batches padded to their longest member) to show what sorting saves;
2. **pipeline** - a full ``ingest`` into a fresh embedded index: load, chunk, plan,
   embed, staged upsert with read-back, switch, verify;
3. **re-ingest** - ``ragwright ingest`` on the unchanged input in a fresh process
   (start-up included), which must embed and write nothing.

Rates count real (non-padding) tokens. Prints JSON and writes
``benchmarks/results/ingest.json``. No assertions: figures, not tests.

    python benchmarks/ingest.py [--corpus scifact runbooks] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.pipeline.ingest import ingest, plan_documents
from ragwright.types import ChunkingPolicy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "scifact": (DATA / "scifact" / "corpus.jsonl", SourceDefaults("note", "published")),
    "runbooks": (
        DATA / "runbooks" / "openshift" / "alerts",
        SourceDefaults("runbook", "published"),
    ),
}
# Word budgets alone cannot keep chunks under MiniLM's 256 tokens (code, notation), and
# over-long inputs are refused, so both corpora use sentence-blocks with a token ceiling:
# whole abstracts where they fit for SciFact (as benchmarks/scifact_quality.py indexes
# it), 120-word windows for the runbooks.
POLICIES = {
    "scifact": ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256),
    "runbooks": ChunkingPolicy(kind="sentence-blocks", max_words=120, max_tokens=256),
}


def run_corpus(name: str, limit: int | None, corpus_order: bool) -> dict[str, object]:
    path, defaults = CORPORA[name]
    policy = POLICIES[name]
    lexical = LexicalProfile()
    if not path.exists():
        raise SystemExit(f"missing benchmark data: {path}")
    documents = load_sources([path], defaults)[:limit]
    embedder = OnnxEmbedder()
    plans = plan_documents(documents, policy, embedder)
    inputs = [p.embedding_input for plan in plans for p in plan.points]
    real_tokens = sum(embedder.count_tokens(inputs))

    started = time.perf_counter()
    embedder.embed_documents(inputs)  # sorts by length internally
    sorted_seconds = time.perf_counter() - started

    unsorted_seconds: float | None = None
    if corpus_order:
        started = time.perf_counter()
        for i in range(0, len(inputs), embedder.batch_size):  # corpus order: padded batches
            embedder.embed_documents(inputs[i : i + embedder.batch_size])
        unsorted_seconds = time.perf_counter() - started

    home = Path(tempfile.mkdtemp(prefix=f"ragwright-bench-{name}-"))
    index_path = home / "index" / "support-documents"
    started = time.perf_counter()
    with EdgeIndex(index_path, contract_for(embedder.profile, policy.version, lexical)) as index:
        documents = load_sources([path], defaults)[:limit]
        report = ingest(
            documents,
            policy=policy,
            embedder=embedder,
            sparse_encoder=Bm25Encoder(lexical),
            index=index,
        )
    pipeline_seconds = time.perf_counter() - started

    rerun: dict[str, object] = {}
    if limit is None:
        env = {
            **os.environ,
            "RAGWRIGHT_HOME": str(home),
            "RAGWRIGHT_CHUNKING": policy.kind,
            "RAGWRIGHT_MAX_WORDS": str(policy.max_words),
            "RAGWRIGHT_MAX_TOKENS": str(policy.max_tokens),
        }
        command = [sys.executable, "-m", "ragwright", "ingest", str(path), "--json"]
        command += [
            "--type",
            str(defaults.document_type),
            "--state",
            str(defaults.publication_state),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        rerun = {"seconds": round(time.perf_counter() - started, 2), **json.loads(done.stdout)}

    return {
        "corpus": name,
        "documents": report.documents,
        "chunks": report.chunks,
        "chunking_version": policy.version,
        "real_tokens": real_tokens,
        "embedder_sorted": {
            "seconds": round(sorted_seconds, 2),
            "chunks_per_s": round(len(inputs) / sorted_seconds, 1),
            "tokens_per_s": round(real_tokens / sorted_seconds),
        },
        "embedder_corpus_order": None
        if unsorted_seconds is None
        else {
            "seconds": round(unsorted_seconds, 2),
            "tokens_per_s": round(real_tokens / unsorted_seconds),
        },
        "pipeline": {
            "seconds": round(pipeline_seconds, 2),
            "chunks_per_s": round(report.chunks / pipeline_seconds, 1),
            "tokens_per_s": round(report.embedding_tokens / pipeline_seconds),
            "embedded": report.embedded,
            "verified": report.verified,
        },
        "ratio_pipeline_vs_embedder_sorted": round(sorted_seconds / pipeline_seconds, 3),
        "ratio_sorted_vs_corpus_order": None
        if unsorted_seconds is None
        else round(unsorted_seconds / sorted_seconds, 3),
        "reingest_unchanged_fresh_process": rerun,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", choices=sorted(CORPORA), default=sorted(CORPORA))
    parser.add_argument("--limit", type=int, default=None, help="only the first N documents")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "ingest.json"
    )
    parser.add_argument(
        "--skip-corpus-order", action="store_true", help="skip the padded, unsorted embedder pass"
    )
    args = parser.parse_args()
    results = [run_corpus(name, args.limit, not args.skip_corpus_order) for name in args.corpus]
    record = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    for result in results:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
