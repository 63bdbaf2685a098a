"""The command's side: hand a command to a warm process, start one, ask about one.

Standard library only (see :mod:`.context`).

The exchange over the socket, newline-delimited JSON after one first byte:

- ``R`` with the caller's descriptors 0, 1 and 2 attached (``SCM_RIGHTS``), then
  ``{"argv", "env", "cwd"}``. The process answers ``{"accepted": true}`` or
  ``{"accepted": false, "reason"}`` (busy with another command), and once the command
  has ended ``{"exit": N}``. While it runs, the caller may send ``{"op": "interrupt"}``
  (its Ctrl-C); closing the connection interrupts the command as well.
- ``S``: the process answers its status (pid, start, last use, idle timeout, commands
  served, busy).
- ``Q``: the process answers its status and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from ragwright.warm.context import address, context_digest

# Commands a warm process runs: they read the index and print, and are run often.
WARM_COMMANDS = frozenset({"ask", "search"})
CONNECT_TIMEOUT = 2.0  # for the reply to the first message; a command may then run long


class Context:
    """One caller's context: its environment and directory as they were at its start."""

    def __init__(self, environ: Mapping[str, str] | None = None, cwd: str | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.cwd = os.getcwd() if cwd is None else cwd
        self.digest = context_digest(self.environ, self.cwd)
        self.address = address(self.digest)


def _connect(context: Context | str) -> socket.socket | None:
    """A connection to the process at ``context``'s address (or that address itself)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.settimeout(CONNECT_TIMEOUT)
        connection.connect(context if isinstance(context, str) else context.address)
    except OSError:  # no process serves this context (refused), or it is stuck
        connection.close()
        return None
    return connection


def _read_message(reader: Any) -> dict[str, Any] | None:
    line = reader.readline()
    if not line:
        return None
    message = json.loads(line)
    return message if isinstance(message, dict) else None


def forward(
    arguments: list[str], context: Context, descriptors: tuple[int, int, int] = (0, 1, 2)
) -> int | None:
    """Run ``arguments`` in the warm process serving ``context``: its exit status, or
    None when there is no such process or it declined (the caller then runs the command
    itself). ``descriptors``: the command's standard input, output and error (this
    process's own by default). Ctrl-C while it runs interrupts the command there."""
    connection = _connect(context)
    if connection is None:
        return None
    with connection:
        try:
            socket.send_fds(connection, [b"R"], list(descriptors))
            request = {"argv": arguments, "env": context.environ, "cwd": context.cwd}
            connection.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
            reader = connection.makefile("rb")
            reply = _read_message(reader)
        except (OSError, ValueError):  # a closed descriptor, a process that just exited
            return None
        if not reply or not reply.get("accepted"):
            return None
        connection.settimeout(None)
        while True:
            try:
                done = _read_message(reader)
            except KeyboardInterrupt:
                with contextlib.suppress(OSError):
                    connection.sendall(b'{"op": "interrupt"}\n')
                continue
            except (OSError, ValueError):
                done = None
            if done is None or not isinstance(done.get("exit"), int):
                print(
                    "error: the warm command process ended during the command "
                    "(`ragwright model status`); run it again",
                    file=sys.stderr,
                )
                return 1
            return int(done["exit"])


def status(context: Context | str, *, stop: bool = False) -> dict[str, Any] | None:
    """The warm process serving ``context`` (or listening at that address; None when
    there is none); ``stop`` ends it."""
    connection = _connect(context)
    if connection is None:
        return None
    with connection:
        try:
            connection.sendall(b"Q" if stop else b"S")
            return _read_message(connection.makefile("rb"))
        except (OSError, ValueError):
            return None


def running() -> dict[int, str]:
    """This user's warm command processes, whatever context they serve: pid → address."""
    found = {}
    uid = os.getuid()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(os.path.join(entry.path, "cmdline"), "rb") as handle:
                    command = handle.read().split(b"\0")
            except OSError:
                continue
            if b"ragwright.warm.server" in command:
                at = command.index(b"ragwright.warm.server") + 1
                if at < len(command):
                    found[int(entry.name)] = address(command[at].decode(errors="replace"))
    return found


def of_home(home: str, *, stop: bool = False) -> list[dict[str, Any]]:
    """The statuses of this user's warm processes serving ``home`` (an absolute path),
    whatever directory or environment; ``stop`` ends each."""
    found = []
    for found_address in running().values():
        shown = status(found_address)
        if shown is None or shown.get("home") != home:
            continue
        if stop:
            status(found_address, stop=True)
        found.append(shown)
    return found


def start(context: Context, idle_timeout: float) -> subprocess.Popen[bytes]:
    """Start a warm process for ``context`` in the background (a second one for the same
    context finds the address taken and exits at once)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragwright.warm.server",
            context.digest,
            "--idle-timeout",
            str(idle_timeout),
            # For `ps` only: what the process serves (its address is a digest).
            "--directory",
            context.cwd,
            *(
                ("--home", context.environ["RAGWRIGHT_HOME"])
                if "RAGWRIGHT_HOME" in context.environ
                else ()
            ),
        ],
        env=context.environ,
        cwd=context.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the command, and its Ctrl-C
        close_fds=True,
    )
