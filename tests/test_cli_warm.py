"""The warm command process (RAGWRIGHT_COMMAND_KEEP_WARM, ragwright.warm): the first
``ask`` or ``search`` runs in its own process and starts one; the next ones of the same
context are run there with the same output, exit status and errors; every command
still opens the index afresh (an ingestion in between is seen, and is not locked out);
another context gets another process; Ctrl-C reaches the command; ``model status``
shows it, ``model stop`` and its idle timeout end it. Each command is its own process,
as a user runs them, through the real entry point (``python -m ragwright``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragwright.processes import alive
from tests.cli import Result, copy_home, ragwright_process
from tests.processes import CHILD_TIMEOUT
from tests.scripted_openai import scripted_openai

QUESTION = "Should I drain all queued work during shutdown?"
WARM = {"RAGWRIGHT_COMMAND_KEEP_WARM": "60"}


def _ragwright(*args: str, home: Path, check: bool = False, **env: str) -> Result:
    return ragwright_process(*args, home=home, check=check, **(WARM | env))


def _warm(home: Path, **env: str) -> dict[str, Any] | None:
    """The warm command process of this context, as ``model status --json`` shows it."""
    status = json.loads(
        _ragwright("model", "status", "--json", home=home, check=True, **env).stdout
    )
    return status["command_process"]  # type: ignore[no-any-return]


def _wait_for_warm(home: Path, **env: str) -> dict[str, Any]:
    give_up = time.monotonic() + CHILD_TIMEOUT
    while (found := _warm(home, **env)) is None:
        assert time.monotonic() < give_up, "no warm command process came up"
        time.sleep(0.2)
    return found


def _without_timings(stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)
    data.pop("timings", None)
    return data  # type: ignore[no-any-return]


@pytest.fixture
def home(indexed_home: Path, tmp_path: Path) -> Path:
    return copy_home(indexed_home, tmp_path / "home")


@pytest.mark.slow
def test_the_next_ask_is_run_by_the_warm_process_with_the_same_result(home: Path) -> None:
    ask = ("ask", QUESTION, "--style", "evidence", "--json")
    assert _warm(home) is None
    first = _ragwright(*ask, home=home, check=True)
    started = _wait_for_warm(home)
    assert started["served"] == 0
    second = _ragwright(*ask, home=home, check=True)
    third = _ragwright("search", "drain queued work", "--k", "2", home=home, check=True)
    after = _warm(home)
    assert after is not None and after["pid"] == started["pid"]
    assert after["served"] == 2  # the second ask and the search ran there
    assert _without_timings(second.stdout) == _without_timings(first.stdout)
    alone = ragwright_process("search", "drain queued work", "--k", "2", home=home, check=True)
    assert third.stdout == alone.stdout and third.stderr == alone.stderr
    stopped = json.loads(_ragwright("model", "stop", "--json", home=home, check=True).stdout)
    assert stopped["command_process_pid"] == started["pid"]
    assert not alive(int(started["pid"]))
    assert _warm(home) is None


@pytest.mark.slow
def test_errors_and_exit_statuses_are_those_of_a_process_of_its_own(home: Path) -> None:
    _ragwright("search", "drain", home=home, check=True)
    _wait_for_warm(home)
    for args in (
        ("ask", QUESTION, "--style", "nonsense"),  # a usage error: 2
        ("ask", QUESTION, "--history", "missing.json"),  # a bad input: 1
        ("search", "drain", "--chunking-version", "no-such-version"),
    ):
        warm = _ragwright(*args, home=home)
        alone = ragwright_process(*args, home=home)  # RAGWRIGHT_COMMAND_KEEP_WARM=0
        assert (warm.returncode, warm.stdout, warm.stderr) == (
            alone.returncode,
            alone.stdout,
            alone.stderr,
        ), args
    served = _warm(home)
    assert served is not None and served["served"] == 3
    _ragwright("model", "stop", home=home, check=True)


@pytest.mark.slow
def test_an_ingestion_between_two_asks_is_seen_and_not_locked_out(
    home: Path, tmp_path: Path
) -> None:
    question = ("search", "When does the fjord ferry leave?", "--type", "note", "--json")
    before = json.loads(_ragwright(*question, home=home, check=True).stdout)
    assert not any("ferry" in hit["document_id"] for hit in before["hits"])
    _wait_for_warm(home)
    note = tmp_path / "notes" / "ferry.md"
    note.parent.mkdir()
    note.write_text("# Fjord ferry\n\nThe fjord ferry leaves at 07:40 from pier four.\n", "utf-8")
    # The warm process holds no index between commands: the ingestion takes it.
    _ragwright(
        "ingest", str(note.parent), "--type", "note", "--state", "published", home=home, check=True
    )
    after = json.loads(_ragwright(*question, home=home, check=True).stdout)
    assert after["hits"][0]["document_id"].startswith("ferry")
    served = _warm(home)
    assert served is not None and served["served"] == 1
    _ragwright("model", "stop", home=home, check=True)


@pytest.mark.slow
def test_another_context_is_not_served_by_this_process(home: Path, tmp_path: Path) -> None:
    _ragwright("search", "drain", home=home, check=True)
    first = _wait_for_warm(home)
    # Another setting is another context: its command runs in its own process and
    # starts a warm process of its own; this one runs nothing.
    other = {"RAGWRIGHT_RRF_K": "30"}
    _ragwright("search", "drain", home=home, check=True, **other)
    second = _wait_for_warm(home, **other)
    assert second["pid"] != first["pid"]
    unchanged = _warm(home)
    assert unchanged is not None and unchanged["served"] == 0
    # With RAGWRIGHT_COMMAND_KEEP_WARM=0 nothing is started.
    ragwright_process("search", "drain", home=home, check=True)
    assert (
        json.loads(ragwright_process("model", "status", "--json", home=home, check=True).stdout)[
            "command_process"
        ]
        is None
    )
    # one stop ends both: this context's and, with --all, the other's
    stopped = json.loads(_ragwright("model", "stop", "--all", "--json", home=home).stdout)
    assert stopped["command_process_pid"] == first["pid"]
    assert second["pid"] in stopped["other_command_process_pids"]
    assert not alive(int(first["pid"])) and not alive(int(second["pid"]))


@pytest.mark.slow
def test_the_warm_process_exits_by_itself_after_its_idle_timeout(home: Path) -> None:
    # Long enough for a `model status` (a process of its own, a second or more on a busy
    # machine) to see it come up before it goes: at 2 s the first look could miss it.
    short = {"RAGWRIGHT_COMMAND_KEEP_WARM": "8"}
    _ragwright("search", "drain", home=home, check=True, **short)
    give_up = time.monotonic() + CHILD_TIMEOUT
    pid = None
    while time.monotonic() < give_up:
        found = _warm(home, **short)
        if found is None and pid is not None:
            break
        if found is not None:
            pid = int(found["pid"])
        time.sleep(0.2)
    assert pid is not None, "no warm command process came up"
    assert _warm(home, **short) is None
    give_up = time.monotonic() + 10
    while alive(pid) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.slow
def test_ctrl_c_interrupts_the_command_in_the_warm_process(home: Path) -> None:
    def reply(evidence: list[dict[str, Any]]) -> dict[str, Any]:
        return {"status": "answered", "answer": "x", "sourceIds": [evidence[0]["id"]]}

    with scripted_openai(reply, delay=300.0) as (base_url, requests):
        env = WARM | {
            "RAGWRIGHT_CHAT_PROVIDER": "openai",
            "RAGWRIGHT_CHAT_MODEL": "scripted",
            "RAGWRIGHT_CHAT_BASE_URL": base_url,
            "RAGWRIGHT_CHAT_RETRIES": "1",
            "RAGWRIGHT_CHAT_MAX_ATTEMPTS": "1",
        }
        _ragwright("search", "drain", home=home, check=True, **env)
        warm = _wait_for_warm(home, **env)
        command = subprocess.Popen(
            [sys.executable, "-m", "ragwright", "ask", QUESTION, "--style", "generated"],
            env={**os.environ, "RAGWRIGHT_HOME": str(home), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        give_up = time.monotonic() + CHILD_TIMEOUT
        while not requests and time.monotonic() < give_up:  # the model call has begun
            time.sleep(0.05)
        assert requests, "the ask never reached the model"
        busy = _warm(home, **env)
        assert busy is not None and busy["busy"] is True
        command.send_signal(signal.SIGINT)
        command.communicate(timeout=120)  # not the model's 300 s
        assert command.returncode == 130  # as Typer ends an interrupted command
        idle = _warm(home, **env)
        assert idle is not None and idle["pid"] == warm["pid"] and idle["busy"] is False
        _ragwright("model", "stop", home=home, check=True, **env)


def _with_reader_gone(*args: str, home: Path, env: dict[str, str]) -> tuple[int, str]:
    """``ragwright ARGS`` writing into a pipe whose reader has already gone (as after
    ``| head -1``): its exit status and stderr."""
    read, write = os.pipe()
    os.close(read)
    try:
        command = subprocess.Popen(
            [sys.executable, "-m", "ragwright", *args],
            env={**env, "RAGWRIGHT_HOME": str(home)},
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write)
    _, stderr = command.communicate(timeout=CHILD_TIMEOUT)
    return command.returncode, stderr


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_a_reader_gone_ends_the_command_as_it_ends_a_process_of_its_own(
    home: Path, unbuffered: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    search = ("search", "drain", "--k", "2")
    alone = _with_reader_gone(*search, home=home, env=env)  # KEEP_WARM=0 from the suite
    warm_env = env | WARM
    _with_reader_gone(*search, home=home, env=warm_env)  # starts the warm process

    def status(*args: str) -> dict[str, Any] | None:
        # exactly this environment: ragwright_process would add the suite's own back
        shown = subprocess.run(
            [sys.executable, "-m", "ragwright", "model", *args, "--json"],
            env={**warm_env, "RAGWRIGHT_HOME": str(home)},
            capture_output=True,
            text=True,
            check=True,
            timeout=CHILD_TIMEOUT,
        )
        return json.loads(shown.stdout).get("command_process")  # type: ignore[no-any-return]

    give_up = time.monotonic() + CHILD_TIMEOUT
    while not ((found := status("status")) and found["ready"]):
        assert time.monotonic() < give_up, "no warm command process came up"
        time.sleep(0.2)
    warm = _with_reader_gone(*search, home=home, env=warm_env)
    served = status("status")
    assert served is not None and served["served"] == 1
    assert warm[0] == alone[0] != 0  # 120 buffered (the exit's flush), 1 unbuffered
    assert ("BrokenPipeError" in warm[1]) == ("BrokenPipeError" in alone[1])
    status("stop")


@pytest.mark.slow
def test_help_neither_uses_nor_starts_a_warm_process(home: Path) -> None:
    shown = _ragwright("ask", "--help", home=home, check=True)
    assert "RAGWRIGHT_COMMAND_KEEP_WARM" in shown.stdout
    assert _warm(home) is None
