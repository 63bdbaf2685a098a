"""A full disk under the job store, through the service (issue 20): a submission is
503 (never a 500), a result that cannot be committed is not lost, the runner survives,
``/readyz`` and the waiting jobs say why, and the backlog drains once the disk has room,
without a restart, each job published once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from ragwright.adapters.jobs import SqliteJobStore
from tests.disk_full import DiskFull
from tests.service.conftest import RecordingModel, Service, bearer
from tests.service.test_answer_jobs import ANSWER, BODY, submit

Client = Callable[[Service], TestClient]


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_a_full_disk_while_publishing_loses_nothing_and_the_backlog_drains_without_restart(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, job_workers=1, job_lease=2.0)
    disk = DiskFull()
    store = SqliteJobStore(
        service.application.settings.storage.home / "jobs.sqlite3", factory=disk.factory
    )
    service.components._jobs = store
    secret = service.key("alice")
    client = client_for(service)  # starts the runner
    assert client.get("/readyz").status_code == 200

    disk.full = True
    refused = submit(client, secret, "k-0")
    assert refused.status_code == 503, refused.text  # was 500: sqlite3 error from COMMIT
    assert refused.json()["type"] == "/problems/jobs-unavailable"

    disk.full = False
    model.release.clear()  # the first job's answer waits
    probes = model.events.count("call")  # the startup probe's
    jobs = [submit(client, secret, f"k-{n}").json()["id"] for n in (1, 2, 3)]
    until(lambda: model.events.count("call") == probes + 1, "the first job's answer started")
    disk.full = True
    model.release.set()  # its result meets the full disk

    ready = until(
        lambda: (r := client.get("/readyz")).status_code == 503 and r.json(),
        "readiness reports the runner",
    )
    assert ready["checks"]["jobs"]["ok"] is False
    assert "job store refuses the runner's" in ready["checks"]["jobs"]["detail"]
    statuses = [client.get(f"/v1/answer-jobs/{job}", headers=bearer(secret)).json() for job in jobs]
    assert [s["state"] for s in statuses] == ["running", "queued", "queued"]
    assert {s["waiting_reason"] for s in statuses} == {"store_unavailable"}
    assert disk.refused >= 1

    disk.full = False
    done = [
        until(
            lambda job=job: (
                (s := client.get(f"/v1/answer-jobs/{job}", headers=bearer(secret)).json())["state"]
                == "succeeded"
                and s
            ),
            f"job {job} published",
        )
        for job in jobs
    ]
    assert all(s["waiting_reason"] is None and s["result"]["answer"] for s in done)
    assert done[0]["attempts"] == 2  # its refused result ran again after its lease
    assert [s["attempts"] for s in done[1:]] == [1, 1]
    assert until(lambda: client.get("/readyz").status_code == 200, "ready again")
    counts = store.counts().states
    assert counts == {"succeeded": 3}, counts  # nothing lost, nothing duplicated


def test_a_queued_jobs_status_says_it_waits_for_a_worker(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(job_workers=0)
    secret = service.key("alice")
    client = client_for(service)
    job = submit(client, secret, body=BODY).json()
    assert job["waiting_reason"] == "waiting_for_worker"
    assert "jobs" not in client.get("/readyz").json()["checks"]  # no runner here
