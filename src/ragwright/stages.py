"""What a long call is doing now, for whoever shows it (``ragwright ask`` on a terminal).

The answer path announces each stage as it starts (retrieve, score, generate, ...), and
the local model announces its start; a command that wants to show them sets a listener
for the duration of its call. The listener lives in a context variable, so concurrent
requests of a service never see each other's stages, and worker threads started with
:func:`ragwright.threads.run_in_thread` inherit it. With no listener an announcement
costs one lookup. Announcements carry stage names only, never a question or a text.
Standard library only.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

StageListener = Callable[[str], None]

_listener: contextvars.ContextVar[StageListener | None] = contextvars.ContextVar(
    "ragwright_stage_listener", default=None
)


def announce(stage: str) -> None:
    """Tell the current listener, if any, that ``stage`` starts now."""
    listener = _listener.get()
    if listener is not None:
        listener(stage)


@contextmanager
def listening(listener: StageListener) -> Iterator[None]:
    """Send the stages announced inside this block (and in what it starts) to ``listener``.

    Example:
        >>> seen = []
        >>> with listening(seen.append):
        ...     announce("retrieve")
        >>> announce("generate")  # nobody listens any more
        >>> seen
        ['retrieve']
    """
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
