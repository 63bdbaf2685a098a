"""The job store's statements (:mod:`ragwright.adapters.jobs`), for either engine.

One table, ``answer_jobs``, and a schema-version row in ``ragwright_schema``; on
PostgreSQL both live in the store's schema and are named with it. Every "now" is a
parameter (``now``): the store reads it from its clock (SQLite) or the server's
``clock_timestamp()`` (PostgreSQL) once per transaction.
"""

from __future__ import annotations

from ragwright.adapters.queries.dialect import Dialect

COLUMNS = (
    "id, tenant, key_id, idempotency_key, input_hash, request, state, created_at, "
    "expires_at, attempts, lease_owner, lease_expires_at, result, failure, finished_at, "
    "grant_digest"
)
# What brings a store of version N to N + 1 ({table}: the jobs table); run in the
# transaction that records N + 1.
UPGRADES: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE {table} ADD COLUMN grant_digest TEXT",
        "CREATE INDEX answer_jobs_finished ON {table} (finished_at)",
    ),
}


class JobQueries:
    """Every statement of the job store, written for ``dialect``; ``schema`` qualifies
    the tables (PostgreSQL), ``None`` leaves them plain (SQLite: one file, one store)."""

    def __init__(self, dialect: Dialect, schema: str | None = None) -> None:
        p = dialect.p
        prefix = f"{schema}." if schema else ""
        self.table = table = f"{prefix}answer_jobs"
        versions = f"{prefix}ragwright_schema"
        self.create_versions = (
            f"CREATE TABLE IF NOT EXISTS {versions} "
            f"(component TEXT PRIMARY KEY, version INTEGER NOT NULL){dialect.table_options}"
        )
        self.create = (
            f"""CREATE TABLE IF NOT EXISTS {table} (
    seq {dialect.row_id},
    id TEXT NOT NULL UNIQUE,
    tenant TEXT,
    tenant_key TEXT NOT NULL,
    key_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    request {dialect.json} NOT NULL,
    state TEXT NOT NULL,
    created_at {dialect.moment} NOT NULL,
    expires_at {dialect.moment} NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires_at {dialect.moment},
    result {dialect.json},
    failure TEXT,
    finished_at {dialect.moment},
    grant_digest TEXT,
    UNIQUE (tenant_key, idempotency_key)
){dialect.table_options}""",
            f"CREATE INDEX IF NOT EXISTS answer_jobs_state ON {table} (state, created_at, seq)",
            f"CREATE INDEX IF NOT EXISTS answer_jobs_finished ON {table} (finished_at)",
        )
        self.version = f"SELECT version FROM {versions} WHERE component = 'jobs'"
        self.record_version = f"INSERT INTO {versions} VALUES ('jobs', {p.version})"
        self.set_version = f"UPDATE {versions} SET version = {p.version} WHERE component = 'jobs'"

        self.submit = (
            f"INSERT INTO {table} (id, tenant, tenant_key, key_id, idempotency_key, "
            "input_hash, request, state, created_at, expires_at, grant_digest) "
            f"VALUES ({p.id}, {p.tenant}, {p.tenant_key}, {p.key_id}, {p.idempotency_key}, "
            f"{p.input_hash}, {p.request}, 'queued', {p.now}, {p.expires_at}, "
            f"{p.grant_digest}) ON CONFLICT (tenant_key, idempotency_key) DO NOTHING"
        )
        self.by_key = (
            f"SELECT {COLUMNS} FROM {table} "
            f"WHERE tenant_key = {p.tenant_key} AND idempotency_key = {p.idempotency_key}"
        )
        self.by_id = f"SELECT {COLUMNS} FROM {table} WHERE id = {p.id}"
        self.cancel = (
            f"UPDATE {table} SET state = 'cancelled', finished_at = {p.now}, "
            f"lease_expires_at = NULL WHERE id = {p.id} AND state IN ('queued', 'running')"
        )
        self.live = (
            f"SELECT count(*) FROM {table} WHERE state = 'running' AND lease_expires_at > {p.now}"
        )
        # A job a worker may take: waiting, or running under a lease that ran out (its
        # worker died), and in either case not past its own expiry; the oldest first.
        claimable = (
            f"SELECT j.id FROM {table} j WHERE (j.state = 'queued' OR (j.state = 'running' "
            f"AND j.lease_expires_at <= {p.now})) AND j.expires_at > {p.now}"
        )
        oldest = f" ORDER BY j.created_at, j.seq LIMIT 1{dialect.lock_row}"
        self.claimable = claimable + oldest
        # ... whose tenant runs fewer than per_tenant jobs.
        self.claimable_for_tenants = (
            f"{claimable} AND (SELECT count(*) FROM {table} r WHERE r.tenant_key = "
            "j.tenant_key AND r.state = 'running' AND r.lease_expires_at > "
            f"{p.now}) < {p.per_tenant}{oldest}"
        )
        self.take = (
            f"UPDATE {table} SET state = 'running', lease_owner = {p.worker}, "
            f"lease_expires_at = {p.lease_until}, attempts = attempts + 1 "
            f"WHERE id = {p.id} RETURNING {COLUMNS}"
        )
        # renew, release and publish change a row only while the worker holds it.
        held = f"id = {p.id} AND lease_owner = {p.worker} AND state = 'running'"
        self.renew = (
            f"UPDATE {table} SET lease_expires_at = {p.lease_until} "
            f"WHERE {held} AND expires_at > {p.now} RETURNING id"
        )
        self.release = (
            f"UPDATE {table} SET state = 'queued', lease_owner = NULL, "
            f"lease_expires_at = NULL WHERE {held} RETURNING id"
        )
        self.publish = (
            f"UPDATE {table} SET state = {p.state}, result = {p.result}, "
            f"failure = {p.failure}, finished_at = {p.now}, lease_expires_at = NULL "
            f"WHERE {held} RETURNING id"
        )
        self.expire = (
            f"UPDATE {table} SET state = 'expired', finished_at = {p.now}, "
            "lease_expires_at = NULL WHERE state IN ('queued', 'running') "
            f"AND expires_at <= {p.now} RETURNING id"
        )
        self.purge = (
            f"DELETE FROM {table} WHERE state IN ('succeeded', 'failed', 'cancelled', "
            f"'expired') AND finished_at <= {p.before} RETURNING id"
        )
        self.states = f"SELECT state, count(*) FROM {table} GROUP BY state"
        self.oldest_queued = f"SELECT min(created_at) FROM {table} WHERE state = 'queued'"

    def upgrade(self, version: object) -> list[tuple[str, dict[str, int]]]:
        """The statements that bring a store at ``version`` to the newest, the version's
        own update included; none for any other version (refused after)."""
        if not isinstance(version, int) or version not in UPGRADES:
            return []
        statements: list[tuple[str, dict[str, int]]] = []
        while version in UPGRADES:
            statements += [(s.format(table=self.table), {}) for s in UPGRADES[version]]
            version += 1
        statements.append((self.set_version, {"version": version}))
        return statements
