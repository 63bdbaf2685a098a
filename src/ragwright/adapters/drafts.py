"""Draft stores: previous answers in SQLite (one machine) or PostgreSQL (replicas).

Two tables: ``drafts``, one row per (tenant, question key, input version) holding the
answer's JSON, and ``draft_documents``, one row per document a draft cites, so a purge
finds every draft citing a changed document with one indexed delete (the rows it cites
go with it, ``ON DELETE CASCADE``). An untenanted draft is stored under the tenant ``''``
(no tenant id is empty), so the tenant is part of every primary key and lookup.

SQLite follows the API key store (:mod:`ragwright.adapters.keys`): one connection under a
lock, WAL, ``busy_timeout``, ``PRAGMA user_version``, a file private to its owner.
PostgreSQL uses a small pool in one schema (:mod:`ragwright.adapters.pg`), in
:mod:`ragwright.adapters.drafts_postgres` (so a command on SQLite never imports psycopg:
~0.15 s of its start). Both run the same statements, written once in
:mod:`ragwright.adapters.queries.drafts`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragwright.adapters.queries.dialect import SQLITE, SqlSession
from ragwright.adapters.queries.drafts import DraftQueries
from ragwright.adapters.sqlite import BUSY_TIMEOUT, SqliteFile
from ragwright.application.drafts import FIND_LIMIT, Draft
from ragwright.errors import StorageError

SCHEMA_VERSION = 1


class _SqlDraftStore:
    """The draft rules over :class:`DraftQueries`; a backend gives ``_session``."""

    _q: DraftQueries
    _where: str

    def _session(
        self, doing: str = "", *, write: bool = True
    ) -> contextlib.AbstractContextManager[SqlSession]:
        raise NotImplementedError

    def put(self, draft: Draft) -> None:
        tenant = _tenant_key(draft.tenant)
        row = {
            "tenant": tenant,
            "question_key": draft.question_key,
            "input_version": draft.input_version,
            "cited": json.dumps(draft.cited),
            "result": json.dumps(dict(draft.result)),
            "created_at": draft.created_at,
        }
        with self._session("draft not stored") as db:
            db.rows(self._q.put, row)
            db.many(
                self._q.cite,
                [
                    {**row, "document_id": document_id}
                    for document_id in sorted({d for d, _ in draft.cited})
                ],
            )

    def find(
        self, tenant: str | None, question_key: str, *, limit: int = FIND_LIMIT
    ) -> list[Draft]:
        with self._session("drafts not read", write=False) as db:
            rows = db.rows(
                self._q.find,
                {"tenant": _tenant_key(tenant), "question_key": question_key, "limit": limit},
            )
        return [_draft(self._where, row) for row in rows]

    def purge_documents(self, tenant: str | None, document_ids: Iterable[str]) -> int:
        ids = sorted(set(document_ids))
        if not ids:
            return 0
        statement, params = self._q.purge(ids)
        with self._session("drafts not purged") as db:
            return len(db.rows(statement, {**params, "tenant": _tenant_key(tenant)}))


class SqliteDraftStore(SqliteFile, _SqlDraftStore):
    """A :class:`~ragwright.application.drafts.DraftStore` in a SQLite file (``factory``:
    the ``sqlite3`` connection class, which a test replaces to inject faults).

    Raises:
        StorageError: the file cannot be opened, is not a draft store, or was written by
            a newer schema than this code reads.
    """

    what = "draft store"
    _q = DraftQueries(SQLITE)

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self._where = str(path)
        self._open(path, busy_timeout, "foreign_keys = ON", factory=factory)

    def _migrate(self) -> None:
        self._create_versioned(self._q.create, SCHEMA_VERSION, "a draft store")


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
