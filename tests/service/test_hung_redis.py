"""A Redis that accepts connections and never answers stalls only the calls that wait on
it: the service keeps serving everything else, and a call to it fails by its own
timeout, read as a cache miss and an in-process capacity gate."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO
from urllib.parse import urlparse

import pytest
from fastapi.testclient import TestClient

from ragwright.adapters import redis as redis_adapter
from tests.service.conftest import QUESTION, Service, bearer

Client = Callable[[Service], TestClient]

# The connection handshake redis-py sends (RESP3), always answered so a client connects.
_HANDSHAKE = {
    "HELLO": b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n",
    "CLIENT": b"+OK\r\n",
    "PING": b"+PONG\r\n",
}
# Until it hangs: an empty cache (GET misses, SET stores nothing) and a pool that grants
# every lease (the acquire script's 1) and holds none.
_WORKING = {
    "GET": b"_\r\n",
    "SET": b"+OK\r\n",
    "EVALSHA": b":1\r\n",
    "ZREM": b":1\r\n",
    "ZCARD": b":0\r\n",
    "PTTL": b":-2\r\n",
}
WAIT = 60.0  # bound on the test's own waits, so nothing here can hang


class HungRedis:
    """A loopback server that completes redis-py's handshake and answers ``PING``; other
    commands are answered (as an empty Redis) until :meth:`hang`, or from the start with
    ``hung=True``, then read and never replied to, their connection held open."""

    def __init__(self, *, hung: bool = False) -> None:
        self._replies = dict(_HANDSHAKE) if hung else {**_HANDSHAKE, **_WORKING}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self._lock = threading.Condition()
        self._held: list[tuple[socket.socket, str]] = []
        self._connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def hang(self) -> None:
        """Answer nothing but the handshake from now on."""
        self._replies = dict(_HANDSHAKE)

    def asked(self, name: str) -> bool:
        """Wait (at most ``WAIT`` seconds) until a ``name`` command is held unanswered."""
        with self._lock:
            return self._lock.wait_for(lambda: any(n == name for _, n in self._held), WAIT)

    def unanswered(self) -> list[str]:
        """The commands held unanswered on connections their client still keeps open."""
        with self._lock:
            return [name for conn, name in self._held if _open(conn)]

    def close(self) -> None:
        """The server goes away: every connection is cut, new ones are refused."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):
            for name in _commands(conn.makefile("rb")):
                reply = self._replies.get(name)
                if reply is not None:
                    conn.sendall(reply)
                    continue
                with self._lock:
                    self._held.append((conn, name))
                    self._lock.notify_all()


def _commands(reader: BinaryIO) -> Iterator[str]:
    """The name of each RESP command ``reader`` receives, until the client leaves."""
    while line := reader.readline():
        count = int(line[1:])
        parts = [reader.read(int(reader.readline()[1:]) + 2)[:-2] for _ in range(count)]
        yield parts[0].decode().upper()


def _open(conn: socket.socket) -> bool:
    """The client has not closed its end (a peek sees no end of stream)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


@pytest.fixture
def fake_redis() -> Iterator[HungRedis]:
    server = HungRedis()
    yield server
    server.close()


@pytest.fixture
def hung_redis() -> Iterator[HungRedis]:
    server = HungRedis(hung=True)
    yield server
    server.close()


def test_a_hung_redis_stalls_only_the_answer_waiting_on_it(
    make_service: Callable[..., Service],
    client_for: Client,
    fake_redis: HungRedis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client timeout far longer than the test: the hang ends when the server goes away.
    monkeypatch.setattr(redis_adapter, "TIMEOUT", 600.0, raising=False)
    service = make_service(redis_url=fake_redis.url)
    answerer, searcher = service.key("alice"), service.key("bob", scopes=("search",))
    client = client_for(service)
    assert client.get("/healthz").status_code == 200  # started, with Redis answering
    fake_redis.hang()
    answered: dict[str, Any] = {}

    def answer() -> None:
        answered["response"] = client.post(
            "/v1/answers", json={"question": QUESTION}, headers=bearer(answerer)
        )

    asking = threading.Thread(target=answer, daemon=True)
    asking.start()
    try:
        assert fake_redis.asked("GET"), "the answer never looked in the cache"
        # The answer's cache lookup waits on Redis; meanwhile other requests are served.
        assert client.get("/healthz").status_code == 200
        search = client.post("/v1/search", json={"question": QUESTION}, headers=bearer(searcher))
        assert search.status_code == 200 and search.json()["hits"]
        assert "GET" in fake_redis.unanswered(), "the cache lookup is no longer waiting"
        assert asking.is_alive()
    finally:
        fake_redis.close()  # the lookup fails: a cache miss, and the answer goes on
        asking.join(WAIT)
    assert not asking.is_alive()
    assert answered["response"].status_code == 200, answered["response"].text
    assert answered["response"].json()["mode"] == "generated"


def test_a_call_to_a_hung_redis_fails_by_its_own_timeout_with_the_reason(
    make_service: Callable[..., Service],
    client_for: Client,
    hung_redis: HungRedis,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(redis_adapter, "TIMEOUT", 0.5)
    service = make_service(redis_url=hung_redis.url)
    secret = service.key("alice", scopes=("answer", "search"))
    client = client_for(service)
    with caplog.at_level(logging.WARNING):
        response = client.post("/v1/answers", json={"question": QUESTION}, headers=bearer(secret))
    assert response.status_code == 200, response.text
    assert response.json()["mode"] == "generated"
    # redis-py words the same read timeout by the layer that caught it: its parser
    # ("from socket") or its connection ("from HOST:PORT"), which depends on timing.
    reason = rf"Timeout reading from (socket|127\.0\.0\.1:{urlparse(hung_redis.url).port})"
    assert re.search(rf"is unreachable \({reason}\)", caplog.text), caplog.text
    pools = client.get("/v1/status", headers=bearer(secret)).json()["service"]["model_capacity"]
    assert pools and all(re.fullmatch(reason, p["degraded"]) for p in pools.values()), pools
    assert all(p["backend"] == "local" for p in pools.values())
