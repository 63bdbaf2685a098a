"""Admission (503 / 429 at once, no queue), one deadline from the edge, cancellation on
disconnect, and each degradation mode forced by its dependency's failure."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ragwright.application import Application, ChatSession, Workload
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.protocols import TokenCounter
from ragwright.runtime import RuntimeComponents
from ragwright.service import create_app
from ragwright.testing.scripted import Fail, Hang, ScriptedChatModel
from tests.application.components import FakeComponents
from tests.service.conftest import (
    CORPUS,
    QUESTION,
    LiveServer,
    RecordingModel,
    Service,
    bearer,
)

Client = Callable[[Service], TestClient]
ANSWER = '{"status": "answered", "answer": "Drain while the deadline allows.", "sourceIds": ["S1"]}'


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def post_in_thread(url: str, secret: str, results: list[Any], path: str = "/v1/answers") -> None:
    def run() -> None:
        results.append(
            httpx.post(url + path, json={"question": QUESTION}, headers=bearer(secret), timeout=30)
        )

    threading.Thread(target=run, daemon=True).start()


# --- admission -----------------------------------------------------------------------------


def test_excess_requests_are_refused_at_once_with_503_and_no_retry_after(
    make_service: Callable[..., Service],
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, serve_concurrency=1)
    secret = service.key("alice", scopes=("answer", "search"))
    first: list[Any] = []
    with LiveServer(service.app) as url:
        model.release.clear()  # the startup probe went through: hold the answers
        post_in_thread(url, secret, first)
        wait_for(lambda: model.events.count("call") == 2)  # the first answer holds the permit
        refused = httpx.post(
            url + "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
        )
        search = httpx.post(url + "/v1/search", json={"question": QUESTION}, headers=bearer(secret))
        assert model.events.count("call") == 2  # the refused request started nothing
        model.release.set()
        wait_for(lambda: bool(first))
        after = httpx.post(url + "/v1/search", json={"question": QUESTION}, headers=bearer(secret))
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert "retry-after" not in refused.headers
    assert search.status_code == 503
    assert first[0].status_code == 200
    assert after.status_code == 200  # the permit came back


def test_a_tenant_at_its_limit_gets_429_while_other_tenants_go_on(
    make_service: Callable[..., Service],
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, serve_concurrency=4, serve_tenant_concurrency=1)
    first_key = service.key("one")
    second_key = service.key("two")  # the same (untenanted) tenant
    other_tenant = service.key("acme", tenant="acme")
    first: list[Any] = []
    with LiveServer(service.app) as url:
        model.release.clear()
        post_in_thread(url, first_key, first)
        wait_for(lambda: model.events.count("call") == 2)
        limited = httpx.post(
            url + "/v1/answers", json={"question": QUESTION}, headers=bearer(second_key)
        )
        other = httpx.post(
            url + "/v1/answers", json={"question": QUESTION}, headers=bearer(other_tenant)
        )
        model.release.set()
        wait_for(lambda: bool(first))
    assert limited.status_code == 429
    assert "retry-after" not in limited.headers
    assert other.status_code == 200  # acme has no documents: insufficient, but admitted
    assert other.json()["mode"] == "insufficient"


def test_a_client_that_disconnects_cancels_the_model_call_and_frees_its_permit(
    make_service: Callable[..., Service],
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, serve_concurrency=1)
    secret = service.key("alice")
    with LiveServer(service.app) as url:
        model.release.clear()
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                url + "/v1/answers", json={"question": QUESTION}, headers=bearer(secret), timeout=1
            )
        wait_for(lambda: "cancelled" in model.events)
        state = service.app.state.ragwright
        wait_for(lambda: state.admission.active == 0)
    assert model.events.count("replied") == 1  # only the probe's


def test_a_stream_closed_after_its_evidence_cancels_the_model_call_and_frees_its_permit(
    make_service: Callable[..., Service],
) -> None:
    model = RecordingModel(ANSWER, hold=True)
    service = make_service(model, serve_concurrency=1)
    secret = service.key("alice")
    state = service.app.state.ragwright
    with LiveServer(service.app) as url:
        model.release.clear()
        try:
            with httpx.stream(
                "POST",
                url + "/v1/answers/stream",
                json={"question": QUESTION},
                headers=bearer(secret),
                timeout=30,
            ) as response:
                assert response.status_code == 200
                lines = response.iter_lines()  # one iterator: dropping it closes the response
                assert next(lines) == "event: evidence"
                wait_for(lambda: model.events.count("call") == 2)  # the model is answering
                assert state.admission.active == 1
            # Leaving the block closed the connection after the evidence event.
            wait_for(lambda: "cancelled" in model.events)
            wait_for(lambda: state.admission.active == 0)
        finally:
            model.release.set()
    assert model.events.count("replied") == 1  # only the probe's


def test_one_deadline_from_the_edge_bounds_a_slow_model(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ScriptedChatModel([Hang()] * 10), answer_deadline=1.5)
    secret = service.key("alice")
    app = create_app(service.application, probe_model=False)
    with TestClient(app) as client:
        body = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
    # The provider never answers: only the deadline can end the request.
    outcome = body.json()
    assert (outcome["mode"], outcome["reason"], outcome["degraded"]) == (
        "evidence_only",
        "request_deadline_exceeded",
        "deadline_exhausted",
    )
    assert 0 < outcome["options"]["deadline_seconds"] <= 1.5
    assert service.components.model.calls == 1  # type: ignore[attr-defined]  # no retry after it


def test_a_deadline_spent_without_a_degradation_mode_is_503_saying_the_deadline_passed(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(
        ScriptedChatModel([Hang()] * 10), answer_deadline=1.0, evidence_only_on_model_failure=False
    )
    secret = service.key("alice")
    app = create_app(service.application, probe_model=False)
    with TestClient(app) as client:
        response = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
    assert response.status_code == 503
    body = response.json()
    assert (body["mode"], body["reason"]) == ("unavailable", "request_deadline_exceeded")
    assert body["detail"].startswith("the request's deadline passed before the model answered")


# --- degradation modes ---------------------------------------------------------------------


TEMPLATES = """
templates:
  - id: shutdown-acknowledgement
    version: "2"
    phrases: ["queued work", "shutdown"]
    text: "Shutdown questions are answered by the on-call engineer; the runbook is cited."
"""


def test_model_down_offers_the_approved_template_for_the_question_class(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Path
) -> None:
    templates = tmp_path / "templates.yaml"
    templates.write_text(TEMPLATES)
    service = make_service(
        ScriptedChatModel([Fail(FailureCategory.TRANSIENT)] * 40), templates=templates
    )
    secret = service.key("alice")
    client = client_for(service)
    body = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret)).json()
    assert (body["mode"], body["reason"]) == ("approved_template", "model_unavailable")
    assert body["template"]["id"] == "shutdown-acknowledgement"
    assert body["answer"] == ""  # a template is never presented as the model's answer
    other = client.post(
        "/v1/answers", json={"question": "How long does a refund take?"}, headers=bearer(secret)
    ).json()
    assert other["mode"] in ("evidence_only", "insufficient")
    assert other["template"] is None


def test_model_down_without_template_or_evidence_mode_is_unavailable(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(
        ScriptedChatModel([Fail(FailureCategory.TRANSIENT)] * 40),
        evidence_only_on_model_failure=False,
    )
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
    )
    assert response.status_code == 503
    assert "retry-after" not in response.headers  # nothing says when the model is back
    body = response.json()
    assert (body["mode"], body["reason"]) == ("unavailable", "model_unavailable")
    assert "quotes" not in body and "answer" not in body


def test_a_model_pool_cooling_down_after_a_429_gives_retry_after_its_seconds_left(
    make_service: Callable[..., Service],
) -> None:
    # The provider throttles with Retry-After 30: the pool cools down for 30 s, longer
    # than the request's budget, so the answer is unavailable and the cooldown is known.
    service = make_service(
        ScriptedChatModel([Fail(FailureCategory.THROTTLED, retry_after=30)] * 5),
        evidence_only_on_model_failure=False,
        answer_deadline=3,
    )
    secret = service.key("alice")
    with TestClient(create_app(service.application, probe_model=False)) as client:
        response = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
        left = service.application.model_cooldown()
    assert response.status_code == 503
    assert response.json()["mode"] == "unavailable"
    assert 0 < int(response.headers["retry-after"]) <= 30
    assert left is not None and 0 < left <= int(response.headers["retry-after"])


class RealProviderComponents(FakeComponents):
    """The hashing embedder, but the real chat pipeline and provider adapter."""

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        return RuntimeComponents.chat(self, counter, workload)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_provider_down_degrades_to_evidence_and_readiness_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ragwright.application import AddKeyRequest, IngestRequest
    from ragwright.settings import load_settings

    settings = load_settings(
        home=tmp_path / "home",
        chat_provider="openai",
        chat_model="gpt-test",
        chat_base_url=f"http://127.0.0.1:{closed_port()}/v1",
        chat_api_key="sk-test",
        answer_style="generated",
        answer_deadline=20,
    )
    application = Application(RealProviderComponents(settings))
    application.ingest(IngestRequest((CORPUS,)))
    secret = application.add_key(AddKeyRequest(tenant=None, scopes=("answer", "search"))).secret
    with caplog.at_level(logging.WARNING), TestClient(create_app(application)) as client:
        ready = client.get("/readyz").json()
        body = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
        status = client.get("/v1/status", headers=bearer(secret)).json()
    pools = status["service"]["model_capacity"]
    assert sorted(pools) == ["batch/openai", "interactive/openai"]
    assert (pools["interactive/openai"]["backend"], pools["interactive/openai"]["limit"]) == (
        "local",
        2,
    )
    assert pools["batch/openai"]["limit"] == application.settings.jobs.capacity
    assert ready["ready"] is True  # a declared degradation mode keeps it serving
    assert ready["checks"]["model"]["detail"].startswith("transient")
    assert "does not answer" in caplog.text
    outcome = body.json()
    assert (outcome["mode"], outcome["reason"]) == ("evidence_only", "model_unavailable")
    assert outcome["quotes"] and outcome["answer"] == ""


class SwitchedModel:
    """A provider fake that replies while ``up`` is set and fails transiently while it is
    clear; ``events`` records each call's result."""

    name = "switched"

    def __init__(self, *, up: bool) -> None:
        self.up = threading.Event()
        if up:
            self.up.set()
        self.events: list[str] = []

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        if not self.up.is_set():
            self.events.append("failed")
            raise ChatError(self.name, FailureCategory.TRANSIENT, "switched off")
        self.events.append("replied")
        return ChatResponse(ANSWER, "stop", "switched-model", provider=self.name)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> Any:
        raise AssertionError("the answer path does not stream from the provider")
        yield ChatUpdate("")  # pragma: no cover


def model_check(client: TestClient) -> tuple[int, str]:
    response = client.get("/readyz")
    return response.status_code, response.json()["checks"]["model"]["detail"]


def test_a_model_down_at_start_is_ready_again_once_a_recheck_answers(
    make_service: Callable[..., Service],
) -> None:
    model = SwitchedModel(up=False)
    # No degradation mode: the model check decides readiness.
    service = make_service(model, evidence_only_on_model_failure=False)
    secret = service.key("alice", scopes=("answer", "search"))
    with TestClient(create_app(service.application, model_recheck=0.05)) as client:
        status, detail = model_check(client)
        assert (status, detail.split(":")[0]) == (503, "transient")
        model.up.set()
        wait_for(lambda: model_check(client) == (200, "ok"))
        service_view = client.get("/v1/status", headers=bearer(secret)).json()["service"]
        answer = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
    assert service_view["model"] == "ok"
    assert answer.json()["mode"] == "generated"


def test_a_model_that_fails_after_start_fails_the_model_check_until_it_answers(
    make_service: Callable[..., Service],
) -> None:
    model = SwitchedModel(up=True)
    service = make_service(model, evidence_only_on_model_failure=False)
    secret = service.key("alice", scopes=("answer", "search"))
    with TestClient(create_app(service.application, model_recheck=0.05)) as client:
        assert model_check(client) == (200, "ok")
        model.up.clear()
        refused = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
        status, detail = model_check(client)
        service_view = client.get("/v1/status", headers=bearer(secret)).json()["service"]
        model.up.set()
        wait_for(lambda: model_check(client) == (200, "ok"))
    assert refused.status_code == 503
    assert (refused.json()["mode"], refused.json()["reason"]) == (
        "unavailable",
        "model_unavailable",
    )
    assert (status, detail.split(":")[0]) == (503, "transient")
    assert service_view["model"].startswith("transient")


def test_retrieval_unavailable_is_503_never_an_answer(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
    )
    assert response.status_code == 503
    body = response.json()
    assert (body["mode"], body["reason"]) == ("unavailable", "retrieval_unavailable")
    assert service.components.model.calls <= 1  # type: ignore[attr-defined]  # the probe only


def test_a_damaged_index_fails_readiness_with_the_reason(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service()
    contract = service.application.settings.index_path / "contract.json"
    contract.write_text("{ damaged")
    secret = service.key("alice")
    client = client_for(service)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "damaged" in response.json()["reasons"][0]
    assert "contract.json" in response.json()["reasons"][0]
    answer = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
    assert answer.status_code == 503
    assert answer.json()["reason"] == "retrieval_unavailable"


def test_redis_down_at_start_serves_with_an_in_process_gate_and_a_warning(
    make_service: Callable[..., Service], client_for: Client, caplog: pytest.LogCaptureFixture
) -> None:
    service = make_service(redis_url=f"redis://127.0.0.1:{closed_port()}/0")
    secret = service.key("alice")
    with caplog.at_level(logging.WARNING):
        body = client_for(service).post(
            "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
        )
    assert body.json()["mode"] == "generated"
    assert "Redis" in caplog.text and "unreachable" in caplog.text
