"""Durable answer jobs under faults: two ``ragwright serve`` replicas on loopback sharing
one PostgreSQL and one Redis, each on its own copy of one ingested index (the embedded
index is one process per path and no Qdrant server runs here; ``tests/replicas.py``).
Jobs are answered in the ``generated`` style by a scripted OpenAI-compatible provider
that holds each reply ``--model-delay`` seconds, so faults hit work in flight.

Scenarios, each on fresh replicas and a fresh database:

1. **baseline** — no fault.
2. **worker_killed** — SIGKILL replica A once it holds a running job (its lease owner in
   the store); B takes its jobs after the lease (``RAGWRIGHT_JOB_LEASE``) runs out.
3. **killed_before_202** — A runs with the test-only failpoint ``after-job-persist``: it
   dies after persisting, before answering; the client retries with the same
   Idempotency-Key on B. A is restarted (failpoint still set) and hit again, 3 times.
4. **postgres_restart** — a private PostgreSQL cluster (never the machine's server) is
   stopped (``pg_ctl -m fast``) while jobs run and submissions arrive, and started again
   ``--outage`` seconds later; the client retries 503s with the same key.
5. **redis_down** — Redis is killed while jobs run: the replicas warn and fall back to
   per-process capacity; nothing is lost.
6. **disk_full** — one replica whose home (its SQLite job and key stores; the index
   stays on the ordinary disk) is a 64 MiB tmpfs: half the jobs are accepted, then the
   tmpfs is filled while they run (results meet a refused ``COMMIT``) and the other
   half is submitted (503 until there is room; the client retries with the same key);
   the filler is removed ``--outage`` seconds later. No restart. Needs root (``mount``);
   skipped otherwise. Also records what ``/readyz`` and the jobs' ``waiting_reason``
   said during the fault.
7. **burst** — 10 × ``RAGWRIGHT_BATCH_CAPACITY`` jobs at once while interactive
   ``POST /v1/answers`` run one after another: their p95 during the burst against the
   same measurement without it (stated bound: at most 1.5 ×), and the backlog's drain
   rate against the pool's rate (batch capacity / one answer's service time, measured
   as the interactive median without the burst).

Per scenario: jobs submitted (accepted with 202, counting a retry of one key once),
completed (succeeded), lost (accepted but not succeeded by the end: must be 0),
duplicated (a job published more than once in the replicas' logs, or more than one row
per Idempotency-Key: must be 0), attempts (claims; a re-run after a fault is not a
duplicate: its first run published nothing), client retries, and the time from
persisting to publishing (the store's ``created_at`` to ``finished_at``, one clock)
p50/p95/max. Writes ``benchmarks/results/job_faults.json``. The whole run takes about
two to three minutes; nothing here asserts on time.

    python benchmarks/job_faults.py [--jobs 24] [--model-delay 0.5] [--outage 7]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# The harness and the scripted provider live with the tests (they use them too).
sys.path.insert(0, str(ROOT))
from tests.failpoints import AFTER_JOB_PERSIST  # noqa: E402
from tests.replicas import (  # noqa: E402
    Replica,
    add_key,
    copy_index,
    ingest_template,
    private_postgres,
    published,
    read_job,
    redis_server,
    replicas,
    scratch_database,
    submit,
)
from tests.scripted_openai import scripted_openai  # noqa: E402

QUESTION = "Should I drain all queued work during shutdown?"
LEASE = 2.0
BATCH_CAPACITY = 4
JOB_WORKERS = 2
BURST_BOUND = 1.5
REDIS_WARNING = "Redis at"
FINISHED = ("succeeded", "failed", "cancelled", "expired")


def quote_s1(evidence: list[dict[str, Any]]) -> dict[str, Any]:
    """A generated answer the support check accepts: S1's first sentence."""
    if not evidence:
        return {"status": "insufficient", "answer": "", "sourceIds": []}
    sentence = evidence[0]["text"].split(". ")[0]
    return {"status": "answered", "answer": sentence, "sourceIds": ["S1"]}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": round(statistics.median(values), 3) if values else None,
        "p95": percentile(values, 0.95),
        "max": round(max(values), 3) if values else None,
    }


@dataclass
class Client:
    """Submits jobs as a careful client does: on a dropped connection or a 503 it sends
    the same body with the same Idempotency-Key again, to the next replica."""

    fleet: list[Replica]
    secret: str
    accepted: dict[str, str] = field(default_factory=dict)  # idempotency key -> job id
    retries: int = 0
    refusals: Counter[str] = field(default_factory=Counter)

    def submit(self, key: str, question: str, first: int, give_up: float = 60.0) -> str:
        deadline = time.monotonic() + give_up
        target = first
        while time.monotonic() < deadline:
            replica = self.fleet[target % len(self.fleet)]
            try:
                response = submit(replica.url, self.secret, key, question, timeout=15)
                if response.status_code == 202:
                    job_id = str(response.json()["id"])
                    self.accepted[key] = job_id
                    return job_id
                kind = response.json().get("type", "") if response.content else ""
                self.refusals[f"{response.status_code} {kind}".strip()] += 1
            except httpx.TransportError as error:
                self.refusals[type(error).__name__] += 1
            self.retries += 1
            target += 1
            time.sleep(0.1)
        raise RuntimeError(f"job {key} was never accepted")


def rows(database_url: str) -> list[dict[str, Any]]:
    with psycopg.connect(database_url, connect_timeout=2) as conn:
        found = conn.execute(
            "SELECT id, idempotency_key, state, attempts, created_at, finished_at "
            "FROM ragwright.answer_jobs ORDER BY seq"
        ).fetchall()
    names = ("id", "idempotency_key", "state", "attempts", "created_at", "finished_at")
    return [dict(zip(names, row, strict=True)) for row in found]


def running(database_url: str) -> int:
    with psycopg.connect(database_url, connect_timeout=2) as conn:
        found = conn.execute(
            "SELECT count(*) FROM ragwright.answer_jobs WHERE state = 'running'"
        ).fetchone()
    return int(found[0]) if found else 0


def wait_drained(database_url: str, job_ids: set[str], timeout: float) -> list[dict[str, Any]]:
    """The store's rows once every accepted job finished (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    last: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.Error):
            last = rows(database_url)
            done = {r["id"] for r in last if r["state"] in FINISHED}
            if job_ids <= done:
                return last
        time.sleep(0.2)
    return last


def account(
    client: Client, fleet: list[Replica], database_url: str, timeout: float
) -> dict[str, Any]:
    """The scenario's figures from the client's accepted jobs, the store and the logs."""
    found = wait_drained(database_url, set(client.accepted.values()), timeout)
    return figures(client, fleet, found)


def figures(client: Client, fleet: list[Replica], found: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of ``account`` from the store's rows ``found``."""
    job_ids = set(client.accepted.values())
    by_id = {r["id"]: r for r in found}
    succeeded = [by_id[j] for j in job_ids if j in by_id and by_id[j]["state"] == "succeeded"]
    counts = published(fleet)
    per_key = Counter(r["idempotency_key"] for r in found)
    seconds = [(r["finished_at"] - r["created_at"]).total_seconds() for r in succeeded]
    attempts = Counter(str(r["attempts"]) for r in succeeded)
    return {
        "submitted": len(client.accepted),
        "completed": len(succeeded),
        "lost": len(job_ids) - len(succeeded),
        "duplicated": sum(1 for j in job_ids if counts[j] > 1)
        + sum(n - 1 for n in per_key.values() if n > 1),
        "rows_in_store": len(found),
        "attempts": dict(sorted(attempts.items())),
        "client_retries": client.retries,
        "client_refusals": dict(client.refusals),
        "time_to_completion_s": summary(seconds),
    }


@dataclass
class Setup:
    template: Path
    root: Path
    model_env: dict[str, str]
    args: argparse.Namespace

    @contextlib.contextmanager
    def fleet(
        self, name: str, database_url: str, redis_url: str, **extra: str
    ) -> Iterator[tuple[list[Replica], str]]:
        env = {
            **self.model_env,
            "RAGWRIGHT_DATABASE_URL": database_url,
            "RAGWRIGHT_REDIS_URL": redis_url,
            "RAGWRIGHT_JOB_WORKERS": str(JOB_WORKERS),
            "RAGWRIGHT_BATCH_CAPACITY": str(BATCH_CAPACITY),
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
            **extra,
        }
        secret = add_key(env, self.root / name / "admin")
        with replicas(self.template, self.root / name, 2, env) as fleet:
            yield fleet, secret


def submit_all(client: Client, name: str, count: int, spacing: float = 0.0) -> None:
    for n in range(count):
        client.submit(f"{name}-{n}", f"{QUESTION} ({name} {n})", first=n)
        if spacing:
            time.sleep(spacing)


def baseline(setup: Setup) -> dict[str, Any]:
    with (
        scratch_database() as db,
        redis_server() as redis,
        setup.fleet("baseline", db, redis.url) as (fleet, secret),
    ):
        client = Client(fleet, secret)
        submit_all(client, "baseline", setup.args.jobs)
        return account(client, fleet, db, timeout=90)


def worker_killed(setup: Setup) -> dict[str, Any]:
    with (
        scratch_database() as db,
        redis_server() as redis,
        setup.fleet("killed", db, redis.url) as (fleet, secret),
    ):
        a = fleet[0]
        client = Client(fleet, secret)
        submit_all(client, "killed", setup.args.jobs)
        worker = a.worker_id()
        held: list[str] = []
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            with psycopg.connect(db) as conn:
                held = [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM ragwright.answer_jobs WHERE state = 'running' "
                        "AND lease_owner = %s",
                        (worker,),
                    ).fetchall()
                ]
            time.sleep(0.05)
        a.kill()
        record = account(client, fleet, db, timeout=90)
        record["fault"] = f"SIGKILL replica a holding {len(held)} running job(s)"
        return record


def killed_before_202(setup: Setup) -> dict[str, Any]:
    with (
        scratch_database() as db,
        redis_server() as redis,
        setup.fleet("crash", db, redis.url) as (fleet, secret),
    ):
        a = fleet[0]
        a.stop()
        a.start(failpoint=AFTER_JOB_PERSIST)
        a.wait_ready()
        client = Client(fleet, secret)
        crashes = 0
        for n in range(setup.args.jobs):
            crash = n % 8 == 0 and crashes < 3
            if crash and (a.process is None or a.process.poll() is not None):
                a.start(failpoint=AFTER_JOB_PERSIST)
                a.wait_ready()
            # The crash rounds go to a first; every other job to b.
            client.submit(f"crash-{n}", f"{QUESTION} (crash {n})", first=0 if crash else 1)
            if crash:
                crashes += a.process is not None and a.process.wait(10) == 137
        record = account(client, fleet, db, timeout=90)
        record["fault"] = f"process exited 137 after persisting, before 202: {crashes} time(s)"
        return record


def postgres_restart(setup: Setup) -> dict[str, Any]:
    with (
        private_postgres() as cluster,
        redis_server() as redis,
        setup.fleet("pg", cluster.url, redis.url) as (fleet, secret),
    ):
        client = Client(fleet, secret)
        restarted: dict[str, float] = {}

        def restart() -> None:
            time.sleep(1.5)
            restarted["running"] = running(cluster.url)
            began = time.monotonic()
            cluster.stop()
            time.sleep(setup.args.outage)
            cluster.start()
            restarted["down_s"] = round(time.monotonic() - began, 2)

        fault = threading.Thread(target=restart)
        fault.start()
        submit_all(client, "pg", setup.args.jobs, spacing=0.2)
        fault.join()
        record = account(client, fleet, cluster.url, timeout=120)
        warned = sum(r.log().count("job store unavailable") for r in fleet)
        record["fault"] = (
            f"PostgreSQL stopped (fast) with {restarted.get('running')} job(s) running and "
            f"started again; down {restarted.get('down_s')} s; "
            f"'job store unavailable' warnings in the logs: {warned}"
        )
        return record


def redis_down(setup: Setup) -> dict[str, Any]:
    with (
        scratch_database() as db,
        redis_server() as redis,
        setup.fleet("redis", db, redis.url) as (fleet, secret),
    ):
        client = Client(fleet, secret)

        at_kill: list[int] = []

        def kill() -> None:
            time.sleep(1.0)
            at_kill.append(running(db))
            redis.stop()

        fault = threading.Thread(target=kill)
        fault.start()
        submit_all(client, "redis", setup.args.jobs, spacing=0.1)
        fault.join()
        record = account(client, fleet, db, timeout=90)
        warned = [r.name for r in fleet if REDIS_WARNING in r.log()]
        record["fault"] = (
            f"redis-server killed with {at_kill[0]} job(s) running; replicas that warned: {warned}"
        )
        record["warned"] = len(warned)
        return record


def interactive(url: str, secret: str, stop: Callable[[], bool], tag: str) -> list[float]:
    """Sequential interactive answers until ``stop()``: their latencies in seconds."""
    seconds: list[float] = []
    n = 0
    while not stop():
        began = time.perf_counter()
        response = httpx.post(
            url + "/v1/answers",
            json={"question": f"{QUESTION} (interactive {tag} {n})"},
            headers={"Authorization": f"Bearer {secret}"},
            timeout=30,
        )
        if response.status_code == 200:
            seconds.append(time.perf_counter() - began)
        n += 1
    return seconds


def burst(setup: Setup) -> dict[str, Any]:
    count = 10 * BATCH_CAPACITY
    with (
        scratch_database() as db,
        redis_server() as redis,
        setup.fleet("burst", db, redis.url) as (fleet, secret),
    ):
        a = fleet[0]
        quiet_until = time.monotonic() + setup.args.quiet_seconds
        quiet = interactive(a.url, secret, lambda: time.monotonic() > quiet_until, "quiet")
        client = Client(fleet, secret)
        drained = threading.Event()
        during: list[float] = []
        measuring = threading.Thread(
            target=lambda: during.extend(interactive(a.url, secret, drained.is_set, "burst"))
        )
        began = time.monotonic()
        measuring.start()
        submit_all(client, "burst", count)
        record = account(client, fleet, db, timeout=120)
        drained.set()
        measuring.join()
        found = rows(db)
        first = min(r["created_at"] for r in found)
        last = max(r["finished_at"] for r in found if r["finished_at"] is not None)
        drain_s = (last - first).total_seconds()
        service_s = statistics.median(quiet)
        record.update(
            {
                "burst_jobs": count,
                "batch_capacity": BATCH_CAPACITY,
                "interactive_without_burst_s": {"n": len(quiet), **summary(quiet)},
                "interactive_during_burst_s": {"n": len(during), **summary(during)},
                "interactive_p95_ratio": round(
                    (percentile(during, 0.95) or 0) / (percentile(quiet, 0.95) or 1), 2
                ),
                "interactive_bound": f"p95 during the burst <= {BURST_BOUND} x without it",
                "drain_seconds": round(drain_s, 2),
                "drain_rate_jobs_per_s": round(count / drain_s, 2),
                "pool_rate_jobs_per_s": round(BATCH_CAPACITY / service_s, 2),
                "measured_for_s": round(time.monotonic() - began, 1),
            }
        )
        record["interactive_within_bound"] = record["interactive_p95_ratio"] <= BURST_BOUND
        record["drain_vs_pool_rate"] = round(
            record["drain_rate_jobs_per_s"] / record["pool_rate_jobs_per_s"], 2
        )
        return record


class LoggedOutside(Replica):
    """A replica whose log is not in its home (the home's disk is the one that fills)."""

    @property
    def log_path(self) -> Path:
        return self.home.parents[1] / f"serve-{self.name}.log"


def fill(disk: Path) -> Path:
    """A file that takes every byte ``disk`` has left."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:
        for block in (2**20, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * block)
                    out.flush()
    return filler


def sqlite_rows(path: Path) -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        found = conn.execute(
            "SELECT id, idempotency_key, state, attempts, created_at, finished_at "
            "FROM answer_jobs ORDER BY seq"
        ).fetchall()

    def moment(text: str | None) -> datetime | None:
        return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))

    return [
        {
            "id": i,
            "idempotency_key": k,
            "state": st,
            "attempts": a,
            "created_at": moment(c),
            "finished_at": moment(f),
        }
        for i, k, st, a, c, f in found
    ]


def disk_full(setup: Setup) -> dict[str, Any]:
    base = setup.root / "disk"
    disk = base / "tmpfs"
    disk.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        return {"skipped": f"cannot mount a 64 MiB tmpfs: {mounted.stderr.strip()}"}
    try:
        home = disk / "home"
        home.mkdir()
        outside = copy_index(setup.template, base / "index-copy")
        (home / "index").symlink_to(outside / "index")  # the index stays on the real disk
        if (setup.template / "tokenizers").is_dir():  # and the tokenizer cache
            shutil.copytree(setup.template / "tokenizers", base / "tokenizers")
            (home / "tokenizers").symlink_to(base / "tokenizers")
        env = {
            **setup.model_env,
            "RAGWRIGHT_JOB_WORKERS": str(JOB_WORKERS),
            "RAGWRIGHT_BATCH_CAPACITY": str(BATCH_CAPACITY),
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
        }
        secret = add_key(env, home)
        replica = LoggedOutside("a", home, env)
        replica.start()
        try:
            replica.wait_ready()
            client = Client([replica], secret)
            half = setup.args.jobs // 2
            submit_all(client, "disk", half)
            filler = fill(disk)
            late = threading.Thread(
                target=submit_all, args=(client, "disk-late", setup.args.jobs - half)
            )
            late.start()
            said: Counter[str] = Counter()
            waiting: Counter[str] = Counter()
            ends = time.monotonic() + setup.args.outage
            while time.monotonic() < ends:
                with contextlib.suppress(httpx.HTTPError):
                    ready = httpx.get(replica.url + "/readyz", timeout=5)
                    jobs = ready.json()["checks"].get("jobs", {})
                    said[f"{ready.status_code} jobs ok={jobs.get('ok')}"] += 1
                    for job_id in list(client.accepted.values())[:half]:
                        status = read_job(replica.url, secret, job_id)
                        waiting[str(status.get("waiting_reason"))] += 1
                time.sleep(0.25)
            filler.unlink()
            late.join(120)
            job_ids = set(client.accepted.values())
            deadline = time.monotonic() + 120
            found = sqlite_rows(home / "jobs.sqlite3")
            while time.monotonic() < deadline:
                found = sqlite_rows(home / "jobs.sqlite3")
                if job_ids <= {r["id"] for r in found if r["state"] in FINISHED}:
                    break
                time.sleep(0.2)
            record = figures(client, [replica], found)
            restarted = replica.process is None or replica.process.poll() is not None
            record["fault"] = (
                f"home on a 64 MiB tmpfs filled for {setup.args.outage} s while jobs ran "
                f"and were submitted; replica restarted: {'yes' if restarted else 'no'}"
            )
            record["readyz_during_fault"] = dict(said)
            record["waiting_reason_during_fault"] = dict(waiting)
            return record
        finally:
            replica.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


SCENARIOS: dict[str, Callable[[Setup], dict[str, Any]]] = {
    "baseline": baseline,
    "worker_killed": worker_killed,
    "killed_before_202": killed_before_202,
    "postgres_restart": postgres_restart,
    "redis_down": redis_down,
    "disk_full": disk_full,
    "burst": burst,
}


def table(record: dict[str, Any]) -> str:
    head = f"{'scenario':20}{'submitted':>10}{'completed':>10}{'lost':>6}{'dup':>5}{'p95 s':>8}"
    lines = [head]
    for name, figures in record["scenarios"].items():
        if "skipped" in figures:
            lines.append(f"{name:20}skipped: {figures['skipped']}")
            continue
        lines.append(
            f"{name:20}{figures['submitted']:>10}{figures['completed']:>10}"
            f"{figures['lost']:>6}{figures['duplicated']:>5}"
            f"{figures['time_to_completion_s']['p95']!s:>8}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=24, help="jobs per fault scenario")
    parser.add_argument("--model-delay", type=float, default=0.5, help="seconds per reply")
    parser.add_argument(
        "--outage", type=float, default=7.0, help="PostgreSQL down, seconds (> connect_timeout)"
    )
    parser.add_argument("--quiet-seconds", type=float, default=8.0, help="interactive alone")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "job_faults.json"
    )
    args = parser.parse_args()
    began = time.perf_counter()
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        scripted_openai(quote_s1, delay=args.model_delay) as (base_url, _),
    ):
        root = Path(tmp)
        setup = Setup(
            ingest_template(root),
            root,
            {
                "RAGWRIGHT_CHAT_PROVIDER": "openai",
                "RAGWRIGHT_CHAT_MODEL": "scripted",
                "RAGWRIGHT_CHAT_BASE_URL": base_url,
                "RAGWRIGHT_CHAT_API_KEY": "sk-scripted",
                "RAGWRIGHT_ANSWER_STYLE": "generated",
            },
            args,
        )
        for name, scenario in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            started = time.perf_counter()
            results[name] = scenario(setup)
            results[name]["scenario_seconds"] = round(time.perf_counter() - started, 1)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    record = {
        "cpus": os.cpu_count(),
        "settings": {
            "replicas": 2,
            "job_workers_per_replica": JOB_WORKERS,
            "batch_capacity": BATCH_CAPACITY,
            "job_lease_s": LEASE,
            "model_delay_s": args.model_delay,
            "answer_style": "generated",
            "jobs_per_scenario": args.jobs,
            "postgres_outage_s": args.outage,
            "index": "embedded, one copy of one ingested index per replica",
            "keys": "PostgreSQL key store shared by the replicas (RAGWRIGHT_DATABASE_URL)",
        },
        "scenarios": results,
        "run_seconds": round(time.perf_counter() - began, 1),
        "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    print(table(record))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
