"""The embedded local model's threads (``RAGWRIGHT_CHAT_THREADS``) on a quiet and a busy
machine.

llama.cpp splits each step of the model over its threads and waits at the end of the step
until every thread is done. On a quiet machine more threads (up to one per core) means
more work per step; on a machine whose cores other processes also want, a thread the
system has set aside holds up the others at every step. This measures both: the same
requests to a llama.cpp server (the shipped GGUF, started as ragwright starts it) with
each thread count, first alone, then beside ``--busy`` processes that each keep one core
busy (a Python loop), alternating the counts request by request so both see the same
machine.

Each request is an answer-sized chat completion: a prompt of about 400 tokens that no
cache can spare (each request's text differs from the previous one's at its start) and
32 tokens written. Reported per condition: p50 / mean wall seconds, and the ratio of
each thread count's p50 to the default's (``null`` threads: llama.cpp's default, one per
core: the key ``default``). Writes ``benchmarks/results/model_threads.json``.

    .venv/bin/python benchmarks/model_threads.py [--requests 6] [--busy 2] [--threads 1]
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
from pathlib import Path
from typing import Any

import httpx

from ragwright.adapters.chatmodels.local import LocalModelServer, assemble_model

WORDS = [
    "the",
    "drain",
    "step",
    "waits",
    "for",
    "the",
    "queue",
    "to",
    "empty",
    "before",
    "the",
    "node",
    "is",
    "cordoned",
    "and",
    "the",
    "pods",
    "are",
    "evicted",
    "one",
    "by",
    "one",
    "while",
    "the",
    "operator",
    "watches",
    "the",
    "deadline",
]


def prompt(number: int) -> str:
    # A different opening word for each request: the slot's cache spares nothing.
    body = " ".join(WORDS[(number + i) % len(WORDS)] for i in range(300))
    return f"Request {number}. Summarise in one sentence: {body}"


def ask(server: LocalModelServer, number: int) -> float:
    started = time.perf_counter()
    response = httpx.post(
        f"{server.base_url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {server.api_key}"},
        json={
            "messages": [{"role": "user", "content": prompt(number)}],
            "max_tokens": 32,
            "temperature": 0,
            "ignore_eos": True,
        },
        timeout=600,
    )
    response.raise_for_status()
    return time.perf_counter() - started


def figures(seconds: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(seconds), 3),
        "mean": round(statistics.fmean(seconds), 3),
        "min": round(min(seconds), 3),
        "max": round(max(seconds), 3),
    }


def measure(model: Path, counts: list[int | None], requests: int) -> dict[str, Any]:
    servers = {t: LocalModelServer(model, threads=t) for t in counts}
    try:
        for t, server in servers.items():  # load the weights before timing
            ask(server, -1 - (t or 0))
        times: dict[int | None, list[float]] = {t: [] for t in counts}
        for number in range(requests):
            for t in counts:
                times[t].append(ask(servers[t], number * len(counts) + (t or 0)))
    finally:
        for server in servers.values():
            server.close()
    default = statistics.median(times[None])
    return {
        ("default" if t is None else str(t)): {
            **figures(s),
            "ratio_to_default_p50": round(statistics.median(s) / default, 3),
        }
        for t, s in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside the model")
    parser.add_argument(
        "--threads", type=int, action="append", help="thread counts beside the default"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/model_threads.json"))
    args = parser.parse_args()
    counts: list[int | None] = [None, *(args.threads or [1])]
    with tempfile.TemporaryDirectory(prefix="ragwright-threads-") as cache:
        model = assemble_model(Path(cache))
        results: dict[str, Any] = {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "requests": args.requests,
            "load_average_start": os.getloadavg(),
        }
        results["quiet"] = measure(model, counts, args.requests)
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)
        ]
        try:
            results[f"beside_{args.busy}_busy_processes"] = measure(model, counts, args.requests)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
        results["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
