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

Both run the same rules (:class:`_SqlKeyStore`) over the same statements, written once
for either engine in :mod:`ragwright.adapters.queries.keys`; a backend brings only its
sessions (a locked ``sqlite3`` connection, or a pooled psycopg one).
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
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragwright.adapters.pg import PooledStore
from ragwright.adapters.queries.dialect import POSTGRES, SQLITE, SqlSession
from ragwright.adapters.queries.keys import KeyQueries
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

_SQLITE = KeyQueries(SQLITE)
_POSTGRES = KeyQueries(POSTGRES)


class _SqlKeyStore:
    """The key rules over :class:`KeyQueries`; a backend gives ``_session``."""

    _q: KeyQueries
    _where: str  # names the store in errors, never a password
    _clock: Callable[[], float]

    def _session(
        self, doing: str = "", *, write: bool = True
    ) -> contextlib.AbstractContextManager[SqlSession]:
        raise NotImplementedError

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
            with self._session("API key not stored") as db:
                inserted = db.rows(self._q.insert, row)
            if inserted:
                return key, secret
            # 48-bit id already taken (one in billions): draw another

    def list(self) -> builtins.list[ApiKey]:
        with self._session(write=False) as db:
            rows = db.rows(self._q.list)
        return [_key(self._where, row) for row in rows]

    def get(self, key_id: str) -> ApiKey | None:
        with self._session(write=False) as db:
            rows = db.rows(self._q.get, {"id": key_id})
        return _key(self._where, rows[0]) if rows else None

    def revoke(self, key_id: str) -> ApiKey:
        with self._session() as db:
            rows = db.rows(self._q.revoke, {"now": _timestamp(self._clock()), "id": key_id})
        if not rows:
            raise RequestError("key_id", f"no API key has id {key_id!r} ('keys list' shows them)")
        return _key(self._where, rows[0])

    def authenticate(self, secret: str) -> ApiKey | None:
        # sha256, not a slow password hash (bcrypt, scrypt, argon2): the secret is 256
        # random bits, not something a person chose, so there is no dictionary to try
        # and brute force over 2**256 is out of reach however fast the hash is. A slow
        # KDF would protect nothing here and would cost every request its work factor.
        key_id = _key_id(secret)
        if key_id is None:
            return None
        with self._session(write=False) as db:
            rows = db.rows(self._q.get_with_digest, {"id": key_id})
        if not rows or not hmac.compare_digest(_digest(secret), rows[0][-1]):
            return None
        key = _key(self._where, rows[0][:-1])
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
        stale_before = _timestamp(now - LAST_USED_INTERVAL_SECONDS)
        try:
            with self._session() as db:
                db.rows(
                    self._q.touch, {"used_at": used_at, "id": key.id, "stale_before": stale_before}
                )
        except StorageError as error:
            # The key is valid whether or not its recency could be written (a read-only
            # copy, a writer holding the lock past the timeout): authentication must not
            # fail on bookkeeping. The refusal is logged (the key id, never the secret).
            logger.warning("API key %s: last_used_at not recorded: %s", key.id, error)
            return key
        return dataclasses.replace(key, last_used_at=used_at)


class SqliteKeyStore(SqliteFile, _SqlKeyStore):
    """A :class:`~ragwright.application.keys.KeyStore` in a SQLite file.

    ``clock`` gives the time in seconds since the epoch (a test passes a manual clock);
    ``busy_timeout`` is how long a write waits for another connection's (seconds);
    ``factory`` is the ``sqlite3`` connection class (a test injects faults through it).

    Raises:
        StorageError: the file cannot be opened, is not a key store, or was written by a
            newer schema than this code reads.
    """

    what = "API key store"
    _q = _SQLITE

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = BUSY_TIMEOUT,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self._clock = clock
        self._where = str(path)
        self._open(path, busy_timeout, factory=factory)

    def _migrate(self) -> None:
        self._create_versioned(self._q.create, SCHEMA_VERSION, "an API key store")


class PostgresKeyStore(PooledStore, _SqlKeyStore):
    """A :class:`~ragwright.application.keys.KeyStore` in PostgreSQL, shared by every
    replica (``RAGWRIGHT_DATABASE_URL``); the table lives in ``schema``, created on first
    use. Same secret format, digest, validation and ``last_used_at`` throttle as
    :class:`SqliteKeyStore`.

    Raises:
        StorageError: the server cannot be reached, or holds a newer key schema.
    """

    what = "API key store"
    _q = _POSTGRES

    def __init__(
        self, url: str, schema: str = "ragwright", *, clock: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._open_pool(
            url,
            schema,
            noun="API key",
            component="api_keys",
            version=SCHEMA_VERSION,
            tables=self._q.create,
        )


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
) -> tuple[ApiKey, str, dict[str, Any]]:
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
    row = {
        "id": key.id,
        "secret_sha256": _digest(secret),
        "tenant": key.tenant,
        "scopes": json.dumps(key.scopes),
        "documents": json.dumps(key.documents),
        "types": json.dumps(key.types),
        "states": json.dumps(key.states),
        "name": key.name,
        "created_at": key.created_at,
    }
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
