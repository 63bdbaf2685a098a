"""Draft stores: previous answers in SQLite (one machine) or PostgreSQL (replicas).

Two tables: ``drafts``, one row per (tenant, question key, input version) holding the
answer's JSON, and ``draft_documents``, one row per document a draft cites, so a purge
finds every draft citing a changed document with one indexed delete (the rows it cites
go with it, ``ON DELETE CASCADE``). An untenanted draft is stored under the tenant ``''``
(no tenant id is empty), so the tenant is part of every primary key and lookup.

SQLite follows the API key store (:mod:`ragwright.adapters.keys`): one connection under a
lock, WAL, ``busy_timeout``, ``PRAGMA user_version``, a file private to its owner.
PostgreSQL uses a small pool in one schema (:mod:`ragwright.adapters.pg`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from ragwright.adapters.pg import create_schema, open_pool, redacted
from ragwright.adapters.sqlite import BUSY_TIMEOUT, SqliteFile
from ragwright.application.drafts import FIND_LIMIT, Draft
from ragwright.errors import StorageError

SCHEMA_VERSION = 1

_SQLITE_SCHEMA = (
    """
    CREATE TABLE drafts (
        tenant TEXT NOT NULL,
        question_key TEXT NOT NULL,
        input_version TEXT NOT NULL,
        cited TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (tenant, question_key, input_version)
    ) STRICT
    """,
    """
    CREATE TABLE draft_documents (
        tenant TEXT NOT NULL,
        document_id TEXT NOT NULL,
        question_key TEXT NOT NULL,
        input_version TEXT NOT NULL,
        PRIMARY KEY (tenant, document_id, question_key, input_version),
        FOREIGN KEY (tenant, question_key, input_version)
            REFERENCES drafts (tenant, question_key, input_version) ON DELETE CASCADE
    ) STRICT
    """,
    "CREATE INDEX drafts_newest ON drafts (tenant, question_key, created_at)",
)
_PG_SCHEMA = (
    """
    CREATE TABLE drafts (
        tenant TEXT NOT NULL,
        question_key TEXT NOT NULL,
        input_version TEXT NOT NULL,
        cited JSONB NOT NULL,
        result JSONB NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, question_key, input_version)
    )
    """,
    """
    CREATE TABLE draft_documents (
        tenant TEXT NOT NULL,
        document_id TEXT NOT NULL,
        question_key TEXT NOT NULL,
        input_version TEXT NOT NULL,
        PRIMARY KEY (tenant, document_id, question_key, input_version),
        FOREIGN KEY (tenant, question_key, input_version)
            REFERENCES drafts (tenant, question_key, input_version) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX drafts_newest ON drafts (tenant, question_key, created_at)",
)
_COLUMNS = "tenant, question_key, input_version, cited, result, created_at"


class SqliteDraftStore(SqliteFile):
    """A :class:`~ragwright.application.drafts.DraftStore` in a SQLite file (``factory``:
    the ``sqlite3`` connection class, which a test replaces to inject faults).

    Raises:
        StorageError: the file cannot be opened, is not a draft store, or was written by
            a newer schema than this code reads.
    """

    what = "draft store"

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self._open(path, busy_timeout, "foreign_keys = ON", factory=factory)

    def _migrate(self) -> None:
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StorageError(str(self.path), "holds other tables: not a draft store")
                for statement in _SQLITE_SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise StorageError(
                    str(self.path),
                    f"draft store schema version {version}, this ragwright reads "
                    f"{SCHEMA_VERSION}; use the ragwright that wrote it",
                )

    def put(self, draft: Draft) -> None:
        tenant = _tenant_key(draft.tenant)
        with self._write("draft not stored") as db:
            db.execute(
                f"INSERT INTO drafts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, question_key, input_version) DO UPDATE SET "
                "cited = excluded.cited, result = excluded.result, "
                "created_at = excluded.created_at",
                (
                    tenant,
                    draft.question_key,
                    draft.input_version,
                    json.dumps(draft.cited),
                    json.dumps(dict(draft.result)),
                    draft.created_at,
                ),
            )
            db.executemany(
                "INSERT OR IGNORE INTO draft_documents "
                "(tenant, document_id, question_key, input_version) VALUES (?, ?, ?, ?)",
                [
                    (tenant, document_id, draft.question_key, draft.input_version)
                    for document_id in sorted({d for d, _ in draft.cited})
                ],
            )

    def find(
        self, tenant: str | None, question_key: str, *, limit: int = FIND_LIMIT
    ) -> list[Draft]:
        with self._read("drafts not read") as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM drafts WHERE tenant = ? AND question_key = ? "
                "ORDER BY created_at DESC LIMIT ?",
                (_tenant_key(tenant), question_key, limit),
            ).fetchall()
        return [_draft(str(self.path), row) for row in rows]

    def purge_documents(self, tenant: str | None, document_ids: Iterable[str]) -> int:
        ids = sorted(set(document_ids))
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        with self._write("drafts not purged") as db:
            done = db.execute(
                "DELETE FROM drafts WHERE (tenant, question_key, input_version) IN ("
                "SELECT tenant, question_key, input_version FROM draft_documents "
                f"WHERE tenant = ? AND document_id IN ({marks}))",
                (_tenant_key(tenant), *ids),
            )
            return done.rowcount


class PostgresDraftStore:
    """A :class:`~ragwright.application.drafts.DraftStore` in PostgreSQL, shared by every
    replica; tables in ``schema``, created on first use.

    Raises:
        StorageError: the server cannot be reached, or holds a newer draft schema.
    """

    def __init__(self, url: str, schema: str = "ragwright") -> None:
        self._where = f"{redacted(url)} schema {schema}"
        self._pool = open_pool(url, schema, what="draft")
        self._closed = False
        try:
            create_schema(
                self._pool,
                url,
                schema,
                component="drafts",
                version=SCHEMA_VERSION,
                create=_create_pg_tables,
            )
        except StorageError:
            self._pool.close()
            raise

    def put(self, draft: Draft) -> None:
        tenant = _tenant_key(draft.tenant)
        try:
            with self._pool.connection() as db, db.transaction():
                db.execute(
                    f"INSERT INTO drafts ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (tenant, question_key, input_version) DO UPDATE SET "
                    "cited = excluded.cited, result = excluded.result, "
                    "created_at = excluded.created_at",
                    (
                        tenant,
                        draft.question_key,
                        draft.input_version,
                        json.dumps(draft.cited),
                        json.dumps(dict(draft.result)),
                        draft.created_at,
                    ),
                )
                with db.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO draft_documents "
                        "(tenant, document_id, question_key, input_version) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [
                            (tenant, document_id, draft.question_key, draft.input_version)
                            for document_id in sorted({d for d, _ in draft.cited})
                        ],
                    )
        except psycopg.Error as error:
            raise StorageError(self._where, f"draft not stored: {error}") from error

    def find(
        self, tenant: str | None, question_key: str, *, limit: int = FIND_LIMIT
    ) -> list[Draft]:
        try:
            with self._pool.connection() as db:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM drafts WHERE tenant = %s AND question_key = %s "
                    "ORDER BY created_at DESC LIMIT %s",
                    (_tenant_key(tenant), question_key, limit),
                ).fetchall()
        except psycopg.Error as error:
            raise StorageError(self._where, f"drafts not read: {error}") from error
        return [_draft(self._where, row) for row in rows]

    def purge_documents(self, tenant: str | None, document_ids: Iterable[str]) -> int:
        ids = sorted(set(document_ids))
        if not ids:
            return 0
        try:
            with self._pool.connection() as db, db.transaction():
                done = db.execute(
                    "DELETE FROM drafts WHERE (tenant, question_key, input_version) IN ("
                    "SELECT tenant, question_key, input_version FROM draft_documents "
                    "WHERE tenant = %s AND document_id = ANY(%s))",
                    (_tenant_key(tenant), ids),
                )
                return done.rowcount
        except psycopg.Error as error:
            raise StorageError(self._where, f"drafts not purged: {error}") from error

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()


def _create_pg_tables(db: psycopg.Connection) -> None:
    for statement in _PG_SCHEMA:
        db.execute(statement)


def _tenant_key(tenant: str | None) -> str:
    return "" if tenant is None else tenant


def _draft(where: str, row: Sequence[Any]) -> Draft:
    tenant, key, version, cited, result, created_at = row
    try:
        # SQLite hands back JSON text, PostgreSQL's JSONB already decoded.
        pairs = json.loads(cited) if isinstance(cited, str) else cited
        body = json.loads(result) if isinstance(result, str) else result
        if not isinstance(body, dict):
            raise ValueError(f"result is {type(body).__name__}, not an object")
        return Draft(
            tenant=tenant or None,
            question_key=str(key),
            input_version=str(version),
            cited=tuple((str(d), str(r)) for d, r in pairs),
            result=body,
            created_at=float(created_at),
        )
    except (TypeError, ValueError) as error:
        raise StorageError(where, f"draft {key!r} does not read back: {error}") from error
