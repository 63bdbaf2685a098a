"""A caller's going away, as an event its work can see: set by an entry point whose
client may leave (an HTTP upload), read by the work that can be stopped (a file's
conversion process: :mod:`ragwright.adapters.formats.box`).

The event lives in a context variable, so it reaches the threads the caller starts with
``asyncio.to_thread`` (which copies the context) without being passed through every
layer in between.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar

CANCEL: ContextVar[threading.Event | None] = ContextVar("ragwright_cancel", default=None)
"""Set by a caller that may go away: the work in its context stops when it is set."""


@contextlib.contextmanager
def cancelled_by(event: threading.Event) -> Iterator[None]:
    """Work started in this context (and in threads it starts with
    ``asyncio.to_thread``) stops when ``event`` is set."""
    token = CANCEL.set(event)
    try:
        yield
    finally:
        CANCEL.reset(token)
