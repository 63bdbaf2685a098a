"""The API key store's statements (:mod:`ragwright.adapters.keys`), for either engine.

One table, ``api_keys``, one row per key. On PostgreSQL a ``seq`` identity column keeps
the order keys were made in; SQLite has its ``rowid`` for that.
"""

from __future__ import annotations

from ragwright.adapters.queries.dialect import SQLITE, Dialect

COLUMNS = "id, tenant, scopes, documents, types, states, name, created_at, revoked_at, last_used_at"
# What add() writes (the secret only as its SHA-256).
NEW_ROW = (
    "id",
    "secret_sha256",
    "tenant",
    "scopes",
    "documents",
    "types",
    "states",
    "name",
    "created_at",
)


class KeyQueries:
    """Every statement of the key store, written for ``dialect``."""

    def __init__(self, dialect: Dialect) -> None:
        p = dialect.p
        order = "rowid" if dialect is SQLITE else "seq"
        seq = "" if dialect is SQLITE else "seq BIGINT GENERATED ALWAYS AS IDENTITY,\n    "
        self.create = (
            f"""CREATE TABLE api_keys (
    {seq}id TEXT PRIMARY KEY,
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
){dialect.table_options}""",
        )
        marks = ", ".join(getattr(p, name) for name in NEW_ROW)
        self.insert = (
            f"INSERT INTO api_keys ({', '.join(NEW_ROW)}) VALUES ({marks}) "
            "ON CONFLICT (id) DO NOTHING RETURNING id"
        )
        self.list = f"SELECT {COLUMNS} FROM api_keys ORDER BY {order}"
        self.get = f"SELECT {COLUMNS} FROM api_keys WHERE id = {p.id}"
        self.get_with_digest = f"SELECT {COLUMNS}, secret_sha256 FROM api_keys WHERE id = {p.id}"
        self.revoke = (
            f"UPDATE api_keys SET revoked_at = COALESCE(revoked_at, {p.now}) "
            f"WHERE id = {p.id} RETURNING {COLUMNS}"
        )
        # Only when the recorded use is older than the throttle: two replicas touching
        # one key at once write it once.
        self.touch = (
            f"UPDATE api_keys SET last_used_at = {p.used_at} WHERE id = {p.id} "
            f"AND (last_used_at IS NULL OR last_used_at <= {p.stale_before})"
        )
