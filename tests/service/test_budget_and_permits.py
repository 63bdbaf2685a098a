"""One budget from the edge (time spent before the handler counts, searches included),
and admission permits held until the work's worker threads have returned."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ragwright.application import AddKeyRequest, Application, IngestRequest
from ragwright.application.keys import ApiKey, KeyStore
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.deadline import current_deadline
from ragwright.service import create_app
from ragwright.settings import load_settings
from ragwright.testing import HashingEmbedder
from tests.application.components import FakeComponents
from tests.service.conftest import CORPUS, QUESTION, LiveServer, bearer

ANSWER = '{"status": "answered", "answer": "Drain while the deadline allows.", "sourceIds": ["S1"]}'


@dataclass
class GatedEmbedder(HashingEmbedder):
    """The hashing embedder; each query embedding records the seconds its request's
    deadline had left (``None`` outside any), and waits while ``gate`` is clear."""

    deadlines: list[float | None] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.gate.set()

    def embed_query(self, text: str) -> list[float]:
        deadline = current_deadline()
        self.deadlines.append(None if deadline is None else deadline.remaining())
        self.entered.set()
        self.gate.wait(30)
        return super().embed_query(text)


class SlowKeyStore:
    """The real key store, whose ``authenticate`` first waits ``delay`` seconds (a key
    server slow to answer)."""

    def __init__(self, inner: KeyStore) -> None:
        self.inner = inner
        self.delay = 0.0

    def add(self, **grant: Any) -> tuple[ApiKey, str]:
        return self.inner.add(**grant)

    def list(self) -> list[ApiKey]:
        return self.inner.list()

    def revoke(self, key_id: str) -> ApiKey:
        return self.inner.revoke(key_id)

    def authenticate(self, secret: str) -> ApiKey | None:
        time.sleep(self.delay)
        return self.inner.authenticate(secret)


class DeadlineModel:
    """Replies with a valid answer; records the seconds each call's deadline had left."""

    name = "deadline-recording"

    def __init__(self) -> None:
        self.remaining: list[float] = []

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        self.remaining.append(deadline.remaining())
        return ChatResponse(ANSWER, "stop", "recording-model", provider=self.name)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> Any:
        raise AssertionError("the answer path does not stream from the provider")
        yield ChatUpdate("")  # pragma: no cover


class EdgeComponents(FakeComponents):
    """Fake components with a key store that can be slowed and a gated embedder."""

    def __init__(self, settings: Any, model: DeadlineModel) -> None:
        super().__init__(settings, model)
        self.gated = GatedEmbedder()
        self._hashing = self.gated
        self.keys: SlowKeyStore | None = None

    def key_store(self) -> SlowKeyStore:
        if self.keys is None:
            self.keys = SlowKeyStore(super().key_store())
        return self.keys


@dataclass
class Edge:
    application: Application
    components: EdgeComponents
    model: DeadlineModel
    secret: str

    def slow_keys(self, seconds: float) -> None:
        self.components.key_store().delay = seconds


@pytest.fixture
def make_edge(tmp_path: Path) -> Callable[..., Edge]:
    def make(**settings: Any) -> Edge:
        settings.setdefault("answer_style", "generated")
        model = DeadlineModel()
        components = EdgeComponents(load_settings(home=tmp_path / "home", **settings), model)
        application = Application(components)
        application.ingest(IngestRequest((CORPUS,)))
        grant = AddKeyRequest(tenant=None, scopes=("answer", "search"))
        return Edge(application, components, model, application.add_key(grant).secret)

    return make


def post(client: TestClient, edge: Edge, path: str) -> httpx.Response:
    return client.post(path, json={"question": QUESTION}, headers=bearer(edge.secret))


# --- one budget from the edge ----------------------------------------------------------


def test_time_spent_before_the_handler_counts_against_the_answer_deadline(
    make_edge: Callable[..., Edge],
) -> None:
    edge = make_edge(answer_deadline=30)
    with TestClient(create_app(edge.application)) as client:
        edge.slow_keys(0.5)  # after startup: the delay is the request's own
        body = post(client, edge, "/v1/answers").json()
    assert body["mode"] == "generated"
    # What the handler passed on, what the query embedding and the model saw: what was
    # left after the slow authentication, never the full 30 s.
    assert 0 < body["options"]["deadline_seconds"] <= 29.5
    (embedding_left,) = edge.components.gated.deadlines
    assert embedding_left is not None and 0 < embedding_left <= 29.5
    assert 0 < edge.model.remaining[-1] <= 29.5


def test_a_search_runs_under_what_is_left_of_the_request_deadline(
    make_edge: Callable[..., Edge],
) -> None:
    edge = make_edge(answer_deadline=30)
    with TestClient(create_app(edge.application)) as client:
        edge.slow_keys(0.5)
        response = post(client, edge, "/v1/search")
    assert response.status_code == 200
    (embedding_left,) = edge.components.gated.deadlines
    assert embedding_left is not None and 0 < embedding_left <= 29.5


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/v1/answers", "answer-unavailable"),
        ("/v1/answers/stream", "answer-unavailable"),
        ("/v1/search", "retrieval-unavailable"),
    ],
)
def test_a_budget_spent_before_the_handler_is_503_request_deadline_exceeded(
    make_edge: Callable[..., Edge], path: str, kind: str
) -> None:
    edge = make_edge(answer_deadline=0.2)
    with TestClient(create_app(edge.application)) as client:
        probed = len(edge.model.remaining)
        edge.slow_keys(0.3)
        response = post(client, edge, path)
    assert response.status_code == 503
    body = response.json()
    assert (body["type"], body["reason"]) == (f"/problems/{kind}", "request_deadline_exceeded")
    assert edge.components.gated.deadlines == []  # nothing was started
    assert len(edge.model.remaining) == probed


# --- permits held until the work's threads return --------------------------------------


@pytest.fixture
def service_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO, logger="ragwright.service"):
        yield caplog


def logged(caplog: pytest.LogCaptureFixture, line: str) -> bool:
    return any(r.getMessage().startswith(line) for r in list(caplog.records))


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


@pytest.mark.parametrize("path", ["/v1/search", "/v1/answers", "/v1/answers/stream"])
def test_a_request_whose_client_left_keeps_its_permit_until_its_embedding_returns(
    make_edge: Callable[..., Edge], service_log: pytest.LogCaptureFixture, path: str
) -> None:
    edge = make_edge(serve_concurrency=1)
    embedder = edge.components.gated
    app = create_app(edge.application)
    admission = app.state.ragwright.admission
    with LiveServer(app) as url:
        embedder.gate.clear()  # the query embedding holds its worker thread
        try:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(
                    url + path, json={"question": QUESTION}, headers=bearer(edge.secret), timeout=1
                )
            assert embedder.entered.is_set()
            wait_for(lambda: logged(service_log, f"POST {path} 499"))  # the server saw it go
            # The embedding still runs: its capacity is still taken.
            assert admission.active == 1
            refused = httpx.post(
                url + "/v1/search", json={"question": QUESTION}, headers=bearer(edge.secret)
            )
        finally:
            embedder.gate.set()
        wait_for(lambda: admission.active == 0)
        after = httpx.post(
            url + "/v1/search", json={"question": QUESTION}, headers=bearer(edge.secret)
        )
    assert (refused.status_code, refused.json()["type"]) == (503, "/problems/capacity-busy")
    assert after.status_code == 200
