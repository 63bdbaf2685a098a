"""The second bundled embedding profile (``RAGWRIGHT_EMBEDDING_PROVIDER=e5``) through the
CLI: ingest, search, ask, eval calibrate and serve use it, and an index built with one
profile is refused by the other in one line that names both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragwright.adapters.embedders.e5 import E5_SMALL_PROFILE
from ragwright.adapters.embedders.onnx import MINILM_PROFILE
from tests.cli import ragwright, ragwright_process
from tests.conftest import SAMPLES
from tests.service.conftest import bearer, free_port

E5 = {"RAGWRIGHT_EMBEDDING_PROVIDER": "e5"}
ELIGIBLE = ("--type", "runbook", "--type", "note")


@pytest.fixture(scope="module")
def e5_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("e5-home")
    out = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=home, check=True, **E5).stdout
    )
    assert out["embedding_profile"] == E5_SMALL_PROFILE.profile_id
    return home


@pytest.mark.slow
def test_search_on_an_e5_index_with_the_e5_setting_finds_the_answer(e5_home: Path) -> None:
    out = ragwright(
        "search",
        "How often are TLS certificates rotated?",
        "--json",
        home=e5_home,
        check=True,
        **E5,
    )
    hits = json.loads(out.stdout)["hits"]
    assert hits[0]["document_id"] == "certificate-rotation"


@pytest.mark.slow
def test_ask_evidence_style_reads_the_e5_index(e5_home: Path) -> None:
    question = "What happens to unfinished jobs when the shutdown deadline expires?"
    out = ragwright("ask", question, "--style", "evidence", home=e5_home, check=True, **E5)
    assert any(
        "leave unfinished jobs for the durable retry path" in line
        for line in out.stdout.splitlines()
    )


@pytest.mark.slow
def test_eval_calibrate_runs_on_the_e5_index(e5_home: Path) -> None:
    cases = SAMPLES.parent / "eval" / "cases.jsonl"
    out = json.loads(
        ragwright(
            "eval",
            "calibrate",
            str(cases),
            *ELIGIBLE,
            "--force",
            "--json",
            home=e5_home,
            check=True,
            **E5,
        ).stdout
    )
    assert out["rows"][0]["false_acceptance_rate"] == 1.0
    assert out["recommended"]["false_acceptance_rate"] < 1.0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index_env", "query_env", "built", "selected"),
    [
        (E5, {}, E5_SMALL_PROFILE, MINILM_PROFILE),
        ({}, E5, MINILM_PROFILE, E5_SMALL_PROFILE),
    ],
    ids=["e5-index-minilm-settings", "minilm-index-e5-settings"],
)
def test_an_index_of_one_profile_is_refused_by_the_other_in_one_line(
    e5_home: Path,
    indexed_home: Path,
    index_env: dict[str, str],
    query_env: dict[str, str],
    built: object,
    selected: object,
) -> None:
    home = e5_home if index_env else indexed_home
    result = ragwright("search", "rotate certificates", "--json", home=home, **query_env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert built.profile_id in lines[0] and selected.profile_id in lines[0]  # type: ignore[attr-defined]
    assert "RAGWRIGHT_EMBEDDING_PROVIDER" in lines[0]


@pytest.mark.slow
def test_serve_refuses_an_index_of_the_other_profile_in_one_line(e5_home: Path) -> None:
    result = ragwright_process("serve", "--port", str(free_port()), home=e5_home)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert E5_SMALL_PROFILE.profile_id in lines[0] and MINILM_PROFILE.profile_id in lines[0]


@pytest.fixture
def served_e5(e5_home: Path) -> Iterator[tuple[str, str]]:
    added = ragwright(
        "keys", "add", "--no-tenant", "--scope", "search", "--json", home=e5_home, check=True, **E5
    )
    secret = json.loads(added.stdout)["key"]
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ragwright", "serve", "--port", str(port)],
        env={**os.environ, "RAGWRIGHT_HOME": str(e5_home), **E5},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.25)
        yield url, secret
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.mark.slow
def test_serve_with_the_e5_setting_searches_the_e5_index(served_e5: tuple[str, str]) -> None:
    url, secret = served_e5
    response = httpx.post(
        url + "/v1/search",
        json={"question": "How often are TLS certificates rotated?"},
        headers=bearer(secret),
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert response.json()["hits"][0]["document_id"] == "certificate-rotation"
