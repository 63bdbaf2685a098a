"""Several ``ragwright serve`` replicas as real processes on loopback, sharing one
PostgreSQL database (jobs), one Redis (capacity pools, cache) and one key store, each
on its own copy of one ingested index: jobs accepted on either replica run once; a
replica killed with jobs in flight loses none; a process that dies between persisting
a job and answering 202 leaves a job the client's retry finds; a PostgreSQL restart and
Redis killed while jobs run lose none and run none twice; a burst never runs more jobs
at once than the batch pool while interactive answers are served; an HTTP-less
``ragwright worker`` runs what a replica without workers accepted (issue 12).

Keys: made once (``ragwright keys add`` with the replicas' ``RAGWRIGHT_DATABASE_URL``),
in the PostgreSQL key store every replica reads; no replica has a key file of its own.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.failpoints import AFTER_JOB_PERSIST
from tests.replicas import (
    Worker,
    add_key,
    copy_index,
    key_count,
    live_leases,
    private_postgres,
    published,
    redis_server,
    replicas,
    rows_by_state,
    scratch_database,
    store_rows,
    submit,
    wait_finished,
)
from tests.scripted_openai import scripted_openai

pytestmark = pytest.mark.slow

QUESTION = "Should I drain all queued work during shutdown?"
LEASE = 2.0


def quote_s1(evidence: list[dict[str, Any]]) -> dict[str, Any]:
    """A generated answer the support check accepts: S1's first sentence."""
    if not evidence:
        return {"status": "insufficient", "answer": "", "sourceIds": []}
    sentence = evidence[0]["text"].split(". ")[0]
    return {"status": "answered", "answer": sentence, "sourceIds": ["S1"]}


@pytest.fixture(scope="module")
def template(sample_home: Path) -> Path:
    """The sample corpus indexed (what ``ingest_template`` makes): the index to copy."""
    return sample_home


@pytest.fixture
def shared() -> Iterator[dict[str, str]]:
    """The servers replicas share: a scratch database (jobs and keys), a throwaway Redis."""
    with scratch_database() as database, redis_server() as redis:
        yield {
            "RAGWRIGHT_DATABASE_URL": database,
            "RAGWRIGHT_REDIS_URL": redis.url,
            "RAGWRIGHT_JOB_WORKERS": "2",
            "RAGWRIGHT_BATCH_CAPACITY": "4",
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
        }


def model_env(base_url: str, style: str) -> dict[str, str]:
    return {
        "RAGWRIGHT_CHAT_PROVIDER": "openai",
        "RAGWRIGHT_CHAT_MODEL": "scripted",
        "RAGWRIGHT_CHAT_BASE_URL": base_url,
        "RAGWRIGHT_CHAT_API_KEY": "sk-scripted",
        "RAGWRIGHT_ANSWER_STYLE": style,
    }


def test_jobs_accepted_on_either_replica_complete_once_and_a_key_is_one_job_across_them(
    template: Path, shared: dict[str, str], tmp_path: Path
) -> None:
    with scripted_openai(quote_s1) as (base_url, _):
        env = {**shared, **model_env(base_url, "evidence")}
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as (a, b):
            ids = []
            for n in range(8):
                replica = (a, b)[n % 2]
                response = submit(replica.url, secret, f"job-{n}", f"{QUESTION} ({n})")
                assert response.status_code == 202, response.text
                ids.append(response.json()["id"])
            first = submit(a.url, secret, "same-key", QUESTION)
            again = submit(b.url, secret, "same-key", QUESTION)
            assert (first.status_code, again.status_code) == (202, 202)
            assert again.json()["id"] == first.json()["id"]
            assert (first.json()["replayed"], again.json()["replayed"]) == (False, True)
            ids.append(first.json()["id"])
            done = wait_finished(b.url, secret, ids, timeout=60)
            fleet = [a, b]
            counts = published(fleet)
    assert {job_id: done[job_id]["state"] for job_id in ids} == dict.fromkeys(ids, "succeeded")
    assert {counts[job_id] for job_id in ids} == {1}
    assert len(store_rows(shared["RAGWRIGHT_DATABASE_URL"])) == 9
    # The key both replicas accepted lives in PostgreSQL, not in a file per replica.
    assert key_count(shared["RAGWRIGHT_DATABASE_URL"]) == 1
    assert not any((replica.home / "keys.sqlite3").exists() for replica in fleet)
    # Both replicas ran jobs: the queue is shared, not per process.
    assert all(published([replica]) for replica in fleet)


def test_a_replica_killed_with_jobs_in_flight_loses_none_and_runs_none_twice(
    template: Path, shared: dict[str, str], tmp_path: Path
) -> None:
    with scripted_openai(quote_s1, delay=1.5) as (base_url, _):
        env = {**shared, **model_env(base_url, "generated")}
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as (a, b):
            ids = [
                submit(a.url, secret, f"job-{n}", f"{QUESTION} ({n})").json()["id"]
                for n in range(8)
            ]
            worker = a.worker_id()
            assert worker is not None
            held: list[str] = []
            deadline = time.monotonic() + 30
            while not held and time.monotonic() < deadline:
                held = [
                    row["id"]
                    for row in store_rows(shared["RAGWRIGHT_DATABASE_URL"])
                    if row["state"] == "running" and row["lease_owner"] == worker
                ]
                time.sleep(0.05)
            assert held, "replica a never claimed a job"
            a.kill()
            done = wait_finished(b.url, secret, ids, timeout=90)
            counts = published([a, b])
    assert {job_id: done[job_id]["state"] for job_id in ids} == dict.fromkeys(ids, "succeeded")
    assert {counts[job_id] for job_id in ids} == {1}, counts
    # The killed replica's jobs ran again on the survivor, after the lease ran out.
    assert all(done[job_id]["attempts"] >= 2 for job_id in held), done
    assert all(done[job_id]["result"]["mode"] == "generated" for job_id in ids)


def test_a_process_dying_after_persisting_leaves_the_job_for_the_retry_with_the_same_key(
    template: Path, shared: dict[str, str], tmp_path: Path
) -> None:
    with scripted_openai(quote_s1) as (base_url, _):
        env = {**shared, **model_env(base_url, "evidence")}
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as (a, b):
            a.stop()
            a.start(failpoint=AFTER_JOB_PERSIST, RAGWRIGHT_JOB_WORKERS="0")
            a.wait_ready()
            key = f"crash-{uuid.uuid4().hex}"
            with pytest.raises(Exception) as crashed:  # the connection drops: no answer
                submit(a.url, secret, key, QUESTION)
            assert type(crashed.value).__module__.startswith("httpx")
            assert a.process is not None and a.process.wait(10) == 137
            rows = store_rows(shared["RAGWRIGHT_DATABASE_URL"])
            assert [r["idempotency_key"] for r in rows] == [key]  # persisted before it died
            retry = submit(b.url, secret, key, QUESTION)
            assert retry.status_code == 202
            assert retry.json()["id"] == rows[0]["id"]
            assert retry.json()["replayed"] is True
            done = wait_finished(b.url, secret, [rows[0]["id"]], timeout=60)
            counts = published([a, b])
    assert done[rows[0]["id"]]["state"] == "succeeded"
    assert counts[rows[0]["id"]] == 1
    assert len(store_rows(shared["RAGWRIGHT_DATABASE_URL"])) == 1


def test_a_postgresql_restart_while_jobs_run_loses_none_and_runs_none_twice(
    template: Path, tmp_path: Path
) -> None:
    with (
        private_postgres() as cluster,
        redis_server() as redis,
        scripted_openai(quote_s1, delay=1.0) as (base_url, _),
    ):
        env = {
            "RAGWRIGHT_DATABASE_URL": cluster.url,
            "RAGWRIGHT_REDIS_URL": redis.url,
            "RAGWRIGHT_JOB_WORKERS": "2",
            "RAGWRIGHT_BATCH_CAPACITY": "4",
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
            **model_env(base_url, "generated"),
        }
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as (a, b):
            ids = [
                submit((a, b)[n % 2].url, secret, f"job-{n}", f"{QUESTION} ({n})").json()["id"]
                for n in range(8)
            ]
            deadline = time.monotonic() + 30
            while not rows_by_state(cluster.url).get("running") and time.monotonic() < deadline:
                time.sleep(0.05)
            cluster.stop()
            try:
                # Nothing can be authenticated or persisted: 503, never a 202 or a 500.
                during = submit(a.url, secret, "during", QUESTION, timeout=30)
                assert during.status_code == 503, during.text
                assert during.json()["type"] == "/problems/keys-unavailable"
                time.sleep(LEASE * 3)  # past the store's connect timeout and the leases
            finally:
                cluster.start()
            retry = submit(b.url, secret, "during", QUESTION)
            assert retry.status_code == 202, retry.text
            ids.append(retry.json()["id"])
            done = wait_finished(a.url, secret, ids, timeout=90)
            counts = published([a, b])
        states = rows_by_state(cluster.url)
    assert {job_id: done[job_id]["state"] for job_id in ids} == dict.fromkeys(ids, "succeeded")
    assert {counts[job_id] for job_id in ids} == {1}, counts
    assert states == {"succeeded": 9}


def test_redis_killed_while_jobs_run_degrades_capacity_with_a_warning_and_loses_nothing(
    template: Path, tmp_path: Path
) -> None:
    with (
        scratch_database() as database,
        redis_server() as redis,
        scripted_openai(quote_s1, delay=0.5) as (base_url, _),
    ):
        env = {
            "RAGWRIGHT_DATABASE_URL": database,
            "RAGWRIGHT_REDIS_URL": redis.url,
            "RAGWRIGHT_JOB_WORKERS": "2",
            "RAGWRIGHT_BATCH_CAPACITY": "4",
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
            **model_env(base_url, "generated"),
        }
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as fleet:
            ids = [
                submit(fleet[n % 2].url, secret, f"job-{n}", f"{QUESTION} ({n})").json()["id"]
                for n in range(6)
            ]
            deadline = time.monotonic() + 30
            while not rows_by_state(database).get("running") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert rows_by_state(database).get("running"), "no job was running"
            before = [len(replica.log()) for replica in fleet]
            redis.stop()
            # Jobs accepted after the kill need model attempts: only per-process gates left.
            for n in range(6, 12):
                response = submit(fleet[n % 2].url, secret, f"job-{n}", f"{QUESTION} ({n})")
                assert response.status_code == 202, response.text
                ids.append(response.json()["id"])
            done = wait_finished(fleet[0].url, secret, ids, timeout=90)
            counts = published(fleet)
            after = [replica.log()[offset:] for replica, offset in zip(fleet, before, strict=True)]
        rows = store_rows(database)
    assert {job_id: done[job_id]["state"] for job_id in ids} == dict.fromkeys(ids, "succeeded")
    assert {counts[job_id] for job_id in ids} == {1}, counts
    assert len(rows) == 12
    assert any(
        "Redis at redis://127.0.0.1" in text and "in-process capacity gate" in text
        for text in after
    ), after


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same time)."""
    steps = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    held = peak = 0
    for _, step in steps:
        held += step
        peak = max(peak, held)
    return peak


def test_a_burst_never_runs_more_jobs_than_the_batch_capacity_and_interactive_answers_go_on(
    template: Path, tmp_path: Path
) -> None:
    capacity = 3
    with (
        scratch_database() as database,
        redis_server() as redis,
        scripted_openai(quote_s1, delay=0.5) as (base_url, seen),
    ):
        env = {
            "RAGWRIGHT_DATABASE_URL": database,
            "RAGWRIGHT_REDIS_URL": redis.url,
            # Six workers over the two replicas: more than the pool lets run at once.
            "RAGWRIGHT_JOB_WORKERS": "3",
            "RAGWRIGHT_BATCH_CAPACITY": str(capacity),
            "RAGWRIGHT_JOB_LEASE": str(LEASE),
            **model_env(base_url, "generated"),
        }
        secret = add_key(env, tmp_path / "admin")
        with replicas(template, tmp_path, 2, env) as fleet:
            sampled: list[int] = []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    sampled.append(live_leases(database))
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                ids = [
                    submit(
                        fleet[n % 2].url, secret, f"burst-{n}", f"{QUESTION} (burst {n})"
                    ).json()["id"]
                    for n in range(4 * capacity)
                ]
                interactive = [
                    httpx.post(
                        replica.url + "/v1/answers",
                        json={"question": f"{QUESTION} (interactive {replica.name})"},
                        headers={"Authorization": f"Bearer {secret}"},
                        timeout=30,
                    )
                    for replica in fleet
                ]
                done = wait_finished(fleet[0].url, secret, ids, timeout=120)
            finally:
                sampling.set()
                sampler.join()
            counts = published(fleet)
    assert {job_id: done[job_id]["state"] for job_id in ids} == dict.fromkeys(ids, "succeeded")
    assert {counts[job_id] for job_id in ids} == {1}, counts
    assert sampled and max(sampled) <= capacity, sampled  # the store's live leases
    held = [
        (r["started"], r["ended"])
        for r in seen
        if "(burst " in json.dumps(r["body"]) and "ended" in r
    ]
    assert len(held) == len(ids)
    # At the provider: the jobs' model calls held open at once, across both replicas.
    assert 2 <= peak_overlap(held) <= capacity, held
    assert [r.status_code for r in interactive] == [200, 200], [r.text for r in interactive]
    assert [r.json()["mode"] for r in interactive] == ["generated", "generated"]


def test_an_http_less_worker_runs_a_job_a_replica_without_workers_accepted(
    template: Path, shared: dict[str, str], tmp_path: Path
) -> None:
    with scripted_openai(quote_s1) as (base_url, _):
        env = {**shared, **model_env(base_url, "generated")}
        secret = add_key(env, tmp_path / "admin")
        accepting = {**env, "RAGWRIGHT_JOB_WORKERS": "0"}
        with replicas(template, tmp_path, 1, accepting) as (a,):
            # Its own copy of the index: the serving replica holds the other one.
            worker = Worker("worker", copy_index(template, tmp_path / "worker"), env)
            worker.start()
            try:
                worker.wait_started()
                response = submit(a.url, secret, "via-worker", QUESTION)
                assert response.status_code == 202, response.text
                job_id = response.json()["id"]
                done = wait_finished(a.url, secret, [job_id], timeout=60)
            finally:
                worker.stop()
    assert done[job_id]["state"] == "succeeded", done
    assert done[job_id]["result"]["mode"] == "generated"
    assert published([worker])[job_id] == 1 and published([a])[job_id] == 0
    assert worker.process is not None and worker.process.returncode == 0, worker.log()
