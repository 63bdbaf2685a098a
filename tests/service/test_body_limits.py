"""Request bodies: authenticated before they are read, cut at their route's limit
(``RAGWRIGHT_SERVE_MAX_BODY``, ``RAGWRIGHT_SERVE_MAX_INGEST_BODY``) with 413 problem
details, chunked ones too, and a large ingestion parsed off the event loop so
``/healthz`` answers meanwhile (issue 20, item 9)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragwright.service.ingestions import read_ingestion
from tests.service.conftest import QUESTION, LiveServer, Service, bearer

Client = Callable[[Service], TestClient]
LIMIT = 2000
INGEST_LIMIT = 6000
CHUNK = b" " * 500  # JSON whitespace: a body that would parse, were it read


class RecordingClient:
    """An ASGI client that sends a body in chunks and records how many the app read."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.read = 0
        self.status = 0
        self.body = b""

    def request(
        self, path: str, chunks: list[bytes], headers: dict[str, str], *, length: bool = True
    ) -> RecordingClient:
        pending = list(chunks)
        raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        raw_headers.append((b"content-type", b"application/json"))
        if length:
            raw_headers.append((b"content-length", str(sum(map(len, chunks))).encode()))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": raw_headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }

        async def receive() -> dict[str, Any]:
            if not pending:
                return {"type": "http.disconnect"}
            self.read += 1
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"")

        asyncio.run(asyncio.wait_for(self.app(scope, receive, send), 60))
        return self

    def problem(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


def test_an_unauthenticated_body_is_refused_401_without_being_read(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False)
    chunks = [CHUNK] * 100
    for path in ("/v1/ingestions", "/v1/answers", "/v1/answer-jobs"):
        anonymous = RecordingClient(service.app).request(path, chunks, {})
        assert (anonymous.status, anonymous.read) == (401, 0), path
        assert anonymous.problem()["type"] == "/problems/unauthenticated"
        unknown = RecordingClient(service.app).request(path, chunks, bearer("rwk_nope_nope"))
        assert (unknown.status, unknown.read) == (401, 0), path
        assert unknown.problem()["type"] == "/problems/invalid-key"


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_its_routes_limit_is_413_and_read_no_further(
    make_service: Callable[..., Service], length: bool
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT, serve_max_ingest_body=INGEST_LIMIT)
    secret = service.key("writer", scopes=("answer", "ingest"))
    chunks = [CHUNK] * 100  # 50,000 bytes
    for path, limit, setting in (
        ("/v1/answers", LIMIT, "RAGWRIGHT_SERVE_MAX_BODY"),
        ("/v1/ingestions", INGEST_LIMIT, "RAGWRIGHT_SERVE_MAX_INGEST_BODY"),
    ):
        sent = RecordingClient(service.app).request(path, chunks, bearer(secret), length=length)
        assert sent.status == 413, (path, sent.body)
        problem = sent.problem()
        assert problem["type"] == "/problems/body-too-large" and problem["limit"] == limit
        assert setting in problem["detail"]
        # A declared length is refused unread; a chunked body just past the limit.
        assert sent.read == (0 if length else limit // len(CHUNK) + 1), path


def test_the_limits_are_per_route_through_http(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT, serve_max_ingest_body=INGEST_LIMIT)
    secret = service.key("writer", scopes=("answer", "ingest"))
    client = client_for(service)
    padding = " " * LIMIT  # whitespace: the same request, only larger
    question = f'{{"question": {json.dumps(QUESTION)}}}'
    headers = {**bearer(secret), "content-type": "application/json"}
    answer = client.post("/v1/answers", content=question + padding, headers=headers)
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("application/problem+json")
    document = {
        "document_id": "padded",
        "title": "Padded",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [{"section_id": "s", "heading": "S", "paragraphs": ["Drain first."]}],
    }
    body = json.dumps({"documents": [document]}) + padding  # over one limit, not the other
    ingested = client.post("/v1/ingestions", content=body, headers=headers)
    assert ingested.status_code == 200, ingested.text
    too_big = client.post("/v1/ingestions", content=body + " " * INGEST_LIMIT, headers=headers)
    assert too_big.status_code == 413


def test_a_chunked_body_over_the_limit_is_413_over_a_real_socket(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT)
    secret = service.key("alice")

    def chunked() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        yield f'{{"question": {json.dumps(QUESTION)}'.encode()
        for _ in range(10):
            yield b" " * 500
        yield b"}"

    with LiveServer(service.app) as url:
        response = httpx.post(
            url + "/v1/answers",
            content=chunked(),
            headers={**bearer(secret), "content-type": "application/json"},
            timeout=30,
        )
    assert response.status_code == 413, response.text
    assert response.json()["type"] == "/problems/body-too-large"


def test_healthz_answers_while_an_ingestion_body_is_parsed(
    make_service: Callable[..., Service],
) -> None:
    """The reader (parsing and validating the body) waits until ``/healthz`` has
    answered: on the event loop that could never happen before the wait gives up, so
    the order of the recorded events shows where the parsing ran."""
    service = make_service(ingest=False)
    secret = service.key("writer", scopes=("ingest",))
    events: list[str] = []
    parsing = threading.Event()
    healthy = threading.Event()

    def recording_reader(*args: Any) -> Any:
        events.append("parse started")
        parsing.set()
        if not healthy.wait(30):
            events.append("parse gave up waiting for /healthz")
        events.append("parse ended")
        return read_ingestion(*args)

    service.app.state.ragwright.ingestion_reader = recording_reader
    document = {
        "document_id": "note",
        "title": "A note",
        "document_type": "note",
        "publication_state": "published",
        "sections": [{"section_id": "s", "heading": "S", "paragraphs": ["Drain first."]}],
    }
    results: dict[str, Any] = {}
    with LiveServer(service.app) as url:

        def ingest() -> None:
            results["ingestion"] = httpx.post(
                url + "/v1/ingestions",
                json={"documents": [document]},
                headers=bearer(secret),
                timeout=120,
            )

        sender = threading.Thread(target=ingest)
        sender.start()
        assert parsing.wait(60), "the ingestion's body was never parsed"
        health = httpx.get(url + "/healthz", timeout=60)
        events.append("healthz answered")
        healthy.set()
        sender.join(120)
        assert not sender.is_alive()
    assert health.status_code == 200
    assert events == ["parse started", "healthz answered", "parse ended"], events
    assert results["ingestion"].status_code == 200, results["ingestion"].text
