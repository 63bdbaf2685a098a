from __future__ import annotations

import ast
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"


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
    import os

    for name in list(os.environ):
        if name.startswith("RAGWRIGHT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
