"""Remote embedders a test opened, closed when the test ends: their HTTP connections would
otherwise be closed by the garbage collector, in whichever later test it runs (a
ResourceWarning there). A module that imports ``close_opened_embedders`` gets it as an
autouse fixture; ``opened`` registers an embedder."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

import pytest


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)
_OPENED: list[_Closable] = []


def opened(embedder: C) -> C:
    """``embedder``, to be closed when the current test ends."""
    _OPENED.append(embedder)
    return embedder


@pytest.fixture(autouse=True)
def close_opened_embedders() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()
