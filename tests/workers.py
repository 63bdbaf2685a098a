"""Queued ingestion as real processes on loopback: a coordinator (``ragwright ingest
--queue``), ``ragwright ingest-worker`` processes, a scratch PostgreSQL database (the
queue) and the Qdrant REST double (``tests/adapters/qdrant_server.py``: qdrant-client's
local engine behind Qdrant's REST endpoints) served by the calling process.

Used by ``tests/test_ingest_workers.py`` and ``benchmarks/ingest_workers.py``, so the
test and the benchmark's equality check run the same setup. Every process started here
is stopped by the context that started it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.adapters.qdrant_server import QdrantRestDouble
from tests.failpoints import INGEST_ITEM_HANG, command, launcher_env

HANG = INGEST_ITEM_HANG


@dataclass
class Process:
    """A ``ragwright`` process (with ``failpoint``: tests/failpoints.py) whose stderr goes
    to a file."""

    name: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    log_path: Path
    # A test-only failpoint (tests/failpoints.py) the process runs with, if any.
    failpoint: str | None = None
    process: subprocess.Popen[bytes] | None = None
    stdout: list[str] = field(default_factory=list)

    def start(self) -> Process:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command(self.failpoint, *self.args),
                env=launcher_env({**os.environ, **self.env}),
                stdout=subprocess.PIPE,
                stderr=log,
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited before {text!r}:\n{self.log()}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: no {text!r} in {timeout} s:\n{self.log()}")

    def finish(self, timeout: float) -> tuple[int, str]:
        """Exit status and stdout, waiting up to ``timeout`` seconds."""
        assert self.process is not None
        out, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode, out.decode()

    def kill(self) -> None:
        """SIGKILL: no shutdown, the heartbeat just stops (a crashed machine)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def processes() -> Iterator[list[Process]]:
    """A list to append started processes to; all are stopped on exit."""
    started: list[Process] = []
    try:
        yield started
    except BaseException:
        # What each process said, so a failure (a timeout above all) shows why.
        for process in started:
            sys.stderr.write(f"--- {process.name} (stderr) ---\n{process.log()[-6000:]}\n")
        raise
    finally:
        for process in started:
            process.stop()


def server_env(home: Path, qdrant_url: str, collection: str, database: str) -> dict[str, str]:
    """Settings of a process writing into ``collection`` on the double, with the queue
    in ``database``."""
    return {
        "RAGWRIGHT_HOME": str(home),
        "RAGWRIGHT_BACKEND": "qdrant",
        "RAGWRIGHT_QDRANT_LOCATION": qdrant_url,
        "RAGWRIGHT_COLLECTION": collection,
        "RAGWRIGHT_DATABASE_URL": database,
    }


def ragwright_run(
    *args: str, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``ragwright ARGS`` in a fresh process with ``env`` over this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
        timeout=timeout,
    )


def ragwright_json(*args: str, env: Mapping[str, str], timeout: float = 300) -> dict[str, Any]:
    done = ragwright_run(*args, "--json", env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"ragwright {' '.join(args)} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def wait_for_items(database: str, timeout: float) -> None:
    """Until the coordinator has sealed its run (every item is on the queue)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.errors.UndefinedTable), psycopg.connect(database) as db:
            row = db.execute("SELECT count(*) FROM ragwright.ingest_runs WHERE state = 'sealed'")
            found = row.fetchone()
            if found and found[0]:
                return
        time.sleep(0.1)
    raise RuntimeError(f"no sealed run in {timeout} s")


def claims(database: str) -> list[tuple[int, str]]:
    """Every (item, worker) attempt, in claim order."""
    with psycopg.connect(database) as db:
        rows = db.execute(
            "SELECT item, worker FROM ragwright.ingest_item_claims ORDER BY claimed_at"
        ).fetchall()
    return [(int(item), str(worker)) for item, worker in rows]


def results(database: str) -> list[tuple[int, str, str]]:
    """Every recorded (item, outcome, worker)."""
    with psycopg.connect(database) as db:
        rows = db.execute(
            "SELECT item, outcome, worker FROM ragwright.ingest_item_results ORDER BY item"
        ).fetchall()
    return [(int(item), str(outcome), str(worker)) for item, outcome, worker in rows]


@dataclass(frozen=True)
class StoredPoint:
    payload_sha256: str
    dense: tuple[float, ...]
    sparse: tuple[tuple[int, ...], tuple[float, ...]]


def snapshot(double: QdrantRestDouble, collection: str) -> dict[str, StoredPoint]:
    """Every point of ``collection``: id → payload hash, dense and sparse vector."""
    points: dict[str, StoredPoint] = {}
    offset: Any = None
    with double.lock:
        while True:
            records, offset = double.engine.scroll(
                collection, limit=256, offset=offset, with_payload=True, with_vectors=True
            )
            for record in records:
                vectors = record.vector if isinstance(record.vector, dict) else {}
                dense = next(v for v in vectors.values() if isinstance(v, list))
                sparse = next((v for v in vectors.values() if not isinstance(v, list)), None)
                points[str(record.id)] = StoredPoint(
                    hashlib.sha256(json.dumps(record.payload, sort_keys=True).encode()).hexdigest(),
                    tuple(float(x) for x in dense),
                    (
                        (tuple(sparse.indices), tuple(round(v, 9) for v in sparse.values))
                        if sparse is not None
                        else ((), ())
                    ),
                )
            if offset is None:
                return points


def max_dense_difference(a: dict[str, StoredPoint], b: dict[str, StoredPoint]) -> float:
    """The largest absolute difference between two snapshots' dense vectors (same ids)."""
    return max(
        (abs(x - y) for key in a for x, y in zip(a[key].dense, b[key].dense, strict=True)),
        default=0.0,
    )
