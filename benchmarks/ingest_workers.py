"""Queued ingestion with several workers: the equality check and wall time per worker
count (issue 13, "Several ingestion workers").

Everything runs as real processes on loopback (``tests/workers.py``): a coordinator
(``ragwright ingest --queue``), N ``ragwright ingest-worker`` processes started just
before it, a scratch PostgreSQL database per scenario (the queue), and one Qdrant
collection per scenario on the REST double (``tests/adapters/qdrant_server.py``:
qdrant-client's local engine behind Qdrant's REST endpoints, served by this process; no
Qdrant server binary runs here). The embedder is the bundled ONNX model; the corpus the
OpenShift runbooks (``../shared/data/runbooks/openshift/alerts``, sentence-blocks, 120
words, 256 tokens), or ``--corpus``.

Scenarios: ``single`` (one ``ragwright ingest`` process, no queue: the reference), then
queued runs with 1, 2 and 3 workers, and 3 workers with one SIGKILLed once a quarter of
the items are recorded, while it holds an item. Each queued run's collection is
compared with the reference: point ids, SHA-256 of each payload (JSON, sorted keys),
sparse vectors, and the largest dense-vector difference (the batches differ, so float
sums may too); and its summary's counts with the reference's. Also per run: wall time
(coordinator start to exit, workers already started), items, attempts (claims),
reclaimed items, results per item (must be 1), and the 1-minute load average when it
ended (the machine is shared: other work competes for its 2 cores). Writes
``benchmarks/results/ingest_workers.json``; no assertions.

    python benchmarks/ingest_workers.py [--corpus DIR] [--item-size 16] [--lease 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.adapters.qdrant_server import QdrantRestDouble, serve_qdrant_double  # noqa: E402
from tests.replicas import scratch_database  # noqa: E402
from tests.workers import (  # noqa: E402
    Process,
    claims,
    max_dense_difference,
    processes,
    results,
    server_env,
    snapshot,
    wait_for_items,
)

DATA = ROOT.parent / "shared" / "data"
RUNBOOKS = DATA / "runbooks" / "openshift" / "alerts"
CHUNKING = (
    "--policy",
    "sentence-blocks",
    "--max-words",
    "120",
    "--max-tokens",
    "256",
    "--type",
    "runbook",
    "--state",
    "published",
)
COUNTS = (
    "documents",
    "chunks",
    "embedded",
    "unchanged",
    "payload_updated",
    "deleted",
    "verified",
    "documents_changed",
    "embedding_tokens",
    "bm25_avgdl",
)
SCENARIOS = (("queued_1", 1, False), ("queued_2", 2, False), ("queued_3", 3, False))
KILLED = ("queued_3_one_killed", 3, True)


def run_single(corpus: Path, root: Path, qdrant_url: str) -> tuple[dict[str, Any], float]:
    with scratch_database() as database, processes() as started:
        single = Process(
            "single",
            ("ingest", str(corpus), *CHUNKING, "--json"),
            server_env(root / "single", qdrant_url, "single", database),
            root / "single.log",
        )
        began = time.perf_counter()
        started.append(single.start())
        status, out = single.finish(timeout=1800)
        seconds = time.perf_counter() - began
        if status != 0:
            raise SystemExit(f"single-process ingest failed:\n{single.log()}")
        return json.loads(out), seconds


def run_queued(
    name: str,
    workers: int,
    kill: bool,
    corpus: Path,
    root: Path,
    qdrant_url: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    with scratch_database() as database, processes() as started:
        env = {
            **server_env(root / name, qdrant_url, name, database),
            "RAGWRIGHT_INGEST_LEASE": str(args.lease),
        }
        fleet = [
            Process(
                f"w{n}",
                ("ingest-worker", "--name", f"w{n}", "--until-idle", str(args.idle)),
                env,
                root / f"{name}-w{n}.log",
            ).start()
            for n in range(workers)
        ]
        started.extend(fleet)
        coordinator = Process(
            "coordinator",
            (
                "ingest",
                str(corpus),
                *CHUNKING,
                "--queue",
                "--item-size",
                str(args.item_size),
                "--json",
            ),
            env,
            root / f"{name}-coordinator.log",
        )
        began = time.perf_counter()
        started.append(coordinator.start())
        killed_at: float | None = None
        held_when_killed: list[int] = []
        if kill:
            wait_for_items(database, timeout=600)
            with psycopg.connect(database) as db:
                row = db.execute("SELECT items FROM ragwright.ingest_runs").fetchone()
            items = int(row[0]) if row else 0
            while coordinator.process is not None and coordinator.process.poll() is None:
                done = {item for item, _, _ in results(database)}
                held = [i for i, w in claims(database) if w == "w0" and i not in done]
                if len(done) >= items / 4 and held:
                    fleet[0].kill()
                    killed_at = time.perf_counter() - began
                    held_when_killed = held
                    break
                time.sleep(0.05)
        status, out = coordinator.finish(timeout=3600)
        seconds = time.perf_counter() - began
        if status != 0:
            raise SystemExit(f"{name}: coordinator failed:\n{coordinator.log()}")
        for worker in fleet:
            worker.stop()
        attempts = claims(database)
        recorded = results(database)
    per_item = Counter(item for item, _ in attempts)
    return {
        "scenario": name,
        "workers": workers,
        "seconds": round(seconds, 2),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "summary": json.loads(out),
        "items": len(recorded),
        "attempts": len(attempts),
        "reclaimed_items": sum(1 for n in per_item.values() if n > 1),
        "results_per_item_max": max(Counter(item for item, _, _ in recorded).values()),
        "failed_items": sum(1 for _, outcome, _ in recorded if outcome != "done"),
        "killed": (
            {"worker": "w0", "at_seconds": round(killed_at, 2), "held_items": held_when_killed}
            if kill
            else None
        ),
    }


def compare(
    double: QdrantRestDouble, reference: dict[str, Any], run: dict[str, Any]
) -> dict[str, Any]:
    ours, theirs = snapshot(double, run["scenario"]), snapshot(double, "single")
    summary = run["summary"]
    return {
        "point_ids_equal": ours.keys() == theirs.keys(),
        "points": len(ours),
        "payload_hashes_equal": ours.keys() == theirs.keys()
        and all(ours[k].payload_sha256 == theirs[k].payload_sha256 for k in ours),
        "sparse_vectors_equal": ours.keys() == theirs.keys()
        and all(ours[k].sparse == theirs[k].sparse for k in ours),
        "dense_max_abs_difference": (
            max_dense_difference(ours, theirs) if ours.keys() == theirs.keys() else None
        ),
        "counts_differing_from_single": {
            k: [summary[k], reference[k]] for k in COUNTS if summary[k] != reference[k]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=RUNBOOKS)
    parser.add_argument("--item-size", type=int, default=16, help="documents per work item")
    parser.add_argument("--lease", type=float, default=5.0, help="RAGWRIGHT_INGEST_LEASE")
    parser.add_argument("--idle", type=float, default=20.0, help="workers' --until-idle")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "ingest_workers.json"
    )
    args = parser.parse_args()
    if not args.corpus.exists():
        raise SystemExit(f"missing benchmark data: {args.corpus}")
    began = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_qdrant_double(record=False) as (qdrant_url, double),
    ):
        root = Path(tmp)
        reference, single_seconds = run_single(args.corpus, root, qdrant_url)
        single_load = round(os.getloadavg()[0], 2)
        print(f"single: {single_seconds:.1f} s, {reference['chunks']} chunks", flush=True)
        for name, workers, kill in (*SCENARIOS, KILLED):
            run = run_queued(name, workers, kill, args.corpus, root, qdrant_url, args)
            run["equality"] = compare(double, reference, run)
            print(
                f"{name}: {run['seconds']:.1f} s, {run['items']} items, "
                f"{run['reclaimed_items']} reclaimed, equal ids/payloads "
                f"{run['equality']['point_ids_equal']}/{run['equality']['payload_hashes_equal']}",
                flush=True,
            )
            runs.append(run)
    output = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "index": "Qdrant REST double (qdrant-client local engine behind Qdrant's REST "
        "endpoints, one process, requests serialised); no Qdrant server binary here",
        "queue": "pgqueuer 1.6.0 on the machine's PostgreSQL 15 (scratch database per run)",
        "embedder": reference["embedding_profile"],
        "corpus": str(args.corpus.relative_to(ROOT.parent))
        if args.corpus.is_relative_to(ROOT.parent)
        else str(args.corpus),
        "chunking_version": reference["chunking_version"],
        "item_size": args.item_size,
        "lease_seconds": args.lease,
        "single": {
            "seconds": round(single_seconds, 2),
            "load_average_1min_at_end": single_load,
            "summary": {k: reference[k] for k in COUNTS},
        },
        "runs": [{**run, "summary": {k: run["summary"][k] for k in COUNTS}} for run in runs],
        "total_seconds": round(time.perf_counter() - began, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(json.dumps(output, indent=2))


if __name__ == "__main__":
    main()
