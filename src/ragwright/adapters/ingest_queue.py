"""``PgQueuerIngestQueue``: ingestion work items on pgqueuer's queue, in PostgreSQL.

The queue is pgqueuer's (1.6), installed in schema ``ragwright`` with the prefix
``ingest_`` (tables ``ingest_pgqueuer``, ``ingest_pgqueuer_log``, ...; NOTIFY channel
``ragwright_ingest``). pgqueuer claims an item with ``FOR UPDATE SKIP LOCKED``, keeps a
heartbeat on it while a worker runs it (every ``lease / 2``), and its dequeue takes
again an item whose heartbeat is older than ``lease``: a killed worker's item goes to
another worker by itself. Beside it, three small tables of ours:

- ``ingest_runs``: one row per run (``open``, ``sealed``, then ``finished``, ``failed``
  or ``abandoned``), renewed by the coordinator while it waits. A worker drops, without
  running it, an item whose run ended or was not renewed for ``4 × lease`` (its
  coordinator died): such an item would write documents of a run nobody sums.
- ``ingest_item_results``: ``PRIMARY KEY (run_id, item)``, inserted with
  ``ON CONFLICT DO NOTHING``: the first recorded result of an item stands, so an item
  run twice counts once. The coordinator's summary sums these rows.
- ``ingest_item_claims``: one row per attempt (run, item, worker), for operators and
  tests: a reclaimed item shows two.

The tables and pgqueuer's objects are created together, once, under the advisory lock
and schema version every PostgreSQL store here uses (``adapters/pg.py``).

pgqueuer's worker is asyncio; each item runs ``handle`` in a thread, so heartbeats go
on while it embeds. A worker runs up to two items at once: pgqueuer's smallest
per-worker cap (``max_concurrent_tasks`` must be at least twice the dequeue batch of 1).
pgqueuer's psycopg driver reads NOTIFYs on the connection its queries use, holding it
for up to a second per wait; :class:`_PairedDriver` gives the queries a connection of
their own (measured: 6 items of 0.2 s took 7.3 s through one connection, 0.7 s apart).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver, SyncPsycopgDriver
from pgqueuer.adapters.persistence import qb
from pgqueuer.adapters.persistence.queries import Queries, SyncQueries
from pgqueuer.core.qm import QueueManager
from pgqueuer.domain.errors import RetryRequested
from pgqueuer.domain.models import Job
from pgqueuer.domain.settings import DBSettings, Durability
from pgqueuer.domain.types import Channel
from psycopg import AsyncRawCursor
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ragwright.adapters.pg import create_schema, open_pool, redacted
from ragwright.application.ingest_queue import ItemResult, RunState, WorkerStats, WorkItem
from ragwright.errors import IndexUnavailable, ProviderError, StorageError

logger = logging.getLogger("ragwright.ingest")

SCHEMA = "ragwright"
SCHEMA_VERSION = 1
ENTRYPOINT = "ragwright-ingest-item"
QUEUE_SETTINGS = DBSettings(
    prefix="ingest_",
    db_schema=SCHEMA,
    channel=Channel("ragwright_ingest"),
    durability=Durability.durable,
)
# A run not renewed by its coordinator for this many leases is abandoned.
ABANDON_AFTER_LEASES = 4
# Items one worker process runs at once: pgqueuer's smallest per-worker cap.
ITEMS_AT_ONCE = 2
# Times an item is put back after a transient failure (index server unreachable, a
# provider's transient/throttled/timeout failure) before it is recorded as failed.
TRANSIENT_RETRIES = 3
# How often an idle worker checks the queue (and its stop event), seconds at most.
_IDLE_POLL = 0.5

_TABLES = (
    """CREATE TABLE ingest_runs (
        run_id TEXT PRIMARY KEY,
        state TEXT NOT NULL
            CHECK (state IN ('open', 'sealed', 'finished', 'failed', 'abandoned')),
        items INTEGER,
        created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        renewed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        finished_at TIMESTAMPTZ
    )""",
    """CREATE TABLE ingest_item_results (
        seq BIGSERIAL UNIQUE,
        run_id TEXT NOT NULL REFERENCES ingest_runs (run_id) ON DELETE CASCADE,
        item INTEGER NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('done', 'failed')),
        report JSONB,
        error TEXT,
        worker TEXT NOT NULL,
        recorded_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (run_id, item)
    )""",
    """CREATE TABLE ingest_item_claims (
        run_id TEXT NOT NULL REFERENCES ingest_runs (run_id) ON DELETE CASCADE,
        item INTEGER NOT NULL,
        worker TEXT NOT NULL,
        claimed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
    )""",
    "CREATE INDEX ingest_item_claims_run ON ingest_item_claims (run_id, item)",
)
# Finished runs' rows are kept this long (operators read them), then dropped.
_KEEP_RUNS = "7 days"


class PgQueuerIngestQueue:
    """An :class:`~ragwright.application.ingest_queue.IngestQueue` on pgqueuer.

    Raises:
        StorageError: the server is unreachable, or the tables were written by another
            schema version.
    """

    def __init__(self, url: str, *, lease: float) -> None:
        self._url = url
        self._lease = lease
        self._pool = open_pool(url, SCHEMA, what="ingest queue")
        self._enqueue_connection: psycopg.Connection[Any] | None = None
        try:
            create_schema(
                self._pool,
                url,
                SCHEMA,
                component="ingest_queue",
                version=SCHEMA_VERSION,
                create=_create_tables,
            )
        except BaseException:
            self._pool.close()
            raise

    # --- coordinator ------------------------------------------------------------------

    def open_run(self, run_id: str) -> None:
        with self._db() as db:
            db.execute(
                "DELETE FROM ingest_runs WHERE finished_at < clock_timestamp() - %s::interval",
                (_KEEP_RUNS,),
            )
            db.execute("INSERT INTO ingest_runs (run_id, state) VALUES (%s, 'open')", (run_id,))

    def enqueue(self, run_id: str, number: int, body: Mapping[str, Any]) -> None:
        payload = json.dumps({"run": run_id, "item": number, "body": body}).encode()
        try:
            if self._enqueue_connection is None or self._enqueue_connection.closed:
                self._enqueue_connection = psycopg.connect(
                    self._url, autocommit=True, connect_timeout=5
                )
            queries = SyncQueries(
                SyncPsycopgDriver(self._enqueue_connection),
                qbq=qb.QueryQueueBuilder(QUEUE_SETTINGS),
            )
            queries.enqueue(ENTRYPOINT, payload)
        except psycopg.Error as error:
            raise StorageError(redacted(self._url), f"cannot queue a work item: {error}") from error
        self.renew_run(run_id)

    def seal_run(self, run_id: str, items: int) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE ingest_runs SET state = 'sealed', items = %s, "
                "renewed_at = clock_timestamp() WHERE run_id = %s",
                (items, run_id),
            )

    def renew_run(self, run_id: str) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE ingest_runs SET renewed_at = clock_timestamp() WHERE run_id = %s",
                (run_id,),
            )

    def results(self, run_id: str, *, known: Collection[int] = ()) -> list[ItemResult]:
        # By item, not "seq > the last seen": a BIGSERIAL is taken at insert and seen
        # at commit, so two workers committing out of order would hide the lower one
        # from such a poll forever (a coordinator waited on "1 of 10 outstanding").
        with self._db() as db:
            rows = db.execute(
                "SELECT seq, item, worker, report, error FROM ingest_item_results "
                "WHERE run_id = %s AND NOT (item = ANY(%s)) ORDER BY seq",
                (run_id, sorted(known)),
            ).fetchall()
        return [
            ItemResult(number=item, worker=worker, report=report, error=error, sequence=seq)
            for seq, item, worker, report, error in rows
        ]

    def close_run(self, run_id: str, state: RunState) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE ingest_runs SET state = %s, finished_at = clock_timestamp() "
                "WHERE run_id = %s",
                (state, run_id),
            )

    # --- worker -----------------------------------------------------------------------

    def work(
        self,
        handle: Callable[[WorkItem], Mapping[str, Any]],
        *,
        worker: str,
        idle_exit: float | None = None,
        stop: threading.Event | None = None,
    ) -> WorkerStats:
        counts = _Counts()
        asyncio.run(self._work(handle, worker, idle_exit, stop or threading.Event(), counts))
        return WorkerStats(
            done=counts.done, failed=counts.failed, skipped=counts.skipped, retried=counts.retried
        )

    async def _work(
        self,
        handle: Callable[[WorkItem], Mapping[str, Any]],
        worker: str,
        idle_exit: float | None,
        stop: threading.Event,
        counts: _Counts,
    ) -> None:
        try:
            listen = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=5
            )
            query = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=5
            )
        except psycopg.Error as error:
            raise StorageError(redacted(self._url), f"cannot reach the queue: {error}") from error
        try:
            queries = Queries(
                _PairedDriver(listen, query),
                qbe=qb.QueryBuilderEnvironment(QUEUE_SETTINGS),
                qbq=qb.QueryQueueBuilder(QUEUE_SETTINGS),
                qbs=qb.QuerySchedulerBuilder(QUEUE_SETTINGS),
            )
            manager = QueueManager(queries, channel=Channel(QUEUE_SETTINGS.channel))

            @manager.entrypoint(ENTRYPOINT)
            async def run_item(job: Job) -> None:
                await asyncio.to_thread(self._run_item, job, handle, worker, counts)

            watcher = asyncio.create_task(self._watch(manager, queries, idle_exit, stop))
            try:
                await manager.run(
                    dequeue_timeout=timedelta(seconds=min(self._lease / 2, 5.0)),
                    batch_size=1,
                    max_concurrent_tasks=ITEMS_AT_ONCE,
                    heartbeat_timeout=timedelta(seconds=self._lease),
                )
            finally:
                watcher.cancel()
        finally:
            await listen.close()
            await query.close()

    async def _watch(
        self,
        manager: QueueManager,
        queries: Queries,
        idle_exit: float | None,
        stop: threading.Event,
    ) -> None:
        """Shut the manager down when ``stop`` is set, or after ``idle_exit`` seconds in
        which no item was queued or held by any worker (a dead worker's item is still
        held until it is taken again, so an idle worker waits for it)."""
        idle_since: float | None = None
        while not manager.shutdown.is_set():
            await asyncio.sleep(_IDLE_POLL)
            if stop.is_set():
                manager.shutdown.set()
                return
            if idle_exit is None:
                continue
            pending = sum(
                s.count
                for s in await queries.queue_size()
                if s.entrypoint == ENTRYPOINT and s.status in ("queued", "picked")
            )
            if pending or manager.job_context:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= idle_exit:
                manager.shutdown.set()
                return

    def _run_item(
        self,
        job: Job,
        handle: Callable[[WorkItem], Mapping[str, Any]],
        worker: str,
        counts: _Counts,
    ) -> None:
        envelope = json.loads(job.payload or b"{}")
        run_id, number = str(envelope["run"]), int(envelope["item"])
        try:
            if not self._claim(run_id, number, worker):
                counts.add("skipped")
                return
        except StorageError as error:
            # The queue's database did not answer: leave the item to be taken again.
            logger.warning("ingest run %s item %d: %s; retried", run_id, number, error)
            raise RetryRequested(delay=timedelta(seconds=self._lease)) from error
        started = time.monotonic()
        try:
            report = handle(WorkItem(run_id, number, envelope["body"]))
        except Exception as error:
            detail = f"{type(error).__name__}: {error}"
            if _transient(error) and job.attempts < TRANSIENT_RETRIES:
                # The index server or the embedding provider was briefly unavailable:
                # the item goes back on the queue (it converges when run again).
                logger.warning(
                    "ingest run %s item %d: %s; retried in %.0f s",
                    run_id,
                    number,
                    detail,
                    self._lease,
                )
                counts.add("retried")
                raise RetryRequested(
                    delay=timedelta(seconds=self._lease), reason=type(error).__name__
                ) from error
            logger.warning("ingest run %s item %d failed: %s", run_id, number, detail)
            self._record(run_id, number, worker, None, detail)
            counts.add("failed")
            return
        self._record(run_id, number, worker, report, None)
        counts.add("done")
        logger.info(
            "ingest run %s item %d done in %.1f s (%d chunks)",
            run_id,
            number,
            time.monotonic() - started,
            int(report.get("chunks", 0)),
        )

    def _claim(self, run_id: str, number: int, worker: str) -> bool:
        """Record this attempt, unless the item already has a result or its run is
        over or abandoned (then it is dropped: ``False``)."""
        with self._db() as db:
            row = db.execute(
                "SELECT state IN ('open', 'sealed') AND renewed_at > clock_timestamp() "
                "- make_interval(secs => %s), "
                "EXISTS (SELECT 1 FROM ingest_item_results WHERE run_id = %s AND item = %s) "
                "FROM ingest_runs WHERE run_id = %s",
                (ABANDON_AFTER_LEASES * self._lease, run_id, number, run_id),
            ).fetchone()
            if row is None or not row[0] or row[1]:
                logger.info(
                    "ingest run %s item %d dropped (%s)",
                    run_id,
                    number,
                    "recorded already" if row is not None and row[1] else "run over or abandoned",
                )
                return False
            db.execute(
                "INSERT INTO ingest_item_claims (run_id, item, worker) VALUES (%s, %s, %s)",
                (run_id, number, worker),
            )
        return True

    def _record(
        self,
        run_id: str,
        number: int,
        worker: str,
        report: Mapping[str, Any] | None,
        error: str | None,
    ) -> None:
        try:
            with self._db() as db:
                db.execute(
                    "INSERT INTO ingest_item_results "
                    "(run_id, item, outcome, report, error, worker) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id, item) DO NOTHING",
                    (
                        run_id,
                        number,
                        "failed" if report is None else "done",
                        None if report is None else Jsonb(dict(report)),
                        error,
                        worker,
                    ),
                )
        except StorageError as failure:
            # Not recorded: the item runs again (idempotent) once the database answers.
            logger.warning("ingest run %s item %d: %s; retried", run_id, number, failure)
            raise RetryRequested(delay=timedelta(seconds=self._lease)) from failure

    def _db(self) -> _Transaction:
        return _Transaction(self._pool, self._url)

    def close(self) -> None:
        if self._enqueue_connection is not None:
            self._enqueue_connection.close()
        self._pool.close()


def _transient(error: Exception) -> bool:
    """A failure another attempt may cure: the index server or the queue's database did
    not answer, or a provider failed transiently (its category says so)."""
    if isinstance(error, ProviderError):
        return error.category.retryable
    return isinstance(error, (IndexUnavailable, StorageError))


def _create_tables(db: psycopg.Connection[Any]) -> None:
    for statement in _TABLES:
        db.execute(statement)
    db.execute(qb.QueryBuilderEnvironment(QUEUE_SETTINGS).build_install_query(create_schema=False))


@dataclass
class _Counts:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    retried: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


class _Transaction:
    """A pooled connection in one transaction; a server error is a StorageError."""

    def __init__(self, pool: Any, url: str) -> None:
        self._pool = pool
        self._url = url
        self._context: Any = None

    def __enter__(self) -> psycopg.Connection[Any]:
        try:
            self._context = self._pool.connection()
            connection: psycopg.Connection[Any] = self._context.__enter__()
        except Exception as error:
            raise StorageError(redacted(self._url), f"ingest queue: {error}") from error
        return connection

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        try:
            self._context.__exit__(kind, error, traceback)
        except psycopg.Error as failure:
            raise StorageError(redacted(self._url), f"ingest queue: {failure}") from failure
        if isinstance(error, psycopg.Error):
            raise StorageError(redacted(self._url), f"ingest queue: {error}") from error


class _PairedDriver(PsycopgDriver):
    """pgqueuer's psycopg driver with its queries on a second connection.

    The driver's NOTIFY reader waits on its connection for up to a second at a time,
    and every query on that connection waits behind it; here LISTEN keeps the first
    connection and queries use ``query``.
    """

    def __init__(
        self, listen: psycopg.AsyncConnection[Any], query: psycopg.AsyncConnection[Any]
    ) -> None:
        super().__init__(listen)
        self._query = query

    async def fetch(self, query: str, *args: object) -> list[dict[str, object]]:
        cursor = AsyncRawCursor(self._query, row_factory=dict_row)
        await cursor.execute(query, args or None)
        return await cursor.fetchall()

    async def execute(self, query: str, *args: object) -> str:
        cursor = AsyncRawCursor(self._query)
        await cursor.execute(query, args or None)
        return cursor.statusmessage or ""
