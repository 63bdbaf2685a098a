"""The draft store in PostgreSQL (replicas share it); the rules and the SQLite store are
in :mod:`ragwright.adapters.drafts`. Kept apart so that importing the SQLite store does
not import psycopg."""

from __future__ import annotations

from ragwright.adapters.drafts import SCHEMA_VERSION, _SqlDraftStore
from ragwright.adapters.pg import PooledStore
from ragwright.adapters.queries.dialect import POSTGRES
from ragwright.adapters.queries.drafts import DraftQueries


class PostgresDraftStore(PooledStore, _SqlDraftStore):
    """A :class:`~ragwright.application.drafts.DraftStore` in PostgreSQL, shared by every
    replica; tables in ``schema``, created on first use.

    Raises:
        StorageError: the server cannot be reached, or holds a newer draft schema.
    """

    what = "draft store"
    _q = DraftQueries(POSTGRES)

    def __init__(self, url: str, schema: str = "ragwright") -> None:
        self._open_pool(
            url,
            schema,
            noun="draft",
            component="drafts",
            version=SCHEMA_VERSION,
            tables=self._q.create,
        )
