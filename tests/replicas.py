"""Replicas of ``ragwright serve`` as real processes on loopback, with the servers they
share: a scratch PostgreSQL database (or a private cluster that can be restarted), a
throwaway Redis, and one ingested index copied into each replica's home.

Used by ``tests/service/test_replicas.py`` and ``benchmarks/job_faults.py``, so the
fault tests and the fault table exercise the same setup. Every process it starts is
stopped by the context manager that started it; nothing leaves loopback.

The embedded index is owned by one process per path, and no Qdrant server runs on this
machine, so each replica gets its own copy of one ingested index (``copy_index``): the
replicas answer from identical indexes, as they would from one Qdrant server.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

from tests.cli import copy_tree
from tests.failpoints import command, launcher_env

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "samples" / "corpus"
# The server of RAGWRIGHT_TEST_POSTGRES_URL (what `make pytest` and the other PostgreSQL
# tests read), without its database: scratch databases are made on it.
POSTGRES_SERVER = urlunsplit(
    urlsplit(
        os.environ.get(
            "RAGWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        )
    )._replace(path="", query="", fragment="")
)
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
# The job runner's line when it published a result (application/job_runner.py).
PUBLISHED = re.compile(r"job ([0-9a-f]{32}) succeeded")
RUNNER = re.compile(r"job runner (worker-[0-9a-f]+):")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ragwright(*args: str, env: Mapping[str, str]) -> str:
    """Run the CLI to completion; its stdout, or an error with its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ragwright {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def ingest_template(root: Path) -> Path:
    """A home with the sample corpus ingested (bundled embedder): the index to copy."""
    home = root / "template"
    ragwright("ingest", str(CORPUS), env={"RAGWRIGHT_HOME": str(home)})
    return home


def copy_index(template: Path, home: Path) -> Path:
    """``home`` with its own copy of the template's index (one process owns an index)."""
    home.mkdir(parents=True, exist_ok=True)
    copy_tree(template / "index", home / "index", dirs_exist_ok=True)
    return home


@contextlib.contextmanager
def scratch_database(server: str = POSTGRES_SERVER) -> Iterator[str]:
    """A database of its own on the machine's server (created, then dropped): its URL."""
    name = f"ragwright_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster of its own in ``directory`` (owned by the ``postgres`` user:
    initdb refuses root), on ``port``: stopped and started by the restart fault, never
    the machine's shared server."""

    directory: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *command: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def init(self) -> None:
        self.directory.mkdir(parents=True)
        shutil.chown(self.directory, "postgres", "postgres")
        os.chmod(self.directory, 0o700)
        self._as_postgres(
            str(POSTGRES_BIN / "initdb"),
            "-D",
            str(self.directory),
            "--auth=trust",
            "-U",
            "postgres",
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        self._as_postgres(
            str(POSTGRES_BIN / "pg_ctl"),
            "-D",
            str(self.directory),
            "-o",
            options,
            "-l",
            str(self.directory / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._as_postgres(
            str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.directory), "-m", "fast", "-w", "stop"
        )


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    # Directly under /tmp, not a root-only temporary directory: the postgres user must
    # reach it.
    cluster = PrivatePostgres(Path("/tmp") / f"ragwright-pg-{uuid.uuid4().hex[:12]}")
    cluster.init()
    cluster.start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            cluster.stop()
        shutil.rmtree(cluster.directory, ignore_errors=True)


@dataclass
class RedisServer:
    """A throwaway ``redis-server`` (no persistence) on ``port``."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not listen on {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Replica:
    """One ``ragwright serve`` process with its own home; its stderr goes to a log file
    that survives restarts (appended), so published lines of a killed process count."""

    name: str
    home: Path
    env: Mapping[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / "serve.log"

    def arguments(self) -> list[str]:
        return ["serve", "--port", str(self.port)]

    def start(self, failpoint: str | None = None, **extra: str) -> None:
        """Start the process (with a test-only ``failpoint``: tests/failpoints.py),
        ``extra`` added to its environment."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command(failpoint, *self.arguments()),
                env=launcher_env(
                    {**os.environ, **self.env, "RAGWRIGHT_HOME": str(self.home), **extra}
                ),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited:\n{self.log()}")
            time.sleep(0.2)
        raise RuntimeError(f"replica {self.name} not ready in {timeout} s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no release of leases (a crashed machine)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def worker_id(self) -> str | None:
        """The job runner's id of the current process (the last one in the log)."""
        found = RUNNER.findall(self.log())
        return found[-1] if found else None


class Worker(Replica):
    """A ``ragwright worker`` process (answer jobs without HTTP) with its own home: it
    must own its embedded index, so give it a copy no ``serve`` process holds."""

    def arguments(self) -> list[str]:
        return ["worker"]

    def wait_started(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "jobs at once" in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.log()}")
            time.sleep(0.2)
        raise RuntimeError(f"worker {self.name} not started in {timeout} s:\n{self.log()}")


@contextlib.contextmanager
def replicas(
    template: Path, root: Path, count: int, env: Mapping[str, str]
) -> Iterator[list[Replica]]:
    """``count`` replicas started together and ready, each on a copy of the index."""
    fleet = [
        Replica(chr(ord("a") + n), copy_index(template, root / f"replica-{n}"), env)
        for n in range(count)
    ]
    try:
        for replica in fleet:
            replica.start()
        for replica in fleet:
            replica.wait_ready()
        yield fleet
    finally:
        for replica in fleet:
            replica.stop()


def add_key(env: Mapping[str, str], home: Path) -> str:
    """One API key every replica accepts: made once, in the PostgreSQL key store they
    share (``env`` carries their ``RAGWRIGHT_DATABASE_URL``)."""
    out = ragwright(
        "keys",
        "add",
        "--no-tenant",
        "--scope",
        "answer",
        "--json",
        env={**env, "RAGWRIGHT_HOME": str(home)},
    )
    import json

    return str(json.loads(out)["key"])


def submit(
    url: str, secret: str, idempotency_key: str, question: str, *, timeout: float = 30.0
) -> httpx.Response:
    return httpx.post(
        url + "/v1/answer-jobs",
        json={"question": question},
        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": idempotency_key},
        timeout=timeout,
    )


def read_job(url: str, secret: str, job_id: str) -> dict[str, Any]:
    response = httpx.get(
        f"{url}/v1/answer-jobs/{job_id}",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def wait_finished(
    url: str, secret: str, job_ids: list[str], timeout: float
) -> dict[str, dict[str, Any]]:
    """Each job's last status, polled until all finished or ``timeout`` passed."""
    last: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    pending = list(job_ids)
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            with contextlib.suppress(httpx.HTTPError):
                last[job_id] = read_job(url, secret, job_id)
                if last[job_id]["state"] in ("succeeded", "failed", "cancelled", "expired"):
                    pending.remove(job_id)
        if pending:
            time.sleep(0.2)
    return last


def published(fleet: list[Replica]) -> Counter[str]:
    """How many times each job's result was published, over every replica's log."""
    return Counter(job for replica in fleet for job in PUBLISHED.findall(replica.log()))


def store_rows(database_url: str) -> list[dict[str, Any]]:
    """Every job row (id, idempotency key, state, attempts, lease owner)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT id, idempotency_key, state, attempts, lease_owner "
            "FROM ragwright.answer_jobs ORDER BY seq"
        ).fetchall()
    names = ("id", "idempotency_key", "state", "attempts", "lease_owner")
    return [dict(zip(names, row, strict=True)) for row in rows]


def key_count(database_url: str) -> int:
    """API keys in the PostgreSQL key store the replicas share."""
    with psycopg.connect(database_url) as conn:
        found = conn.execute("SELECT count(*) FROM ragwright.api_keys").fetchone()
    return int(found[0]) if found else 0


def live_leases(database_url: str) -> int:
    """Jobs running under a lease that has not run out, by the server's clock: the jobs
    the batch pool counts."""
    with psycopg.connect(database_url, connect_timeout=2) as conn:
        found = conn.execute(
            "SELECT count(*) FROM ragwright.answer_jobs "
            "WHERE state = 'running' AND lease_expires_at > clock_timestamp()"
        ).fetchone()
    return int(found[0]) if found else 0


def rows_by_state(database_url: str) -> dict[str, int]:
    """How many jobs the store holds in each state."""
    with psycopg.connect(database_url, connect_timeout=2) as conn:
        found = conn.execute(
            "SELECT state, count(*) FROM ragwright.answer_jobs GROUP BY state"
        ).fetchall()
    return {str(state): int(n) for state, n in found}
