"""Registries of factories by kind, and what closes what the runtime opened.

Each choice the settings make (embedding provider, index backend, reranker, chat
provider, store engine) is a :class:`Registry`: a mapping from the kind's name to the
factory that builds it. A new provider is one more entry, not one more ``if``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from ragwright.errors import ConfigError

logger = logging.getLogger(__name__)

F = TypeVar("F")


class Registry(Generic[F]):
    """Factories by kind; looking up a kind it lacks names ``setting`` in a ConfigError."""

    def __init__(self, setting: str, factories: Mapping[str, F]) -> None:
        self.setting = setting
        self._factories = dict(factories)

    def __getitem__(self, kind: str) -> F:
        try:
            return self._factories[kind]
        except KeyError:
            raise ConfigError(
                self.setting, f"unknown kind {kind!r} (one of {', '.join(self._factories)})"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __contains__(self, kind: object) -> bool:
        return kind in self._factories

    def register(self, kind: str, factory: F) -> None:
        """Add (or replace) the factory for ``kind``."""
        self._factories[kind] = factory


class Closable(Protocol):
    def close(self) -> None: ...


class Closers:
    """Callbacks that release what was opened, run newest first by :meth:`close`.

    Every callback runs even when one fails (the failure is logged); the list is emptied,
    so a second :meth:`close` does nothing.
    """

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[], object]) -> None:
        with self._lock:
            self._callbacks.append(callback)

    def close(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in reversed(callbacks):
            try:
                callback()
            except Exception:  # one failed release must not keep the others
                logger.warning("warning: releasing %r failed", callback, exc_info=True)
