"""The warm process: ``python -m ragwright.warm.server DIGEST --idle-timeout SECONDS``.

Binds its socket before importing the application, so a second process started for the
same context exits at once; then imports and builds what it keeps (the embedding
model's session, the token table), and runs the commands handed to it one at a time in
its main thread (where Python delivers Ctrl-C), each with the caller's descriptors,
environment and directory in place of its own. It exits after ``idle_timeout`` seconds
without a command, on ``ragwright model stop``, or when a command's settings no longer
want it (``RAGWRIGHT_COMMAND_KEEP_WARM=0`` in ``ragwright.toml``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from ragwright.warm.context import address

Runner = Callable[[list[str]], int]
# How long the loop waits for a command the acceptor took just as the process decided to
# end (its request is read already; only the hand-over to the queue is left).
_ACCEPTING_SECONDS = 10.0


@dataclass
class _Job:
    connection: socket.socket
    arguments: list[str]
    environ: dict[str, str]
    cwd: str
    descriptors: list[int]


@dataclass
class WarmServer:
    """Serves commands on ``listener`` with ``run`` (``ragwright.cli.common.run``)."""

    listener: socket.socket
    idle_timeout: float
    run: Runner
    keep_wanted: Callable[[], bool] = lambda: True
    """Asked after each command: False ends the process (the settings turned it off)."""
    owner: int = field(default_factory=os.getuid)
    """The only user whose connections are served."""
    targets: tuple[int, int, int] = (0, 1, 2)
    """The descriptors a command's standard streams take the place of (a process's own;
    tests running the server in a thread give others, leaving the test process's alone)."""
    started_at: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    served: int = 0
    ready: bool = False
    """Whether the warm-up has ended (a command handed over before waits for it)."""
    home: str | None = None
    """The home the settings pointed at when it started (``model stop --all`` matches it)."""
    _jobs: queue.Queue[_Job | None] = field(default_factory=queue.Queue)
    _busy: threading.Lock = field(default_factory=threading.Lock)
    _running_job: _Job | None = None
    """The command running now (None between commands)."""
    _stopping: bool = False

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "last_used": self.last_used,
            "idle_timeout": self.idle_timeout,
            "served": self.served,
            "busy": self._busy.locked(),
            "ready": self.ready,
            "home": self.home,
        }

    def serve(self, warm_up: Callable[[], str | None] = lambda: None) -> None:
        """Accept in a thread, warm up, then run commands until idle or stopped."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._interrupted)
        threading.Thread(target=self._accept, name="warm-accept", daemon=True).start()
        with contextlib.suppress(Exception):  # a broken setting: the commands report it
            self.home = warm_up()
        self.ready = True
        self.last_used = time.time()
        ending = False
        while True:
            remaining = self.last_used + self.idle_timeout - time.time()
            if ending or remaining <= 0:
                if self._close_doors():
                    break
                remaining = _ACCEPTING_SECONDS  # one was accepted meanwhile: run it
            try:
                job = self._jobs.get(timeout=remaining)
            except queue.Empty:
                continue
            if job is None:
                break
            code = 1
            try:
                code = self._execute(job)
            except Exception:  # the process's own fault, not the command's: it goes on
                traceback.print_exc()
            finally:
                self.last_used = time.time()
                ending = self._stopping or not self.keep_wanted()
                # Free before the caller hears the status, so the command it runs next
                # finds this process free, not busy.
                self._busy.release()
            with contextlib.suppress(OSError):
                job.connection.sendall(json.dumps({"exit": code}).encode() + b"\n")
            job.connection.close()
        # shutdown() wakes the acceptor blocked in accept(); close() alone would not, and
        # the address would stay taken until the process exits.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()

    def _close_doors(self) -> bool:
        """Accept nothing more; True when no command was accepted before that (the
        process may end), False when one was and is on its way to the queue."""
        self._stopping = True
        return self._busy.acquire(blocking=False)  # held for good: nothing more runs

    # -- the acceptor thread ----------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # the listener closed: the process is ending
                return
            try:
                self._greet(connection)
            except (OSError, ValueError):
                connection.close()

    def _greet(self, connection: socket.socket) -> None:
        connection.settimeout(10.0)
        credentials = connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
        if struct.unpack("3i", credentials)[1] != self.owner:
            connection.close()  # only this user's commands (the address is public)
            return
        first, descriptors, _, _ = socket.recv_fds(connection, 1, 3)
        try:
            if first in (b"S", b"Q"):
                connection.sendall(json.dumps(self.status()).encode() + b"\n")
                connection.close()
                if first == b"Q":
                    self._stopping = True
                    self._jobs.put(None)
                return
            if first != b"R" or len(descriptors) != 3:
                connection.close()
                return
            request = json.loads(connection.makefile("rb").readline())
            if self._stopping or not self._busy.acquire(blocking=False):
                connection.sendall(b'{"accepted": false, "reason": "busy"}\n')
                connection.close()
                return
            try:
                # A caller that gave up waiting has closed its end: this fails (EPIPE)
                # and the command is not run twice.
                connection.sendall(b'{"accepted": true}\n')
            except OSError:
                self._busy.release()
                raise
        except BaseException:
            for descriptor in descriptors:
                os.close(descriptor)
            raise
        connection.settimeout(None)
        self._jobs.put(
            _Job(
                connection,
                list(request["argv"]),
                dict(request["env"]),
                str(request["cwd"]),
                descriptors,
            )
        )

    # -- the main thread --------------------------------------------------------------

    def _execute(self, job: _Job) -> int:
        """Run one command in the caller's place; its exit status."""
        code = 1
        with _in_callers_place(job, self.targets):
            self._running_job = job
            try:
                threading.Thread(
                    target=self._watch,
                    args=(job, threading.get_ident()),
                    name="warm-watch",
                    daemon=True,
                ).start()
                try:
                    code = self.run(job.arguments)
                finally:
                    self._running_job = None
            except KeyboardInterrupt:  # arrived as the command ended
                self._running_job = None
                code = 130
            except Exception:  # what an uncaught error prints in a process of its own
                self._running_job = None
                traceback.print_exc()
                code = 1
            self.served += 1
            return _flush_at_exit(code)

    def _watch(self, job: _Job, main_thread: int) -> None:
        """Interrupt ``job``'s command when its caller asks (Ctrl-C) or goes away; never
        a later command (this caller closing its end after its exit status arrives is
        seen here while the next caller's command may already run)."""
        reader = job.connection.makefile("rb")
        while True:
            try:
                line = reader.readline()
            except (OSError, ValueError):
                line = b""
            if self._running_job is not job:
                return
            if not line or b"interrupt" in line:
                signal.pthread_kill(main_thread, signal.SIGINT)
            if not line:
                return

    def _interrupted(self, signum: int, frame: object) -> None:
        """SIGINT: a KeyboardInterrupt in the running command, ignored between commands."""
        if self._running_job is not None:
            raise KeyboardInterrupt


@contextlib.contextmanager
def _in_callers_place(job: _Job, targets: tuple[int, int, int]) -> Iterator[None]:
    """The caller's standard descriptors (on ``targets``), environment, directory and
    command line in place of this process's while the command runs; then its own again.
    The command gets streams of its own over those descriptors, buffered as a new
    process's would be and dropped after it (:func:`_streams`)."""
    saved_fds = [os.dup(target) for target in targets]
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    raws: list[io.FileIO] = []
    try:
        _flush()
        for target, descriptor in zip(targets, job.descriptors, strict=True):
            os.dup2(descriptor, target)
        os.environ.clear()
        os.environ.update(job.environ)
        (sys.stdin, sys.stdout, sys.stderr), raws = _streams(targets)
        os.chdir(job.cwd)
        sys.argv = ["ragwright", *job.arguments]
        yield
    finally:
        _flush()
        for raw in raws:
            raw.close()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for target, descriptor in zip(targets, saved_fds, strict=True):
            os.dup2(descriptor, target)
            os.close(descriptor)
        for descriptor in job.descriptors:
            os.close(descriptor)
        os.environ.clear()
        os.environ.update(saved_env)
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
        sys.argv = saved_argv


def _streams(
    targets: tuple[int, int, int] = (0, 1, 2),
) -> tuple[tuple[TextIO, TextIO, TextIO], list[io.FileIO]]:
    """Text streams over descriptors 0, 1 and 2 as Python sets up a new process's: the
    interpreter's encoding, stdout line-buffered on a terminal, stderr always, and no
    buffering at all under ``PYTHONUNBUFFERED``; and their raw files, which the command's
    end closes (the descriptors stay open: they are the caller's), so that nothing a
    stream still buffers is written later, when descriptor 1 is another caller's."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))  # the caller's, set by now
    encoding = sys.__stdout__.encoding if sys.__stdout__ else "utf-8"
    raws = [
        io.FileIO(descriptor, "r" if descriptor == targets[0] else "w", closefd=False)
        for descriptor in targets
    ]

    def writer(raw: io.FileIO, errors: str, lines: bool) -> TextIO:
        if unbuffered:  # as -u: no buffer under the text layer either
            return io.TextIOWrapper(raw, encoding, errors, write_through=True)
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding, errors, line_buffering=lines)

    reader = io.TextIOWrapper(io.BufferedReader(raws[0]), encoding)
    streams = (
        reader,
        writer(raws[1], "strict", os.isatty(targets[1])),
        writer(raws[2], "backslashreplace", True),
    )
    return streams, raws


def _flush_at_exit(code: int) -> int:
    """What the interpreter does with standard output at exit: flush it, and when that
    fails (a reader that has gone, as after ``| head``) say so on stderr and exit 120."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as error:
        with contextlib.suppress(Exception):
            print(f"Exception ignored in: {sys.stdout!r}", file=sys.stderr)
            print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 120
    return code


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _warm_up() -> str:
    """Import every command and build the parts kept between commands; the home."""
    from ragwright.cli import common  # noqa: F401  (every command module)
    from ragwright.runtime import RuntimeComponents
    from ragwright.runtime.kept import keep_across_commands
    from ragwright.settings import load_settings

    keep_across_commands()
    settings = load_settings()
    components = RuntimeComponents(settings)
    try:
        components.token_counter().count("warm")
        components.embedder().embed_query("warm")
    finally:
        components.close()
    return str(settings.storage.home.resolve())


def _keep_wanted() -> bool:
    from ragwright.settings import load_settings

    try:
        return load_settings().chat.command_keep_warm > 0
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description="A warm ragwright command process.")
    parser.add_argument("digest")
    parser.add_argument("--idle-timeout", type=float, required=True)
    # Shown by `ps` (the address is a digest); the context itself is in the digest.
    parser.add_argument("--directory")
    parser.add_argument("--home")
    arguments = parser.parse_args()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address(arguments.digest))
    except OSError:  # another process serves this context already
        return
    listener.listen(16)
    from ragwright.heap import fix_malloc_thresholds

    fix_malloc_thresholds()  # a long-lived process: freed large blocks go back
    # The acceptor answers while the warm-up imports the application.
    WarmServer(listener, arguments.idle_timeout, _run, keep_wanted=_keep_wanted).serve(_warm_up)


def _run(arguments: list[str]) -> int:
    from ragwright.cli.common import run

    return run(arguments)


if __name__ == "__main__":
    main()
