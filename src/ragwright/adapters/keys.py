"""API key stores: ``SqliteKeyStore`` in one SQLite file (``$RAGWRIGHT_HOME/keys.sqlite3``)
and ``PostgresKeyStore`` in the PostgreSQL database replicas share.

One table, one row per key, the schema version in ``PRAGMA user_version``. The secret
is ``rwk_<id>_<random>``: ``id`` (12 hex characters) is public and finds the row,
``random`` (``secrets.token_urlsafe(32)``, 256 bits) is what proves possession. Only
``sha256(secret)`` is stored.

Several threads share one connection under a lock; several processes (service workers,
a ``ragwright keys`` command beside them) share the file through SQLite's own locking in
WAL mode, waiting up to ``busy_timeout`` seconds for a writer. The file is created with
mode 0600 (SQLite gives its ``-wal`` and ``-shm`` files the same mode).

``PostgresKeyStore`` keeps the same row in the ``api_keys`` table of its schema (created
under an advisory lock, :mod:`ragwright.adapters.pg`); ``seq`` keeps the listing in the
order keys were made. Every replica authenticates against it, so a key revoked on one is
refused by all at their next request.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from ragwright.adapters.pg import create_schema, open_pool, redacted
from ragwright.adapters.sqlite import BUSY_TIMEOUT, SqliteFile
from ragwright.application.keys import ApiKey, check_grant, unique
from ragwright.errors import RequestError, StorageError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SECRET_PREFIX = "rwk"
# How long a connection waits for another process's write before giving up, seconds.
# ``last_used_at`` is written at most this often per key: a recency for operators, not
# an access log, so a busy key costs one write a minute instead of one per request.
LAST_USED_INTERVAL_SECONDS = 60

_ID = re.compile(r"[0-9a-f]{12}")
_RANDOM = re.compile(r"[A-Za-z0-9_-]{43}")  # token_urlsafe(32): 32 bytes, base64url, no padding

_SCHEMA = """
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    tenant TEXT,
    scopes TEXT NOT NULL,
    documents TEXT NOT NULL,
    types TEXT NOT NULL,
    states TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    last_used_at TEXT
) STRICT
"""
_PG_SCHEMA = """
CREATE TABLE api_keys (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    tenant TEXT,
    scopes TEXT NOT NULL,
    documents TEXT NOT NULL,
    types TEXT NOT NULL,
    states TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    last_used_at TEXT
)
"""
_COLUMNS = (
    "id, tenant, scopes, documents, types, states, name, created_at, revoked_at, last_used_at"
)


class SqliteKeyStore(SqliteFile):
    """A :class:`~ragwright.application.keys.KeyStore` in a SQLite file.

    ``clock`` gives the time in seconds since the epoch (a test passes a manual clock);
    ``busy_timeout`` is how long a write waits for another connection's (seconds);
    ``factory`` is the ``sqlite3`` connection class (a test injects faults through it).

    Raises:
        StorageError: the file cannot be opened, is not a key store, or was written by a
            newer schema than this code reads.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = BUSY_TIMEOUT,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self._clock = clock
        self._open(path, busy_timeout, factory=factory)

    what = "API key store"

    def _migrate(self) -> None:
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                # A new file, or one that is no key store: never add a table to a
                # database something else owns (a mistyped RAGWRIGHT_KEYS_PATH).
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StorageError(str(self.path), "holds other tables: not an API key store")
                db.execute(_SCHEMA)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise StorageError(
                    str(self.path),
                    f"API key store schema version {version}, this ragwright reads "
                    f"{SCHEMA_VERSION}; use the ragwright that wrote it",
                )

    def add(
        self,
        *,
        tenant: str | None,
        scopes: Sequence[str],
        documents: Sequence[str] = (),
        types: Sequence[str] = (),
        states: Sequence[str] = (),
        name: str = "",
    ) -> tuple[ApiKey, str]:
        check_grant(
            tenant=tenant, scopes=scopes, documents=documents, types=types, states=states, name=name
        )
        created_at = _timestamp(self._clock())
        while True:
            key, secret, row = _new_key(tenant, scopes, documents, types, states, name, created_at)
            with self._write("API key not stored") as db:
                inserted = db.execute(
                    "INSERT INTO api_keys (id, secret_sha256, tenant, scopes, documents, "
                    "types, states, name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO NOTHING",
                    row,
                ).rowcount
            if inserted:
                return key, secret
            # 48-bit id already taken (one in billions): draw another

    def list(self) -> builtins.list[ApiKey]:
        with self._read() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY rowid")
            return [_key(str(self.path), row) for row in rows]

    def get(self, key_id: str) -> ApiKey | None:
        with self._read() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        return None if row is None else _key(str(self.path), row)

    def revoke(self, key_id: str) -> ApiKey:
        with self._write() as db:
            db.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                (_timestamp(self._clock()), key_id),
            )
            row = db.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        if row is None:
            raise RequestError("key_id", f"no API key has id {key_id!r} ('keys list' shows them)")
        return _key(str(self.path), row)

    def authenticate(self, secret: str) -> ApiKey | None:
        # sha256, not a slow password hash (bcrypt, scrypt, argon2): the secret is 256
        # random bits, not something a person chose, so there is no dictionary to try
        # and brute force over 2**256 is out of reach however fast the hash is. A slow
        # KDF would protect nothing here and would cost every request its work factor.
        key_id = _key_id(secret)
        if key_id is None:
            return None
        with self._read() as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, secret_sha256 FROM api_keys WHERE id = ?", (key_id,)
            ).fetchone()
        if row is None or not hmac.compare_digest(_digest(secret), row[-1]):
            return None
        key = _key(str(self.path), row[:-1])
        if not key.active:
            return None
        return self._touch(key)

    def _touch(self, key: ApiKey) -> ApiKey:
        """Record the use when the last recorded one is a minute old or more."""
        now = self._clock()
        if key.last_used_at is not None and _seconds(key.last_used_at) > (
            now - LAST_USED_INTERVAL_SECONDS
        ):
            return key
        used_at = _timestamp(now)
        try:
            with self._write() as db:
                db.execute(
                    "UPDATE api_keys SET last_used_at = ? WHERE id = ? "
                    "AND (last_used_at IS NULL OR last_used_at <= ?)",
                    (used_at, key.id, _timestamp(now - LAST_USED_INTERVAL_SECONDS)),
                )
        except StorageError as error:
            # The key is valid whether or not its recency could be written (a read-only
            # copy, a writer holding the lock past the timeout): authentication must not
            # fail on bookkeeping. The refusal is logged (the key id, never the secret).
            logger.warning("API key %s: last_used_at not recorded: %s", key.id, error)
            return key
        return dataclasses.replace(key, last_used_at=used_at)


class PostgresKeyStore:
    """A :class:`~ragwright.application.keys.KeyStore` in PostgreSQL, shared by every
    replica (``RAGWRIGHT_DATABASE_URL``); the table lives in ``schema``, created on first
    use. Same secret format, digest, validation and ``last_used_at`` throttle as
    :class:`SqliteKeyStore`.

    Raises:
        StorageError: the server cannot be reached, or holds a newer key schema.
    """

    def __init__(
        self, url: str, schema: str = "ragwright", *, clock: Callable[[], float] = time.time
    ) -> None:
        self._where = f"{redacted(url)} schema {schema}"
        self._clock = clock
        self._closed = False
        self._pool = open_pool(url, schema, what="API key")
        try:
            create_schema(
                self._pool,
                url,
                schema,
                component="api_keys",
                version=SCHEMA_VERSION,
                create=_create_pg_table,
            )
        except StorageError:
            self._pool.close()
            raise

    def add(
        self,
        *,
        tenant: str | None,
        scopes: Sequence[str],
        documents: Sequence[str] = (),
        types: Sequence[str] = (),
        states: Sequence[str] = (),
        name: str = "",
    ) -> tuple[ApiKey, str]:
        check_grant(
            tenant=tenant, scopes=scopes, documents=documents, types=types, states=states, name=name
        )
        created_at = _timestamp(self._clock())
        while True:
            key, secret, row = _new_key(tenant, scopes, documents, types, states, name, created_at)
            try:
                with self._connection() as db:
                    inserted = db.execute(
                        "INSERT INTO api_keys (id, secret_sha256, tenant, scopes, documents, "
                        "types, states, name, created_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (id) DO NOTHING",
                        row,
                    ).rowcount
            except psycopg.Error as error:
                raise StorageError(self._where, f"API key not stored: {error}") from error
            if inserted:
                return key, secret
            # 48-bit id already taken (one in billions): draw another

    def list(self) -> builtins.list[ApiKey]:
        with self._connection() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY seq").fetchall()
        return [_key(self._where, row) for row in rows]

    def get(self, key_id: str) -> ApiKey | None:
        with self._connection() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id = %s", (key_id,)).fetchone()
        return None if row is None else _key(self._where, row)

    def revoke(self, key_id: str) -> ApiKey:
        with self._connection() as db:
            row = db.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id = %s "
                f"RETURNING {_COLUMNS}",
                (_timestamp(self._clock()), key_id),
            ).fetchone()
        if row is None:
            raise RequestError("key_id", f"no API key has id {key_id!r} ('keys list' shows them)")
        return _key(self._where, row)

    def authenticate(self, secret: str) -> ApiKey | None:
        # sha256 and the compare as in SqliteKeyStore.authenticate (why not a slow KDF).
        key_id = _key_id(secret)
        if key_id is None:
            return None
        with self._connection() as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, secret_sha256 FROM api_keys WHERE id = %s", (key_id,)
            ).fetchone()
        if row is None or not hmac.compare_digest(_digest(secret), row[-1]):
            return None
        key = _key(self._where, row[:-1])
        if not key.active:
            return None
        return self._touch(key)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def _touch(self, key: ApiKey) -> ApiKey:
        """Record the use when the last recorded one is a minute old or more."""
        now = self._clock()
        if key.last_used_at is not None and _seconds(key.last_used_at) > (
            now - LAST_USED_INTERVAL_SECONDS
        ):
            return key
        used_at = _timestamp(now)
        try:
            with self._pool.connection() as db:
                db.execute(
                    "UPDATE api_keys SET last_used_at = %s WHERE id = %s "
                    "AND (last_used_at IS NULL OR last_used_at <= %s)",
                    (used_at, key.id, _timestamp(now - LAST_USED_INTERVAL_SECONDS)),
                )
        except psycopg.Error as error:
            # As in SqliteKeyStore: bookkeeping never fails an authentication.
            logger.warning("API key %s: last_used_at not recorded: %s", key.id, error)
            return key
        return dataclasses.replace(key, last_used_at=used_at)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, one transaction; server errors become StorageError."""
        if self._closed:
            raise StorageError(self._where, "the API key store is closed")
        try:
            with self._pool.connection() as db:
                yield db
        except psycopg.Error as error:
            raise StorageError(self._where, f"the API key store failed: {error}") from error


def _create_pg_table(db: psycopg.Connection) -> None:
    db.execute(_PG_SCHEMA)


def _key(where: str, row: Sequence[object]) -> ApiKey:
    try:
        key_id, tenant, scopes, documents, types, states, name, created, revoked, used = row
        return ApiKey(
            id=str(key_id),
            tenant=None if tenant is None else str(tenant),
            scopes=_names(scopes),
            documents=_names(documents),
            types=_names(types),
            states=_names(states),
            name=str(name),
            created_at=str(created),
            revoked_at=None if revoked is None else str(revoked),
            last_used_at=None if used is None else str(used),
        )
    except (TypeError, ValueError) as error:
        raise StorageError(where, f"API key {row[0]!r} does not read back: {error}") from error


def _names(value: object) -> tuple[str, ...]:
    names = json.loads(str(value))
    if not isinstance(names, builtins.list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"expected a JSON list of names, found {value!r}")
    return tuple(names)


def _new_key(
    tenant: str | None,
    scopes: Sequence[str],
    documents: Sequence[str],
    types: Sequence[str],
    states: Sequence[str],
    name: str,
    created_at: str,
) -> tuple[ApiKey, str, tuple[Any, ...]]:
    """A new key with a fresh id and secret, and its row (the secret only as SHA-256):
    the same for every store."""
    key = ApiKey(
        id=secrets.token_hex(6),
        tenant=tenant,
        scopes=unique(scopes),
        documents=unique(documents),
        types=unique(types),
        states=unique(states),
        name=name,
        created_at=created_at,
        revoked_at=None,
    )
    secret = f"{SECRET_PREFIX}_{key.id}_{secrets.token_urlsafe(32)}"
    row = (
        key.id,
        _digest(secret),
        key.tenant,
        json.dumps(key.scopes),
        json.dumps(key.documents),
        json.dumps(key.types),
        json.dumps(key.states),
        key.name,
        key.created_at,
    )
    return key, secret, row


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _key_id(secret: str) -> str | None:
    """The id inside a well-formed secret, else ``None`` (nothing to look up)."""
    prefix, _, rest = secret.partition("_")
    key_id, _, random = rest.partition("_")
    if prefix != SECRET_PREFIX or not _ID.fullmatch(key_id) or not _RANDOM.fullmatch(random):
        return None
    return key_id


def _timestamp(seconds: float) -> str:
    # One fixed-width format, so timestamps also compare correctly as text in SQL.
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(timestamp: str) -> float:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
