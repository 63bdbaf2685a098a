"""The suite every :class:`~ragwright.application.jobs.JobStore` passes.

Inherit :class:`JobStoreConformance`, override the ``store`` fixture (a fresh, empty
store per test), :meth:`open_again` (another store object on the same data, as another
process would open it) and :meth:`elapse` (make ``seconds`` pass for the store: advance
an injected clock, or sleep for a store on a server's clock). ``store_expression`` is
Python source that opens the same store in a child process (the multi-process test
runs four of them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ragwright.application.jobs import JobLimits, JobStore, canonical_input
from ragwright.errors import IdempotencyConflict, JobNotFound, RequestError

LEASE = 0.3  # seconds: short, so a lease runs out within a test
WIDE = JobLimits(pool=100)


def submit(
    store: JobStore,
    key: str,
    *,
    tenant: str | None = "acme",
    question: str = "q?",
    ttl: float = 600.0,
    grant: str = "grant-1",
) -> str:
    request = {"question": question}
    return store.submit(
        tenant=tenant,
        key_id="k1",
        idempotency_key=key,
        input_hash=canonical_input(request),
        request=request,
        ttl_seconds=ttl,
        grant_digest=grant,
    ).job.id


class JobStoreConformance:
    """Inherit, override ``store``, :meth:`open_again`, :meth:`elapse` and
    ``store_expression``."""

    store_expression: str = ""

    @pytest.fixture
    def store(self) -> JobStore:
        raise NotImplementedError("override the store fixture")

    def open_again(self, store: JobStore) -> JobStore:
        """Another store object on the same data (closed by the caller)."""
        raise NotImplementedError

    def elapse(self, seconds: float) -> None:
        raise NotImplementedError

    # Idempotency.

    def test_submit_persists_a_queued_job(self, store: JobStore) -> None:
        request = {"question": "Where is the manual?", "history": []}
        done = store.submit(
            tenant="acme",
            key_id="k1",
            idempotency_key="key-1",
            input_hash=canonical_input(request),
            request=request,
            ttl_seconds=60,
            grant_digest="grant-1",
        )
        assert done.created
        again = self.open_again(store)
        try:
            job = again.get(done.job.id)
        finally:
            again.close()
        assert job is not None
        assert (
            job.state,
            job.tenant,
            job.key_id,
            job.request,
            job.attempts,
            job.grant_digest,
        ) == ("queued", "acme", "k1", request, 0, "grant-1")
        assert job.expires_at > job.created_at

    def test_same_key_same_input_returns_the_existing_job(self, store: JobStore) -> None:
        first = submit(store, "key-1")
        request = {"question": "q?"}
        again = store.submit(
            tenant="acme",
            key_id="k2",
            idempotency_key="key-1",
            input_hash=canonical_input(request),
            request=request,
            ttl_seconds=60,
            grant_digest="grant-1",
        )
        assert (again.job.id, again.created) == (first, False)

    def test_the_grant_is_not_part_of_the_input(self, store: JobStore) -> None:
        first = submit(store, "key-1", grant="before")
        again = store.submit(
            tenant="acme",
            key_id="k1",
            idempotency_key="key-1",
            input_hash=canonical_input({"question": "q?"}),
            request={"question": "q?"},
            ttl_seconds=60,
            grant_digest="after",
        )
        # The same job, still with the grant it was accepted under.
        assert (again.job.id, again.created, again.job.grant_digest) == (first, False, "before")

    def test_same_key_other_input_is_a_conflict_naming_the_job(self, store: JobStore) -> None:
        first = submit(store, "key-1")
        with pytest.raises(IdempotencyConflict) as caught:
            submit(store, "key-1", question="another?")
        assert (caught.value.idempotency_key, caught.value.job_id) == ("key-1", first)

    def test_a_key_is_scoped_to_its_tenant(self, store: JobStore) -> None:
        ids = {submit(store, "key-1", tenant=t) for t in ("acme", "globex", None)}
        assert len(ids) == 3
        assert submit(store, "key-1", tenant=None) in ids  # untenanted keys are unique too

    def test_concurrent_submits_of_one_key_make_one_job(self, store: JobStore) -> None:
        others = [self.open_again(store) for _ in range(3)]
        stores = [store, *others]
        barrier = threading.Barrier(8)
        ids: list[str] = []

        def one(index: int) -> None:
            barrier.wait()
            ids.append(submit(stores[index % len(stores)], "same-key"))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for other in others:
            other.close()
        assert len(ids) == 8 and len(set(ids)) == 1
        assert store.counts().states == {"queued": 1}

    # Claims and leases.

    def test_claims_take_the_oldest_job_first(self, store: JobStore) -> None:
        ids = [submit(store, f"key-{i}") for i in range(3)]
        claimed = [store.claim("w", lease_seconds=60, limits=WIDE) for _ in range(4)]
        assert [job.id if job else None for job in claimed] == [*ids, None]
        first = claimed[0]
        assert first is not None
        assert (first.state, first.lease_owner, first.attempts) == ("running", "w", 1)

    def test_a_dead_workers_job_is_claimed_again_after_its_lease(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        assert store.claim("dead", lease_seconds=LEASE, limits=WIDE) is not None
        assert store.claim("live", lease_seconds=LEASE, limits=WIDE) is None
        self.elapse(LEASE + 0.2)
        taken = store.claim("live", lease_seconds=60, limits=WIDE)
        assert taken is not None
        assert (taken.id, taken.lease_owner, taken.attempts) == (job_id, "live", 2)
        # The old worker learns at its next renewal and cannot publish.
        assert not store.renew(job_id, "dead", lease_seconds=60)
        assert not store.publish(job_id, "dead", state="succeeded", result={"text": "old"})
        assert store.publish(job_id, "live", state="succeeded", result={"text": "new"})
        job = store.get(job_id)
        assert job is not None and job.result == {"text": "new"}

    def test_renewal_keeps_a_lease_alive(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=LEASE, limits=WIDE)
        for _ in range(3):
            self.elapse(LEASE / 2)
            assert store.renew(job_id, "w", lease_seconds=LEASE)
        assert store.claim("other", lease_seconds=LEASE, limits=WIDE) is None

    def test_a_result_is_published_once(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=60, limits=WIDE)
        assert store.publish(job_id, "w", state="succeeded", result={"answer": "Yes."})
        assert not store.publish(job_id, "w", state="failed", failure="late")
        job = store.get(job_id)
        assert job is not None
        assert (job.state, job.result, job.failure) == ("succeeded", {"answer": "Yes."}, None)
        assert job.finished_at is not None and job.lease_expires_at is None

    def test_a_failure_is_published_with_its_reason(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=60, limits=WIDE)
        assert store.publish(job_id, "w", state="failed", failure="model unavailable")
        job = store.get(job_id)
        assert job is not None and (job.state, job.failure) == ("failed", "model unavailable")

    def test_release_requeues_only_for_the_lease_holder(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=60, limits=WIDE)
        assert not store.release(job_id, "other", reason="documents changed")
        assert store.release(job_id, "w", reason="documents changed")
        job = store.get(job_id)
        assert job is not None and (job.state, job.lease_owner) == ("queued", None)
        again = store.claim("w2", lease_seconds=60, limits=WIDE)
        assert again is not None and (again.id, again.attempts) == (job_id, 2)

    # Cancellation and expiry.

    def test_a_cancelled_running_job_stops_its_worker(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=60, limits=WIDE)
        assert store.cancel(job_id).state == "cancelled"
        assert not store.renew(job_id, "w", lease_seconds=60)
        assert not store.publish(job_id, "w", state="succeeded", result={})
        assert store.claim("w", lease_seconds=60, limits=WIDE) is None

    def test_cancelling_a_finished_job_changes_nothing(self, store: JobStore) -> None:
        job_id = submit(store, "key-1")
        store.claim("w", lease_seconds=60, limits=WIDE)
        store.publish(job_id, "w", state="succeeded", result={"a": 1})
        assert store.cancel(job_id).state == "succeeded"

    def test_cancelling_an_unknown_job_is_not_found(self, store: JobStore) -> None:
        with pytest.raises(JobNotFound):
            store.cancel("no-such-job")
        assert store.get("no-such-job") is None

    def test_a_job_past_its_expiry_is_never_claimed_and_expires(self, store: JobStore) -> None:
        job_id = submit(store, "key-1", ttl=LEASE)
        kept = submit(store, "key-2")
        self.elapse(LEASE + 0.2)
        claimed = store.claim("w", lease_seconds=60, limits=WIDE)
        assert claimed is not None and claimed.id == kept
        assert store.expire() == 1
        job = store.get(job_id)
        assert job is not None and job.state == "expired" and job.finished_at is not None
        assert store.expire() == 0

    # Retention.

    def test_finished_jobs_past_the_retention_are_purged_and_free_their_key(
        self, store: JobStore
    ) -> None:
        done, failed, cancelled, expired, running, queued = (
            submit(store, f"key-{i}", ttl=LEASE if i == 3 else 600.0) for i in range(6)
        )
        for job_id in (done, failed):
            claimed = store.claim("w", lease_seconds=60, limits=WIDE)
            assert claimed is not None and claimed.id == job_id
        store.publish(done, "w", state="succeeded", result={})
        store.publish(failed, "w", state="failed", failure="model unavailable")
        store.cancel(cancelled)
        self.elapse(LEASE + 0.2)
        assert store.expire() == 1
        claimed = store.claim("w", lease_seconds=600, limits=WIDE)
        assert claimed is not None and claimed.id == running
        assert store.purge(older_than=60) == 0  # finished too recently
        self.elapse(0.5)
        recent = submit(store, "key-recent")
        store.cancel(recent)
        assert store.purge(older_than=0.4) == 4  # not the one cancelled just now
        assert [store.get(j) for j in (done, failed, cancelled, expired)] == [None] * 4
        assert {job.state for job in map(store.get, (running, queued, recent)) if job} == {
            "running",
            "queued",
            "cancelled",
        }
        # The purged job's Idempotency-Key names a new job, even for another input.
        assert submit(store, "key-0", question="another?") not in (done, failed)
        assert store.purge(older_than=0) == 1  # the recent one, with no retention
        with pytest.raises(RequestError):
            store.purge(older_than=-1)

    # Batch limits.

    def test_the_pool_limits_jobs_running_at_once(self, store: JobStore) -> None:
        for i in range(3):
            submit(store, f"key-{i}", tenant=f"t{i}")
        limits = JobLimits(pool=2)
        first = store.claim("a", lease_seconds=60, limits=limits)
        assert first is not None
        assert store.claim("b", lease_seconds=60, limits=limits) is not None
        assert store.claim("c", lease_seconds=60, limits=limits) is None
        store.publish(first.id, "a", state="succeeded", result={})
        assert store.claim("c", lease_seconds=60, limits=limits) is not None

    def test_a_tenant_at_its_limit_is_skipped_for_another_tenants_job(
        self, store: JobStore
    ) -> None:
        submit(store, "key-1", tenant="acme")
        submit(store, "key-2", tenant="acme")
        other = submit(store, "key-3", tenant="globex")
        limits = JobLimits(pool=10, per_tenant=1)
        assert store.claim("a", lease_seconds=60, limits=limits) is not None
        taken = store.claim("b", lease_seconds=60, limits=limits)
        assert taken is not None and taken.id == other
        assert store.claim("c", lease_seconds=60, limits=limits) is None

    def test_an_expired_lease_frees_its_slot(self, store: JobStore) -> None:
        submit(store, "key-1")
        submit(store, "key-2")
        limits = JobLimits(pool=1)
        assert store.claim("dead", lease_seconds=LEASE, limits=limits) is not None
        assert store.claim("w", lease_seconds=60, limits=limits) is None
        self.elapse(LEASE + 0.2)
        assert store.claim("w", lease_seconds=60, limits=limits) is not None

    # Counts.

    def test_counts_jobs_per_state_and_the_oldest_queued_age(self, store: JobStore) -> None:
        assert store.counts().states == {}
        assert store.counts().oldest_queued_seconds is None
        for i in range(4):
            submit(store, f"key-{i}")
        done = store.claim("w", lease_seconds=60, limits=WIDE)
        assert done is not None
        store.publish(done.id, "w", state="succeeded", result={})
        store.claim("w", lease_seconds=60, limits=WIDE)
        self.elapse(0.5)
        counts = store.counts()
        assert counts.states == {"queued": 2, "running": 1, "succeeded": 1}
        assert counts.oldest_queued_seconds is not None
        assert 0.4 <= counts.oldest_queued_seconds < 30

    # Several processes.

    def test_four_processes_run_sixty_jobs_exactly_once(
        self, store: JobStore, tmp_path: Path
    ) -> None:
        ids = {submit(store, f"key-{i}", tenant=f"t{i % 3}") for i in range(60)}
        pool = 2
        code = textwrap.dedent(
            f"""
            import json, sys, time
            from ragwright.application.jobs import JobLimits
            store = {self.store_expression}
            worker, out = sys.argv[1], open(sys.argv[2], "w")
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 1.5:
                job = store.claim(worker, lease_seconds=30, limits=JobLimits(pool={pool}))
                if job is None:
                    time.sleep(0.002)
                    continue
                idle_since = start = time.monotonic()
                time.sleep(0.03)
                end = time.monotonic()
                ok = store.publish(job.id, worker, state="succeeded", result={{"by": worker}})
                out.write(json.dumps([job.id, start, end, ok]) + "\\n")
                out.flush()
            store.close()
            """
        )
        src = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": src}
        files = [tmp_path / f"claims-{n}.jsonl" for n in range(4)]
        children = [
            subprocess.Popen([sys.executable, "-c", code, f"w{n}", str(files[n])], env=env)
            for n in range(4)
        ]
        began = time.monotonic()
        for child in children:
            assert child.wait(timeout=20) == 0
        assert time.monotonic() - began < 20
        claims = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        claimed = sorted(c[0] for c in claims)
        doubles = {i for i in claimed if claimed.count(i) > 1}
        assert not doubles, f"claimed twice under a live lease: {sorted(doubles)}"
        assert claimed == sorted(ids), "every job claimed exactly once"
        assert all(c[3] for c in claims), "every claim's publish took effect"
        # Never more than ``pool`` jobs held at once across the processes (CLOCK_MONOTONIC
        # is one clock for every process on the machine).
        events = sorted([(c[1], 1) for c in claims] + [(c[2], -1) for c in claims])
        held = peak = 0
        for _, step in events:
            held += step
            peak = max(peak, held)
        assert peak <= pool, f"{peak} jobs held at once, the pool is {pool}"
        assert store.counts().states == {"succeeded": 60}
        workers = {str(job.result["by"]) for job in map(store.get, ids) if job and job.result}
        assert len(workers) >= 2  # the work really was shared between processes
