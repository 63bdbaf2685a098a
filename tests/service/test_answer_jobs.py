"""Durable answer jobs through the service: 202 + idempotency, authorisation on reads,
revalidation before running and before publishing, and degraded answers requeued."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragwright.application import IngestRequest, RevokeKeyRequest
from ragwright.application.callers import grant_digest
from ragwright.application.job_runner import DispatchRamp, JobRunner
from ragwright.application.jobs import JobLimits, canonical_input
from ragwright.errors import FailureCategory, StorageError
from ragwright.settings import load_settings
from ragwright.testing.scripted import Fail, ScriptedChatModel
from tests.application.components import answered
from tests.service.conftest import CORPUS, QUESTION, RecordingModel, Service, bearer

Client = Callable[[Service], TestClient]
BODY = {"question": QUESTION}
ANSWER = '{"status": "answered", "answer": "Drain while the deadline allows.", "sourceIds": ["S1"]}'


def submit(client: TestClient, secret: str, key: str = "k-1", body: Any = BODY) -> Any:
    return client.post(
        "/v1/answer-jobs", json=body, headers={**bearer(secret), "Idempotency-Key": key}
    )


def wait_for_state(client: TestClient, secret: str, job_id: str, *states: str) -> Any:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        job = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(secret)).json()
        if job["state"] in states:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {states}: {job}")


def runner(service: Service, events: list[str], **kwargs: Any) -> JobRunner:
    options: dict[str, Any] = {
        "concurrency": 1,
        "limits": JobLimits(2),
        "lease_seconds": 5.0,
        "deadline_seconds": 10.0,
        "poll_seconds": 0.05,
        "events": events.append,
    }
    options.update(kwargs)
    return JobRunner(service.application, service.application.jobs(), **options)


def test_a_job_is_accepted_with_202_and_runs_to_a_published_answer(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=1)
    secret = service.key("alice")
    client = client_for(service)
    response = submit(client, secret)
    assert response.status_code == 202
    job = response.json()
    assert response.headers["location"] == job["status_url"] == f"/v1/answer-jobs/{job['id']}"
    assert job["replayed"] is False
    done = wait_for_state(client, secret, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["result"]["mode"] == "generated"
    assert done["result"]["citations"]
    assert "request" not in done["result"]
    assert "jobs" in service.components.workloads  # its own model-capacity pools
    # Cancelling a finished job changes nothing: 200 with its state and result as they are.
    late = client.delete(f"/v1/answer-jobs/{job['id']}", headers=bearer(secret))
    assert late.status_code == 200
    assert (late.json()["state"], late.json()["result"]) == ("succeeded", done["result"])


def test_the_same_idempotency_key_is_the_same_job_and_another_body_is_409(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    alice = service.key("alice")
    acme = service.key("acme", tenant="acme")
    client = client_for(service)
    first = submit(client, alice).json()
    again = submit(client, alice)
    assert again.status_code == 202
    assert again.json()["id"] == first["id"] and again.json()["replayed"] is True
    conflict = submit(client, alice, body={"question": "Another question?"})
    assert conflict.status_code == 409
    assert conflict.json()["detail"].startswith("Idempotency-Key")
    other_tenant = submit(client, acme).json()  # keys are scoped to the caller's tenant
    assert other_tenant["id"] != first["id"]


def test_an_idempotency_conflict_says_the_key_is_used_without_naming_the_other_job(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    """Keys are the tenant's: a second key of acme reusing one gets a 409 that names
    neither the first key's job nor anything of it (issue 46, item 8)."""
    service = make_service(job_workers=0)
    first_key = service.key("acme-1", tenant="acme")
    second_key = service.key("acme-2", tenant="acme")
    client = client_for(service)
    first = submit(client, first_key, key="shared").json()
    conflict = submit(client, second_key, key="shared", body={"question": "Another question?"})
    assert conflict.status_code == 409
    problem = conflict.json()
    assert problem["type"].endswith("/idempotency-conflict")
    assert "already used for another request" in problem["detail"]
    assert first["id"] not in conflict.text
    assert "job_id" not in problem


@pytest.mark.parametrize(
    ("headers", "field"),
    [({}, "Idempotency-Key"), ({"Idempotency-Key": "has space"}, "Idempotency-Key")],
)
def test_a_submission_needs_a_well_formed_idempotency_key(
    make_service: Callable[..., Service],
    client_for: Client,
    headers: dict[str, str],
    field: str,
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answer-jobs", json=BODY, headers={**bearer(secret), **headers}
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_invalid_input_is_refused_at_submission_not_later(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    response = submit(client_for(service), secret, body={"question": "   "})
    assert response.status_code == 422
    assert service.application.jobs().counts().states.get("queued", 0) == 0


def test_reads_and_cancellation_follow_the_callers_current_permissions(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    alice = service.key("alice")
    colleague = service.key("colleague")  # same (untenanted) tenant
    acme = service.key("acme", tenant="acme")
    client = client_for(service)
    job_id = submit(client, alice).json()["id"]
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(colleague)).status_code == 200
    other = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(acme))
    assert other.status_code == 404  # another tenant's job does not exist for it
    assert client.delete(f"/v1/answer-jobs/{job_id}", headers=bearer(acme)).status_code == 404
    key_id = next(k.id for k in service.application.list_keys().keys if k.name == "alice")
    service.application.revoke_key(RevokeKeyRequest(key_id))
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(alice)).status_code == 401
    cancelled = client.delete(f"/v1/answer-jobs/{job_id}", headers=bearer(colleague))
    assert cancelled.json()["state"] == "cancelled"


def test_a_result_citing_documents_outside_the_readers_allowlist_is_refused(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=1)
    alice = service.key("alice")
    narrow = service.key("narrow", documents=("refund-policy",))
    client = client_for(service)
    job_id = submit(client, alice).json()["id"]
    done = wait_for_state(client, alice, job_id, "succeeded", "failed")
    assert done["state"] == "succeeded"
    refused = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(narrow))
    assert refused.status_code == 403


def test_a_revoked_submitter_fails_the_job_before_it_runs(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    key_id = service.application.list_keys().keys[0].id
    service.application.revoke_key(RevokeKeyRequest(key_id))
    events: list[str] = []
    calls = service.components.model.calls  # type: ignore[attr-defined]
    asyncio.run(_run_until(runner(service, events), events, f"failed:{job_id}"))
    assert f"failed:{job_id}:permission_revoked" in events
    assert service.components.model.calls == calls  # type: ignore[attr-defined]
    job = service.application.jobs().get(job_id)
    assert job is not None and (job.state, job.failure) == ("failed", "permission_revoked")


def test_a_cited_document_changed_during_generation_runs_the_job_again(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Any
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    model.release.clear()
    events: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner(service, events).run(stop))
        while model.events.count("call") < 2:  # the probe's, then the job's
            await asyncio.sleep(0.01)
        # Edit the corpus while the model writes: the cited revision is gone.
        edited = tmp_path / "edited"
        edited.mkdir()
        for source in CORPUS.glob("*.md"):
            (edited / source.name).write_text(source.read_text() + "\nA new closing line.\n")
        await asyncio.to_thread(service.application.ingest, IngestRequest((edited,)))
        model.release.set()
        while not any(e.startswith(f"published:{job_id}") for e in events):
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 60))
    released = [e for e in events if e.startswith(f"released:{job_id}:inputs_changed")]
    assert released, events
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "succeeded" and job.attempts == 2


def test_a_model_outage_requeues_the_job_and_ramps_dispatch_down(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = ScriptedChatModel([answered("S1")] + [Fail(FailureCategory.TRANSIENT)] * 40)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    events: list[str] = []
    job_runner = runner(service, events, concurrency=4)
    asyncio.run(_run_until(job_runner, events, f"released:{job_id}"))
    assert any(e.startswith(f"released:{job_id}:model_unavailable") for e in events)
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "queued"  # never published as evidence only
    assert job_runner.ramp.allowed == 1


def test_the_dispatch_ramp_drops_to_one_and_doubles_back_to_the_limit() -> None:
    now = [0.0]
    ramp = DispatchRamp(8, backoff=2.0, clock=lambda: now[0])
    assert ramp.may_start(7) and not ramp.may_start(8)
    ramp.outage()
    assert not ramp.may_start(0)  # paused for the backoff
    now[0] = 2.0
    assert ramp.may_start(0) and not ramp.may_start(1)
    ramp.outage()
    now[0] = 5.0
    assert not ramp.may_start(0)  # the backoff doubled to 4 s
    now[0] = 6.0
    steps = []
    for _ in range(4):
        ramp.success()
        steps.append(ramp.allowed)
    assert steps == [2, 4, 8, 8]


def test_a_job_cancelled_while_it_runs_publishes_nothing(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    model.release.clear()
    events: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner(service, events, lease_seconds=0.3).run(stop))
        while model.events.count("call") < 2:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(service.application.jobs().cancel, job_id)
        while f"lost:{job_id}" not in events:
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert "cancelled" in model.events  # the model call was stopped
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "cancelled" and job.result is None


async def _run_until(job_runner: JobRunner, events: list[str], prefix: str) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(job_runner.run(stop))
    for _ in range(3000):
        if any(e.startswith(prefix) for e in events):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 30)


class StoreDownAtFirst:
    """A job store whose first ``outages`` claims fail as a database restart does;
    every other call goes to the real store. Records each claim's outcome."""

    def __init__(self, store: Any, outages: int) -> None:
        self.store = store
        self.outages = outages
        self.claims: list[str] = []

    def claim(self, worker: str, **kwargs: Any) -> Any:
        if self.outages > 0:
            self.outages -= 1
            self.claims.append("down")
            raise StorageError("postgresql://127.0.0.1:5432/jobs", "connection refused")
        self.claims.append("ok")
        return self.store.claim(worker, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_the_runner_survives_a_job_store_outage_and_claims_again_when_it_is_back(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    # Regression (issue 12, PostgreSQL restart fault): a claim that raised while the
    # database restarted ended the dispatch loop, so the process ran no job again.
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    store = StoreDownAtFirst(service.application.jobs(), outages=2)
    events: list[str] = []
    job_runner = JobRunner(
        service.application,
        store,  # type: ignore[arg-type]
        concurrency=1,
        limits=JobLimits(2),
        lease_seconds=5.0,
        deadline_seconds=10.0,
        poll_seconds=0.05,
        events=events.append,
        ramp=DispatchRamp(1, backoff=0.05),
    )
    asyncio.run(_run_until(job_runner, events, f"published:{job_id}"))
    assert store.claims[:3] == ["down", "down", "ok"]
    assert events[:2] == ["store_unavailable:StorageError"] * 2
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "succeeded" and job.attempts == 1


def test_a_freed_slot_is_taken_when_a_job_ends_not_at_the_next_poll(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    # Regression (issue 12, burst fault): the loop slept a whole poll interval after a
    # job ended, so a backlog drained slower than the pool. With a poll interval longer
    # than _run_until waits, the second job runs only if the first one's end wakes it.
    service = make_service(job_workers=0)
    secret = service.key("alice")
    client = client_for(service)
    first, second = (submit(client, secret, key).json()["id"] for key in ("k-1", "k-2"))
    events: list[str] = []
    job_runner = runner(service, events, concurrency=1, poll_seconds=120.0)
    asyncio.run(_run_until(job_runner, events, f"published:{second}"))
    assert [e for e in events if e.startswith("published:")] == [
        f"published:{first}",
        f"published:{second}",
    ]


class KeyStoreDown:
    """A key store whose server is down (a PostgreSQL restart): every read raises as
    ``PostgresKeyStore`` does, and each attempt is recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def authenticate(self, secret: str) -> Any:
        self.calls.append("authenticate")
        raise StorageError("postgresql://127.0.0.1:5432/keys", "connection refused")


def test_a_key_store_outage_is_503_keys_unavailable_not_a_500(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    # Regression (issue 12, PostgreSQL restart fault): with keys in PostgreSQL, a
    # submission during the restart failed with 500 internal.
    service = make_service(job_workers=0)
    secret = service.key("alice")
    down = KeyStoreDown()
    service.components._keys = down  # type: ignore[attr-defined,assignment]
    response = submit(client_for(service), secret)
    assert response.status_code == 503, response.text
    assert response.json()["type"] == "/problems/keys-unavailable"
    assert down.calls == ["authenticate"]


def test_a_job_past_its_expiry_is_never_run_and_says_expired(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0, job_ttl=0.2)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    time.sleep(0.4)
    events: list[str] = []
    calls = service.components.model.calls  # type: ignore[attr-defined]
    asyncio.run(_run_until(runner(service, events), events, "expired:"))
    assert "expired:1" in events
    assert not any(e.startswith("claimed:") for e in events)
    assert service.components.model.calls == calls  # type: ignore[attr-defined]
    assert wait_for_state(client, secret, job_id, "expired")["state"] == "expired"


def test_a_replica_without_workers_reports_an_overdue_job_expired(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0, job_ttl=0.2)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    time.sleep(0.4)
    job = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(secret)).json()
    assert job["state"] == "expired"


def test_the_openapi_document_requires_the_idempotency_key(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    spec = client_for(make_service(ingest=False, job_workers=0)).get("/openapi.json").json()
    (header,) = [
        p
        for p in spec["paths"]["/v1/answer-jobs"]["post"]["parameters"]
        if p["name"] == "Idempotency-Key"
    ]
    assert header["required"] is True and header["schema"]["maxLength"] == 200


def test_the_batch_tenant_capacity_setting_holds_a_tenants_second_job_in_the_queue(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=2, batch_capacity=2, batch_tenant_capacity=1)
    secret = service.key("alice")
    client = client_for(service)
    model.release.clear()  # the startup probe went through: hold the jobs' answers
    first = submit(client, secret, key="k-1").json()["id"]
    second = submit(client, secret, key="k-2").json()["id"]
    store = service.application.jobs()
    time.sleep(1.5)  # several claim rounds of both workers
    states = sorted(store.get(j).state for j in (first, second))  # type: ignore[union-attr]
    assert states == ["queued", "running"]  # the pool had room; the tenant had not
    model.release.set()
    wait_for_state(client, secret, first, "succeeded")
    wait_for_state(client, secret, second, "succeeded")


def test_the_job_deadline_setting_bounds_each_attempt(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=1, job_deadline=0.5)
    secret = service.key("alice")
    client = client_for(service)
    model.release.clear()
    job_id = submit(client, secret).json()["id"]
    end = time.monotonic() + 20
    while "cancelled" not in model.events and time.monotonic() < end:
        time.sleep(0.05)
    assert "cancelled" in model.events  # the attempt was stopped at its deadline
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state in ("queued", "running") and job.result is None


# --- invalid input ---------------------------------------------------------------------

# 600 tokens for the hashing embedder (a word or a mark each), which reads at most 512;
# 1,199 characters, within the request's own limit of 2,000.
TOO_MANY_TOKENS = " ".join(["a"] * 599) + " ?"


def test_a_question_longer_than_the_embedder_reads_is_refused_at_submission(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    response = submit(client_for(service), secret, body={"question": TOO_MANY_TOKENS})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "question"
    assert "512" in response.json()["errors"][0]["rule"]
    assert service.application.jobs().counts().states == {}


def store_job(service: Service, key_name: str, question: str, idempotency_key: str) -> str:
    """A job put in the store directly, as an older replica (or one with another
    embedder) could have accepted it: no submission check ran."""
    key = next(k for k in service.application.list_keys().keys if k.name == key_name)
    request = {"question": question, "history": [], "documents": []}
    return (
        service.application.jobs()
        .submit(
            tenant=key.tenant,
            key_id=key.id,
            idempotency_key=idempotency_key,
            input_hash=canonical_input(request),
            request=request,
            ttl_seconds=600,
            grant_digest=grant_digest(key),
        )
        .job.id
    )


def test_invalid_input_found_when_the_job_runs_fails_it_without_an_outage(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(job_workers=0)
    service.key("alice")
    job_id = store_job(service, "alice", TOO_MANY_TOKENS, "k-long")
    events: list[str] = []
    job_runner = runner(service, events, concurrency=4)
    asyncio.run(_run_until(job_runner, events, f"failed:{job_id}"))
    assert any(e.startswith(f"failed:{job_id}:invalid_request: question:") for e in events)
    assert not any(e.startswith("released:") for e in events)  # not requeued as an outage
    assert job_runner.ramp.allowed == 4 and job_runner.ramp.paused_until == 0.0
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "failed" and job.attempts == 1


# --- the key store seen from the runner -------------------------------------------------


class GatedKeyStore:
    """The real key store, except that ``get`` waits until the test's event loop opens
    the gate (at most 10 s), as a PostgreSQL key store waits for a server that is down:
    run on the event loop, it would block the loop that must open it."""

    def __init__(self, keys: Any) -> None:
        self.keys = keys
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.opened_in_time: list[bool] = []

    def get(self, key_id: str) -> Any:
        self.entered.set()
        self.opened_in_time.append(self.gate.wait(10))
        return self.keys.get(key_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.keys, name)


def test_the_runner_reads_the_submitting_key_off_the_event_loop(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    gated = GatedKeyStore(service.components.key_store())
    service.components._keys = gated  # type: ignore[assignment]
    events: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner(service, events).run(stop))
        while not gated.entered.is_set():
            await asyncio.sleep(0.01)
        gated.gate.set()  # runs only if the loop is free while the key is read
        while not any(e.startswith(f"published:{job_id}") for e in events):
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert gated.opened_in_time and all(gated.opened_in_time)


class KeyLookupDown:
    """A key store whose server is down: ``get`` raises as ``PostgresKeyStore`` does."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, key_id: str) -> Any:
        self.calls += 1
        raise StorageError("postgresql://127.0.0.1:5432/keys", "connection refused")


def test_a_key_store_outage_hands_the_job_back_and_logs_it_without_content(
    make_service: Callable[..., Service], client_for: Client, caplog: pytest.LogCaptureFixture
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    down = KeyLookupDown()
    service.components._keys = down  # type: ignore[assignment]
    events: list[str] = []
    job_runner = runner(service, events)
    with caplog.at_level(logging.INFO, logger="ragwright"):
        asyncio.run(_run_until(job_runner, events, f"released:{job_id}"))
    assert events[:3] == [
        f"claimed:{job_id}",
        f"keys_unavailable:{job_id}",
        f"released:{job_id}:keys_unavailable",
    ]
    assert down.calls == 1 and job_runner.ramp.allowed == 1  # an outage: dispatch ramps down
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "queued" and job.result is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(job_id in line and "key store is unavailable" in line for line in warned)
    assert QUESTION not in caplog.text


# --- renewal while the job store is down -----------------------------------------------


class RenewalsDown:
    """The real job store, except that the first ``failures`` renewals raise as a
    PostgreSQL store does while the server is down; every renewal is recorded.

    ``now`` is the runner's lease clock, a manual one: it stands still (a renewal late
    on a loaded machine is not a lapsed lease) except that each failed renewal moves it
    on by ``outage`` seconds, the time the store was down."""

    def __init__(self, store: Any, failures: int, outage: float = 0.0) -> None:
        self.store = store
        self.failures = failures
        self.outage = outage
        self.elapsed = 0.0
        self.renewals: list[str] = []

    def now(self) -> float:
        return self.elapsed

    def renew(self, job_id: str, worker: str, **kwargs: Any) -> bool:
        if self.failures > 0:
            self.failures -= 1
            self.renewals.append("down")
            self.elapsed += self.outage
            raise StorageError("postgresql://127.0.0.1:5432/jobs", "connection refused")
        renewed = bool(self.store.renew(job_id, worker, **kwargs))
        self.renewals.append("ok" if renewed else "refused")
        return renewed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def job_runner_over(service: Service, store: Any, events: list[str], **kwargs: Any) -> JobRunner:
    options: dict[str, Any] = {
        "concurrency": 1,
        "limits": JobLimits(2),
        "lease_seconds": 0.6,
        "deadline_seconds": 30.0,
        "poll_seconds": 0.05,
        "events": events.append,
    }
    if isinstance(store, RenewalsDown):
        options["clock"] = store.now
    options.update(kwargs)
    return JobRunner(service.application, store, **options)


def test_a_failed_renewal_is_tried_again_and_the_job_still_publishes(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    model.release.clear()
    store = RenewalsDown(service.application.jobs(), failures=1)
    events: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(job_runner_over(service, store, events).run(stop))
        # The renewal after the failure goes on: two more renewals while the model works.
        while store.renewals.count("ok") < 2:
            await asyncio.sleep(0.01)
        model.release.set()
        while not any(e.startswith(f"published:{job_id}") for e in events):
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert store.renewals[0] == "down" and f"renewal_failed:{job_id}" in events
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "succeeded" and job.attempts == 1


def test_renewals_failing_past_the_lease_stop_the_answer_and_publish_nothing(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    model.release.clear()
    # Each failed renewal is 0.25 s of outage: the third finds the 0.6 s lease run out.
    store = RenewalsDown(service.application.jobs(), failures=1000, outage=0.25)
    events: list[str] = []
    asyncio.run(_run_until(job_runner_over(service, store, events), events, f"lost:{job_id}"))
    assert f"lost:{job_id}" in events
    assert "cancelled" in model.events  # the answer was stopped
    assert len(store.renewals) >= 2 and set(store.renewals) == {"down"}
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "running" and job.result is None  # lease lapses


class PublishBroken:
    """The real job store, except that ``publish`` fails with ``error``."""

    def __init__(self, store: Any, error: Exception) -> None:
        self.store = store
        self.error = error

    def publish(self, *args: Any, **kwargs: Any) -> bool:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_bug_in_a_job_task_is_logged_with_the_job_id_and_without_content(
    make_service: Callable[..., Service], client_for: Client, caplog: pytest.LogCaptureFixture
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    store = PublishBroken(service.application.jobs(), RuntimeError(f"cannot store {QUESTION}"))
    events: list[str] = []
    job_runner = job_runner_over(service, store, events)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(job_runner.run(stop))
        while not any("ended by" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.01)
        stop.set()
        await task

    with caplog.at_level(logging.INFO, logger="ragwright"):
        asyncio.run(asyncio.wait_for(scenario(), 60))
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line.startswith(f"job {job_id} ended by an unexpected RuntimeError")
    assert "publish" in line  # the traceback says where
    assert QUESTION not in caplog.text


def test_a_job_store_outage_at_publish_is_logged_and_the_job_runs_again_later(
    make_service: Callable[..., Service], client_for: Client, caplog: pytest.LogCaptureFixture
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    down = StorageError("postgresql://127.0.0.1:5432/jobs", "connection refused")
    store = PublishBroken(service.application.jobs(), down)
    events: list[str] = []
    with caplog.at_level(logging.INFO, logger="ragwright"):
        asyncio.run(
            _run_until(job_runner_over(service, store, events), events, "store_unavailable:")
        )
    assert events[-1] == "store_unavailable:StorageError"
    assert any(
        job_id in r.getMessage() and "publish not recorded" in r.getMessage()
        for r in caplog.records
    )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "running"  # its lease lapses; claimed again


# --- reads under the reader's eligibility ----------------------------------------------


def test_a_result_citing_documents_of_types_or_states_the_reader_may_not_see_is_refused(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Any
) -> None:
    service = make_service(job_workers=1)
    alice = service.key("alice")
    notes_only = service.key("notes", types=("note",))
    drafts_only = service.key("drafts", states=("draft",))
    wider = service.key("wider", types=("runbook", "note"), states=("published", "draft"))
    client = client_for(service)
    job_id = submit(client, alice).json()["id"]
    done = wait_for_state(client, alice, job_id, "succeeded", "failed")
    assert done["state"] == "succeeded", done
    cited = {c["document_id"] for c in done["result"]["citations"]}
    for reader in (notes_only, drafts_only):
        refused = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(reader))
        assert refused.status_code == 403, refused.text
        assert refused.json()["type"] == "/problems/not-eligible"
        deleted = client.delete(f"/v1/answer-jobs/{job_id}", headers=bearer(reader))
        assert deleted.status_code == 403
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(wider)).status_code == 200
    # Eligibility now, not at submission: the cited document is a note since.
    edited = tmp_path / "retyped"
    edited.mkdir()
    for source in CORPUS.glob("*.md"):
        text = source.read_text()
        if any(f"document_id: {d}\n" in text for d in cited):
            text = text.replace("document_type: runbook", "document_type: note")
        (edited / source.name).write_text(text)
    service.application.ingest(IngestRequest((edited,)))
    refused = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(alice))
    assert refused.status_code == 403 and refused.json()["type"] == "/problems/not-eligible"
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(wider)).status_code == 200


# --- the batch pool ----------------------------------------------------------------------


def test_a_jobs_model_attempt_takes_its_lease_from_the_jobs_pool_not_the_interactive_one(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=1)
    secret = service.key("alice")
    client = client_for(service)
    model.release.clear()  # the startup probe went through: hold the job's answer
    job_id = submit(client, secret).json()["id"]
    end = time.monotonic() + 30
    while model.events.count("call") < 2 and time.monotonic() < end:
        time.sleep(0.01)
    held = {name: pool["in_use"] for name, pool in service.application.capacity().items()}
    model.release.set()
    assert held == {"interactive/recording": 0, "batch/recording": 1}
    assert wait_for_state(client, secret, job_id, "succeeded")["state"] == "succeeded"


# --- the grant recorded at submission ----------------------------------------------------


def change_grant(service: Service, name: str, **columns: list[str]) -> None:
    """Change a key's grant in its store, as an operator editing the row would."""
    key = next(k for k in service.application.list_keys().keys if k.name == name)
    with sqlite3.connect(service.application.settings.key_store_path) as db:
        for column, values in columns.items():
            db.execute(
                f"UPDATE api_keys SET {column} = ? WHERE id = ?", (json.dumps(values), key.id)
            )


def test_a_grant_changed_before_the_job_runs_fails_it_permission_changed(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    change_grant(service, "alice", states=["published", "draft"])
    events: list[str] = []
    calls = service.components.model.calls  # type: ignore[attr-defined]
    asyncio.run(_run_until(runner(service, events), events, f"failed:{job_id}"))
    assert f"failed:{job_id}:permission_changed" in events
    assert service.components.model.calls == calls  # type: ignore[attr-defined]
    job = service.application.jobs().get(job_id)
    assert job is not None and (job.state, job.failure) == ("failed", "permission_changed")


def test_a_grant_changed_while_the_job_runs_fails_it_before_publishing(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    model.release.clear()
    events: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner(service, events).run(stop))
        while model.events.count("call") < 2:  # the probe's, then the job's
            await asyncio.sleep(0.01)
        await asyncio.to_thread(change_grant, service, "alice", documents=["worker-shutdown"])
        model.release.set()
        while not any(e.startswith(f"failed:{job_id}") for e in events):
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert f"failed:{job_id}:permission_changed" in events
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "failed" and job.result is None


# --- renewal --------------------------------------------------------------------------


def test_a_job_longer_than_its_lease_runs_once_with_two_workers(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=0)
    secret = service.key("alice")
    job_id = submit(client_for(service), secret).json()["id"]
    model.release.clear()
    events: list[str] = []
    lease = 2.0
    store = RenewalsDown(service.application.jobs(), failures=0)
    workers = [
        job_runner_over(service, store, events, lease_seconds=lease, worker_id=f"w{n}")
        for n in range(2)
    ]

    async def scenario() -> None:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(w.run(stop)) for w in workers]
        while model.events.count("call") < 2:  # the probe's, then the job's
            await asyncio.sleep(0.01)
        # The answer takes three leases: without renewals the other worker (polling
        # every 50 ms) would claim the job once the first lease ran out.
        await asyncio.sleep(3 * lease)
        model.release.set()
        while not any(e.startswith(f"published:{job_id}") for e in events):
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert events.count(f"claimed:{job_id}") == 1
    assert model.events.count("call") == 2  # the probe's and the job's: it ran once
    assert store.renewals.count("ok") >= 6  # every third of a lease
    job = service.application.jobs().get(job_id)
    assert job is not None and job.state == "succeeded" and job.attempts == 1


# --- retention and the store on submission ---------------------------------------------


def test_finished_jobs_are_deleted_after_the_retention_setting_and_free_their_key(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0, job_retention=0.3)
    secret = service.key("alice")
    client = client_for(service)
    job_id = submit(client, secret).json()["id"]
    events: list[str] = []
    job_runner = runner(service, events, sweep_seconds=0.05)  # retention from the setting
    assert job_runner.retention_seconds == 0.3
    asyncio.run(_run_until(job_runner, events, "purged:"))
    assert events.index(f"published:{job_id}") < events.index("purged:1")
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(secret)).status_code == 404
    again = submit(client, secret, body={"question": "Another question?"})
    assert again.status_code == 202 and again.json()["id"] != job_id  # the key is free


def test_the_default_retention_is_a_week() -> None:
    assert load_settings().jobs.retention == 7 * 24 * 3600


class SubmitDown:
    """A job store whose server is down: ``submit`` raises as ``PostgresJobStore`` does."""

    def __init__(self) -> None:
        self.calls = 0

    def submit(self, **kwargs: Any) -> Any:
        self.calls += 1
        raise StorageError("postgresql://127.0.0.1:5432/jobs", "connection refused")


def test_a_job_store_outage_on_submit_is_503_jobs_unavailable_and_nothing_is_accepted(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    down = SubmitDown()
    service.components._jobs = down  # type: ignore[assignment]
    response = submit(client_for(service), secret)
    assert response.status_code == 503, response.text
    assert response.json()["type"] == "/problems/jobs-unavailable"
    assert "submit again with the same Idempotency-Key" in response.json()["detail"]
    assert down.calls == 1


# --- replays under the replaying key's eligibility ---------------------------------------


def test_a_replayed_submission_passes_the_same_visibility_check_as_a_read(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Any
) -> None:
    """Replaying another key's Idempotency-Key with the same body must not hand over a
    result that a GET of the job refuses: outside the allowlist, or citing a document
    that is a draft since."""
    service = make_service(job_workers=1)
    alice = service.key("alice")
    narrow = service.key("narrow", documents=("refund-policy",))
    client = client_for(service)
    job_id = submit(client, alice, key="shared").json()["id"]
    done = wait_for_state(client, alice, job_id, "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(narrow)).status_code == 403
    replayed = submit(client, narrow, key="shared")
    assert replayed.status_code == 403, replayed.text
    assert replayed.json()["type"] == "/problems/outside-allowlist"
    assert "result" not in replayed.json() and "Drain" not in replayed.text
    # The submitter's own replay, once a cited document is a draft: refused like its GET.
    cited = {c["document_id"] for c in done["result"]["citations"]}
    edited = tmp_path / "drafted"
    edited.mkdir()
    for source in CORPUS.glob("*.md"):
        text = source.read_text()
        if any(f"document_id: {d}\n" in text for d in cited):
            text = text.replace("publication_state: published", "publication_state: draft")
        (edited / source.name).write_text(text)
    service.application.ingest(IngestRequest((edited,)))
    read = client.get(f"/v1/answer-jobs/{job_id}", headers=bearer(alice))
    assert read.status_code == 403 and read.json()["type"] == "/problems/not-eligible"
    replayed = submit(client, alice, key="shared")
    assert replayed.status_code == 403, replayed.text
    assert replayed.json()["type"] == "/problems/not-eligible"
    # A replay the reader may see is still the same job.
    wider = service.key("wider", states=("published", "draft"))
    again = submit(client, wider, key="shared")
    assert again.status_code == 202 and again.json()["replayed"] is True
    assert again.json()["id"] == job_id
