"""The HTTP service under open-loop load with a slow model: admission, latency, memory.

``ragwright serve`` runs as a real separate process over the sample corpus (ingested
first into a temporary ``RAGWRIGHT_HOME``, bundled ONNX embedder), answering in the
``generated`` style from a scripted OpenAI-compatible provider on loopback that holds
every reply ``--model-delay`` seconds (``tests/scripted_openai.py``, the one the tests
use). Requests arrive open-loop: Poisson arrivals at a fixed rate, seeded, sent whether
or not earlier ones have finished (a closed loop would slow down with the server and
hide overload).

1. **warm-up** — sequential answers; their mean is the service time ``S``, and the
   process's capacity is ``concurrency / S`` answers per second.
2. **baseline** — offered ``0.5 ×`` capacity.
3. **overload** — offered ``2 ×`` capacity: half of it or more must be refused at once
   (503 ``capacity-busy``), and what is admitted must keep the baseline's latency.

Per phase: offered rate, requests sent, accepted (200), refused (503 capacity-busy, 429
tenant-limit), other statuses (must be 0), accepted latency p50/p95/max and the share
within the answer deadline, the answers' modes, refusal latency p50/p95 (target p95 <
10 ms), the load generator's lateness (it kept its schedule), and the server's RSS
sampled every 0.5 s (start, max, end, growth). Then the ratio of accepted p95 under
overload to the baseline's (target about 1: admission keeps excess out instead of
queueing it). Writes ``benchmarks/results/service_load.json``.

    python benchmarks/service_load.py [--concurrency 4] [--model-delay 0.4]
        [--phase-seconds 20] [--max-requests 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
# The scripted provider lives with the tests (they drive the CLI against it too).
sys.path.insert(0, str(ROOT))
from tests.scripted_openai import scripted_openai  # noqa: E402

CORPUS = ROOT / "samples" / "corpus"
CASES = ROOT / "samples" / "eval" / "cases.jsonl"
# The service's own line per request (docs/service.md): method, path, status, milliseconds.
LOG_LINE = re.compile(r"POST /v1/answers (\d{3}) ([\d.]+)ms")
REFUSALS = {(503, "/problems/capacity-busy"), (429, "/problems/tenant-limit")}
MIB = 1024 * 1024


def quote_s1(evidence: list[dict[str, Any]]) -> dict[str, Any]:
    """A generated answer that passes the support check: S1's longest sentence."""
    if not evidence:
        return {"status": "insufficient", "answer": "", "sourceIds": []}
    sentences = re.split(r"(?<=[.!?])\s+|\n+", evidence[0]["text"])
    return {"status": "answered", "answer": max(sentences, key=len), "sourceIds": ["S1"]}


def erlang_b(servers: int, offered_erlangs: float) -> float:
    """The share of Poisson arrivals a loss system of ``servers`` refuses (Erlang B:
    ``B(0) = 1``, ``B(c) = A·B(c-1) / (c + A·B(c-1))``): admission without a queue is
    exactly such a system, so its refusals can be checked against this reference."""
    blocked = 1.0
    for c in range(1, servers + 1):
        blocked = offered_erlangs * blocked / (c + offered_erlangs * blocked)
    return blocked


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ragwright(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"ragwright {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def latency_summary(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": round(statistics.median(values), 1) if values else None,
        "p95": percentile(values, 0.95),
        "max": round(max(values), 1) if values else None,
    }


@dataclass
class Outcome:
    """One request: what came back and how long it took (milliseconds)."""

    status: int
    kind: str
    mode: str | None
    latency_ms: float
    lateness_ms: float


@dataclass
class Memory:
    """The server process's resident set, sampled while a phase runs."""

    samples: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        start, peak, end = self.samples[0], max(self.samples), self.samples[-1]
        return {
            "start_mib": round(start / MIB, 1),
            "max_mib": round(peak / MIB, 1),
            "end_mib": round(end / MIB, 1),
            "growth_mib": round((peak - start) / MIB, 1),
            "samples": len(self.samples),
        }


async def sample_memory(process: psutil.Process, memory: Memory, stop: asyncio.Event) -> None:
    while True:
        memory.samples.append(process.memory_info().rss)
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
            memory.samples.append(process.memory_info().rss)
            return
        except TimeoutError:
            continue


async def ask(
    client: httpx.AsyncClient, question: str, scheduled: float, started_at: float
) -> Outcome:
    sent = time.perf_counter()
    response = await client.post("/v1/answers", json={"question": question})
    latency = (time.perf_counter() - sent) * 1000
    body = response.json()
    kind = body.get("type", "") if response.status_code != 200 else ""
    mode = body.get("mode") if response.status_code == 200 else None
    lateness = (sent - started_at - scheduled) * 1000
    return Outcome(response.status_code, kind, mode, latency, lateness)


def questions(count: int, rng: random.Random) -> list[str]:
    """Sample questions made unique, so the response cache never answers one."""
    pool = [json.loads(line)["question"] for line in CASES.read_text().splitlines() if line]
    return [f"{rng.choice(pool)} (request {i})" for i in range(count)]


async def warm_up(client: httpx.AsyncClient, count: int, rng: random.Random) -> dict[str, Any]:
    outcomes = [await ask(client, q, 0.0, time.perf_counter()) for q in questions(count, rng)]
    latencies = [o.latency_ms for o in outcomes if o.status == 200]
    if len(latencies) != count:
        raise SystemExit(f"warm-up answers failed: {Counter(o.status for o in outcomes)}")
    steady = latencies[2:]  # the first answers warm the embedder and connections
    return {
        "requests": count,
        "latency_ms": latency_summary(latencies),
        "service_time_ms": round(statistics.mean(steady), 1),
        "modes": dict(Counter(o.mode for o in outcomes)),
    }


def server_times(log: Path, offset: int) -> dict[int, list[float]]:
    """Milliseconds per status as the server logged them, from ``offset`` on: the time
    inside the process, without the client's or the network's share."""
    times: dict[int, list[float]] = {}
    with log.open("rb") as lines:
        lines.seek(offset)
        for line in lines.read().decode(errors="replace").splitlines():
            if match := LOG_LINE.search(line):
                times.setdefault(int(match[1]), []).append(float(match[2]))
    return times


async def run_phase(
    client: httpx.AsyncClient,
    process: psutil.Process,
    log: Path,
    *,
    rate: float,
    seconds: float,
    max_requests: int,
    deadline_s: float,
    rng: random.Random,
) -> dict[str, Any]:
    arrivals: list[float] = []
    at = 0.0
    while len(arrivals) < max_requests:
        at += rng.expovariate(rate)
        if at > seconds:
            break
        arrivals.append(at)
    asked = questions(len(arrivals), rng)
    memory, stop = Memory(), asyncio.Event()
    offset = log.stat().st_size
    sampler = asyncio.create_task(sample_memory(process, memory, stop))
    started_at = time.perf_counter()
    tasks = []
    for scheduled, question in zip(arrivals, asked, strict=True):
        delay = started_at + scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(ask(client, question, scheduled, started_at)))
    outcomes: list[Outcome] = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started_at
    stop.set()
    await sampler
    await asyncio.sleep(0.2)  # the server's last log lines
    logged = server_times(log, offset)
    accepted = [o for o in outcomes if o.status == 200]
    refused = [o for o in outcomes if (o.status, o.kind) in REFUSALS]
    other = [o for o in outcomes if o.status != 200 and (o.status, o.kind) not in REFUSALS]
    accepted_ms = [o.latency_ms for o in accepted]
    return {
        "offered_rate_per_s": round(rate, 2),
        "duration_s": round(elapsed, 1),
        "sent": len(outcomes),
        "accepted": len(accepted),
        "refused": len(refused),
        "refused_share": round(len(refused) / len(outcomes), 3) if outcomes else None,
        "refused_by": dict(Counter(f"{o.status} {o.kind}" for o in refused)),
        "other": len(other),
        "other_by": dict(Counter(f"{o.status} {o.kind}" for o in other)),
        "accepted_share": round(len(accepted) / len(outcomes), 3) if outcomes else None,
        "accepted_rate_per_s": round(len(accepted) / elapsed, 2),
        "accepted_latency_ms": latency_summary(accepted_ms),
        "within_deadline_share": (
            round(sum(ms <= deadline_s * 1000 for ms in accepted_ms) / len(accepted_ms), 3)
            if accepted_ms
            else None
        ),
        "accepted_modes": dict(Counter(o.mode for o in accepted)),
        "refusal_latency_ms": {
            "p50": latency_summary([o.latency_ms for o in refused])["p50"],
            "p95": percentile([o.latency_ms for o in refused], 0.95),
        },
        "server_side_ms": {
            "accepted": latency_summary(logged.get(200, [])),
            "refused": latency_summary(logged.get(503, []) + logged.get(429, [])),
        },
        "generator_lateness_ms": {
            "p95": percentile([o.lateness_ms for o in outcomes], 0.95),
            "max": round(max(o.lateness_ms for o in outcomes), 1) if outcomes else None,
        },
        "server_rss": memory.summary(),
    }


def wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    end = time.monotonic() + 180
    while time.monotonic() < end:
        if server.poll() is not None:
            raise SystemExit(f"ragwright serve exited {server.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"ragwright serve was not ready in 180 s:\n{log.read_text()}")


async def measure(
    url: str, key: str, pid: int, log: Path, args: argparse.Namespace
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    process = psutil.Process(pid)
    limits = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)
    async with httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {key}"},
        limits=limits,
        timeout=httpx.Timeout(60.0),
    ) as client:
        warm = await warm_up(client, args.warmup, rng)
        capacity = args.concurrency / (warm["service_time_ms"] / 1000)
        print(f"warm-up: service time {warm['service_time_ms']} ms, capacity {capacity:.2f}/s")
        phases = {}
        for name, factor in (("baseline", 0.5), ("overload", 2.0)):
            phases[name] = {
                "load_factor": factor,
                "refused_share_erlang_b": round(
                    erlang_b(args.concurrency, factor * args.concurrency), 3
                ),
                **await run_phase(
                    client,
                    process,
                    log,
                    rate=factor * capacity,
                    seconds=args.phase_seconds,
                    max_requests=args.max_requests,
                    deadline_s=args.deadline,
                    rng=rng,
                ),
            }
            print(name, json.dumps(phases[name]))
    base = phases["baseline"]["accepted_latency_ms"]["p95"]
    over = phases["overload"]["accepted_latency_ms"]["p95"]
    return {
        "warm_up": warm,
        "capacity_per_s": round(capacity, 2),
        "phases": phases,
        "accepted_p95_ratio_overload_vs_baseline": round(over / base, 3) if base and over else None,
    }


TABLE = (
    ("offered /s", ("offered_rate_per_s",)),
    ("sent", ("sent",)),
    ("accepted", ("accepted",)),
    ("refused", ("refused",)),
    ("refused share", ("refused_share",)),
    ("other", ("other",)),
    ("refused share, Erlang B", ("refused_share_erlang_b",)),
    ("accepted p50 ms", ("accepted_latency_ms", "p50")),
    ("accepted p95 ms", ("accepted_latency_ms", "p95")),
    ("accepted max ms", ("accepted_latency_ms", "max")),
    ("within deadline", ("within_deadline_share",)),
    ("refusal p50 ms", ("refusal_latency_ms", "p50")),
    ("refusal p95 ms", ("refusal_latency_ms", "p95")),
    ("refusal p95 ms, server side", ("server_side_ms", "refused", "p95")),
    ("RSS growth MiB", ("server_rss", "growth_mib")),
)


def table(record: dict[str, Any]) -> str:
    def cell(phase: str, path: tuple[str, ...]) -> str:
        value: Any = record["phases"][phase]
        for name in path:
            value = value[name]
        return f"{value!s:>12}"

    lines = [f"{'':30}{'0.5x':>12}{'2x':>12}"]
    lines += [
        f"{label:30}{cell('baseline', path)}{cell('overload', path)}" for label, path in TABLE
    ]
    ratio = record["accepted_p95_ratio_overload_vs_baseline"]
    lines.append(f"accepted p95, 2x / 0.5x: {ratio}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4, help="RAGWRIGHT_SERVE_CONCURRENCY")
    parser.add_argument("--model-delay", type=float, default=0.4, help="seconds per reply")
    parser.add_argument("--deadline", type=float, default=10.0, help="RAGWRIGHT_ANSWER_DEADLINE")
    parser.add_argument("--phase-seconds", type=float, default=20.0)
    parser.add_argument("--max-requests", type=int, default=600, help="per phase")
    parser.add_argument("--warmup", type=int, default=12, help="sequential warm-up answers")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "service_load.json"
    )
    args = parser.parse_args()
    began = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        scripted_openai(quote_s1, delay=args.model_delay) as (base_url, _),
    ):
        home = Path(tmp) / "home"
        env = {
            **os.environ,
            "RAGWRIGHT_HOME": str(home),
            "RAGWRIGHT_CHAT_PROVIDER": "openai",
            "RAGWRIGHT_CHAT_MODEL": "scripted",
            "RAGWRIGHT_CHAT_BASE_URL": base_url,
            "RAGWRIGHT_CHAT_API_KEY": "sk-scripted",
            "RAGWRIGHT_ANSWER_STYLE": "generated",
            "RAGWRIGHT_SERVE_CONCURRENCY": str(args.concurrency),
            "RAGWRIGHT_CHAT_CAPACITY": str(args.concurrency),
            "RAGWRIGHT_ANSWER_DEADLINE": str(args.deadline),
        }
        ragwright("ingest", str(CORPUS), env=env)
        key = json.loads(
            ragwright("keys", "add", "--no-tenant", "--scope", "answer", "--json", env=env)
        )["key"]
        port = free_port()
        log = Path(tmp) / "serve.log"
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [sys.executable, "-m", "ragwright", "serve", "--port", str(port)],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, server, log)
            record = asyncio.run(measure(url, key, server.pid, log, args))
        finally:
            server.terminate()
            server.wait(30)
    record = {
        "cpus": os.cpu_count(),
        "settings": {
            "serve_concurrency": args.concurrency,
            "chat_capacity": args.concurrency,
            "model_delay_s": args.model_delay,
            "answer_deadline_s": args.deadline,
            "answer_style": "generated",
            "embedder": "onnx (bundled)",
            "arrivals": "poisson (open loop)",
            "phase_seconds": args.phase_seconds,
            "max_requests_per_phase": args.max_requests,
            "seed": args.seed,
        },
        **record,
        "run_seconds": round(time.perf_counter() - began, 1),
    }
    print(table(record))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
