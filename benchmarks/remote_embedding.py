"""Remote embedding throughput against the number of batches in flight.

A fixed corpus (the first ``--documents`` SciFact abstracts, chunked as
``benchmarks/ingest.py`` chunks them) is embedded through the OpenAI-compatible
embedder exactly as ``runtime.open_embedder`` builds it (retry → capacity gate →
provider, ``RAGWRIGHT_EMBEDDING_IN_FLIGHT`` = N) against a local server whose latency
is fixed: the scripted embeddings server of the tests (``tests/scripted_openai.py``)
holds every request ``--latency`` seconds and works on at most ``--server-capacity``
requests at once, as a real server's slots do, so the rate scales with N until the
server is the limit. Batching is the ingestion pipeline's: inputs sorted by length, cut
into ``--batch-size`` batches, up to N ``embed_documents`` calls outstanding from N
worker threads. For each N: seconds (median of ``--repeats``), chunks/s, the ratio to
N = 1, the most requests the server held at once and worked on at once, the ideal
rate ``min(N, capacity) * batch / latency`` and the share of the server's limit
(``capacity * batch / latency``) reached. The same inputs through the bundled ONNX model
(one batch at a time, in this process) for comparison.

The server's vectors are the hashing test embedder's (64 dimensions): this measures the
transport and the concurrency, not a model. It runs in this process on its own threads.
The machine's 1-minute load average before and after is recorded: other work on the
machine slows the ONNX figure (CPU-bound) far more than the remote ones (waiting).
Prints JSON and writes ``benchmarks/results/remote_embedding.json``. No assertions.

    python benchmarks/remote_embedding.py [--documents 800] [--latency 0.25]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.pipeline.ingest import plan_documents
from ragwright.protocols import Embedder
from ragwright.runtime import open_embedder
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy

ROOT = Path(__file__).resolve().parents[1]
# The scripted server lives with the tests (they use it too).
sys.path.insert(0, str(ROOT))
from tests.scripted_openai import scripted_embeddings  # noqa: E402

SCIFACT = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256)
IN_FLIGHT = (1, 2, 4, 8, 16)


def corpus_inputs(documents: int) -> tuple[list[str], int]:
    """The pipeline's embedding inputs for the first ``documents`` abstracts, and their
    MiniLM token count (the bundled model plans the chunks, as ``ingest`` does)."""
    if not SCIFACT.exists():
        raise SystemExit(f"missing benchmark data: {SCIFACT} (see ../shared/data/README.md)")
    loaded = load_sources([SCIFACT], SourceDefaults("note", "published"))[:documents]
    embedder = OnnxEmbedder()
    inputs = [
        p.embedding_input for plan in plan_documents(loaded, POLICY, embedder) for p in plan.points
    ]
    return inputs, sum(embedder.count_tokens(inputs))


def pipeline_batches(inputs: list[str], batch_size: int) -> list[list[str]]:
    """Length-sorted batches, as ``pipeline/ingest.py`` cuts them for an embedder that
    does not count tokens (length in characters)."""
    ordered = sorted(inputs, key=len)
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


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


def remote_settings(base_url: str, in_flight: int) -> Settings:
    return Settings(
        embedding_provider="openai",
        embedding_profile_id="scripted-hashing-64-v1",
        embedding_model="scripted-embed",
        embedding_digest="sha256:" + "0" * 64,
        embedding_dimensions=64,
        embedding_in_flight=in_flight,
        openai_base_url=base_url,
        openai_api_key="unused",  # type: ignore[arg-type]
    )


def run_remote(
    batches: list[list[str]], *, latency: float, capacity: int, repeats: int
) -> list[dict[str, object]]:
    chunks = sum(len(b) for b in batches)
    batch_size = len(batches[0])
    rows: list[dict[str, object]] = []
    for in_flight in IN_FLIGHT:
        with scripted_embeddings(delay=latency, capacity=capacity) as server:
            embedder = open_embedder(remote_settings(server.base_url, in_flight))
            embed_all(embedder, batches[: in_flight * 2], in_flight)  # connections warm
            server.max_concurrent = server.max_working = 0
            seconds = statistics.median(
                embed_all(embedder, batches, in_flight) for _ in range(repeats)
            )
        rate = chunks / seconds
        rows.append(
            {
                "in_flight": in_flight,
                "seconds": round(seconds, 3),
                "chunks_per_s": round(rate, 1),
                "server_held_max": server.max_concurrent,
                "server_working_max": server.max_working,
                "ideal_chunks_per_s": round(min(in_flight, capacity) * batch_size / latency, 1),
                "share_of_server_limit": round(rate / (capacity * batch_size / latency), 3),
            }
        )
    base = float(str(rows[0]["chunks_per_s"]))
    for row in rows:
        row["ratio_to_1"] = round(float(str(row["chunks_per_s"])) / base, 2)
    return rows


def run_onnx(inputs: list[str], tokens: int) -> dict[str, object]:
    embedder = OnnxEmbedder(batch_size=32)
    started = time.perf_counter()
    embedder.embed_documents(inputs)  # length-sorted batches of 32 inside
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 2),
        "chunks_per_s": round(len(inputs) / seconds, 1),
        "tokens_per_s": round(tokens / seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=800, help="first N SciFact abstracts")
    parser.add_argument("--batch-size", type=int, default=32, help="chunks per request")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per request")
    parser.add_argument("--server-capacity", type=int, default=8, help="requests at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-onnx", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "remote_embedding.json"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    inputs, tokens = corpus_inputs(args.documents)
    batches = pipeline_batches(inputs, args.batch_size)
    remote = run_remote(
        batches, latency=args.latency, capacity=args.server_capacity, repeats=args.repeats
    )
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
            "documents": args.documents,
            "chunking_version": POLICY.version,
            "chunks": len(inputs),
            "minilm_tokens": tokens,
        },
        "server": {
            "kind": "scripted OpenAI-compatible /v1/embeddings (tests/scripted_openai.py)",
            "latency_s": args.latency,
            "capacity": args.server_capacity,
            "batch_size": args.batch_size,
            "requests_per_pass": len(batches),
        },
        "remote_openai_compatible": remote,
        "bundled_onnx": None if args.skip_onnx else run_onnx(inputs, tokens),
    }
    machine["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
