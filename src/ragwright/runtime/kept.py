"""Parts a warm command process keeps from one command to the next.

A command builds its application afresh: settings, stores and the index are opened per
command and closed when it ends, so a warm process (``ragwright.warm``) sees every
change another process made in between (an ingestion, a calibration, a new key). Two
parts are costly to build and hold no state of a command or a file another process
writes: the bundled embedding model's session and the o200k_base token table. Inside a
warm process (after :func:`keep_across_commands`) those are built once per
configuration and handed to every later command; everywhere else :func:`kept` builds
them per call, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_kept: dict[Hashable, Any] | None = None


def keep_across_commands() -> None:
    """From now on, :func:`kept` keeps what it builds (a warm command process calls it)."""
    global _kept  # noqa: PLW0603 (one switch for the process, set once)
    with _lock:
        if _kept is None:
            _kept = {}


def kept(key: Hashable, build: Callable[[], T]) -> T:
    """``build()``; inside a warm process, the one built earlier under ``key``."""
    if _kept is None:
        return build()
    with _lock:
        if key not in _kept:
            _kept[key] = build()
        return _kept[key]  # type: ignore[no-any-return]


def kept_count() -> int:
    """How many parts this process keeps (0 outside a warm process)."""
    return 0 if _kept is None else len(_kept)
