"""Job stores: ``SqliteJobStore`` (embedded default) and ``PostgresJobStore`` (replicas).

Both hold one table, ``answer_jobs``, with the same columns, and a schema-version row in
``ragwright_schema``. The rules live in SQL that both share (:class:`_SqlJobStore` over
the statements of :mod:`ragwright.adapters.queries.jobs`, written once for either
engine); a backend supplies only its clock, its transactions, its JSON and timestamp
encodings.

Schema versions: 1 had no ``grant_digest`` column and no ``finished_at`` index; a
store of version 1 is upgraded in place on open (the query module's ``UPGRADES``: a
nullable column and an index, so replicas still running the previous ragwright keep
reading and writing it until they restart, when they refuse the newer version). Any
other version is refused.

- Idempotency: ``UNIQUE (tenant_key, idempotency_key)``, where ``tenant_key`` is ``''``
  for an untenanted caller and ``'t:' + tenant`` otherwise (a NULL tenant would not
  collide in a unique index). ``submit`` inserts with ``ON CONFLICT DO NOTHING`` and
  then reads the row that holds the key: concurrent submits of one key make one job,
  because the constraint decides, not a check before the insert.
- Claim: one transaction that counts the live leases (the job pool, per tenant) and
  takes the oldest claimable row. SQLite serialises it with ``BEGIN IMMEDIATE``;
  PostgreSQL with ``pg_advisory_xact_lock`` on a key per schema (so two replicas never
  both see one free slot), then ``FOR UPDATE SKIP LOCKED`` on the row.
- ``renew``, ``release`` and ``publish`` change a row only while ``lease_owner`` is the
  worker and the state is ``running``: a worker whose lease was taken over, or whose job
  was cancelled, changes nothing, so a result is published once.
- "Now" is the database server's ``clock_timestamp()`` on PostgreSQL (replicas whose
  clocks disagree agree on leases) and an injectable clock on SQLite (one machine).

PostgreSQL connections come from a small pool that checks each connection before
lending it, so after a server restart the next call gets a fresh connection. A call
made while the server is down raises :class:`~ragwright.errors.StorageError` after at
most ``connect_timeout`` seconds; it is not retried here (the worker loop decides).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import psycopg
import psycopg_pool
from psycopg.types.json import Jsonb

from ragwright.adapters.pg import RecoveringPool, probe, redacted
from ragwright.adapters.queries.dialect import POSTGRES, SQLITE, SqlSession
from ragwright.adapters.queries.jobs import JobQueries
from ragwright.adapters.sqlite import BUSY_TIMEOUT, SqliteFile
from ragwright.application.jobs import AnswerJob, JobCounts, JobLimits, Submitted
from ragwright.errors import IdempotencyConflict, JobNotFound, RequestError, StorageError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
CONNECT_TIMEOUT = 5.0
_TIMESTAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width: compares correctly as text
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class _SqlJobStore:
    """The job rules over :class:`JobQueries`; subclasses give the transactions."""

    _q: JobQueries
    _where: str  # names the store in errors, never a password

    def submit(
        self,
        *,
        tenant: str | None,
        key_id: str,
        idempotency_key: str,
        input_hash: str,
        request: Mapping[str, Any],
        ttl_seconds: float,
        grant_digest: str,
    ) -> Submitted:
        if not idempotency_key:
            raise RequestError("idempotency_key", "must not be empty")
        if ttl_seconds <= 0:
            raise RequestError("ttl_seconds", f"must be positive, got {ttl_seconds}")
        job_id = uuid.uuid4().hex
        key = {"tenant_key": _tenant_key(tenant), "idempotency_key": idempotency_key}
        with self._transaction(mode="write") as (db, now):
            db.rows(
                self._q.submit,
                {
                    **key,
                    "id": job_id,
                    "tenant": tenant,
                    "key_id": key_id,
                    "input_hash": input_hash,
                    "request": self._json(request),
                    "now": now,
                    "expires_at": self._later(now, ttl_seconds),
                    "grant_digest": grant_digest,
                },
            )
            rows = db.rows(self._q.by_key, key)
        job = self._job(rows[0])
        if job.input_hash != input_hash:
            raise IdempotencyConflict(idempotency_key, job.id)
        return Submitted(job, created=job.id == job_id)

    def get(self, job_id: str) -> AnswerJob | None:
        with self._transaction(mode="read") as (db, _):
            rows = db.rows(self._q.by_id, {"id": job_id})
        return self._job(rows[0]) if rows else None

    def cancel(self, job_id: str) -> AnswerJob:
        with self._transaction(mode="write") as (db, now):
            db.rows(self._q.cancel, {"now": now, "id": job_id})
            rows = db.rows(self._q.by_id, {"id": job_id})
        if not rows:
            raise JobNotFound(job_id)
        return self._job(rows[0])

    def claim(self, worker: str, *, lease_seconds: float, limits: JobLimits) -> AnswerJob | None:
        if limits.pool < 1:
            raise RequestError("limits.pool", f"must be at least 1, got {limits.pool}")
        if limits.per_tenant is not None and limits.per_tenant < 1:
            raise RequestError(
                "limits.per_tenant", f"must be at least 1 or None, got {limits.per_tenant}"
            )
        with self._transaction(mode="claim") as (db, now):
            if db.rows(self._q.live, {"now": now})[0][0] >= limits.pool:
                return None
            if limits.per_tenant is None:
                found = db.rows(self._q.claimable, {"now": now})
            else:
                found = db.rows(
                    self._q.claimable_for_tenants, {"now": now, "per_tenant": limits.per_tenant}
                )
            if not found:
                return None
            rows = db.rows(
                self._q.take,
                {
                    "worker": worker,
                    "lease_until": self._later(now, lease_seconds),
                    "id": found[0][0],
                },
            )
        return self._job(rows[0])

    def renew(self, job_id: str, worker: str, *, lease_seconds: float) -> bool:
        with self._transaction(mode="write") as (db, now):
            rows = db.rows(
                self._q.renew,
                {
                    "lease_until": self._later(now, lease_seconds),
                    "id": job_id,
                    "worker": worker,
                    "now": now,
                },
            )
        return bool(rows)

    def release(self, job_id: str, worker: str, *, reason: str) -> bool:
        with self._transaction(mode="write") as (db, _):
            rows = db.rows(self._q.release, {"id": job_id, "worker": worker})
        if rows:
            logger.info("job %s released by %s: %s", job_id, worker, reason)
        return bool(rows)

    def publish(
        self,
        job_id: str,
        worker: str,
        *,
        state: Literal["succeeded", "failed"],
        result: Mapping[str, Any] | None = None,
        failure: str | None = None,
    ) -> bool:
        if state not in ("succeeded", "failed"):
            raise RequestError("state", f"must be 'succeeded' or 'failed', got {state!r}")
        with self._transaction(mode="write") as (db, now):
            rows = db.rows(
                self._q.publish,
                {
                    "state": state,
                    "result": None if result is None else self._json(result),
                    "failure": failure,
                    "now": now,
                    "id": job_id,
                    "worker": worker,
                },
            )
        return bool(rows)

    def expire(self) -> int:
        with self._transaction(mode="write") as (db, now):
            return len(db.rows(self._q.expire, {"now": now}))

    def purge(self, *, older_than: float) -> int:
        if older_than < 0:
            raise RequestError("older_than", f"must not be negative, got {older_than}")
        with self._transaction(mode="write") as (db, now):
            return len(db.rows(self._q.purge, {"before": self._later(now, -older_than)}))

    def counts(self) -> JobCounts:
        with self._transaction(mode="read") as (db, now):
            states = db.rows(self._q.states)
            oldest = db.rows(self._q.oldest_queued)[0][0]
        age = None if oldest is None else max(0.0, self._seconds(now) - self._seconds(oldest))
        return JobCounts({str(s): int(n) for s, n in states}, age)

    # What a backend supplies.

    def _transaction(
        self, *, mode: _Mode
    ) -> contextlib.AbstractContextManager[tuple[SqlSession, Any]]:
        raise NotImplementedError

    def _later(self, now: Any, seconds: float) -> Any:
        raise NotImplementedError

    def _seconds(self, moment: Any) -> float:
        raise NotImplementedError

    def _text(self, moment: Any) -> str:
        raise NotImplementedError

    def _json(self, value: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def _mapping(self, value: Any) -> Mapping[str, Any]:
        raise NotImplementedError

    def _job(self, row: Sequence[Any]) -> AnswerJob:
        try:
            (
                job_id,
                tenant,
                key_id,
                idempotency_key,
                input_hash,
                request,
                state,
                created_at,
                expires_at,
                attempts,
                lease_owner,
                lease_expires_at,
                result,
                failure,
                finished_at,
                grant_digest,
            ) = row
            return AnswerJob(
                id=str(job_id),
                tenant=tenant,
                key_id=str(key_id),
                idempotency_key=str(idempotency_key),
                input_hash=str(input_hash),
                request=self._mapping(request),
                state=state,
                created_at=self._text(created_at),
                expires_at=self._text(expires_at),
                attempts=int(attempts),
                lease_owner=lease_owner,
                lease_expires_at=None if lease_expires_at is None else self._text(lease_expires_at),
                result=None if result is None else self._mapping(result),
                failure=failure,
                finished_at=None if finished_at is None else self._text(finished_at),
                grant_digest=grant_digest,
            )
        except (TypeError, ValueError) as error:
            raise StorageError(
                self._where, f"job {row[0]!r} does not read back: {error}"
            ) from error


_Mode = Literal["read", "write", "claim"]


class SqliteJobStore(SqliteFile, _SqlJobStore):
    """A :class:`~ragwright.application.jobs.JobStore` in one SQLite file.

    Threads share one connection under a lock; processes share the file in WAL mode,
    each write waiting up to ``busy_timeout`` seconds for another's. ``clock`` gives
    seconds since the epoch (tests pass a manual clock to make leases run out);
    ``factory`` is the ``sqlite3`` connection class (a test injects faults through it).
    Every ``sqlite3`` error, the ``COMMIT``'s included, is a :class:`StorageError`.

    Raises:
        StorageError: the file cannot be opened, holds other tables, or was written by
            another schema version.
    """

    what = "job store"
    _q = JobQueries(SQLITE)

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = BUSY_TIMEOUT,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self._where = str(path)
        self._clock = clock
        self._open(path, busy_timeout, factory=factory)

    def _migrate(self) -> None:
        q = self._q
        with self._transaction(mode="claim") as (db, _):
            tables = {row[0] for row in db.rows(_SQLITE_TABLES)}
            if not tables:
                for statement in (q.create_versions, *q.create):
                    db.rows(statement)
                db.rows(q.record_version, {"version": SCHEMA_VERSION})
                return
            if "ragwright_schema" not in tables or "answer_jobs" not in tables:
                # Never add a table to a database something else owns.
                raise StorageError(str(self.path), "holds other tables: not a job store")
            for statement, params in q.upgrade(_version(db.rows(q.version))):
                db.rows(statement, params)
            _check_version(db.rows(q.version), self._where)

    @contextlib.contextmanager
    def _transaction(self, *, mode: _Mode) -> Iterator[tuple[SqlSession, Any]]:
        # Every write is BEGIN IMMEDIATE: it takes the write lock up front and waits for
        # it (busy_timeout) rather than failing when a read would have to upgrade; the
        # claim's count and update are then one serialised step across processes. A
        # read (a status poll) takes no lock: WAL gives it a snapshot beside writers.
        begin = "BEGIN" if mode == "read" else "BEGIN IMMEDIATE"
        with self._write("job store busy or unwritable", begin=begin) as db:
            yield SqlSession(db), _stamp(self._clock())

    def _later(self, now: Any, seconds: float) -> str:
        return _stamp(self._seconds(now) + seconds)

    def _seconds(self, moment: Any) -> float:
        return datetime.strptime(str(moment), _TIMESTAMP).replace(tzinfo=UTC).timestamp()

    def _text(self, moment: Any) -> str:
        return str(moment)

    def _json(self, value: Mapping[str, Any]) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def _mapping(self, value: Any) -> Mapping[str, Any]:
        loaded = json.loads(str(value))
        if not isinstance(loaded, dict):
            raise ValueError(f"expected a JSON object, found {type(loaded).__name__}")
        return loaded


class PostgresJobStore(_SqlJobStore):
    """A :class:`~ragwright.application.jobs.JobStore` in PostgreSQL, for replicas.

    ``url`` is a libpq connection string; the tables live in ``schema`` (created on
    open, under an advisory lock so replicas starting together do not race on DDL).
    Connections come from a pool of ``min_size``..``max_size``, each checked before it
    is lent, so the store recovers by itself once a restarted server answers again.

    Raises:
        StorageError: the server is unreachable (within ``connect_timeout`` seconds), or
            the schema was written by another schema version. Every method raises it,
            without retrying, while the server is down.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "ragwright",
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise RequestError(
                "schema", f"must be a lower-case SQL identifier ([a-z_][a-z0-9_]*), got {schema!r}"
            )
        self.schema = schema
        self._q = JobQueries(POSTGRES, schema)
        self._timeout = connect_timeout
        probe(url, what="answer job", timeout=connect_timeout)
        self._where = redacted(url)
        # psycopg_pool logs each failed connection attempt itself; the caller sees ours.
        self._pool = RecoveringPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={
                "connect_timeout": max(1, round(connect_timeout)),
                "application_name": f"ragwright-jobs-{schema}",
            },
            check=psycopg_pool.ConnectionPool.check_connection,
            timeout=connect_timeout,
            open=False,
            name=f"ragwright-jobs-{schema}",
        )
        self._pool.open(wait=False)
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    def _migrate(self) -> None:
        q = self._q
        with self._connection() as conn:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragwright.ddl:{self.schema}",)
            )
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            db = SqlSession(conn)
            db.rows(q.create_versions)
            rows = db.rows(q.version)
            if rows:
                upgrades = q.upgrade(_version(rows))
            else:
                upgrades = [(statement, {}) for statement in q.create]
                db.rows(q.record_version, {"version": SCHEMA_VERSION})
            for statement, params in upgrades:
                db.rows(statement, params)
            rows = db.rows(q.version)
        _check_version(rows, f"{self._where} schema {self.schema}")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        try:
            # The pool's context commits on a clean exit and rolls back on an error.
            with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except psycopg_pool.PoolTimeout as error:
            raise StorageError(
                self._where, f"PostgreSQL did not answer within {self._timeout} s: {error}"
            ) from error
        except psycopg_pool.PoolClosed as error:
            raise StorageError(self._where, "the job store is closed") from error
        except psycopg.Error as error:
            # Any server error, the commit's included (the pool's context commits on exit).
            raise StorageError(self._where, f"PostgreSQL refused the call: {error}") from error

    @contextlib.contextmanager
    def _transaction(self, *, mode: _Mode) -> Iterator[tuple[SqlSession, Any]]:
        with self._connection() as conn:
            if mode == "claim":
                # The claim counts live leases and takes a slot: one claim at a time per
                # schema across every replica, or two could both take the last slot.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))",
                    (f"ragwright.claim:{self.schema}",),
                )
            now = conn.execute("SELECT clock_timestamp()").fetchone()[0]
            yield SqlSession(conn), now

    def _later(self, now: Any, seconds: float) -> datetime:
        moment: datetime = now + timedelta(seconds=seconds)
        return moment

    def _seconds(self, moment: Any) -> float:
        return float(moment.timestamp())

    def _text(self, moment: Any) -> str:
        return str(moment.astimezone(UTC).strftime(_TIMESTAMP))

    def _json(self, value: Mapping[str, Any]) -> Any:
        return Jsonb(dict(value))

    def _mapping(self, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, found {type(value).__name__}")
        return value

    def close(self) -> None:
        self._pool.close()


def _tenant_key(tenant: str | None) -> str:
    return "" if tenant is None else f"t:{tenant}"


# Every table of a SQLite file (a job store holds exactly its two).
_SQLITE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


def _version(rows: Sequence[Sequence[Any]]) -> object:
    return rows[0][0] if rows else None


def _check_version(rows: Sequence[Sequence[Any]], where: str) -> None:
    version = rows[0][0] if rows else None
    if version != SCHEMA_VERSION:
        raise StorageError(
            where,
            f"job store schema version {version}, this ragwright reads {SCHEMA_VERSION}; "
            "use the ragwright that wrote it",
        )


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime(_TIMESTAMP)
