"""Many ``ask`` commands run by one warm command process: does its memory stay flat?

The warm command process (``ragwright.warm``) lives for many commands, each of which
loads its settings and opens and closes the index and stores; whatever one command leaves
behind accumulates there. This benchmark ingests ClapNQ's passages (the shared data's
Markdown copies, type ``note``, chunked as ``benchmarks/answers.py`` does; the sample
corpus when the data is absent), then runs ``--asks N`` (default 300) ``python -m
ragwright ask QUESTION --json`` commands one after another, each its own process as a user
runs it, cycling through ClapNQ's questions. The first starts the warm process; every
later one is handed to it. ``--style`` is ``evidence`` by default (no model: the command
side alone, a few minutes); ``quoted`` adds the embedded model (its background process
is counted apart).

After each ask: the warm process's RSS, the ask's wall time and its status. The figure of
merit is the growth from the RSS after ``--warmup`` asks (default 50) to the RSS after
the last (target: within 5 %). The load average is recorded at the start and the end.
Writes ``benchmarks/results/warm_soak.json``.

    python benchmarks/warm_soak.py [--asks 300] [--warmup 50] [--style evidence]
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
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from service_load import ragwright  # noqa: E402
from soak import CLAPNQ, CLAPNQ_CHUNKING, MIB, corpus_and_questions  # noqa: E402


def _warm_pid(env: dict[str, str]) -> int | None:
    status = json.loads(ragwright("model", "status", "--json", env=env))
    process = status["command_process"]
    return None if process is None else int(process["pid"])


def warm_soak(asks: int, warmup: int, style: str, tmp: Path) -> dict[str, Any]:
    folder, kind, questions = corpus_and_questions()
    env = {
        **os.environ,
        "RAGWRIGHT_HOME": str(tmp / "home"),
        "RAGWRIGHT_COMMAND_KEEP_WARM": "600",
        **(CLAPNQ_CHUNKING if CLAPNQ in folder.parents else {}),
    }
    ragwright("ingest", str(folder), "--type", kind, "--state", "published", env=env)
    load_start = os.getloadavg()
    samples: list[dict[str, Any]] = []
    statuses: Counter[str] = Counter()
    process: psutil.Process | None = None
    try:
        for n in range(1, asks + 1):
            question = questions[(n - 1) % len(questions)]
            started = time.perf_counter()
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "ragwright", "ask", question),
                    *("--type", kind, "--style", style, "--json"),
                ],
                capture_output=True,
                text=True,
                env=env,
                check=False,
                timeout=600,
            )
            wall = time.perf_counter() - started
            if done.returncode != 0:
                raise SystemExit(f"ask {n} exited {done.returncode}: {done.stderr}")
            statuses[json.loads(done.stdout)["status"]] += 1
            if process is None:
                pid = None
                give_up = time.monotonic() + 120
                while pid is None and time.monotonic() < give_up:
                    pid = _warm_pid(env)
                    time.sleep(0.2)
                if pid is None:
                    raise SystemExit("no warm command process came up")
                process = psutil.Process(pid)
                # wait until it has imported what it keeps, so ask 2 is handed over
                while not json.loads(ragwright("model", "status", "--json", env=env))[
                    "command_process"
                ]["ready"]:
                    time.sleep(0.2)
                continue  # the first ask ran in its own process
            samples.append({"asks": n, "rss_mib": process.memory_info().rss / MIB, "wall_s": wall})
            if n % 50 == 0 or n == asks:
                print(
                    f"{n}/{asks} asks, warm process RSS {samples[-1]['rss_mib']:.0f} MiB",
                    flush=True,
                )
        served = json.loads(ragwright("model", "status", "--json", env=env))["command_process"]
    finally:
        ragwright("model", "stop", env=env)
    after_warmup = samples[min(warmup, len(samples) - 1)]
    last = samples[-1]
    growth = (last["rss_mib"] - after_warmup["rss_mib"]) / after_warmup["rss_mib"]
    walls = [s["wall_s"] for s in samples]
    return {
        "asks": asks,
        "style": style,
        "served_by_the_warm_process": served["served"],
        "corpus": "clapnq" if CLAPNQ in folder.parents else "samples",
        "statuses": dict(statuses),
        "wall_s": {
            "p50": round(statistics.median(walls), 3),
            "p95": round(statistics.quantiles(walls, n=20)[-1], 3),
        },
        "rss_mib": {
            "after_first_handed_ask": round(samples[0]["rss_mib"], 1),
            f"after_{warmup}": round(after_warmup["rss_mib"], 1),
            "max": round(max(s["rss_mib"] for s in samples), 1),
            "last": round(last["rss_mib"], 1),
        },
        "growth_after_warmup": round(growth, 4),
        "within_5_percent": abs(growth) <= 0.05,
        "rss_every_50": [round(s["rss_mib"], 1) for s in samples if s["asks"] % 50 == 0],
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--style", choices=("evidence", "quoted"), default="evidence")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "warm_soak.json"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        record = {
            "cpus": os.cpu_count(),
            "command": "python benchmarks/warm_soak.py " + " ".join(sys.argv[1:]),
            "warm_soak": warm_soak(args.asks, args.warmup, args.style, Path(tmp)),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["warm_soak"], indent=2))


if __name__ == "__main__":
    main()
