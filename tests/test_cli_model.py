"""The local model kept warm between commands (RAGWRIGHT_CHAT_KEEP_WARM): the first
``ask`` starts a background process, the next reuses it, ``model status`` shows it,
``model stop`` ends it, and it exits by itself after its idle timeout. Each command is
its own process, as a user runs them: what is tested is how long the model process
outlives the command that started it, and that no other user of the machine can use
it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ragwright.adapters.chatmodels.local import GGUF_NAME
from ragwright.adapters.chatmodels.resident import (
    LEASE,
    LOG,
    STATE,
    read_resident,
    stop_resident,
    touch_lease,
)
from ragwright.processes import alive
from tests.cli import copy_home
from tests.cli import ragwright_process as ragwright

QUESTION = ("ask", "How long do refunds take?", "--type", "note", "--json")


def _status(home: Path) -> dict[str, object]:
    """``model status --json`` without the pids of warm command processes of other
    contexts (other tests' among them)."""
    status = json.loads(ragwright("model", "status", "--json", home=home, check=True).stdout)
    assert isinstance(status.pop("other_command_processes"), list)
    return status  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_second_ask_reuses_the_background_model_until_it_is_stopped(
    indexed_home: Path,
) -> None:
    assert _status(indexed_home) == {"running": False, "command_process": None}
    first = json.loads(ragwright(*QUESTION, home=indexed_home, check=True).stdout)
    assert first["provider"] == "local"
    started = _status(indexed_home)
    assert started["running"] is True
    pid = started["pid"]
    assert isinstance(pid, int) and alive(pid)
    second = json.loads(ragwright(*QUESTION, home=indexed_home, check=True).stdout)
    # The same process answered (greedy decoding: the same answer), no new start.
    assert second["answer"] == first["answer"]
    assert _status(indexed_home)["pid"] == pid
    stopped = json.loads(ragwright("model", "stop", "--json", home=indexed_home).stdout)
    assert stopped == {"stopped": True, "pid": pid, "command_process_pid": None}
    assert _status(indexed_home) == {"running": False, "command_process": None}
    assert not alive(pid)
    assert not (indexed_home / "models" / STATE).exists()


def _threads_of(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


@pytest.mark.slow
def test_the_background_model_computes_with_the_configured_threads(
    indexed_home: Path,
) -> None:
    # RAGWRIGHT_CHAT_THREADS reaches llama.cpp: after an answer the process holds one
    # compute thread more with 2 than with 1 (its other threads do not depend on it),
    # and a command asking for another count replaces the running model.
    one = json.loads(
        ragwright(*QUESTION, home=indexed_home, check=True, RAGWRIGHT_CHAT_THREADS="1").stdout
    )
    first = _status(indexed_home)
    assert first["threads"] == 1
    with_one = _threads_of(int(first["pid"]))  # type: ignore[call-overload]
    two = json.loads(
        ragwright(*QUESTION, home=indexed_home, check=True, RAGWRIGHT_CHAT_THREADS="2").stdout
    )
    second = _status(indexed_home)
    assert second["threads"] == 2 and second["pid"] != first["pid"]
    assert not alive(int(first["pid"]))  # type: ignore[call-overload]
    assert _threads_of(int(second["pid"])) == with_one + 1  # type: ignore[call-overload]
    assert two["answer"] == one["answer"]  # the same greedy answer either way
    ragwright("model", "stop", home=indexed_home, check=True)


def _background_processes(cache: Path) -> list[int]:
    """Pids of the background model processes serving ``cache``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                b"ragwright.adapters.chatmodels.resident" in command
                and str(cache).encode() in command
            ):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_the_background_model_exits_by_itself_after_its_idle_timeout(
    indexed_home: Path,
) -> None:
    cache = indexed_home / "models"
    ragwright(*QUESTION, home=indexed_home, check=True, RAGWRIGHT_CHAT_KEEP_WARM="2")
    # It was started (its log exists), and with a 2 s timeout it ends soon after the
    # command (maybe already): wait for that, bounded against a hang.
    assert (cache / LOG).exists()
    give_up = time.monotonic() + 120
    while _background_processes(cache) and time.monotonic() < give_up:
        time.sleep(0.2)
    assert _background_processes(cache) == []
    assert read_resident(cache) is None
    assert not (cache / STATE).exists()


@pytest.mark.slow
def test_keep_warm_zero_starts_the_model_inside_the_command_only(
    indexed_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    copy_home(indexed_home, home)
    ragwright(*QUESTION, home=home, check=True, RAGWRIGHT_CHAT_KEEP_WARM="0")
    # The model ran in the command (its verified file is in the cache) and nothing was
    # started beside it.
    assert (home / "models" / GGUF_NAME).exists()
    assert not (home / "models" / LOG).exists()
    assert _background_processes(home / "models") == []
    assert _status(home) == {"running": False, "command_process": None}


NOBODY = 65534
# What another user tries (stdlib only: it runs as NOBODY, who cannot read this venv):
# the record, then the server's routes without a key. Prints what each gave.
PROBE = """
import json, sys, urllib.error, urllib.request
record, base = sys.argv[1], sys.argv[2]
seen = {}
try:
    open(record).read()
    seen["record"] = "read"
except OSError as error:
    seen["record"] = type(error).__name__
chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
routes = [
    ("GET", "/v1/models", None), ("GET", "/props", None), ("GET", "/slots", None),
    ("GET", "/health", None), ("POST", "/v1/chat/completions", chat),
    ("POST", "/completion", {"prompt": "hi", "n_predict": 1}),
    ("POST", "/tokenize", {"content": "hi"}),
]
for method, path, body in routes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            seen[path] = [response.status, response.read().decode()]
    except urllib.error.HTTPError as error:
        seen[path] = [error.code, None]
print(json.dumps(seen))
"""


def _as_nobody(*args: str) -> dict[str, object]:
    result = subprocess.run(
        [shutil.which("python3", path="/usr/bin:/bin") or "python3", "-c", PROBE, *args],
        capture_output=True,
        text=True,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="runs a probe as uid 65534: needs root")
def test_another_user_gets_nothing_from_the_background_model(indexed_home: Path) -> None:
    # A home others may pass through (0755, as a home directory usually is): the
    # background model's port is reachable by any user, its key readable only by us.
    shared = Path(tempfile.mkdtemp(prefix="ragwright-shared-"))
    home = copy_home(indexed_home, shared / "home")
    for folder in (shared, home):
        os.chmod(folder, 0o755)
    cache = home / "models"
    try:
        answer = json.loads(ragwright(*QUESTION, home=home, check=True).stdout)
        assert answer["provider"] == "local"  # our own command sent the key
        running = read_resident(cache)
        assert running is not None
        seen = _as_nobody(str(cache / STATE), running.base_url)
        assert seen.pop("record") == "PermissionError"
        assert oct(cache.stat().st_mode & 0o777) == "0o700"
        assert oct((cache / STATE).stat().st_mode & 0o777) == "0o600"
        # /health is public in llama.cpp, and says only that it is up.
        assert seen.pop("/health") == [200, '{"status":"ok"}']
        assert seen == {
            path: [401, None]
            for path in (
                "/v1/models",
                "/props",
                "/slots",
                "/v1/chat/completions",
                "/completion",
                "/tokenize",
            )
        }
    finally:
        stop_resident(cache)
        shutil.rmtree(shared)


def test_a_record_whose_process_is_gone_is_not_a_running_model(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    cache.mkdir()
    # A pid no process has: the record of a background model that was killed.
    (cache / STATE).write_text(
        json.dumps(
            {
                "pid": 2**22 + 17,
                "base_url": "http://127.0.0.1:9",
                "model_sha256": "x",
                "context_tokens": 4096,
                "idle_timeout": 600,
                "started_at": 0,
            }
        ),
        "utf-8",
    )
    touch_lease(cache, time.time())
    assert read_resident(cache) is None
    assert _status(tmp_path) == {"running": False, "command_process": None}
    (cache / LEASE).unlink()


def test_stop_without_a_background_model_says_so(tmp_path: Path) -> None:
    result = ragwright("model", "stop", home=tmp_path, check=True)
    assert result.stdout.splitlines() == [
        "background model: not running",
        "warm command process: not running",
    ]
