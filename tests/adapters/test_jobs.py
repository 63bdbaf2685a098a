"""The job stores against the conformance suite: SQLite in a temporary file, PostgreSQL
on the loopback server (``RAGWRIGHT_TEST_POSTGRES_URL``), each test in its own schema."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
from ragwright.application.jobs import JobStore
from ragwright.errors import StorageError
from ragwright.testing.conformance.jobs import JobStoreConformance, submit

URL = os.environ.get("RAGWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class TestSqliteJobStore(JobStoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[JobStore]:
        self.clock = ManualClock()
        self.path = tmp_path / "jobs.sqlite3"
        self.store_expression = (
            f"__import__('ragwright.adapters.jobs').adapters.jobs.SqliteJobStore("
            f"__import__('pathlib').Path({str(self.path)!r}))"
        )
        store = SqliteJobStore(self.path, clock=self.clock)
        yield store
        store.close()

    def open_again(self, store: JobStore) -> JobStore:
        return SqliteJobStore(self.path, clock=self.clock)

    def elapse(self, seconds: float) -> None:
        self.clock.now += seconds

    def test_four_processes_run_sixty_jobs_exactly_once(
        self, store: JobStore, tmp_path: Path
    ) -> None:
        # The children use the real clock: so must the jobs they claim.
        store.close()
        real = SqliteJobStore(self.path)
        try:
            super().test_four_processes_run_sixty_jobs_exactly_once(real, tmp_path)
        finally:
            real.close()


class TestPostgresJobStore(JobStoreConformance):
    @pytest.fixture
    def store(self) -> Iterator[JobStore]:
        self.schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
        self.store_expression = (
            f"__import__('ragwright.adapters.jobs').adapters.jobs.PostgresJobStore("
            f"{URL!r}, schema={self.schema!r})"
        )
        try:
            store = PostgresJobStore(URL, schema=self.schema)
        except StorageError as error:
            pytest.fail(f"PostgreSQL is not reachable at {URL}: {error}")
        yield store
        store.close()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

    def open_again(self, store: JobStore) -> JobStore:
        return PostgresJobStore(URL, schema=self.schema)

    def elapse(self, seconds: float) -> None:
        time.sleep(seconds)


def test_sqlite_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    SqliteJobStore(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_sqlite_refuses_a_file_another_program_owns(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x)")
    with pytest.raises(StorageError, match="not a job store"):
        SqliteJobStore(path)


def test_sqlite_refuses_another_schema_version(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "jobs.sqlite3"
    SqliteJobStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE ragwright_schema SET version = 99")
    with pytest.raises(StorageError, match="schema version 99"):
        SqliteJobStore(path)


# The tables as schema version 1 made them (before grant_digest and the finished_at
# index), with one queued job of that version.
_V1_COLUMNS = (
    "id {text} NOT NULL UNIQUE, tenant {text}, tenant_key {text} NOT NULL, "
    "key_id {text} NOT NULL, idempotency_key {text} NOT NULL, input_hash {text} NOT NULL, "
    "request {json} NOT NULL, state {text} NOT NULL, created_at {time} NOT NULL, "
    "expires_at {time} NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, lease_owner {text}, "
    "lease_expires_at {time}, result {json}, failure {text}, finished_at {time}, "
    "UNIQUE (tenant_key, idempotency_key)"
)
_V1_JOB = (
    "INSERT INTO {table} (id, tenant, tenant_key, key_id, idempotency_key, input_hash, "
    "request, state, created_at, expires_at) VALUES ('old-job', 'acme', 't:acme', 'k1', "
    "'key-1', 'h', '{{\"question\": \"q?\"}}', 'queued', {now}, {later})"
)


def test_sqlite_upgrades_a_version_1_store_in_place_keeping_its_jobs(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "jobs.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE ragwright_schema (component TEXT PRIMARY KEY, version INTEGER)")
        db.execute("INSERT INTO ragwright_schema VALUES ('jobs', 1)")
        columns = _V1_COLUMNS.format(text="TEXT", json="TEXT", time="TEXT")
        db.execute(f"CREATE TABLE answer_jobs (seq INTEGER PRIMARY KEY, {columns}) STRICT")
        db.execute(
            _V1_JOB.format(
                table="answer_jobs",
                now="'2020-01-01T00:00:00.000000Z'",
                later="'2999-01-01T00:00:00.000000Z'",
            )
        )
    store = SqliteJobStore(path)
    try:
        old = store.get("old-job")
        assert old is not None and (old.state, old.grant_digest) == ("queued", None)
        new = store.get(submit(store, "key-2"))
        assert new is not None and new.grant_digest == "grant-1"
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM ragwright_schema").fetchall() == [(2,)]
    SqliteJobStore(path).close()  # the upgraded store opens again as it is


def test_postgres_upgrades_a_version_1_schema_in_place_keeping_its_jobs() -> None:
    schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            f"CREATE TABLE {schema}.ragwright_schema (component text PRIMARY KEY, version integer)"
        )
        conn.execute(f"INSERT INTO {schema}.ragwright_schema VALUES ('jobs', 1)")
        columns = _V1_COLUMNS.format(text="text", json="jsonb", time="timestamptz")
        conn.execute(
            f"CREATE TABLE {schema}.answer_jobs "
            f"(seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {columns})"
        )
        conn.execute(
            _V1_JOB.format(
                table=f"{schema}.answer_jobs", now="now()", later="now() + interval '1 hour'"
            )
        )
    try:
        stores = [PostgresJobStore(URL, schema=schema) for _ in range(2)]  # once, then as is
        old = stores[1].get("old-job")
        assert old is not None and (old.state, old.grant_digest) == ("queued", None)
        new = stores[1].get(submit(stores[0], "key-2"))
        assert new is not None and new.grant_digest == "grant-1"
        for store in stores:
            store.close()
        with psycopg.connect(URL) as conn:
            version = conn.execute(f"SELECT version FROM {schema}.ragwright_schema").fetchall()
        assert version == [(2,)]
    finally:
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_postgres_stores_opening_together_create_the_schema_once() -> None:
    schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
    stores: list[PostgresJobStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(PostgresJobStore(URL, schema=schema))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        submit(stores[0], "key-1")
        assert stores[3].counts().states == {"queued": 1}
    finally:
        for store in stores:
            store.close()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_postgres_unreachable_is_a_storage_error_without_the_password() -> None:
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        PostgresJobStore("postgresql://postgres:s3cret@127.0.0.1:1/postgres", connect_timeout=1.0)
    assert "s3cret" not in str(caught.value)
    assert time.monotonic() - started < 10


def test_postgres_store_recovers_after_its_connections_are_killed() -> None:
    schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
    store = PostgresJobStore(URL, schema=schema)
    try:
        submit(store, "key-1")
        # What a server restart does to open connections: the server ends them.
        with psycopg.connect(URL, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (f"ragwright-jobs-{schema}",),
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        assert store.counts().states == {"queued": 1}
    finally:
        store.close()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


class OutageProxy:
    """A TCP relay to PostgreSQL that can go down and come back on the same port: what
    the store sees when the server restarts (connections cut, new ones refused)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            if self._listener is not None:
                # shutdown wakes the thread blocked in accept(); close alone may leave it
                # accepting one more connection on Linux.
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)


def test_postgres_outage_is_a_storage_error_and_the_store_recovers() -> None:
    parts = conninfo_to_dict(URL)
    proxy = OutageProxy((str(parts.get("host", "127.0.0.1")), int(parts.get("port", 5432))))
    proxy.start()
    schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
    store = PostgresJobStore(
        make_conninfo(URL, host="127.0.0.1", port=proxy.port), schema=schema, connect_timeout=1.0
    )
    try:
        submit(store, "key-1")
        proxy.stop()
        started = time.monotonic()
        with pytest.raises(StorageError, match="PostgreSQL"):
            store.counts()
        assert time.monotonic() - started < 5  # refused at once, not hung
        proxy.start()
        deadline = time.monotonic() + 15
        while True:
            try:
                assert store.counts().states == {"queued": 1}
                break
            except StorageError:
                assert time.monotonic() < deadline, "the store did not reconnect in 15 s"
                time.sleep(0.2)
    finally:
        store.close()
        proxy.stop()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_after_a_long_outage_the_store_answers_within_about_a_second_of_the_server() -> None:
    # psycopg_pool's own backoff doubles (1, 2, 4, 8 s): after a 7 s outage its next
    # attempt could come 8 s after the server was back, every call failing meanwhile
    # (a replica answered 503 for seconds after a PostgreSQL restart). RecoveringPool
    # caps the delay at RECONNECT_MAX_DELAY. One connection at most: a pool that may grow
    # opens a new connection for a waiting call at once, without the backoff, and then the
    # cap would go untested; here only the replacement attempts can bring the store back.
    parts = conninfo_to_dict(URL)
    proxy = OutageProxy((str(parts.get("host", "127.0.0.1")), int(parts.get("port", 5432))))
    proxy.start()
    schema = f"test_jobs_{uuid.uuid4().hex[:12]}"
    store = PostgresJobStore(
        make_conninfo(URL, host="127.0.0.1", port=proxy.port),
        schema=schema,
        min_size=1,
        max_size=1,
        connect_timeout=1.0,
    )
    try:
        submit(store, "key-1")
        proxy.stop()
        down_until = time.monotonic() + 7.5
        while time.monotonic() < down_until:  # calls keep failing: the pool keeps retrying
            with pytest.raises(StorageError):
                store.counts()
            time.sleep(0.5)
        proxy.start()
        back = time.monotonic()
        while True:
            try:
                assert store.counts().states == {"queued": 1}
                break
            except StorageError:
                assert time.monotonic() - back < 10, "the store did not reconnect in 10 s"
        assert time.monotonic() - back < 2.5
    finally:
        store.close()
        proxy.stop()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
