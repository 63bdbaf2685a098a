"""One time budget per operation, and the current one for calls that take no deadline.

Chat calls receive their :class:`Deadline` as an argument. Embedding and rerank calls
(``Embedder``, ``Reranker``) take none, so the caller sets the request's deadline once::

    with deadline_scope(Deadline.after(10.0)):
        hits = retriever.search(question, eligibility, scope)

and the retrying wrappers (``ragwright.retry``) and the remote adapters read it with
:func:`current_deadline`: retries, waits and every HTTP timeout spend that one budget. A
context variable keeps concurrent requests (threads, asyncio tasks) apart. This module
depends on the standard library only, so every layer above the core may import it.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Deadline:
    """The one time budget of an operation, on a monotonic clock.

    Created once by the caller and passed unchanged through every layer: retries, waits
    and attempts all spend the same budget, and nothing inside the pipeline extends it.
    """

    expires_at: float
    clock: Clock = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        """A deadline ``seconds`` from now."""
        return cls(clock() + seconds, clock)

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.expires_at - self.clock())

    @property
    def expired(self) -> bool:
        """True once no time is left."""
        return self.remaining() <= 0.0


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "ragwright_deadline", default=None
)


@contextmanager
def deadline_scope(deadline: Deadline) -> Iterator[Deadline]:
    """Make ``deadline`` the current one for the calls made inside the block.

    Example:
        >>> with deadline_scope(Deadline.after(5.0)) as deadline:
        ...     current_deadline() is deadline
        True
    """
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the innermost :func:`deadline_scope`, or ``None`` outside any."""
    return _CURRENT.get()
