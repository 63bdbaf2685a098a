"""``RuntimeComponents.close()`` (and ``Application.close()``, which the CLI calls when a
command ends and the service's lifespan on shutdown) releases what the runtime opened:
counted as open SQLite files, PostgreSQL and Redis connections of this process and child
processes, before and after."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

import psutil
import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from ragwright.adapters.chatmodels import local
from ragwright.application import AddKeyRequest
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest
from ragwright.cli import app as cli
from ragwright.deadline import Deadline
from ragwright.errors import ChatError
from ragwright.runtime import RuntimeComponents
from ragwright.service import create_app
from ragwright.settings import load_settings
from tests.application.components import fake_application
from tests.application.postgres import POSTGRES_URL

REDIS_URL = os.environ.get("RAGWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def open_files_under(folder: Path) -> list[str]:
    """Files under ``folder`` this process has open (its /proc/self/fd links)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.startswith(str(folder.resolve())):
            found.append(target)
    return found


def local_ports_to(url: str) -> list[int]:
    """This process's local ports of established TCP connections to ``url``'s server."""
    port = urlsplit(url).port
    return [
        c.laddr.port
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
    ]


def postgres_connections() -> int:
    """The server's ragwright sessions whose client is this process (pg_stat_activity)."""
    ports = local_ports_to(POSTGRES_URL)  # before the observer's own connection
    with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name LIKE 'ragwright-%%' AND client_port = ANY(%s)",
            (ports,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def redis_connections() -> int:
    """Redis clients (CLIENT LIST) whose address is a port of this process."""
    ports = local_ports_to(REDIS_URL)
    observer = redis.Redis.from_url(REDIS_URL)
    try:
        own = observer.client_id()
        clients = observer.client_list()
    finally:
        observer.close()
    return sum(
        1 for c in clients if int(c["id"]) != own and int(str(c["addr"]).rsplit(":", 1)[1]) in ports
    )


def use_every_store(components: RuntimeComponents) -> None:
    components.key_store().list()
    components.job_store()
    components.draft_store()


def test_close_releases_the_sqlite_stores_and_a_later_use_reopens_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    components = RuntimeComponents(load_settings(home=home))
    use_every_store(components)
    assert {Path(f).name for f in open_files_under(home)} >= {
        "keys.sqlite3",
        "jobs.sqlite3",
        "drafts.sqlite3",
    }
    components.close()
    assert open_files_under(home) == []
    components.close()  # idempotent
    assert components.key_store().list() == []  # usable again: opened afresh
    components.close()
    assert open_files_under(home) == []


def test_close_releases_every_postgres_connection(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "home", database_url=POSTGRES_URL)
    components = RuntimeComponents(settings)
    use_every_store(components)
    assert postgres_connections() >= 3  # one pool per store
    components.close()
    assert postgres_connections() == 0
    components.close()
    assert postgres_connections() == 0


def chat_settings(tmp_path: Path, **overrides: object) -> RuntimeComponents:
    return RuntimeComponents(load_settings(home=tmp_path / "home", **overrides))  # type: ignore[arg-type]


def test_close_releases_the_redis_clients_of_every_chat_session(tmp_path: Path) -> None:
    components = chat_settings(
        tmp_path,
        redis_url=REDIS_URL,
        chat_provider="openai",
        chat_model="m",
        chat_base_url="http://127.0.0.1:9/v1",
    )
    before = redis_connections()
    counter = components.token_counter()
    closed = components.chat(counter)
    components.chat(counter, "jobs")  # left open by its holder
    assert redis_connections() == before + 2
    asyncio.run(closed.close())
    assert redis_connections() == before + 1
    components.close()
    assert redis_connections() == before


class ChildServer:
    """Stands in for llama.cpp's server: a child process until closed."""

    started: ClassVar[list[ChildServer]] = []

    def __init__(self, model_path: Path, **_: object) -> None:
        ChildServer.started.append(self)
        self._process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        self.base_url = "http://127.0.0.1:9"  # nothing listens: each call fails at once
        self.api_key = "stand-in-key"

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30)


@pytest.fixture
def child_servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setattr(local, "LocalModelServer", ChildServer)
    monkeypatch.setattr(local, "assemble_model", lambda *_, **__: tmp_path / "model.gguf")
    yield
    while ChildServer.started:
        ChildServer.started.pop().close()  # never left behind, whatever the test saw


def children() -> int:
    return len(psutil.Process().children())


def test_close_stops_the_local_model_server_a_session_left_running(
    tmp_path: Path, child_servers: None
) -> None:
    components = chat_settings(tmp_path, chat_provider="local", chat_keep_warm=0, chat_retries=1)
    session = components.chat(components.token_counter())
    request = ChatRequest(
        (ChatMessage("user", "hello"),), ChatOptions(json_schema={"type": "object"})
    )
    before = children()
    with pytest.raises(ChatError):  # the model server started; nothing answered
        asyncio.run(session.model.complete(request, Deadline.after(30)))
    assert children() == before + 1
    components.close()  # the session was never closed: the runtime stops its server
    assert children() == before
    components.close()


def test_a_command_closes_its_application(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAGWRIGHT_HOME", str(home))
    result = CliRunner().invoke(cli, ["keys", "add", "--no-tenant", "--scope", "search"])
    assert result.exit_code == 0, result.output
    assert (home / "keys.sqlite3").is_file()
    assert open_files_under(home) == []


def test_the_service_closes_its_application_on_shutdown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    application, _ = fake_application(home)
    application.add_key(AddKeyRequest(tenant=None, scopes=("search",)))
    assert open_files_under(home)
    with TestClient(create_app(application, probe_model=False)) as client:
        assert client.get("/healthz").status_code == 200
    assert open_files_under(home) == []
