"""A slow OpenAI-compatible chat server on 127.0.0.1 that counts the requests it is
working on (:func:`generating_openai`).

It stands for a model server that generates a whole reply before it writes anything (a
buffered completion): a client that closes its connection meanwhile is not noticed, and
the request goes on taking one of the server's slots until its reply is made. So
``max_in_flight`` is what the model server really carried at once, whatever the client
did with its connections. Each reply is a valid answer citing ``S1``; a request is
counted from its arrival until its reply is ready (before the reply is written, so a
client's next request cannot overlap it). Handlers run on their own threads.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = {"status": "answered", "answer": "Drain while the deadline allows.", "sourceIds": ["S1"]}


@dataclass
class GeneratingServer:
    """What the server saw: requests received, in flight now, the most at once, and the
    requests whose reply it has finished writing (or found the client gone)."""

    base_url: str
    received: int = 0
    finished: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def generating_openai(*, seconds: float) -> Iterator[GeneratingServer]:
    """A running server whose every completion takes ``seconds`` to generate."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            with server.lock:
                server.received += 1
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                time.sleep(seconds)  # generating; a closed client connection goes unnoticed
            finally:
                with server.lock:
                    server.in_flight -= 1
            completion = {
                "id": "generated-1",
                "object": "chat.completion",
                "created": 0,
                "model": "generating",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": json.dumps(ANSWER)},
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
            data = json.dumps(completion).encode()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            with server.lock:
                server.finished += 1

        def log_message(self, *args: object) -> None:
            pass

    class Listener(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    listener = Listener(("127.0.0.1", 0), Handler)
    server = GeneratingServer(f"http://127.0.0.1:{listener.server_address[1]}/v1")
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        listener.shutdown()
        listener.server_close()
