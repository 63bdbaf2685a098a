"""OpenAI-compatible endpoints on 127.0.0.1: chat that answers from the evidence it is
sent (:func:`scripted_openai`), and embeddings with scripted failures and a fixed
latency (:func:`scripted_embeddings`).

For tests that drive the real command line (a subprocess) and need a known answer: the
``ragwright`` process is pointed at it with ``RAGWRIGHT_CHAT_PROVIDER=openai`` and
``RAGWRIGHT_CHAT_BASE_URL``. ``reply`` receives the request's evidence list (the ``id``,
``title``, ``heading`` and ``text`` the assembler rendered) and returns the answer
object, or a string sent as the completion's text as it is (a malformed answer); every
request body is recorded. A request without evidence (``ragwright serve``'s startup
probe) gets ``{"ok": true}``. ``delay`` holds each reply that many seconds (a slow provider,
for the service's load benchmark); each request is answered on its own thread. Each
recorded request also holds ``started`` and ``ended`` (``time.monotonic()`` on arrival
and once its reply is ready, before it is sent), so a test can count the requests held
open at once.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragwright.errors import InputTooLong
from ragwright.testing import HashingEmbedder

Reply = Callable[[list[dict[str, Any]]], dict[str, Any] | str]


@contextmanager
def scripted_openai(
    reply: Reply, *, delay: float = 0.0
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A running endpoint: its base URL (ending in ``/v1``) and the recorded requests."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            record: dict[str, Any] = {"path": self.path, "body": body, "started": time.monotonic()}
            seen.append(record)
            try:
                evidence = json.loads(body["messages"][-1]["content"])["evidence"]
            except (ValueError, KeyError, TypeError):
                evidence = None  # no evidence: the service's startup probe
            answer = {"ok": True} if evidence is None else reply(evidence)
            if delay:
                time.sleep(delay)
            content = answer if isinstance(answer, str) else json.dumps(answer)
            completion = {
                "id": "scripted-1",
                "object": "chat.completion",
                "created": 0,
                "model": "scripted",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
            data = json.dumps(completion).encode()
            # Before the reply leaves: the client's next request cannot start before it.
            record["ended"] = time.monotonic()
            # A client killed while it waited (the fault benchmarks) is gone: nothing to say.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class EmbeddingServer:
    """What :func:`scripted_embeddings` recorded: request bodies, their concurrency
    (``max_concurrent`` held open at once, ``max_working`` of them past the capacity cap)."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    max_concurrent: int = 0
    max_working: int = 0
    active: int = 0
    working: int = 0

    def env(self, **more: str) -> dict[str, str]:
        """The ``RAGWRIGHT_*`` environment of a remote embedder served by this server
        (the hashing embedder's 64 dimensions, profile ``scripted-v1``), and ``more``."""
        return {
            "RAGWRIGHT_EMBEDDING_PROVIDER": "openai",
            "RAGWRIGHT_EMBEDDING_PROFILE_ID": "scripted-v1",
            "RAGWRIGHT_EMBEDDING_MODEL": "scripted-embed",
            "RAGWRIGHT_EMBEDDING_DIGEST": "sha256:" + "0" * 64,
            "RAGWRIGHT_EMBEDDING_DIMENSIONS": "64",
            "RAGWRIGHT_OPENAI_BASE_URL": self.base_url,
            "RAGWRIGHT_OPENAI_API_KEY": "unused",
            **more,
        }


Failure = tuple[int, dict[str, str]]


@contextmanager
def scripted_embeddings(
    *,
    model: str = "scripted-embed",
    delay: float = 0.0,
    capacity: int | None = None,
    failures: Sequence[Failure] = (),
) -> Iterator[EmbeddingServer]:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1, backed by the
    hashing embedder (64 dimensions, 512-token inputs; a longer one gets HTTP 400, never
    a truncated vector).

    The first ``len(failures)`` requests get the scripted ``(status, headers)`` answers
    (e.g. ``(429, {"Retry-After": "1"})``); later ones are answered after ``delay``
    seconds. ``capacity`` caps how many requests the server works on at once (the
    others wait their turn inside it), as a real server's slots do. ``max_concurrent``
    is the most requests it held open at one moment. ``GET /v1/models`` lists ``model``.
    """
    pending = list(failures)
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(capacity) if capacity else None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: object, headers: Mapping[str, str] = {}) -> None:
            data = json.dumps(payload).encode()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                server.requests.append(body)
                server.active += 1
                server.max_concurrent = max(server.max_concurrent, server.active)
                failure = pending.pop(0) if pending else None
            try:
                if failure is not None:
                    status, headers = failure
                    self._send(status, {"error": {"message": "scripted"}}, headers)
                    return
                if slots is not None:
                    slots.acquire()
                with lock:
                    server.working += 1
                    server.max_working = max(server.max_working, server.working)
                try:
                    time.sleep(delay)
                    try:
                        vectors = HashingEmbedder().embed_documents(body["input"])
                    except InputTooLong as error:
                        self._send(400, {"error": {"message": str(error)}})
                        return
                finally:
                    with lock:
                        server.working -= 1
                    if slots is not None:
                        slots.release()
                items = [
                    {"object": "embedding", "index": i, "embedding": v}
                    for i, v in enumerate(vectors)
                ]
                self._send(200, {"object": "list", "model": body["model"], "data": items})
            finally:
                with lock:
                    server.active -= 1

        def log_message(self, *args: object) -> None:
            pass

    class Listener(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    listener = Listener(("127.0.0.1", 0), Handler)
    server = EmbeddingServer(f"http://127.0.0.1:{listener.server_address[1]}")
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        listener.shutdown()
        listener.server_close()
