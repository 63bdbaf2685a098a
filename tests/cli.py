"""Running the ``ragwright`` command from tests: in this process (the default) or as a
child process (the end-to-end tests that need a real process: a crash, a kill, a
server, the README's commands).

In-process, a command is the real entry point, :func:`ragwright.cli.main`, with its
arguments in ``sys.argv``, its environment in ``os.environ`` and its output captured
(Click's test runner's isolation), so it exits, prints and reports errors exactly as
``python -m ragwright`` does; what it does not pay is a new interpreter and the imports
(several seconds a command on a loaded 2-core machine). What a fresh process would
start with is set for the call and restored after it: the environment, logging going
to stderr as Python's last-resort handler sends it (pytest's capture handlers and any
handler an earlier command added are set aside), and Python's default warning filters
(not the suite's "error").
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner

from tests.processes import CHILD_TIMEOUT

Result = subprocess.CompletedProcess[str]


def ragwright(*args: str, home: Path, check: bool = False, **env: str) -> Result:
    """``ragwright ARGS`` in this process with ``RAGWRIGHT_HOME=home`` and ``env``."""
    from ragwright.cli import main

    runner = CliRunner()
    environment = {"RAGWRIGHT_HOME": str(home), **env}
    with runner.isolation(env=environment) as (stdout, stderr, _), _fresh_process_state():
        code = _exit_status(main, args)
        if isinstance(code, BaseException):
            traceback.print_exception(code, file=sys.stderr)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        result = Result(
            ["ragwright", *args], code, stdout.getvalue().decode(), stderr.getvalue().decode()
        )
    # A command closes what it opened when it ends (cli/common.py), on success and on
    # error; an index dropped on an error path before its application held it keeps its
    # files open until collected, so a failed command's cycles go now, as they would with
    # the process. (A full collection costs 0.2-0.4 s in a test process: not after every
    # command.)
    if result.returncode != 0:
        gc.collect()
    return _checked(result, check)


def ragwright_process(*args: str, home: Path, check: bool = False, **env: str) -> Result:
    """``python -m ragwright ARGS`` as a child process, for the end-to-end tests."""
    environment = {**os.environ, "RAGWRIGHT_HOME": str(home), **env}
    result = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        timeout=CHILD_TIMEOUT,
    )
    return _checked(result, check)


def _exit_status(main: object, args: tuple[str, ...]) -> int | BaseException:
    """The status ``main`` exits with (0 when it returns), or the exception that would
    have ended the process with a traceback."""
    with mock.patch.object(sys, "argv", ["ragwright", *args]):
        try:
            main()  # type: ignore[operator]
        except SystemExit as done:
            if done.code is None or isinstance(done.code, int):
                return done.code or 0
            print(done.code, file=sys.stderr)
            return 1
        except Exception as error:  # an uncaught error: a traceback and exit 1
            return error
    return 0


def _checked(result: Result, check: bool) -> Result:
    if check and result.returncode != 0:
        # Show what the command said: a bare CalledProcessError hides the reason.
        pytest.fail(
            f"ragwright {' '.join(result.args[1:])} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


# A new interpreter's warning filters (python -W unset, not a debug build).
_DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


@contextmanager
def _fresh_process_state() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()  # with no handler, records go to logging.lastResort: stderr
    root.setLevel(logging.WARNING)
    # A command such as `serve` or `ingest-worker` adds its own handler and level to the
    # "ragwright" logger; a fresh process starts without them, and the next command run
    # here (or a service a later test runs in this process) must not write its lines
    # into that command's captured stderr.
    own = logging.getLogger("ragwright")
    own_handlers, own_level = own.handlers[:], own.level
    own.handlers.clear()
    own.setLevel(logging.NOTSET)
    # A new interpreter turns Ctrl-C into KeyboardInterrupt; a pytest-xdist worker
    # ignores SIGINT, and a command run here must see a Ctrl-C as the user's process would.
    main_thread = threading.current_thread() is threading.main_thread()
    interrupt = signal.getsignal(signal.SIGINT) if main_thread else None
    if main_thread:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_DEFAULT_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            yield
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, signal.SIG_DFL if interrupt is None else interrupt)
        root.handlers[:] = handlers
        root.setLevel(level)
        own.handlers[:] = own_handlers
        own.setLevel(own_level)


def write_tree(folder: Path, files: dict[str, str]) -> Path:
    """``folder`` with each (relative path, text) of ``files`` written (folders made)."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return folder


def copy_home(source: Path, target: Path) -> Path:
    """A copy of the home ``source`` at ``target`` that a test may write to, without its
    ``models`` (the local model's cache and the state of its background process)."""
    return copy_tree(source, target, ignore=shutil.ignore_patterns("models"))


def copy_tree(
    source: Path,
    target: Path,
    *,
    ignore: Callable[[str, list[str]], Iterable[str]] | None = None,
    dirs_exist_ok: bool = False,
) -> Path:
    """``shutil.copytree`` that copies holes as holes. The embedded index preallocates
    about 200 MB of files that are mostly holes: a plain copy writes every zero (about a
    second and 700 MB of disk a home), this one costs about what the data does."""
    shutil.copytree(
        source, target, ignore=ignore, copy_function=_copy_sparse, dirs_exist_ok=dirs_exist_ok
    )
    return target


def _copy_sparse(source: str, target: str) -> str:
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src.fileno(), offset, os.SEEK_DATA)
            except OSError:  # no data after offset: the rest is a hole
                break
            end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
            src.seek(start)
            dst.seek(start)
            remaining = end - start
            while remaining:
                block = src.read(min(remaining, 1 << 20))
                if not block:
                    break
                dst.write(block)
                remaining -= len(block)
            offset = end
        dst.truncate(size)
    shutil.copystat(source, target)
    return target
