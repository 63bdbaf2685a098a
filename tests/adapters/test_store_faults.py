"""Every store turns a refused ``COMMIT`` (a full disk) into ``StorageError``,
keeps nothing of the refused write, and works again once the disk has room: the job
store (SQLite and PostgreSQL), the API key store and the draft store (issue 20)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ragwright.adapters.drafts import SqliteDraftStore
from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
from ragwright.adapters.keys import SqliteKeyStore
from ragwright.application.drafts import Draft
from ragwright.application.jobs import JobLimits
from ragwright.errors import StorageError
from tests.disk_full import DiskFull

POSTGRES_URL = os.environ.get(
    "RAGWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def submit(store: SqliteJobStore | PostgresJobStore, key: str) -> str:
    submitted = store.submit(
        tenant=None,
        key_id="k1",
        idempotency_key=key,
        input_hash="h",
        request={"question": "q"},
        ttl_seconds=60,
        grant_digest="g",
    )
    return submitted.job.id


def test_the_job_store_refuses_a_full_disks_commit_as_a_storage_error(tmp_path: Path) -> None:
    disk = DiskFull()
    store = SqliteJobStore(tmp_path / "jobs.sqlite3", factory=disk.factory)
    job_id = submit(store, "k-1")
    disk.full = True
    with pytest.raises(StorageError, match="database or disk is full"):
        submit(store, "k-2")
    with pytest.raises(StorageError, match="database or disk is full"):
        store.claim("w1", lease_seconds=30, limits=JobLimits(2))
    # Reads still work, and nothing of the refused writes was kept.
    job = store.get(job_id)
    assert job is not None and job.state == "queued" and job.attempts == 0
    assert store.counts().states == {"queued": 1}
    disk.full = False
    claimed = store.claim("w1", lease_seconds=30, limits=JobLimits(2))
    assert claimed is not None and claimed.id == job_id
    disk.full = True
    with pytest.raises(StorageError, match="database or disk is full"):
        store.publish(job_id, "w1", state="succeeded", result={"answer": "a"})
    assert store.get(job_id).state == "running"  # type: ignore[union-attr]
    disk.full = False
    assert store.publish(job_id, "w1", state="succeeded", result={"answer": "a"})
    assert disk.refused == 3


def test_the_key_store_refuses_a_full_disks_commit_as_a_storage_error(tmp_path: Path) -> None:
    disk = DiskFull()
    store = SqliteKeyStore(tmp_path / "keys.sqlite3", factory=disk.factory)
    key, _ = store.add(tenant=None, scopes=["answer"])
    disk.full = True
    with pytest.raises(StorageError, match="database or disk is full"):
        store.add(tenant=None, scopes=["answer"])
    with pytest.raises(StorageError, match="database or disk is full"):
        store.revoke(key.id)
    assert [k.id for k in store.list()] == [key.id]
    assert store.get(key.id).active  # type: ignore[union-attr]
    disk.full = False
    assert not store.revoke(key.id).active


def test_the_draft_store_refuses_a_full_disks_commit_as_a_storage_error(tmp_path: Path) -> None:
    disk = DiskFull()
    store = SqliteDraftStore(tmp_path / "drafts.sqlite3", factory=disk.factory)
    draft = Draft(None, "q", "v1", (("doc", "r1"),), {"answer": "a"}, 1.0)
    disk.full = True
    with pytest.raises(StorageError, match="draft not stored: database or disk is full"):
        store.put(draft)
    assert store.find(None, "q") == []
    disk.full = False
    store.put(draft)
    assert [d.input_version for d in store.find(None, "q")] == ["v1"]


@contextlib.contextmanager
def postgres_job_store() -> Iterator[tuple[PostgresJobStore, str]]:
    schema = f"test_faults_{uuid.uuid4().hex[:12]}"
    store = PostgresJobStore(POSTGRES_URL, schema=schema, min_size=1, max_size=1)
    try:
        yield store, schema
    finally:
        store.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_the_postgres_job_store_refuses_a_full_disks_commit_as_a_storage_error() -> None:
    with postgres_job_store() as (store, schema):
        job_id = submit(store, "k-1")
        # A check PostgreSQL runs at COMMIT (a deferred constraint trigger) failing as a
        # server out of disk does (SQLSTATE 53100), while full.on is set.
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {schema}.full (on_ boolean NOT NULL)")
            conn.execute(f"INSERT INTO {schema}.full VALUES (true)")
            conn.execute(
                f"CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF (SELECT on_ FROM {schema}.full) THEN "
                "RAISE EXCEPTION 'could not extend file: No space left on device' "
                "USING ERRCODE = '53100'; END IF; RETURN NULL; END $$"
            )
            conn.execute(
                f"CREATE CONSTRAINT TRIGGER refuse AFTER INSERT OR UPDATE ON {schema}.answer_jobs "
                f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.refuse()"
            )
        with pytest.raises(StorageError, match="No space left on device"):
            store.claim("w1", lease_seconds=30, limits=JobLimits(2))
        assert store.get(job_id).state == "queued"  # type: ignore[union-attr]
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.full SET on_ = false")
        claimed = store.claim("w1", lease_seconds=30, limits=JobLimits(2))
        assert claimed is not None and claimed.id == job_id


def test_the_postgres_job_store_turns_every_server_refusal_into_a_storage_error() -> None:
    with postgres_job_store() as (store, _):
        # The pool's one connection turned read-only (a server in recovery, a standby):
        # writes fail with a non-"operational" psycopg error, still a store error.
        with store._pool.connection() as conn:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        with pytest.raises(StorageError, match="read-only transaction"):
            submit(store, "k-1")
        with store._pool.connection() as conn:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")
        assert submit(store, "k-1")
