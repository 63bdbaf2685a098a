"""The service over the real composition root with two substitutions (hashing embedder,
scripted provider), an ingested sample corpus and API keys made through the use case."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragwright.application import AddKeyRequest, Application, IngestRequest
from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.service import create_app
from tests.application.components import FakeComponents, fake_application

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "samples" / "corpus"
QUESTION = "Should I drain all queued work during shutdown?"


@dataclass
class Service:
    application: Application
    components: FakeComponents
    app: FastAPI
    keys: dict[str, str] = field(default_factory=dict)

    def key(
        self,
        name: str,
        *,
        tenant: str | None = None,
        scopes: tuple[str, ...] = ("answer",),
        **fields: Any,
    ) -> str:
        result = self.application.add_key(
            AddKeyRequest(tenant=tenant, scopes=scopes, name=name, **fields)
        )
        self.keys[name] = result.secret
        return result.secret


def build_service(
    home: Path, model: ChatModel | None = None, *, ingest: bool = True, **settings: object
) -> Service:
    application, components = fake_application(home, model, **settings)
    if ingest:
        application.ingest(IngestRequest((CORPUS,)))
    return Service(application, components, create_app(application))


@pytest.fixture
def make_service(tmp_path: Path) -> Callable[..., Service]:
    def make(model: ChatModel | None = None, **kwargs: Any) -> Service:
        return build_service(tmp_path / "home", model, **kwargs)

    return make


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def client_for() -> Iterator[Callable[[Service], TestClient]]:
    clients: list[TestClient] = []

    def open_client(service: Service) -> TestClient:
        client = TestClient(service.app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.__exit__(None, None, None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """The app on a real loopback socket (uvicorn in a thread)."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        for _ in range(3000):
            if self.server.started:
                return f"http://127.0.0.1:{self.port}"
            threading.Event().wait(0.01)
        raise AssertionError("the server did not start in 30 s")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class RecordingModel:
    """A provider fake: records each call and whether it was cancelled. With ``hold``,
    a call waits while ``release`` is clear (it starts set, so a startup probe passes:
    clear it to hold the calls that follow)."""

    name = "recording"

    def __init__(self, reply: str, *, hold: bool = False) -> None:
        self.reply = reply
        self.events: list[str] = []
        self.hold = hold
        self.release = threading.Event()
        self.release.set()

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        self.events.append("call")
        try:
            while self.hold and not self.release.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.events.append("cancelled")
            raise
        self.events.append("replied")
        return ChatResponse(self.reply, "stop", "recording-model", provider=self.name)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> Any:
        raise AssertionError("the answer path does not stream from the provider")
        yield ChatUpdate("")  # pragma: no cover
