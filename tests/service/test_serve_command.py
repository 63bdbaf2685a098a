"""``ragwright serve`` on the embedded defaults (bundled embedder, local model, embedded
index) as a real process, and the one-line refusals of a broken configuration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli import copy_home
from tests.service.conftest import QUESTION, bearer, free_port


def ragwright(
    *args: str, home: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RAGWRIGHT_HOME": str(home), **env},
        check=False,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, sample_home: Path) -> Path:
    """The sample corpus indexed."""
    return copy_home(sample_home, tmp_path_factory.mktemp("serve") / "home")


@pytest.fixture(scope="module")
def idle_home(tmp_path_factory: pytest.TempPathFactory, sample_home: Path) -> Path:
    """An indexed home no server holds."""
    return copy_home(sample_home, tmp_path_factory.mktemp("idle") / "home")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[tuple[str, str]]:
    added = ragwright(
        "keys",
        "add",
        "--no-tenant",
        "--scope",
        "answer",
        "--scope",
        "search",
        "--json",
        home=home,
    )
    secret = json.loads(added.stdout)["key"]
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ragwright", "serve", "--port", str(port)],
        env={**os.environ, "RAGWRIGHT_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # A bound on waiting, not a speed claim: a busy 2-core machine starts the model slowly.
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(url + "/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "serve was not ready within 600 s"
            time.sleep(0.25)
        yield url, secret
    finally:
        process.terminate()
        process.communicate(timeout=30)  # waits and closes the pipe


def ready_state(url: str, bound: float = 600) -> dict[str, object]:
    """``/readyz``'s body once it says ready (its last body after ``bound`` seconds)."""
    deadline = time.monotonic() + bound
    while True:
        response = httpx.get(url + "/readyz", timeout=60)
        if response.status_code == 200 or time.monotonic() > deadline:
            return dict(response.json())
        time.sleep(1)


@pytest.mark.slow
def test_serve_answers_on_the_embedded_defaults(served: tuple[str, str]) -> None:
    url, secret = served
    # Another test of this module may have left the model marked down on a loaded
    # machine (a probe past its own timeout); it is probed again every 15 s.
    ready = ready_state(url)
    assert ready == {
        "ready": True,
        "checks": {
            "index": {"ok": True, "detail": "ok"},
            "model": {"ok": True, "detail": "ok"},
            "jobs": {"ok": True, "detail": "ok"},  # serve runs answer jobs by default
        },
        "reasons": [],
    }
    body = httpx.post(
        url + "/v1/answers", json={"question": QUESTION}, headers=bearer(secret), timeout=600
    ).json()
    assert body["mode"] in ("generated", "insufficient")
    assert body["provenance"]["provider"] == "local"
    assert body["provenance"]["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m"  # never a path
    assert body["provenance"]["index_contract"]["embedding_digest"].startswith("sha256:")
    if body["mode"] == "generated":
        assert body["citations"] and body["quotes"]


@pytest.mark.slow
def test_serve_streams_evidence_then_the_outcome(served: tuple[str, str]) -> None:
    url, secret = served
    with httpx.stream(
        "POST",
        url + "/v1/answers/stream",
        json={"question": QUESTION},
        headers=bearer(secret),
        timeout=600,
    ) as response:
        names = [
            line.removeprefix("event: ")
            for line in response.iter_lines()
            if line.startswith("event: ")
        ]
    assert names[0] == "evidence"
    assert names[-2:] == ["citations", "outcome"]


@pytest.mark.slow
def test_serve_serves_the_page_from_the_package(served: tuple[str, str]) -> None:
    # The page at / on the embedded defaults: its assets come from the installed package
    # (nothing from another origin), and signing in with the key opens the ask page.
    url, secret = served
    with httpx.Client(base_url=url, timeout=30) as client:
        sign_in = client.get("/")
        assert sign_in.status_code == 200
        assert "default-src 'self'" in sign_in.headers["content-security-policy"]
        assert 'src="http' not in sign_in.text and 'href="http' not in sign_in.text
        for asset, kind in (("ragwright.js", "text/javascript"), ("ragwright.css", "text/css")):
            response = client.get(f"/ui/static/{asset}")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith(kind)
        token = re.search(r'name="csrf" value="([^"]+)"', sign_in.text)
        assert token is not None
        signed_in = client.post("/ui/sign-in", data={"key": secret, "csrf": token.group(1)})
        assert signed_in.status_code == 303
        page = client.get("/")
        assert 'id="question"' in page.text
        assert '<script type="module" src="/ui/static/ragwright.js">' in page.text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "starts"),
    [
        ({"RAGWRIGHT_TEMPLATES": "/nonexistent/templates.yaml"}, "setting 'RAGWRIGHT_TEMPLATES'"),
        ({"RAGWRIGHT_BM25_K1": "1.5"}, "collection contract"),
        ({"RAGWRIGHT_SERVE_CONCURRENCY": "0"}, "setting 'RAGWRIGHT_SERVE_CONCURRENCY'"),
    ],
)
def test_serve_refuses_a_broken_configuration_with_one_line(
    idle_home: Path, env: dict[str, str], starts: str
) -> None:
    result = ragwright("serve", "--port", str(free_port()), home=idle_home, **env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert starts in lines[0]


def closed_port() -> int:
    return free_port()  # bound and released: nothing listens there


def openai_env(base_url: str) -> dict[str, str]:
    return {
        "RAGWRIGHT_CHAT_PROVIDER": "openai",
        "RAGWRIGHT_CHAT_MODEL": "gpt-test",
        "RAGWRIGHT_CHAT_BASE_URL": base_url,
        "RAGWRIGHT_CHAT_API_KEY": "sk-test",
        "RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE": "false",
    }


@pytest.mark.slow
def test_serve_refuses_a_dead_model_without_a_degradation_mode_with_one_line(
    idle_home: Path,
) -> None:
    env = openai_env(f"http://127.0.0.1:{closed_port()}/v1")
    # A service that started instead of refusing would serve until killed.
    result = ragwright("serve", "--port", str(free_port()), home=idle_home, timeout=120, **env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: setting 'RAGWRIGHT_CHAT_PROVIDER': the chat model does")
    assert "no degradation mode is declared" in lines[0]


@pytest.mark.slow
def test_serve_without_a_degradation_mode_probes_the_model_once(idle_home: Path) -> None:
    from tests.scripted_openai import scripted_openai

    with scripted_openai(lambda evidence: {"status": "insufficient"}) as (base_url, seen):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "ragwright", "serve", "--port", str(port)],
            env={**os.environ, "RAGWRIGHT_HOME": str(idle_home), **openai_env(base_url)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ready = wait_until_ready(f"http://127.0.0.1:{port}", process)
        finally:
            process.terminate()
            process.communicate(timeout=30)
    assert ready["checks"]["model"] == {"ok": True, "detail": "ok"}
    assert len(seen) == 1  # serve's probe; the service's start did not probe again


def wait_until_ready(url: str, process: subprocess.Popen[str]) -> Any:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url + "/readyz")
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.25)
    raise AssertionError("the service was not ready in 120 s")


def test_serve_refuses_a_port_in_use_before_starting_anything(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = ragwright("serve", "--port", str(port), home=tmp_path / "home")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: setting '--host/--port': cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


@pytest.mark.slow
def test_worker_runs_answer_jobs_without_http_and_stops_on_sigterm(idle_home: Path) -> None:
    import signal

    from ragwright.application.callers import grant_digest
    from ragwright.application.jobs import canonical_input
    from ragwright.runtime import build_application
    from ragwright.settings import load_settings

    application = build_application(load_settings(home=idle_home, answer_style="evidence"))
    key = application.add_key(_grant()).key
    request = {"question": QUESTION, "history": [], "documents": []}
    job = (
        application.jobs()
        .submit(
            tenant=None,
            key_id=key.id,
            idempotency_key="worker-test",
            input_hash=canonical_input(request),
            request=request,
            ttl_seconds=600,
            grant_digest=grant_digest(key),
        )
        .job
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "ragwright", "worker", "--jobs", "2"],
        env={**os.environ, "RAGWRIGHT_HOME": str(idle_home), "RAGWRIGHT_ANSWER_STYLE": "evidence"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = application.jobs().get(job.id)
            if done is not None and done.finished:
                break
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "up to 2 jobs at once" in stderr
    assert done is not None and done.state == "succeeded", (done, stderr)
    assert done.result is not None and done.result["mode"] == "evidence_only"


def _grant() -> Any:
    from ragwright.application import AddKeyRequest

    return AddKeyRequest(tenant=None, scopes=("answer",))


def test_worker_refuses_an_index_another_process_holds(idle_home: Path) -> None:
    from ragwright.runtime import build_application
    from ragwright.settings import load_settings

    application = build_application(load_settings(home=idle_home))
    with application.hold_index():
        assert application.index_state().opened  # this process holds it now
        result = ragwright("worker", home=idle_home)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: the embedded index at")
    assert "in use by another process" in result.stderr
