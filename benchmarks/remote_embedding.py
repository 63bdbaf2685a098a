"""Remote embedding throughput against the number of batches in flight.

A fixed corpus (the first ``--documents`` SciFact abstracts) goes through the
OpenAI-compatible embedder exactly as ``runtime.open_embedder`` builds it (retry →
capacity gate → provider, ``RAGWRIGHT_EMBEDDING_IN_FLIGHT`` = N) against a local server
whose latency is fixed: the scripted embeddings server of the tests
(``tests/scripted_openai.py``) holds every request ``--latency`` seconds and works on at
most ``--server-capacity`` requests at once, as a real server's slots do, so the rate
scales with N until the server is the limit. Two levels, for N = 1, 2, 4, 8, 16:

1. **pipeline** - ``pipeline.ingest`` into a fresh embedded index (validation pass,
   then batches of 128 documents whose chunks embed in length-sorted batches of
   ``--batch-size``, up to N calls at once, written, read back, switched and verified);
   chunking ``sentence-blocks`` of at most 200 words (a remote model counts no tokens
   here, so no token ceiling);
2. **embedder** - the same chunk inputs cut as the pipeline cuts them, up to N
   ``embed_documents`` calls outstanding over the whole corpus at once (no document
   batches, no writes): the transport's own ceiling.

For each N: seconds (median of ``--repeats``), chunks/s, the ratio to N = 1, the most
requests the server held at once and worked on at once, and the share of the server's
limit (``capacity * batch / latency`` chunks/s) reached. The same documents through
the whole pipeline with the bundled ONNX model (one batch at a time; chunking capped at
256 MiniLM tokens too) for comparison.

The scripted server's vectors are the hashing test embedder's (64 dimensions): this
measures the transport and the concurrency, not a model. It runs in this process on its
own threads.

3. **llama.cpp** - a real OpenAI-compatible server: llama.cpp's, from the ``xllamacpp``
   wheel, serving the project's only GGUF (its chat model, Qwen2.5-Coder-0.5B-Instruct
   Q4_K_M, mean-pooled: it exercises the path, it is not a retrieval-quality embedder;
   ``tests/llama_embeddings.py``) with N slots (``--parallel``, one unified KV stream)
   and N batches in flight, N = 1, 2, 4, on 1 and on 2 CPU threads, through
   ``pipeline.ingest`` for the first ``--llama-documents`` abstracts in requests of
   ``--llama-batch-size`` chunks. Such a server is limited by the CPU it computes on,
   not by waiting: the process's CPU time over the wall time (``cpu_cores_busy``, the
   server's threads and the pipeline's together) says how much of the machine it used.
   Each run is one pass (a warm-up request first); the same documents through the
   bundled ONNX model beside it.

The machine's 1-minute load average before and after is recorded: other work on the
machine slows the CPU-bound figures (ONNX, llama.cpp) far more than the scripted ones
(waiting). Prints JSON and writes ``benchmarks/results/remote_embedding.json``. No
assertions.

    python benchmarks/remote_embedding.py [--documents 800] [--latency 0.25]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from ragwright.adapters.chatmodels.local import GGUF_SHA256, assemble_model
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.pipeline.ingest import ingest, plan_documents
from ragwright.protocols import Embedder
from ragwright.runtime import open_embedder
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy, SourceDocument

ROOT = Path(__file__).resolve().parents[1]
# The scripted server lives with the tests (they use it too).
sys.path.insert(0, str(ROOT))
from tests.llama_embeddings import DIMENSIONS, MODEL_ALIAS, llama_embedding_server  # noqa: E402
from tests.scripted_openai import EmbeddingServer, scripted_embeddings  # noqa: E402

SCIFACT = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
REMOTE_POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=200)
ONNX_POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=200, max_tokens=256)
IN_FLIGHT = (1, 2, 4, 8, 16)
LLAMA_IN_FLIGHT = (1, 2, 4)  # also the server's slots
LLAMA_THREADS = (1, 2)  # the machine has 2 cores
LLAMA_SLOT_TOKENS = 1024  # the longest 200-word SciFact chunk is well under it
LEXICAL = LexicalProfile()


def load_corpus(documents: int) -> list[SourceDocument]:
    if not SCIFACT.exists():
        raise SystemExit(f"missing benchmark data: {SCIFACT} (see ../shared/data/README.md)")
    return load_sources([SCIFACT], SourceDefaults("note", "published"))[:documents]


def remote_settings(base_url: str, in_flight: int) -> Settings:
    return Settings(
        embedding_provider="openai",
        embedding_profile_id="scripted-hashing-64-v1",
        embedding_model="scripted-embed",
        embedding_digest="sha256:" + "0" * 64,
        embedding_dimensions=64,
        embedding_document_format="{title}\n\n{text}",
        embedding_in_flight=in_flight,
        openai_base_url=base_url,
        openai_api_key="unused",  # type: ignore[arg-type]
    )


def llama_settings(base_url: str, in_flight: int) -> Settings:
    return Settings(
        embedding_provider="openai",
        embedding_profile_id="qwen-meanpool-bench-v1",
        embedding_model=MODEL_ALIAS,
        embedding_digest=f"sha256:{GGUF_SHA256}",
        embedding_dimensions=DIMENSIONS,
        embedding_document_format="{title}\n\n{text}",
        embedding_in_flight=in_flight,
        openai_base_url=base_url,
        openai_api_key="unused",  # type: ignore[arg-type]
    )


def cpu_seconds() -> float:
    """CPU time of this process so far, every thread (the in-process server's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def llama_sweep(
    documents: list[SourceDocument], batch_size: int, models: Path
) -> dict[str, object]:
    """The pipeline against llama.cpp's server for each (threads, N slots = N in flight)."""
    model = assemble_model(models)
    rows: list[dict[str, object]] = []
    tokens: int | None = None
    chunks = 0
    for threads in LLAMA_THREADS:
        for in_flight in LLAMA_IN_FLIGHT:
            with llama_embedding_server(
                model, parallel=in_flight, slot_tokens=LLAMA_SLOT_TOKENS, threads=threads
            ) as server:
                embedder = open_embedder(llama_settings(server.base_url, in_flight))
                embedder.embed_documents(["warm up"])
                if tokens is None:
                    tokens = count_tokens(server.base_url, documents, embedder)
                cpu_before = cpu_seconds()
                seconds, chunks = ingest_once(documents, embedder, REMOTE_POLICY, batch_size)
                cpu = cpu_seconds() - cpu_before
            rows.append(
                {
                    "threads": threads,
                    "slots": in_flight,
                    "in_flight": in_flight,
                    "seconds": round(seconds, 2),
                    "chunks_per_s": round(chunks / seconds, 2),
                    "tokens_per_s": None if tokens is None else round(tokens / seconds, 1),
                    "cpu_cores_busy": round(cpu / seconds, 2),
                }
            )
    base = float(str(rows[0]["chunks_per_s"]))
    for row in rows:
        row["ratio_to_1_thread_1_slot"] = round(float(str(row["chunks_per_s"])) / base, 2)
    return {
        "server": "llama.cpp (xllamacpp) /v1/embeddings, in this process",
        "model": "Qwen2.5-Coder-0.5B-Instruct Q4_K_M, mean pooling, 896 dimensions "
        "(the shipped chat GGUF: exercises the path, not a retrieval-quality embedder)",
        "slot_tokens": LLAMA_SLOT_TOKENS,
        "kv_unified": True,
        "documents": len(documents),
        "chunking_version": REMOTE_POLICY.version,
        "chunks": chunks,
        "input_tokens": tokens,
        "batch_size": batch_size,
        "rows": rows,
    }


def count_tokens(base_url: str, documents: list[SourceDocument], embedder: Embedder) -> int | None:
    """The server's own token count of every embedding input (its /tokenize), or None."""
    inputs = [
        p.embedding_input
        for plan in plan_documents(documents, REMOTE_POLICY, embedder)
        for p in plan.points
    ]
    try:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            return sum(
                len(client.post("/tokenize", json={"content": text}).json()["tokens"])
                for text in inputs
            )
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def ingest_once(
    documents: list[SourceDocument], embedder: Embedder, policy: ChunkingPolicy, batch_size: int
) -> tuple[float, int]:
    """Seconds and chunks of one ``ingest`` into a fresh embedded index."""
    home = Path(tempfile.mkdtemp(prefix="ragwright-bench-remote-"))
    try:
        contract = contract_for(embedder.profile, policy.version, LEXICAL)
        started = time.perf_counter()
        with EdgeIndex(home / "index", contract) as index:
            report = ingest(
                documents,
                policy=policy,
                embedder=embedder,
                sparse_encoder=Bm25Encoder(LEXICAL),
                index=index,
                batch_size=batch_size,
            )
        seconds = time.perf_counter() - started
        if report.verified != report.chunks:
            raise SystemExit(f"verified {report.verified} of {report.chunks} chunks")
        return seconds, report.chunks
    finally:
        shutil.rmtree(home, ignore_errors=True)  # each embedded index preallocates ~200 MB


def embed_all(embedder: Embedder, batches: list[list[str]], in_flight: int) -> float:
    """Seconds to embed every batch with up to ``in_flight`` calls outstanding."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=in_flight) as workers:
        for vectors, batch in zip(
            workers.map(embedder.embed_documents, batches), batches, strict=True
        ):
            if len(vectors) != len(batch):
                raise SystemExit("a batch came back short")
    return time.perf_counter() - started


def pipeline_batches(inputs: list[str], batch_size: int) -> list[list[str]]:
    """Length-sorted batches, as ``pipeline/ingest.py`` cuts them for an embedder that
    counts no tokens (length in characters)."""
    ordered = sorted(inputs, key=len)
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


def sweep(
    run: Callable[[Embedder, int], float],
    chunks: int,
    *,
    latency: float,
    capacity: int,
    batch_size: int,
    repeats: int,
) -> list[dict[str, object]]:
    """``run(embedder, in_flight)`` for each N against a fresh server; one row per N."""
    limit = capacity * batch_size / latency
    rows: list[dict[str, object]] = []
    for in_flight in IN_FLIGHT:
        server: EmbeddingServer
        with scripted_embeddings(delay=latency, capacity=capacity) as server:
            embedder = open_embedder(remote_settings(server.base_url, in_flight))
            seconds = statistics.median(run(embedder, in_flight) for _ in range(repeats))
        rate = chunks / seconds
        rows.append(
            {
                "in_flight": in_flight,
                "seconds": round(seconds, 3),
                "chunks_per_s": round(rate, 1),
                "server_held_max": server.max_concurrent,
                "server_working_max": server.max_working,
                "share_of_server_limit": round(rate / limit, 3),
            }
        )
    base = float(str(rows[0]["chunks_per_s"]))
    for row in rows:
        row["ratio_to_1"] = round(float(str(row["chunks_per_s"])) / base, 2)
    return rows


def onnx_run(documents: list[SourceDocument], batch_size: int) -> dict[str, object]:
    """The documents through the pipeline with the bundled model (one batch at a time)."""
    seconds, chunks = ingest_once(documents, OnnxEmbedder(), ONNX_POLICY, batch_size)
    return {
        "documents": len(documents),
        "chunking_version": ONNX_POLICY.version,
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=800, help="first N SciFact abstracts")
    parser.add_argument("--batch-size", type=int, default=32, help="chunks per request")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per request")
    parser.add_argument("--server-capacity", type=int, default=8, help="requests at once")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-onnx", action="store_true")
    parser.add_argument("--llama-documents", type=int, default=16, help="first N abstracts")
    parser.add_argument("--llama-batch-size", type=int, default=4, help="chunks per request")
    parser.add_argument("--skip-llama", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "remote_embedding.json"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    documents = load_corpus(args.documents)
    with scripted_embeddings() as probe:  # the chunk inputs the pipeline will embed
        planner = open_embedder(remote_settings(probe.base_url, 1))
        inputs = [
            p.embedding_input
            for plan in plan_documents(documents, REMOTE_POLICY, planner)
            for p in plan.points
        ]
    batches = pipeline_batches(inputs, args.batch_size)
    options = {
        "latency": args.latency,
        "capacity": args.server_capacity,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
    }
    pipeline = sweep(
        lambda embedder, _n: ingest_once(documents, embedder, REMOTE_POLICY, args.batch_size)[0],
        len(inputs),
        **options,  # type: ignore[arg-type]
    )
    embedder_level = sweep(
        lambda embedder, n: embed_all(embedder, batches, n),
        len(inputs),
        **options,  # type: ignore[arg-type]
    )
    llama: dict[str, object] | None = None
    onnx: dict[str, object] | None = None
    onnx_small: dict[str, object] | None = None
    if not args.skip_llama:
        models = Path(tempfile.mkdtemp(prefix="ragwright-bench-gguf-"))
        try:
            llama = llama_sweep(documents[: args.llama_documents], args.llama_batch_size, models)
        finally:
            shutil.rmtree(models, ignore_errors=True)
    if not args.skip_onnx:
        onnx = onnx_run(documents, args.batch_size)
        if llama is not None:
            onnx_small = onnx_run(documents[: args.llama_documents], args.batch_size)
    machine: dict[str, object] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_1m_before": round(load_before[0], 2),
    }
    record = {
        "machine": machine,
        "corpus": {
            "source": "SciFact corpus.jsonl, first documents",
            "documents": len(documents),
            "chunking_version": REMOTE_POLICY.version,
            "chunks": len(inputs),
        },
        "server": {
            "kind": "scripted OpenAI-compatible /v1/embeddings (tests/scripted_openai.py)",
            "latency_s": args.latency,
            "capacity": args.server_capacity,
            "batch_size": args.batch_size,
            "requests_per_pass": len(batches),
            "limit_chunks_per_s": args.server_capacity * args.batch_size / args.latency,
        },
        "pipeline_ingest": pipeline,
        "embedder_only": embedder_level,
        "bundled_onnx_pipeline_ingest": onnx,
        "llama_cpp_pipeline_ingest": llama,
        "bundled_onnx_pipeline_ingest_llama_documents": onnx_small,
    }
    machine["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
