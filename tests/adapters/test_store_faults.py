"""Every SQLite store turns a refused ``COMMIT`` (a full disk) into ``StorageError``,
keeps nothing of the refused write, and works again once the disk has room: the job
store, the API key store and the draft store (issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragwright.adapters.drafts import SqliteDraftStore
from ragwright.adapters.jobs import SqliteJobStore
from ragwright.adapters.keys import SqliteKeyStore
from ragwright.application.drafts import Draft
from ragwright.application.jobs import BatchLimits
from ragwright.errors import StorageError
from tests.disk_full import DiskFull


def submit(store: SqliteJobStore, key: str) -> str:
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
        store.claim("w1", lease_seconds=30, limits=BatchLimits(2))
    # Reads still work, and nothing of the refused writes was kept.
    job = store.get(job_id)
    assert job is not None and job.state == "queued" and job.attempts == 0
    assert store.counts().states == {"queued": 1}
    disk.full = False
    claimed = store.claim("w1", lease_seconds=30, limits=BatchLimits(2))
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
