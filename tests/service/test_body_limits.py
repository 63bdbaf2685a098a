"""Request bodies: their caller checked before they are read, cut at their route's
limit (``RAGWRIGHT_SERVE_MAX_BODY``, ``RAGWRIGHT_SERVE_MAX_INGEST_BODY``, the page's
form and upload limits) with 413 problem details, chunked ones too, on every route that
takes a body, the page's ``/ui/*`` included (issue 46, item 2); and a large ingestion
parsed off the event loop so ``/healthz`` answers meanwhile (issue 20, item 9)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from ragwright.service.ingestions import read_ingestion
from ragwright.service.limits import GATED_METHODS, BodyGate, BodyLimit
from ragwright.service.state import ServiceState
from ragwright.web.routes import PAGE_FORM_BYTES, UPLOAD_FORM_BYTES
from ragwright.web.sessions import SESSION_COOKIE
from ragwright.web.uploads import MAX_UPLOAD_BYTES
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
        self,
        path: str,
        chunks: list[bytes],
        headers: dict[str, str],
        *,
        length: bool = True,
        content_type: str = "application/json",
    ) -> RecordingClient:
        pending = list(chunks)
        raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        raw_headers.append((b"content-type", content_type.encode()))
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


def chunked_question() -> Iterator[bytes]:
    """A question padded past ``LIMIT``, sent without a Content-Length (chunked)."""
    yield f'{{"question": {json.dumps(QUESTION)}'.encode()
    for _ in range(10):
        yield b" " * 500
    yield b"}"


def test_a_chunked_body_over_the_limit_is_413_over_a_real_socket(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT)
    secret = service.key("alice")

    with LiveServer(service.app) as url:
        response = httpx.post(
            url + "/v1/answers",
            content=chunked_question(),
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


# --- every route, the page's included (issue 46, item 2) -----------------------------------


def gate_table(app: FastAPI) -> dict[tuple[str, str], BodyLimit]:
    """The routes' limits the app's body gate was given."""
    (gate,) = [m for m in app.user_middleware if m.cls is BodyGate]
    return dict(gate.kwargs["routes"])


def body_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) of the app's router that takes a body method."""
    return {
        (method, str(route.path_format))
        for route in iter_route_contexts(app.routes)
        for method in route.methods or ()
        if method in GATED_METHODS
    }


def test_every_route_that_takes_a_body_declares_its_limit_in_the_gate(
    make_service: Callable[..., Service],
) -> None:
    app = make_service(ingest=False).app
    declared = set(gate_table(app))
    assert ("POST", "/ui/ask") in body_routes(app)  # the walk reaches the page's router
    # A route without a limit, or a limit left for a route that is gone, fails here.
    assert body_routes(app) == declared
    added = APIRouter()

    @added.post("/ui/new-form")
    async def new_form(request: Request) -> dict[str, int]:
        return {"read": len(await request.body())}

    app.include_router(added)
    assert body_routes(app) - declared == {("POST", "/ui/new-form")}
    # Until it declares one, the gate hands it no body: nothing of the client's is read.
    sent = RecordingClient(app).request("/ui/new-form", [CHUNK] * 100, {})
    assert (sent.status, json.loads(sent.body), sent.read) == (200, {"read": 0}, 0)


def session_cookie(service: Service) -> dict[str, str]:
    """A signed-in browser's cookie (a session made in the process's store)."""
    secret = service.key("page", scopes=("answer", "ingest"))
    key = service.application.authenticate(secret)
    assert key is not None
    state = service.app.state.ragwright
    assert isinstance(state, ServiceState)
    return {"cookie": f"{SESSION_COOKIE}={state.sessions.create(key.id).session_id}"}


FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_the_pages_signed_in_routes_refuse_a_body_without_a_session_unread(
    make_service: Callable[..., Service], length: bool
) -> None:
    service = make_service(ingest=False)
    for path, content_type in (("/ui/ask", "application/json"), ("/ui/ingest", FORM)):
        for headers in ({}, {"cookie": f"{SESSION_COOKIE}=forged"}):
            sent = RecordingClient(service.app).request(
                path, [CHUNK] * 100, headers, length=length, content_type=content_type
            )
            assert (sent.status, sent.read) == (401, 0), (path, headers)
            assert sent.problem()["type"] == "/problems/signed-out"


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_a_page_routes_limit_is_413_and_read_no_further(
    make_service: Callable[..., Service], length: bool
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT)
    cookie = session_cookie(service)
    big = b" " * 65536
    for path, chunk, count, limit, named, content_type in (
        ("/ui/ask", CHUNK, 100, LIMIT, "RAGWRIGHT_SERVE_MAX_BODY", "application/json"),
        ("/ui/sign-in", CHUNK, 100, PAGE_FORM_BYTES, "the page's form limit", FORM),
        ("/ui/sign-out", CHUNK, 100, PAGE_FORM_BYTES, "the page's form limit", FORM),
        ("/ui/ingest", big, 40, UPLOAD_FORM_BYTES, "the page's upload limit", FORM),
    ):
        sent = RecordingClient(service.app).request(
            path, [chunk] * count, cookie, length=length, content_type=content_type
        )
        assert sent.status == 413, (path, sent.body)
        problem = sent.problem()
        assert (problem["type"], problem["limit"]) == ("/problems/body-too-large", limit)
        assert named in problem["detail"]
        assert sent.read == (0 if length else limit // len(chunk) + 1), path


def test_the_upload_form_has_its_own_larger_limit(make_service: Callable[..., Service]) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT)
    assert gate_table(service.app)[("POST", "/ui/ingest")].size > MAX_UPLOAD_BYTES > LIMIT
    # Past RAGWRIGHT_SERVE_MAX_BODY, within the upload's: the route has it (and refuses
    # the form for its missing token).
    sent = RecordingClient(service.app).request(
        "/ui/ingest", [CHUNK] * 100, session_cookie(service), content_type=FORM
    )
    assert sent.status == 403, sent.body
    assert sent.problem()["type"] == "/problems/csrf"


def test_a_chunked_body_to_the_page_over_its_limit_is_413_over_a_real_socket(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False, serve_max_body=LIMIT)
    cookie = session_cookie(service)

    with LiveServer(service.app) as url:
        response = httpx.post(
            url + "/ui/ask",
            content=chunked_question(),
            headers={**cookie, "content-type": "application/json"},
            timeout=30,
        )
    assert response.status_code == 413, response.text
    assert response.json()["type"] == "/problems/body-too-large"
