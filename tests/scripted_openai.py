"""An OpenAI-compatible chat endpoint on 127.0.0.1 that answers from the evidence it is sent.

For tests that drive the real command line (a subprocess) and need a known answer: the
``ragwright`` process is pointed at it with ``RAGWRIGHT_CHAT_PROVIDER=openai`` and
``RAGWRIGHT_CHAT_BASE_URL``. ``reply`` receives the request's evidence list (the ``id``,
``title``, ``heading`` and ``text`` the assembler rendered) and returns the answer
object, or a string sent as the completion's text as it is (a malformed answer); every
request body is recorded. A request without evidence (``ragwright serve``'s startup
probe) gets ``{"ok": true}``. ``delay`` holds each reply that many seconds (a slow provider,
for the service's load benchmark); each request is answered on its own thread.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
            seen.append({"path": self.path, "body": body})
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
