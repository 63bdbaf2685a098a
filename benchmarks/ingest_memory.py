"""Peak memory of a whole ingestion against corpus size (issue 13, "Bounded memory").

Every run is a fresh child process; its peak RSS is the kernel's ``ru_maxrss`` for that
child (``os.wait4``), so start-up, the model and the index are all counted. Runs:

1. **scifact** - the first N SciFact documents (a ``corpus.jsonl`` of those lines),
   streamed from disk by ``SourceStream`` through ``ingest`` with the bundled ONNX model
   into a fresh embedded index (qdrant-edge, the default backend), chunking
   ``sentence-blocks`` 400 words / 256 tokens as ``benchmarks/ingest.py``;
2. **scifact-before** - the same with the embedder configured as before the fix
   (32 inputs per model run whatever their length, onnxruntime's memory pattern on);
3. **synthetic** - N generated documents (deterministic, from a generator: never a
   list) with the hashing test embedder, so 100,000 documents run in minutes;
4. **synthetic-traced** - the synthetic run under ``tracemalloc``: the peak of the
   pipeline's own Python allocations (the embedded index's native memory is not traced,
   so this separates the run's memory from the index's);
5. **throughput** - embedding speed before and after the fix in one process, the two
   configurations alternating batch by batch on the same length-sorted 64-chunk batches
   (so a busy machine slows both alike).

A child also samples its anonymous and file-backed RSS (``/proc/self/status``) every
0.2 s: file-backed pages are the index's memory-mapped files, which the kernel can drop.
Prints JSON and writes ``benchmarks/results/ingest_memory.json``. No assertions.

    python benchmarks/ingest_memory.py [--scifact 500 1000 2000 5183]
        [--before 2000] [--synthetic 10000 30000 100000 300000]
        [--traced 10000 100000] [--throughput 500]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "ingest_memory.json"
SCIFACT_DOCUMENTS = 5183
# The pipeline's chunk batch (RAGWRIGHT_BATCH_SIZE) and the model runs the runtime makes.
BATCH_SIZE = 64
MODEL_BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", type=int, nargs="*", default=[500, 1000, 2000, 5183])
    parser.add_argument("--before", type=int, nargs="*", default=[2000])
    parser.add_argument(
        "--synthetic", type=int, nargs="*", default=[10_000, 30_000, 100_000, 300_000]
    )
    parser.add_argument("--traced", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--throughput", type=int, default=500, help="SciFact documents")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, size = args.child
        print(json.dumps(run_child(kind, int(size), args.workdir)))
        return
    if (args.scifact or args.before or args.throughput) and not DATA.exists():
        raise SystemExit(f"missing benchmark data: {DATA} (see ../shared/data/README.md)")
    runs: dict[str, list[dict[str, Any]]] = {
        "scifact": [],
        "scifact-before": [],
        "synthetic": [],
        "synthetic-traced": [],
    }
    for kind, sizes in (
        ("synthetic", args.synthetic),
        ("synthetic-traced", args.traced),
        ("scifact", args.scifact),
        ("scifact-before", args.before),
    ):
        for size in sizes:
            figures = run_in_child(kind, size)
            runs[kind].append(figures)
            print(json.dumps(figures), flush=True)
    throughput = run_in_child("throughput", args.throughput) if args.throughput else None
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "runs": runs,
        "flatness": {
            kind: flatness(rows, "peak_traced_mib" if kind.endswith("traced") else "peak_rss_mib")
            for kind, rows in runs.items()
            if len(rows) > 1
        },
        "throughput_before_after": throughput,
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")


def run_in_child(kind: str, size: int) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its peak RSS from the kernel."""
    with tempfile.TemporaryDirectory(prefix=f"ragwright-memory-{kind}-") as workdir:
        if kind.startswith("scifact") or kind == "throughput":
            _write_subset(Path(workdir) / "corpus.jsonl", size)
        command = [sys.executable, __file__, "--child", kind, str(size), "--workdir", workdir]
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        output = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"{kind} {size}: child exited with {child.returncode}")
        figures: dict[str, Any] = json.loads(output)
        return {
            "kind": kind,
            "size": size,
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
            "wall_seconds": round(time.perf_counter() - started, 1),
            **figures,
        }


def _write_subset(path: Path, documents: int) -> None:
    with DATA.open(encoding="utf-8") as source, path.open("w", encoding="utf-8") as target:
        for number, line in enumerate(source):
            if number >= documents:
                break
            target.write(line)


def flatness(rows: Sequence[dict[str, Any]], measure: str = "peak_rss_mib") -> dict[str, Any]:
    """Least-squares slope of a peak (RSS by default) against documents, and
    largest/smallest ratios."""
    xs = [float(r["documents"]) for r in rows]
    ys = [float(r[measure]) for r in rows]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    smallest, largest = (
        min(rows, key=lambda r: r["documents"]),
        max(rows, key=lambda r: r["documents"]),
    )
    return {
        "documents": [int(x) for x in xs],
        measure: ys,
        "slope_mib_per_1000_documents": round(slope * 1000, 3),
        "size_ratio": round(largest["documents"] / smallest["documents"], 1),
        "peak_ratio_largest_smallest": round(largest[measure] / smallest[measure], 3),
    }


# --- in the child -------------------------------------------------------------------


class _Sampler:
    """The largest anonymous and file-backed RSS seen, sampled every 0.2 s."""

    def __init__(self) -> None:
        self.peaks = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.read()

    def read(self) -> None:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in self.peaks:
                    self.peaks[name] = max(self.peaks[name], int(value.split()[0]))

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self.read()
        return {
            "peak_anon_rss_mib": round(self.peaks["RssAnon"] / 1024, 1),
            "peak_file_rss_mib": round(self.peaks["RssFile"] / 1024, 1),
        }


def _maxrss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_child(kind: str, size: int, workdir: Path) -> dict[str, Any]:
    if kind == "throughput":
        return _throughput(workdir / "corpus.jsonl")
    from ragwright.adapters.edge.index import EdgeIndex
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.adapters.sources import SourceDefaults, SourceStream
    from ragwright.core.contracts import contract_for
    from ragwright.core.lexical import LexicalProfile
    from ragwright.pipeline.ingest import ingest
    from ragwright.types import ChunkingPolicy

    lexical = LexicalProfile()
    documents: Any
    embedder: Any
    if kind.startswith("synthetic"):
        policy = ChunkingPolicy()
        embedder = _QuietHashingEmbedder()
        documents = SyntheticCorpus(size)
    else:
        policy = ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256)
        embedder = _embedder(before=kind == "scifact-before")
        documents = SourceStream(
            [workdir / "corpus.jsonl"], SourceDefaults("note", "published"), skip_invalid=True
        )
    contract = contract_for(embedder.profile, policy.version, lexical)
    before_ingest = _maxrss_mib()
    sampler = _Sampler()
    traced = kind == "synthetic-traced"
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    with EdgeIndex(workdir / "index", contract) as index:
        report = ingest(
            documents,
            policy=policy,
            embedder=embedder,
            sparse_encoder=Bm25Encoder(lexical),
            index=index,
            batch_size=BATCH_SIZE,
        )
        seals, segments = index.seals, index._shard.info().segments_count
    seconds = time.perf_counter() - started
    extra: dict[str, Any] = {}
    if traced:
        extra["peak_traced_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    return {
        "documents": report.documents,
        "chunks": report.chunks,
        "embedded": report.embedded,
        "ingest_seconds": round(seconds, 1),
        "chunks_per_s": round(report.chunks / seconds, 1),
        "maxrss_before_ingest_mib": before_ingest,
        "seals": seals,
        "segments": segments,
        **extra,
        **sampler.stop(),
    }


def _embedder(*, before: bool) -> Any:
    from ragwright.adapters.embedders.onnx import OnnxEmbedder

    if not before:
        return OnnxEmbedder(batch_size=MODEL_BATCH)
    import onnxruntime as ort

    # The configuration before the fix: no token budget, the memory pattern on.
    embedder = OnnxEmbedder(batch_size=MODEL_BATCH, max_batch_tokens=MODEL_BATCH * 256)
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.inter_op_num_threads = 1
    embedder._session = ort.InferenceSession(
        str(embedder.model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return embedder


def _throughput(corpus: Path) -> dict[str, Any]:
    from ragwright.adapters.sources import SourceDefaults, SourceStream
    from ragwright.pipeline.ingest import plan_documents
    from ragwright.types import ChunkingPolicy

    before, after = _embedder(before=True), _embedder(before=False)
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=400, max_tokens=256)
    documents = list(SourceStream([corpus], SourceDefaults("note", "published"), skip_invalid=True))
    inputs = [
        p.embedding_input for plan in plan_documents(documents, policy, after) for p in plan.points
    ]
    lengths = after.count_tokens(inputs)
    order = sorted(range(len(inputs)), key=lambda i: lengths[i])
    spent = {"before": 0.0, "after": 0.0}
    for number, start in enumerate(range(0, len(order), BATCH_SIZE)):
        batch = [inputs[i] for i in order[start : start + BATCH_SIZE]]
        pair = [("before", before), ("after", after)]
        for name, embedder in pair if number % 2 == 0 else reversed(pair):
            began = time.perf_counter()
            embedder.embed_documents(batch)
            spent[name] += time.perf_counter() - began
    return {
        "documents": len(documents),
        "chunks": len(inputs),
        "tokens": sum(lengths),
        **{
            name: {"seconds": round(s, 1), "chunks_per_s": round(len(inputs) / s, 2)}
            for name, s in spent.items()
        },
        "speed_after_over_before": round(spent["before"] / spent["after"], 3),
    }


class _QuietHashingEmbedder:
    """The hashing test embedder without its record of every embedded text (which would
    itself grow with the corpus)."""

    def __init__(self) -> None:
        from ragwright.testing.fakes import HashingEmbedder

        self._embedder = HashingEmbedder()
        self.profile = self._embedder.profile
        self.counts_tokens = True

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._embedder.count_tokens(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._embedder.embed_documents(texts)
        self._embedder.calls.clear()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class SyntheticCorpus:
    """``count`` documents generated again on each pass (re-iterable, never a list):
    document *n* is three paragraphs of 30-60 words drawn by ``random.Random(n)`` from a
    fixed 5,000-word vocabulary, so every run ingests the same corpus."""

    VOCABULARY = tuple(f"term{n:04d}" for n in range(5000))

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        # Known without a pass, as a folder's size is after the command's first read.
        return self.count

    def __iter__(self) -> Iterator[Any]:
        from ragwright.core.documents import validate_document
        from ragwright.types import SourceSection

        for number in range(self.count):
            draw = random.Random(number)
            paragraphs = tuple(
                " ".join(draw.choices(self.VOCABULARY, k=draw.randint(30, 60))) + "."
                for _ in range(3)
            )
            yield validate_document(
                document_id=f"synthetic-{number:06d}",
                title=f"Synthetic document {number}",
                document_type="note",
                publication_state="published",
                sections=[SourceSection("body", "Body", paragraphs)],
            )


if __name__ == "__main__":
    main()
