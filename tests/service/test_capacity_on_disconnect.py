"""Model capacity is held until the provider call has ended, not until the client left
(issue 20): clients dropping their streams right after the evidence event, round after
round, never put more requests on the model server than ``RAGWRIGHT_CHAT_CAPACITY``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel
from ragwright.application import Application, ChatSession, IngestRequest, Workload
from ragwright.protocols import TokenCounter
from ragwright.service import create_app
from ragwright.settings import load_settings
from tests.application.components import FakeComponents
from tests.generating_openai import generating_openai
from tests.service.conftest import CORPUS, QUESTION, LiveServer, Service, bearer

CAPACITY = 4
ROUNDS = 10


class ClosingComponents(FakeComponents):
    """The test components, whose chat sessions close the provider's HTTP client."""

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        session = super().chat(counter, workload)
        return ChatSession(session.model, self.model.close, session.capacity)  # type: ignore[attr-defined]


def drop_after_evidence(url: str, secret: str, seen: list[str]) -> None:
    with httpx.stream(
        "POST",
        url + "/v1/answers/stream",
        json={"question": QUESTION},
        headers=bearer(secret),
        timeout=30,
    ) as response:
        lines = response.iter_lines()
        seen.append(next(lines))
    # Leaving the block closed the connection right after the evidence event.


def wait_for(condition: object, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_streams_dropped_after_their_evidence_never_overfill_the_model_server(
    tmp_path: Path,
) -> None:
    with generating_openai(seconds=2.0) as model_server:
        model = OpenAIChatModel("generating", base_url=model_server.base_url, name="generating")
        settings = load_settings(
            home=tmp_path / "home",
            answer_style="generated",
            chat_capacity=CAPACITY,
            serve_concurrency=16,
        )
        components = ClosingComponents(settings, model)
        application = Application(components)
        application.ingest(IngestRequest((CORPUS,)))
        service = Service(application, components, create_app(application, probe_model=False))
        secret = service.key("alice")
        seen: list[str] = []
        with LiveServer(service.app) as url:
            for _ in range(ROUNDS):
                clients = [
                    threading.Thread(target=drop_after_evidence, args=(url, secret, seen))
                    for _ in range(CAPACITY)
                ]
                for client in clients:
                    client.start()
                for client in clients:
                    client.join(60)
                    assert not client.is_alive()
            assert seen == ["event: evidence"] * (CAPACITY * ROUNDS)
            wait_for(
                lambda: model_server.finished == model_server.received, "the model server replied"
            )
        assert model_server.received >= CAPACITY  # the model was asked
        # The bound: what the model server carried at once, however the clients left.
        assert model_server.max_in_flight <= CAPACITY, model_server.max_in_flight
