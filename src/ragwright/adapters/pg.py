"""What every PostgreSQL store shares: a small connection pool in one schema, and tables
created once under an advisory lock with a schema version per component.

Replicas start together: each creates the schema and its tables if they do not exist,
serialised by ``pg_advisory_xact_lock`` so two first starts never race on ``CREATE``.
``schema_versions`` holds one row per component (``api_keys``, ``drafts``); a version
newer than the code reads is refused, never rewritten, as the SQLite stores refuse a
newer ``user_version``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import zip_longest
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from ragwright.adapters.queries.dialect import SqlSession
from ragwright.errors import ConfigError, StorageError

# The setting every PostgreSQL store's URL comes from (errors name it).
DATABASE_SETTING = "RAGWRIGHT_DATABASE_URL"
# Connections per process and store: the stores run one short statement group per call.
POOL_MAX_SIZE = 4
# How long opening the pool, or a call waiting for a connection, may take, seconds.
CONNECT_TIMEOUT = 5.0

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# What :func:`redacted` says of a URL libpq cannot parse.
UNPARSABLE = "unparsable URL, not shown"
# The longest wait between two attempts to replace a lost connection, seconds.
RECONNECT_MAX_DELAY = 1.0


class _CappedAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection attempt with its delay capped at ``RECONNECT_MAX_DELAY``."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY)


class RecoveringPool(ConnectionPool):
    """A connection pool that notices a restarted server within about a second.

    psycopg_pool replaces a lost connection with attempts whose delay doubles (1, 2, 4,
    8 s ...): after a 7 s outage the next attempt could come 8 s after the server was
    back, and every request meanwhile waited out the pool's timeout (a replica answered
    503 ``keys-unavailable`` for seconds after PostgreSQL restarted). Attempts here are
    at most ``RECONNECT_MAX_DELAY`` apart; a refused connection is cheap, so the cap costs
    nothing while the server is down. ``_add_connection`` is psycopg_pool's own hook for
    one attempt (pinned by ``psycopg-pool<4``); the restart tests guard the behaviour.
    """

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is None:
            attempt = _CappedAttempt(timeout=self.reconnect_timeout)
        super()._add_connection(attempt, growing=growing)


def redacted(url: str) -> str:
    """Where ``url`` points, for errors and logs: ``postgresql://host:port/database`` in
    one line, whichever shape libpq accepts it in (a URL, with the password in its user
    part or its query, or ``key=value`` words), never the user, the password or another
    parameter.

    The servers and the database are what libpq parses (so an IPv6 host is bracketed, a
    socket folder or a line break percent-escaped); a URL libpq cannot parse is not
    shown at all, since where its password stops cannot be told.

    >>> redacted("host=::1 port=5433 password='a b' dbname=rag")
    'postgresql://[::1]:5433/rag'
    """
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return UNPARSABLE
    hosts = str(parts.get("host") or parts.get("hostaddr") or "").split(",")
    ports = str(parts.get("port") or "").split(",")
    if len(ports) == 1:  # libpq: one port applies to every host
        ports *= len(hosts)
    servers = ",".join(
        _server(host, port) for host, port in zip_longest(hosts, ports, fillvalue="")
    )
    return f"postgresql://{servers}/{quote(str(parts.get('dbname') or ''), safe='')}"


def _server(host: str, port: str) -> str:
    name = f"[{quote(host, safe=':')}]" if ":" in host else quote(host, safe="")
    return f"{name}:{quote(port, safe='')}" if port else name


def check_url(url: str) -> dict[str, Any]:
    """The connection parameters ``url`` holds (libpq's parse).

    Raises:
        ConfigError: naming ``RAGWRIGHT_DATABASE_URL`` when libpq cannot parse it (a bad
            percent-escape, an unknown parameter). Neither the URL nor libpq's message is
            repeated: both may hold the password.
    """
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise ConfigError(
            DATABASE_SETTING,
            "not a valid PostgreSQL connection URL (postgresql://user:password@host:port/"
            "database, an IPv6 host in brackets such as [::1], or libpq's key=value words; "
            "a '%' in the user or password must start a two-hex-digit escape such as %25); "
            "the URL is not shown because it holds the password",
        ) from None


def probe(url: str, *, what: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """One connection, closed at once: the server answers and accepts the credentials.

    A pool would retry for its whole timeout, logging every attempt (with libpq's message,
    which may quote the URL); one attempt gives the caller one line.

    Raises:
        ConfigError: the URL cannot be parsed (:func:`check_url`).
        StorageError: naming the setting and the server (no credentials) when no
            connection opens within ``timeout``, with libpq's reason (the password, should
            it appear, replaced by ``***``).
    """
    parts = check_url(url)
    try:
        with psycopg.connect(url, connect_timeout=max(1, round(timeout))):
            pass
    except psycopg.Error as error:
        reason = _first_line(str(error)) or type(error).__name__
        raise StorageError(
            f"{DATABASE_SETTING} ({redacted(url)})",
            f"cannot open the {what} store in PostgreSQL: {_scrubbed(reason, parts)}",
        ) from None


def _first_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _scrubbed(message: str, parts: dict[str, Any]) -> str:
    password = str(parts.get("password") or "")
    return message.replace(password, "***") if password else message


def open_pool(url: str, schema: str, *, what: str) -> ConnectionPool:
    """A pool whose connections resolve unqualified names in ``schema``.

    Raises:
        ConfigError: the URL cannot be parsed (naming ``RAGWRIGHT_DATABASE_URL``).
        StorageError: naming ``schema`` when it is not a plain lower-case identifier, or
            the server (without credentials) when no connection opens in time.
    """
    if not _SCHEMA_NAME.fullmatch(schema):
        raise StorageError(
            redacted(url),
            f"schema {schema!r} must be a lower-case identifier (letters, digits, _)",
        )
    probe(url, what=what)
    pool = RecoveringPool(
        url,
        min_size=1,
        max_size=POOL_MAX_SIZE,
        kwargs={
            "options": f"-c search_path={schema}",
            "connect_timeout": 5,
            "application_name": f"ragwright-{schema}"[:63],
        },
        # Each connection is checked before it is lent: after a server restart the
        # pooled ones are dead, and without the check each would fail one request.
        check=ConnectionPool.check_connection,
        timeout=CONNECT_TIMEOUT,
        open=False,
        name=f"ragwright-{what}",
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except (PoolTimeout, psycopg.Error) as error:
        pool.close()
        raise StorageError(
            f"{DATABASE_SETTING} ({redacted(url)})",
            f"cannot open the {what} store in PostgreSQL: {type(error).__name__}",
        ) from None
    return pool


def create_schema(
    pool: ConnectionPool,
    url: str,
    schema: str,
    *,
    component: str,
    version: int,
    create: Callable[[psycopg.Connection], None],
) -> None:
    """Create ``schema`` and (through ``create``) ``component``'s tables if absent, and
    record or check its schema version, all under one advisory lock.

    Raises:
        StorageError: the stored version is not ``version`` (written by another
            ragwright), or the server refuses.
    """
    try:
        with pool.connection() as db, db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragwright:{schema}",))
            db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = db.execute(
                "SELECT version FROM schema_versions WHERE component = %s", (component,)
            ).fetchone()
            if row is None:
                create(db)
                db.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (%s, %s)",
                    (component, version),
                )
            elif row[0] != version:
                raise StorageError(
                    f"{redacted(url)} schema {schema}",
                    f"{component} schema version {row[0]}, this ragwright reads {version}; "
                    "use the ragwright that wrote it",
                )
    except psycopg.Error as error:
        raise StorageError(
            f"{redacted(url)} schema {schema}", f"cannot create the {component} tables: {error}"
        ) from error


class PooledStore:
    """What a PostgreSQL store of one component (API keys, drafts) shares: its pool in
    ``schema``, its tables created once (:func:`create_schema`), sessions on the pool
    whose server errors are :class:`StorageError`, and ``close``."""

    what = "store"

    def _open_pool(
        self,
        url: str,
        schema: str,
        *,
        noun: str,
        component: str,
        version: int,
        tables: Sequence[str],
    ) -> None:
        self._where = f"{redacted(url)} schema {schema}"
        self._closed = False
        self._pool = open_pool(url, schema, what=noun)

        def create(db: psycopg.Connection) -> None:
            for statement in tables:
                db.execute(statement)

        try:
            create_schema(
                self._pool, url, schema, component=component, version=version, create=create
            )
        except StorageError:
            self._pool.close()
            raise

    @contextlib.contextmanager
    def _session(self, doing: str = "", *, write: bool = True) -> Iterator[SqlSession]:
        """A pooled connection, one transaction (committed on a clean exit); any server
        error, the commit's included, is a :class:`StorageError` ``doing: error``."""
        if self._closed:
            raise StorageError(self._where, f"the {self.what} is closed")
        try:
            with self._pool.connection() as db:
                yield SqlSession(db)
        except psycopg.Error as error:
            raise StorageError(
                self._where, f"{doing or f'the {self.what} failed'}: {error}"
            ) from error

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()
