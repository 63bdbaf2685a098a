"""The test process's guard against CPython 3.11.7's shared AST recursion counter
(tests/conftest.py, ``_serialise_ast_parsing``): two threads parse while a third makes
garbage whose finalizer yields the GIL, so collections inside ``ast.parse`` switch
threads mid-construction. Without the guard this fails with "SystemError: AST constructor
recursion depth mismatch" (5 of 5 runs); with it, no parse fails.
"""

from __future__ import annotations

import ast
import gc
import threading
import time
from collections.abc import Iterator

import pytest

SOURCE = "\n".join(
    f"def f{i}(a, b=[1, 2, {{'x': (3, 4)}}]):\n    return [a + b for a in range({i}) if a]"
    for i in range(50)
)


class _Yielding:
    """Garbage in a reference cycle whose finalizer gives the GIL away."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)


@pytest.fixture
def frequent_collections() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(200, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_threads_parsing_at_once_never_fail(frequent_collections: None) -> None:
    errors: list[str] = []
    stop = threading.Event()

    def make_garbage() -> None:
        while not stop.is_set():
            _Yielding()
            time.sleep(0)

    def parse(depth: int) -> None:
        # Different stack depths make the shared counter's corruption visible.
        if depth:
            return parse(depth - 1)
        for _ in range(4):
            try:
                ast.parse(SOURCE)
            except SystemError as error:
                errors.append(str(error))

    garbage = threading.Thread(target=make_garbage)
    garbage.start()
    parsers = [threading.Thread(target=parse, args=(depth,)) for depth in (10, 60)]
    try:
        for thread in parsers:
            thread.start()
        for thread in parsers:
            thread.join()
    finally:
        stop.set()
        garbage.join()
    assert errors == []
