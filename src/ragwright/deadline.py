"""One time budget per operation, and the current one for calls that take no deadline.

Chat calls receive their :class:`Deadline` as an argument. Embedding and rerank calls
(``Embedder``, ``Reranker``) take none, so the caller sets the request's deadline once::

    with deadline_scope(Deadline.after(10.0)):
        hits = retriever.search(question, eligibility, scope)

and the retrying wrappers (``ragwright.retry``) and the remote adapters read it with
:func:`current_deadline`: retries, waits and every HTTP timeout spend that one budget. A
context variable keeps concurrent requests (threads, asyncio tasks) apart. This module
depends on the standard library only, so every layer above the core may import it.

A long operation of many calls (an ingestion run) sets a *bound* instead
(:func:`deadline_bound`): each call keeps its own budget (the retrying wrappers'
``call_budget``, so a hung request still ends after it) and that budget is cut where
the bound ends, so no attempt, retry or backoff outlives the operation.
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


_BOUND: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "ragwright_deadline_bound", default=None
)


@contextmanager
def deadline_bound(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """No call made inside the block outlives ``deadline`` (``None``: no bound).

    Unlike :func:`deadline_scope`, whose deadline is the one budget every call inside
    spends, a bound leaves each call its own budget and only cuts it short
    (:func:`bounded`). Nested bounds keep the earliest.

    Example:
        >>> with deadline_bound(Deadline.after(5.0)) as bound:
        ...     bounded(Deadline.after(60.0)) is bound
        True
    """
    outer = _BOUND.get()
    if deadline is None or (outer is not None and outer.remaining() <= deadline.remaining()):
        deadline = outer
    token = _BOUND.set(deadline)
    try:
        yield deadline
    finally:
        _BOUND.reset(token)


def current_bound() -> Deadline | None:
    """The bound of the innermost :func:`deadline_bound`, or ``None`` outside any."""
    return _BOUND.get()


def bounded(deadline: Deadline) -> Deadline:
    """``deadline``, or the current bound when that ends first."""
    bound = _BOUND.get()
    if bound is not None and bound.remaining() < deadline.remaining():
        return bound
    return deadline
