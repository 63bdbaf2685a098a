"""Which running background model a command reuses (``ensure_resident``), against a
record of a live process whose server answers ``/health`` (a stand-in HTTP server in
this test process): nothing is started or stopped here, each decision is recorded. And
what the background process's body records (``serve_resident``, with a stand-in server):
the key to its server, where only its owner can read it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ragwright.adapters.chatmodels import resident
from ragwright.adapters.chatmodels.resident import (
    STATE,
    ensure_resident,
    serve_resident,
    touch_lease,
)


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Path]:
    """A model cache whose record names a live process (this one) serving /health,
    started with 2 threads and a 4096-token context."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    (tmp_path / STATE).write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "base_url": f"http://127.0.0.1:{server.server_address[1]}",
                "api_key": "per-start-key",
                "model_sha256": resident.GGUF_SHA256,
                "context_tokens": 4096,
                "idle_timeout": 600,
                "threads": 2,
                "started_at": time.time(),
            }
        ),
        "utf-8",
    )
    touch_lease(tmp_path, time.time() - 5)  # last used 5 s ago, nothing in flight
    try:
        yield tmp_path
    finally:
        # The record names this process: the suite's last fixture stops every recorded
        # background model it finds.
        (tmp_path / STATE).unlink(missing_ok=True)
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records a stop or a start instead of doing it (a start ends the call)."""
    made: list[str] = []

    def stop(cache_dir: Path, wait: float = 30.0) -> None:
        made.append("stop")

    class Start(Exception):
        pass

    def popen(*args: object, **kwargs: object) -> None:
        made.append("start")
        raise Start

    monkeypatch.setattr(resident, "stop_resident", stop)
    monkeypatch.setattr(resident.subprocess, "Popen", popen)
    return made


def _ensure(cache: Path, *, threads: int | None, context_tokens: int = 4096) -> object:
    try:
        return ensure_resident(
            cache, context_tokens=context_tokens, idle_timeout=600, threads=threads
        )
    except Exception as error:  # the recorded start
        return type(error).__name__


def test_the_same_configuration_reuses_the_running_model(
    running: Path, decisions: list[str]
) -> None:
    found = _ensure(running, threads=2)
    assert getattr(found, "pid", None) == os.getpid()
    assert decisions == []


def test_another_thread_count_replaces_an_idle_model(running: Path, decisions: list[str]) -> None:
    assert _ensure(running, threads=1) == "Start"  # last used 5 s ago
    assert decisions == ["stop", "start"]


def test_another_thread_count_leaves_a_model_that_is_answering_alone(
    running: Path, decisions: list[str]
) -> None:
    # Another command's call holds the lease until its deadline, 60 s from now: that
    # answer is not cut off; this command uses the running model as it is.
    touch_lease(running, time.time() + 60)
    found = _ensure(running, threads=1)
    assert getattr(found, "threads", None) == 2
    assert decisions == []


def test_another_context_size_replaces_even_a_busy_model(
    running: Path, decisions: list[str]
) -> None:
    # A context it cannot serve is not a matter of speed: the request would not fit.
    touch_lease(running, time.time() + 60)
    assert _ensure(running, threads=2, context_tokens=8192) == "Start"
    assert decisions == ["stop", "start"]


def test_a_model_recorded_without_a_key_is_replaced(running: Path, decisions: list[str]) -> None:
    # Started by a version before keys: its server answers anyone on the machine.
    record = json.loads((running / STATE).read_text("utf-8"))
    del record["api_key"]
    (running / STATE).write_text(json.dumps(record), "utf-8")
    assert _ensure(running, threads=2) == "Start"
    assert decisions == ["stop", "start"]


class _StandInServer:
    """Takes LocalModelServer's place: nothing listens, the key is known."""

    base_url = "http://127.0.0.1:9"
    api_key = "stand-in-key"

    def __init__(self, *_: object, **__: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_record_holding_the_key_is_0600_in_a_0700_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "models"
    cache.mkdir()
    os.chmod(cache, 0o755)  # as earlier versions left it (and a 022 umask makes it)
    monkeypatch.setattr(resident, "assemble_model", lambda cache_dir: cache_dir / "model.gguf")
    monkeypatch.setattr(resident, "LocalModelServer", _StandInServer)
    seen: dict[str, object] = {}

    def watch() -> None:  # what the record is while the process serves
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            try:
                seen["record"] = oct((cache / STATE).stat().st_mode & 0o777)
                seen["key"] = json.loads((cache / STATE).read_text("utf-8")).get("api_key")
            except (OSError, ValueError):
                time.sleep(0.01)
                continue
            seen["folder"] = oct(cache.stat().st_mode & 0o777)
            return

    watcher = threading.Thread(target=watch)
    watcher.start()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        serve_resident(cache, context_tokens=512, idle_timeout=0.5)  # exits when idle
    finally:
        signal.signal(signal.SIGTERM, previous)
        watcher.join()
    assert seen == {"record": "0o600", "key": "stand-in-key", "folder": "0o700"}
    assert not (cache / STATE).exists()
