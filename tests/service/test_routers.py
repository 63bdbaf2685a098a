"""Each route module mounted alone on a bare ``FastAPI()``, its dependencies (caller,
application, admission, the job store) replaced through ``dependency_overrides``: no
``create_app``, no composition root, no ingested index."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from ragwright.adapters.jobs import SqliteJobStore
from ragwright.application.jobs import AnswerJob
from ragwright.application.keys import ApiKey
from ragwright.service.admission import Admission
from ragwright.service.dependencies import (
    Admitting,
    admitting,
    answer_caller,
    application_of,
    budget,
    search_caller,
)
from ragwright.service.problems import install_problem_handlers
from ragwright.service.routes import jobs, search

KEY = ApiKey(
    id="k1",
    tenant="acme",
    scopes=("answer", "search"),
    documents=(),
    types=(),
    states=(),
    name="test",
    created_at="2026-01-01T00:00:00Z",
    revoked_at=None,
)
QUESTION = {"question": "Should I drain all queued work during shutdown?"}


def bare(router: Any, application: Any, overrides: dict[Any, Any]) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router)
    app.dependency_overrides[application_of] = lambda: application
    app.dependency_overrides.update(overrides)
    return app


def test_the_jobs_router_alone_persists_then_calls_the_hook_then_answers_202(
    tmp_path: Path,
) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    persisted: list[tuple[str, bool]] = []

    def hook(job: AnswerJob) -> None:  # the failpoint's place: after the job is durable
        persisted.append((job.id, store.get(job.id) is not None))

    application = SimpleNamespace(
        settings=SimpleNamespace(jobs=SimpleNamespace(ttl=3600.0)),
        check_question_tokens=lambda _q: None,
    )
    app = bare(
        jobs.router,
        application,
        {
            answer_caller: lambda: KEY,
            jobs.job_access: lambda: jobs.JobAccess(lambda: store, lambda: True, hook),
        },
    )
    with TestClient(app) as client:
        accepted = client.post("/v1/answer-jobs", json=QUESTION, headers={"Idempotency-Key": "a"})
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        assert persisted == [(job_id, True)]
        assert accepted.headers["location"] == f"/v1/answer-jobs/{job_id}"
        # The runner's failure (the store_failing dependency) shows in the job's status.
        status = client.get(f"/v1/answer-jobs/{job_id}").json()
        assert (status["state"], status["waiting_reason"]) == ("queued", "store_unavailable")
        refused = client.post("/v1/answer-jobs", json=QUESTION)
        assert refused.status_code == 400
        assert refused.json()["type"].endswith("idempotency-key")
    assert store.get(job_id).tenant == "acme"  # the caller's tenant, from the override


def test_the_search_router_alone_is_admitted_through_the_admission_dependency() -> None:
    searched: list[Any] = []

    def run_search(request: Any) -> Any:
        searched.append(request)
        return SimpleNamespace(to_dict=lambda: {"hits": [], "k": request.k})

    full = Admission(limit=1)
    full.enter("someone else")  # the process's one permit is taken

    def admission_of(limit: Admission) -> Any:
        def admit(request: Request) -> Admitting:
            return Admitting(limit, request)

        return admit

    overrides: dict[Any, Any] = {
        search_caller: lambda: KEY,
        budget: lambda: SimpleNamespace(left=lambda answering=True: 30.0),
    }
    application = SimpleNamespace(search=run_search)
    free = Admission(limit=1)
    app = bare(search.router, application, {**overrides, admitting: admission_of(free)})
    with TestClient(app) as client:
        found = client.post("/v1/search", json={**QUESTION, "k": 3})
    assert (found.status_code, found.json()) == (200, {"hits": [], "k": 3})
    assert searched[0].tenant == "acme" and free.active == 0  # the permit came back

    app = bare(search.router, application, {**overrides, admitting: admission_of(full)})
    with TestClient(app) as client:
        busy = client.post("/v1/search", json=QUESTION)
    assert busy.status_code == 503 and busy.json()["type"].endswith("capacity-busy")
    assert len(searched) == 1  # refused before the use case
