"""Latency of the job and key stores on SQLite and PostgreSQL, two source trees side by side.

For each engine and each variant (``--baseline-src``: another checkout's ``src``, e.g.
the commit before a change; ``current``: this checkout's), a fresh child process opens
a fresh store (a temporary SQLite file, or a new PostgreSQL schema dropped afterwards)
and times, call by call:

- job store: ``submit`` of ``--jobs`` jobs, then for each one ``claim`` and ``publish``;
- key store: one key added, then ``authenticate`` (the recency write throttled to one a
  minute, so a lookup) and ``get`` ``--lookups`` times.

Variants alternate, ``--rounds`` times, so a change in the machine's load hits both;
per operation the median and p95 (milliseconds) over every round's calls are reported,
with the ratio current/baseline and the 1-minute load average at the start and end.
Writes ``benchmarks/results/store_latency.json``. Nothing here asserts on time.

    RAGWRIGHT_TEST_POSTGRES_URL=postgresql://... \\
        python benchmarks/store_latency.py --baseline-src ../main/src [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "store_latency.json"


def _timed(samples: dict[str, list[float]], name: str, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = call()
    samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
    return value


def _child(engine: str, jobs: int, lookups: int) -> dict[str, list[float]]:
    from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
    from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
    from ragwright.application.jobs import JobLimits

    samples: dict[str, list[float]] = {}
    url = os.environ.get("RAGWRIGHT_TEST_POSTGRES_URL", "")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as tmp:
        if engine == "sqlite":
            job_store: Any = SqliteJobStore(Path(tmp) / "jobs.sqlite3")
            key_store: Any = SqliteKeyStore(Path(tmp) / "keys.sqlite3")
        else:
            job_store = PostgresJobStore(url, schema=schema)
            key_store = PostgresKeyStore(url, schema)
        try:
            for n in range(jobs):
                _timed(
                    samples,
                    "job_submit",
                    lambda n=n: job_store.submit(
                        tenant=None,
                        key_id="k",
                        idempotency_key=f"i{n}",
                        input_hash="h",
                        request={"question": f"q{n}"},
                        ttl_seconds=3600,
                        grant_digest="g",
                    ),
                )
            for _ in range(jobs):
                job = _timed(
                    samples,
                    "job_claim",
                    lambda: job_store.claim("w", lease_seconds=60, limits=JobLimits(4)),
                )
                _timed(
                    samples,
                    "job_publish",
                    lambda job=job: job_store.publish(
                        job.id, "w", state="succeeded", result={"answer": "a"}
                    ),
                )
            key, secret = key_store.add(tenant=None, scopes=("answer",), name="bench")
            for _ in range(lookups):
                _timed(samples, "key_authenticate", lambda: key_store.authenticate(secret))
                _timed(samples, "key_get", lambda: key_store.get(key.id))
        finally:
            job_store.close()
            key_store.close()
            if engine == "postgres":
                import psycopg

                with psycopg.connect(url, autocommit=True) as db:
                    db.execute(f"DROP SCHEMA {schema} CASCADE")
    return samples


def _run(src: Path, engine: str, jobs: int, lookups: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            engine,
            "--jobs",
            str(jobs),
            "--lookups",
            str(lookups),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    samples: dict[str, list[float]] = json.loads(out.stdout)
    return samples


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "calls": len(ordered),
        "median_ms": round(statistics.median(ordered), 4),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, required=False)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=("sqlite", "postgres"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.jobs, args.lookups)))
        return
    variants = {"current": ROOT / "src"}
    if args.baseline_src:
        variants = {"baseline": args.baseline_src.resolve(), **variants}
    engines = args.engines.split(",")
    if "postgres" in engines and not os.environ.get("RAGWRIGHT_TEST_POSTGRES_URL"):
        sys.exit("set RAGWRIGHT_TEST_POSTGRES_URL for the postgres engine (or --engines sqlite)")
    load_start = os.getloadavg()[0]
    collected: dict[str, dict[str, dict[str, list[float]]]] = {}
    for _ in range(args.rounds):
        for engine in engines:
            for variant, src in variants.items():
                samples = _run(src, engine, args.jobs, args.lookups)
                into = collected.setdefault(engine, {}).setdefault(variant, {})
                for name, values in samples.items():
                    into.setdefault(name, []).extend(values)
    report: dict[str, Any] = {
        "jobs": args.jobs,
        "lookups": args.lookups,
        "rounds": args.rounds,
        "variants": {name: str(src) for name, src in variants.items()},
        "load_average_1m": {"start": load_start, "end": os.getloadavg()[0]},
        "cpus": os.cpu_count(),
        "engines": {},
    }
    for engine, by_variant in collected.items():
        table = {v: {op: _summary(s) for op, s in ops.items()} for v, ops in by_variant.items()}
        if "baseline" in table:
            table["ratio_current_to_baseline"] = {
                op: round(table["current"][op]["median_ms"] / figures["median_ms"], 3)
                for op, figures in table["baseline"].items()
            }
        report["engines"][engine] = table
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
