from __future__ import annotations

import ast
import sys
import threading
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"

# The longest test files, longest first (measured with --durations on the 2-core CI
# machine). pytest-xdist runs a file in one process and hands files out in collection
# order (the Makefile passes --no-loadscope-reorder, which would otherwise sort files by
# their number of tests), so starting these first keeps one long file from running alone
# at the end while the other processes sit idle.
LONGEST_FIRST = (
    "tests/test_cli_answers.py",
    "tests/test_cli_no_flags.py",
    "tests/service/test_replicas.py",
    "tests/test_cli.py",
    "tests/test_ingest_workers.py",
    "tests/test_cli_warm.py",
    "tests/test_cli_calibration.py",
    "tests/test_cli_damage.py",
    "tests/pipeline/test_ingest_memory.py",
    "tests/adapters/test_llama_embeddings.py",
    "tests/test_faults.py",
    "tests/service/test_serve_command.py",
)


def _serialise_ast_parsing() -> None:
    """CPython before 3.11.8 keeps the AST constructor's recursion counter in state shared
    by all threads, and a garbage collection inside ``ast.parse`` can hand the GIL to
    another thread that parses too: the first then fails with "SystemError: AST
    constructor recursion depth mismatch" (python/cpython#106905, fixed by #113035 in
    3.11.8; this machine has 3.11.7). The tests meet it when a service thread (pydantic's
    schema building calls ``inspect.signature``, which parses) runs beside the test thread
    (Hypothesis and pytest's assertion rewriting parse too): it failed the fuzz module's
    setup in CI. One lock around ``ast.parse`` in the test process removes the overlap
    (tests/test_ast_race.py provokes the race and fails without it).
    """
    if sys.version_info >= (3, 11, 8) or getattr(ast.parse, "_ragwright_serialised", False):
        return
    lock = threading.RLock()
    parse = ast.parse

    def serialised(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    serialised._ragwright_serialised = True  # type: ignore[attr-defined]
    ast.parse = serialised


_serialise_ast_parsing()


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; fails (never skips) with a clear message if absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"shared benchmark data missing: {path} (see ../shared/data/README.md)")
    return path


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No test reads the developer's environment or a ragwright.toml in the checkout.
    _clear_ragwright_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    # The suite runs 3 test processes on 2 cores, so the local model always shares its
    # cores: with one thread it answers 1.5-2.5x faster there (docs/chat.md, "Threads of
    # the local model"). Commands and child processes inherit it; a test that needs
    # another count sets its own.
    monkeypatch.setenv("RAGWRIGHT_CHAT_THREADS", SUITE_MODEL_THREADS)
    # A child `ask` or `search` would leave a warm command process behind for the next
    # (ragwright.warm); the tests of that process set their own value.
    monkeypatch.setenv("RAGWRIGHT_COMMAND_KEEP_WARM", "0")


SUITE_MODEL_THREADS = "1"


def _clear_ragwright_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("RAGWRIGHT_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_application_outlives_its_test() -> Iterator[None]:
    """FastAPI keeps every route function it has classified in a module cache of 4,096
    entries (``fastapi.dependencies.models``); a test's app's routes close over its
    application, so each app a test built, with its token counter (about 70 MB), its
    stores and their connections, stayed alive in the test process: 5 GiB in a worker
    that ran the service tests. ``typing``'s caches hold them too (``Annotated[...,
    Depends(a closure)]``). Both are cleared after each test (a service process builds
    one app and needs none of this)."""
    yield
    models = sys.modules.get("fastapi.dependencies.models")
    for value in vars(models).values() if models is not None else ():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()
    for clear in getattr(typing, "_cleanups", ()):
        clear()


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus ingested by the CLI (in this process), once per test process.
    Never written to: tests copy it (:func:`tests.cli.copy_home`) or use
    ``indexed_home``."""
    from tests.cli import ragwright

    home = tmp_path_factory.mktemp("sample-home")
    with pytest.MonkeyPatch.context() as patch:
        _clear_ragwright_environment(patch)
        patch.chdir(home)
        ragwright("ingest", str(SAMPLES), home=home, check=True)
    return home


@pytest.fixture(scope="module")
def indexed_home(sample_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home with the sample corpus ingested, one per test module (a copy of
    ``sample_home``: the module's tests may write drafts, calibrations, keys); the local
    model's background process its commands started ends with the module."""
    from ragwright.adapters.chatmodels.resident import stop_resident
    from tests.cli import copy_home

    home = copy_home(sample_home, tmp_path_factory.mktemp("home") / "home")
    yield home
    stop_resident(home / "models")


@pytest.fixture(scope="session", autouse=True)
def _no_background_model_outlives_the_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Commands that ask the local model leave its background process running for the
    next command (RAGWRIGHT_CHAT_KEEP_WARM): every one started under this run's
    temporary directories is stopped when the run ends."""
    yield
    from ragwright.adapters.chatmodels.resident import STATE, stop_resident

    for state in tmp_path_factory.getbasetemp().rglob(STATE):
        stop_resident(state.parent)
    _stop_warm_command_processes(tmp_path_factory.getbasetemp())


def _stop_warm_command_processes(under: Path) -> None:
    """End every warm command process (ragwright.warm) working in a directory of this run."""
    import contextlib
    import os
    import signal

    from ragwright.warm.client import running

    for pid in running():
        with contextlib.suppress(OSError):
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(under):
                os.kill(pid, signal.SIGTERM)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of ``LONGEST_FIRST`` first, in its order; the rest as collected."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture
def tesseract_installed() -> None:
    """OCR tests need the tesseract command; fails (never skips) when it is absent."""
    import shutil

    if shutil.which("tesseract") is None:
        pytest.fail("tesseract is not installed: `make test-deps` installs tesseract-ocr")
