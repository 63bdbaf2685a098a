"""The local model kept warm between commands: one background llama.cpp process per home.

Starting the embedded model costs a command most of its time (loading 463 MiB of
weights, the server's start, a cold prompt cache), and a person who asks twice pays it
twice. The first command that needs the model starts ``python -m
ragwright.adapters.chatmodels.resident`` detached from it; the process serves llama.cpp's
OpenAI-compatible API on 127.0.0.1 and a free port, records where in ``resident.json``
(pid, address, the key its server requires, model digest) in the model cache directory,
and exits once no command has used it for ``idle_timeout`` seconds. Later commands find
it there and skip the start.

Any user of the machine can reach a loopback port, so the server requires a key made
for each start (:class:`~ragwright.adapters.chatmodels.local.LocalModelServer`), and
only its owner can read the key: every command that needs the model makes the cache
directory owner-only (0700), and the record is created 0600. A record without a key
(written before keys) names a server anyone can use: the next command replaces it.

Use is recorded in the modification time of ``resident.lease``: a caller sets it to the
end of its call's deadline before the call (so a long answer is never cut off as idle)
and to now after it; the process exits when the lease is older than the timeout. A
lock file serialises starts, so two commands at once start one process. A record whose
process is gone or does not answer ``/health`` is stale: the next command replaces it.
``ragwright model status`` and ``ragwright model stop`` show and end the process.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ragwright.adapters.chatmodels.local import (
    GGUF_SHA256,
    LocalChatModel,
    LocalModelServer,
    _require_schema,
    assemble_model,
)
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.processes import alive
from ragwright.stages import announce

STATE = "resident.json"
LEASE = "resident.lease"
LOCK = "resident.lock"
LOG = "resident.log"
# How long a command waits for a new process to answer /health (assembly on a fresh cache
# hashes 463 MiB; a loaded 2-core machine loads the weights slowly).
START_WAIT = 120.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResidentModel:
    """A running background model, as its record and lease describe it."""

    pid: int
    base_url: str
    model_sha256: str
    context_tokens: int
    idle_timeout: float
    started_at: float
    threads: int | None
    """The threads it computes with (``RAGWRIGHT_CHAT_THREADS``); None: llama.cpp's default."""
    last_used: float
    api_key: str | None = field(repr=False)
    """The key its server requires; None: a record written before keys (replaced)."""

    def idle_seconds(self, now: float) -> float:
        return max(0.0, now - self.last_used)

    def busy(self, now: float) -> bool:
        """Whether a command's call is in flight (its lease runs to that call's deadline)."""
        return self.last_used > now


def read_resident(cache_dir: Path) -> ResidentModel | None:
    """The recorded process if its record parses and the process is alive, else None."""
    try:
        data = json.loads((cache_dir / STATE).read_text("utf-8"))
        pid = int(data["pid"])
        os.kill(pid, 0)
        lease = (cache_dir / LEASE).stat().st_mtime
        return ResidentModel(
            pid=pid,
            base_url=str(data["base_url"]),
            model_sha256=str(data["model_sha256"]),
            context_tokens=int(data["context_tokens"]),
            idle_timeout=float(data["idle_timeout"]),
            started_at=float(data["started_at"]),
            # A record written before the setting existed: llama.cpp's default.
            threads=None if data.get("threads") is None else int(data["threads"]),
            last_used=lease,
            api_key=None if data.get("api_key") is None else str(data["api_key"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def answers(resident: ResidentModel, timeout: float = 2.0) -> bool:
    """Whether the process's server answers ``/health``."""
    try:
        return httpx.get(f"{resident.base_url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def touch_lease(cache_dir: Path, until: float) -> None:
    """Record use of the background model up to ``until`` (epoch seconds)."""
    lease = cache_dir / LEASE
    lease.touch(exist_ok=True)
    os.utime(lease, (until, until))


def _owner_only(cache_dir: Path) -> None:
    """Create ``cache_dir`` or take an existing one (an older version left it 0755) to
    0700: the record in it holds the key to the model server."""
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(cache_dir, 0o700)


def _write_state(cache_dir: Path, record: dict[str, object]) -> None:
    """Write the record atomically, 0600 from its creation (never readable by others
    while it is written, whatever the umask)."""
    _owner_only(cache_dir)
    state = cache_dir / STATE
    temporary = state.with_suffix(f".tmp-{os.getpid()}")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    temporary.replace(state)


@contextlib.contextmanager
def _start_lock(cache_dir: Path) -> Iterator[None]:
    _owner_only(cache_dir)
    with (cache_dir / LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_resident(
    cache_dir: Path,
    *,
    context_tokens: int,
    idle_timeout: float,
    threads: int | None = None,
    wait: float = START_WAIT,
    expected_sha256: str = GGUF_SHA256,
) -> ResidentModel:
    """The running background model for ``cache_dir``, started when there is none (or the
    recorded one is gone, answers nothing, requires no key, or runs another model,
    context size or number of threads).

    Raises:
        ChatError: the process did not come up within ``wait`` seconds, or exited (the
            last line of its log says why); category ``transient``.
    """
    with _start_lock(cache_dir):
        found = read_resident(cache_dir)
        if found is not None and found.api_key is None:
            stop_resident(cache_dir)  # anyone on the machine can use it
        elif found is not None and answers(found):
            same_model = (found.model_sha256, found.context_tokens) == (
                expected_sha256,
                context_tokens,
            )
            if same_model and found.threads == threads:
                touch_lease(cache_dir, time.time())
                return found
            if same_model and found.busy(time.time()):
                # Only the thread count differs and another command's call is in flight
                # (its lease runs to its deadline): the same answers, at another speed;
                # replacing the process now would cut that answer off.
                return found
            stop_resident(cache_dir)
        touch_lease(cache_dir, time.time())
        announce("start-model")
        with (cache_dir / LOG).open("ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ragwright.adapters.chatmodels.resident",
                    str(cache_dir),
                    "--context-tokens",
                    str(context_tokens),
                    "--idle-timeout",
                    str(idle_timeout),
                    *(() if threads is None else ("--threads", str(threads))),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # outlives the command, and its Ctrl-C
                close_fds=True,
            )
        give_up = time.monotonic() + wait
        while time.monotonic() < give_up:
            if process.poll() is not None:
                raise ChatError(
                    "local",
                    FailureCategory.TRANSIENT,
                    f"the background model exited at start ({_last_line(cache_dir / LOG)})",
                )
            found = read_resident(cache_dir)
            if found is not None and found.pid == process.pid and answers(found):
                announce("generate")  # the call that needed the model goes on
                return found
            time.sleep(0.1)
        process.kill()
        raise ChatError(
            "local", FailureCategory.TRANSIENT, f"the background model did not start in {wait} s"
        )


def stop_resident(cache_dir: Path, wait: float = 30.0) -> ResidentModel | None:
    """End the recorded background model (SIGTERM, then SIGKILL after ``wait`` seconds);
    the process it stopped, or None when none was running."""
    found = read_resident(cache_dir)
    if found is None:
        (cache_dir / STATE).unlink(missing_ok=True)
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up and alive(found.pid):
        time.sleep(0.05)
    if alive(found.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(found.pid, signal.SIGKILL)
    (cache_dir / STATE).unlink(missing_ok=True)
    return found


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no log"


class BackgroundLocalModel:
    """The local model served by the background process (started on the first call).

    The same contract as :class:`~ragwright.adapters.chatmodels.local.OnDemandLocalModel`:
    schema-constrained requests only, nothing started before a call. ``close()`` closes
    this command's connections and leaves the process running for the next command.
    """

    def __init__(
        self,
        cache_dir: Path,
        *,
        idle_timeout: float,
        context_tokens: int = 4096,
        threads: int | None = None,
        name: str = "local",
    ) -> None:
        self.name = name
        self._cache_dir = cache_dir
        self._idle_timeout = idle_timeout
        self._context_tokens = context_tokens
        self._threads = threads
        self._client: LocalChatModel | None = None
        self._lock = threading.Lock()

    def _model(self) -> LocalChatModel:
        with self._lock:
            if self._client is None:
                resident = ensure_resident(
                    self._cache_dir,
                    context_tokens=self._context_tokens,
                    idle_timeout=self._idle_timeout,
                    threads=self._threads,
                )
                self._client = LocalChatModel(resident, name=self.name)
            return self._client

    def _lease(self, deadline: Deadline | None) -> None:
        now = time.time()
        held = 0.0 if deadline is None else max(0.0, deadline.remaining())
        touch_lease(self._cache_dir, now + held)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        _require_schema(self.name, request)
        model = self._model()
        self._lease(deadline)
        try:
            return await model.complete(request, deadline)
        except ChatError as error:
            self._forget_if_gone(error)
            raise
        finally:
            self._lease(None)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        _require_schema(self.name, request)
        model = self._model()
        self._lease(deadline)
        try:
            async for update in model.stream(request, deadline):
                yield update
        except ChatError as error:
            self._forget_if_gone(error)
            raise
        finally:
            self._lease(None)

    def _forget_if_gone(self, error: ChatError) -> None:
        # The process may have reached its idle timeout between our start and this call
        # (or been stopped): the next attempt (the retry layer's) starts a new one.
        if error.category is FailureCategory.TRANSIENT and read_resident(self._cache_dir) is None:
            with self._lock:
                self._client = None

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(RuntimeError):
                await client.close()


def serve_resident(
    cache_dir: Path, *, context_tokens: int, idle_timeout: float, threads: int | None = None
) -> None:
    """The background process's body: serve until idle for ``idle_timeout`` s or SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    path = assemble_model(cache_dir)
    server = LocalModelServer(path, context_tokens=context_tokens, threads=threads)
    state = cache_dir / STATE
    try:
        _write_state(
            cache_dir,
            {
                "pid": os.getpid(),
                "base_url": server.base_url,
                "api_key": server.api_key,
                "model_sha256": GGUF_SHA256,
                "context_tokens": context_tokens,
                "idle_timeout": idle_timeout,
                "threads": threads,
                "started_at": time.time(),
            },
        )
        touch_lease(cache_dir, time.time())
        check = min(5.0, max(0.2, idle_timeout / 4))
        while not stop.wait(check):
            try:
                last_used = (cache_dir / LEASE).stat().st_mtime
            except OSError:
                break
            if time.time() - last_used > idle_timeout:
                break
    finally:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads(state.read_text("utf-8"))["pid"] == os.getpid():
                state.unlink()
        server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ragwright's background local model")
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("--context-tokens", type=int, required=True)
    parser.add_argument("--idle-timeout", type=float, required=True)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    serve_resident(
        args.cache_dir,
        context_tokens=args.context_tokens,
        idle_timeout=args.idle_timeout,
        threads=args.threads,
    )


if __name__ == "__main__":
    main()
