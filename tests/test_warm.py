"""The warm command process's parts (ragwright.warm), in this process with a recording
runner in place of the command line: what a command is handed, one command at a time,
only its owner's connections, stop and idle exit, and what names a context."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragwright.warm import client
from ragwright.warm.client import Context, forward, status
from ragwright.warm.context import code_fingerprint, context_digest
from ragwright.warm.server import WarmServer


@dataclass
class Recorder:
    """A runner that records what each command saw and waits for ``release``."""

    code: int = 7
    seen: list[tuple[list[str], str | None, str, list[str]]] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __call__(self, arguments: list[str]) -> int:
        self.seen.append((arguments, os.environ.get("WARM_PROBE"), os.getcwd(), sys.argv))
        self.started.set()
        assert self.release.wait(30)
        return self.code


@pytest.fixture
def context(tmp_path: Path) -> Context:
    caller = tmp_path / "caller"
    caller.mkdir()
    return Context({"WARM_PROBE": "one", "PATH": os.environ["PATH"]}, str(caller))


@pytest.fixture
def serving(context: Context) -> Iterator[tuple[WarmServer, Recorder, threading.Thread]]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(context.address)
    listener.listen(4)
    recorder = Recorder()
    # Descriptors of the test's own stand in for 0, 1 and 2: a pytest-xdist worker talks
    # to its controller over its real ones.
    with open(os.devnull, "r+") as null:
        targets = (os.dup(null.fileno()), os.dup(null.fileno()), os.dup(null.fileno()))
    server = WarmServer(listener, idle_timeout=60, run=recorder, targets=targets)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    yield server, recorder, thread
    recorder.release.set()
    status(context, stop=True)
    thread.join(10)
    for descriptor in targets:
        os.close(descriptor)


def test_a_command_runs_with_the_callers_arguments_environment_and_directory(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context, tmp_path: Path
) -> None:
    _, recorder, _ = serving
    recorder.release.set()
    assert forward(["ask", "why?"], context) == 7  # the runner's exit status
    caller = str(tmp_path / "caller")
    assert recorder.seen == [(["ask", "why?"], "one", caller, ["ragwright", "ask", "why?"])]
    # and the server's own environment and directory are back
    assert os.environ.get("WARM_PROBE") is None and os.getcwd() == str(tmp_path)
    assert status(context)["served"] == 1  # type: ignore[index]


def test_a_command_arriving_while_another_runs_is_declined(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    _, recorder, _ = serving
    codes: list[int | None] = []
    first = threading.Thread(target=lambda: codes.append(forward(["ask", "a"], context)))
    first.start()
    assert recorder.started.wait(30)
    assert status(context)["busy"] is True  # type: ignore[index]
    assert forward(["ask", "b"], context) is None  # the caller runs it itself
    recorder.release.set()
    first.join(30)
    assert codes == [7]
    assert [seen[0] for seen in recorder.seen] == [["ask", "a"]]


def test_connections_of_another_user_get_nothing(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    server, recorder, _ = serving
    server.owner = os.getuid() + 1
    recorder.release.set()
    assert status(context) is None
    assert forward(["ask", "a"], context) is None
    assert recorder.seen == []
    server.owner = os.getuid()  # so that the fixture can stop it


def test_stop_ends_the_process_and_no_process_means_none(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    _, _, thread = serving
    assert status(context, stop=True)["served"] == 0  # type: ignore[index]
    thread.join(10)
    assert not thread.is_alive()
    assert status(context) is None
    assert forward(["ask", "a"], context) is None


def test_the_process_ends_after_its_idle_timeout(context: Context) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(context.address)
    listener.listen(4)
    server = WarmServer(listener, idle_timeout=0.3, run=Recorder(), targets=(-1, -1, -1))
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    serving.join(60)  # a bound against a hang, not a speed check
    assert not serving.is_alive()  # it returned by itself
    assert status(context) is None


def test_a_context_is_its_environment_directory_and_code(tmp_path: Path) -> None:
    base = {"RAGWRIGHT_HOME": "/h", "PATH": "/bin"}
    digest = context_digest(base, "/work")
    assert context_digest(dict(base), "/work") == digest
    assert context_digest(base | {"RAGWRIGHT_RRF_K": "30"}, "/work") != digest
    assert context_digest(base | {"RAGWRIGHT_HOME": "/other"}, "/work") != digest
    assert context_digest(base, "/elsewhere") != digest
    # what a terminal sets does not change the context
    assert context_digest(base | {"TERM": "xterm", "COLUMNS": "80", "SSH_TTY": "x"}, "/work") == (
        digest
    )
    # a changed file of the code does
    package = tmp_path / "package"
    (package / "sub").mkdir(parents=True)
    module = package / "sub" / "m.py"
    module.write_text("x = 1\n")
    before = code_fingerprint(package)
    assert code_fingerprint(package) == before
    module.write_text("x = 22\n")
    assert code_fingerprint(package) != before
    assert context_digest(base, "/work", code_fingerprint(package)) != context_digest(
        base, "/work", before
    )


def test_a_warm_process_keeps_the_embedder_and_token_table_and_no_other_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ragwright.runtime import RuntimeComponents, kept
    from ragwright.settings import Settings

    settings = Settings(home=tmp_path / "home")
    one, two = RuntimeComponents(settings), RuntimeComponents(settings)
    assert one.embedder() is not two.embedder()
    assert one.token_counter() is not two.token_counter()
    monkeypatch.setattr(kept, "_kept", None)  # this test's own keeping, undone after it
    kept.keep_across_commands()
    three, four = RuntimeComponents(settings), RuntimeComponents(settings)
    assert three.embedder() is four.embedder()
    assert three.token_counter() is four.token_counter()
    # another configuration of the model is another part
    other = RuntimeComponents(Settings(home=tmp_path / "home", embedding_threads=1))
    assert other.embedder() is not three.embedder()
    assert kept.kept_count() == 3


def test_output_a_closed_pipe_refused_never_reaches_the_next_caller(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    server, recorder, _ = serving
    recorder.release.set()

    def prints(arguments: list[str]) -> int:
        print(f"output of {arguments[0]}", end="")  # held in the stream's buffer
        return 0

    server.run = prints
    with open(os.devnull) as stdin:
        gone_read, gone_write = os.pipe()
        os.close(gone_read)  # the first caller's reader has gone (`| head` ended)
        # as a process of its own: the flush at its end fails, exit 120
        assert forward(["first"], context, (stdin.fileno(), gone_write, gone_write)) == 120
        os.close(gone_write)
        read, write = os.pipe()
        assert forward(["second"], context, (stdin.fileno(), write, write)) == 0
        os.close(write)
        with os.fdopen(read) as output:
            assert output.read() == "output of second"


def test_another_file_mode_mask_is_another_context() -> None:
    base = {"PATH": "/bin"}
    digest = context_digest(base, "/work")
    before = os.umask(0o077)
    try:
        assert context_digest(base, "/work") != digest
    finally:
        os.umask(before)
    assert context_digest(base, "/work") == digest


def test_a_malformed_request_is_closed_and_the_process_serves_on(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    _, recorder, _ = serving
    recorder.release.set()
    for message in (b"X", b"R{not json}\n"):  # an unknown kind; a run without descriptors
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(10)
            connection.connect(context.address)
            connection.sendall(message)
            try:
                reply = connection.recv(100)
            except ConnectionResetError:  # closed with the request unread
                reply = b""
            assert reply == b""  # closed without a reply
    assert recorder.seen == []
    assert forward(["ask", "after"], context) == 7


class SlowRelease:
    """A lock whose release waits a little first: a window in which a caller told its
    status too early would find the process still busy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        return self._lock.acquire(blocking)

    def release(self) -> None:
        threading.Event().wait(0.3)
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


def test_the_process_is_free_again_before_its_caller_hears_the_status(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    # A caller's next command follows its exit at once (a script of asks): it must be
    # handed over, not declined as busy and run in a process of its own.
    server, recorder, _ = serving
    server._busy = SlowRelease()  # type: ignore[assignment]
    recorder.release.set()
    assert forward(["first"], context) == 7
    assert forward(["second"], context) == 7
    assert [seen[0] for seen in recorder.seen] == [["first"], ["second"]]


def test_a_command_accepted_as_the_process_decides_to_end_still_runs(
    serving: tuple[WarmServer, Recorder, threading.Thread], context: Context
) -> None:
    # The settings turn keeping off after the first command; a second command is
    # accepted in the moment between the first one's end and the process closing its
    # doors. It was accepted, so it runs there; the process ends after it.
    server, recorder, thread = serving
    recorder.release.set()
    server.keep_wanted = lambda: False
    close_doors = server._close_doors
    results: list[int | None] = []
    second = threading.Thread(target=lambda: results.append(forward(["second"], context)))

    def accepted_first() -> bool:
        server._close_doors = close_doors  # type: ignore[method-assign]
        second.start()
        for _ in range(300):  # the acceptor holds the process for the second command
            if server._busy.locked():
                break
            threading.Event().wait(0.01)
        return close_doors()

    server._close_doors = accepted_first  # type: ignore[method-assign]
    assert forward(["first"], context) == 7
    thread.join(30)
    second.join(30)
    assert not thread.is_alive()
    assert results == [7]
    assert [seen[0] for seen in recorder.seen] == [["first"], ["second"]]


def test_a_caller_leaving_after_its_status_never_interrupts_the_next_command(
    serving: tuple[WarmServer, Recorder, threading.Thread],
    context: Context,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each command has a watcher that interrupts it when its caller goes away. The first
    # caller closes its end once its status arrives, and on a busy machine its watcher
    # may only see that while the second caller's command runs: it must then end, not
    # interrupt the second. Here the first caller's end is held open (a duplicate of its
    # descriptor) until the second command runs, then closed.
    server, _, _ = serving
    interrupts: list[int] = []
    held: list[int] = []
    connect = client._connect

    def connect_holding_the_first(target: Context | str) -> socket.socket | None:
        connection = connect(target)
        if connection is not None and not held:
            held.append(os.dup(connection.fileno()))
        return connection

    def runs(arguments: list[str]) -> int:
        if arguments == ["second"]:
            os.close(held.pop())  # the first caller is gone now, during this command
            threading.Event().wait(0.5)  # time for its watcher to see it
        return 0

    monkeypatch.setattr(client, "_connect", connect_holding_the_first)
    server.run = runs
    # The server runs in a thread here, so its interrupt would reach this main thread.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupts.append(signum))
    try:
        assert forward(["first"], context) == 0
        assert forward(["second"], context) == 0
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupts == []
