"""One bounded-retry policy for every provider call, and retrying embedders and rerankers.

:class:`RetryPolicy` makes the one decision after a failed attempt, for the async chat
``Retry`` layer (``chat/retry.py``) and the synchronous wrappers here alike:

* retry only a category that is :attr:`FailureCategory.retryable` (transient, throttled,
  timeout), and at most ``max_attempts`` attempts in all;
* wait the provider's ``retry_after`` when given, else exponential backoff with full
  jitter: ``uniform(0, min(max_delay, base_delay * 2 ** (attempt - 1)))`` (the "Full
  Jitter" of Brooker, *Exponential Backoff And Jitter*, AWS Architecture Blog, 2015);
* a wait that does not fit the remaining deadline is not started: the call ends as
  ``deadline_exhausted`` instead of sleeping into a certain failure.

``Embedder`` and ``Reranker`` calls take no deadline argument. :class:`RetryingEmbedder`
and :class:`RetryingReranker` spend the caller's :func:`~ragwright.deadline.deadline_scope`
deadline, or a fresh ``call_budget`` per call when none is set, cut short by the
caller's :func:`~ragwright.deadline.deadline_bound` (an ingestion run's deadline), and
make it current for the inner adapter, whose HTTP timeout is then what is left of it.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ragwright.deadline import Deadline, bounded, current_deadline, deadline_scope
from ragwright.errors import (
    EmbeddingProviderError,
    FailureCategory,
    ProviderError,
    RerankError,
)
from ragwright.protocols import Embedder, Reranker
from ragwright.types import EmbeddingProfile

EventSink = Callable[[str], None]
T = TypeVar("T")


def _ignore(_event: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempt cap and backoff of a bounded retry under one deadline.

    ``jitter`` returns a number in [0, 1) (injectable so tests see exact waits).
    """

    max_attempts: int = 2
    base_delay: float = 0.05
    max_delay: float = 2.0
    jitter: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError(
                f"base_delay and max_delay must not be negative, got "
                f"{self.base_delay} and {self.max_delay}"
            )

    def backoff(self, attempt: int, error: ProviderError) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        if error.retry_after is not None:
            return max(0.0, error.retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return float(ceiling * self.jitter())

    def wait_before_retry(
        self,
        attempt: int,
        error: ProviderError,
        deadline: Deadline,
        events: EventSink = _ignore,
    ) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` when ``error`` is final.

        Emits ``retry:wait`` when a retry follows and ``retry:no-budget`` when the wait
        does not fit.

        Raises:
            ProviderError: of ``error``'s class, ``deadline_exhausted``, chained to
                ``error``, when the wait would not fit the remaining deadline.
        """
        if not error.category.retryable or attempt >= self.max_attempts:
            return None
        wait = self.backoff(attempt, error)
        if wait >= deadline.remaining():
            events("retry:no-budget")
            raise type(error)(
                error.provider,
                FailureCategory.DEADLINE_EXHAUSTED,
                f"a {wait:.3f}s wait does not fit the remaining budget",
            ) from error
        events("retry:wait")
        return wait


def call_with_retry(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    error_type: type[ProviderError],
    provider: str,
    call_budget: float,
    sleep: Callable[[float], None] = time.sleep,
    events: EventSink = _ignore,
) -> T:
    """Run ``call`` under the current deadline (or ``call_budget`` seconds), retrying,
    never past the current bound.

    Raises:
        ProviderError: the last attempt's error, or ``deadline_exhausted`` of
            ``error_type`` when no time is left for an attempt or a wait.
    """
    deadline = bounded(current_deadline() or Deadline.after(call_budget))
    with deadline_scope(deadline):
        for attempt in itertools.count(1):
            if deadline.expired:
                raise error_type(
                    provider, FailureCategory.DEADLINE_EXHAUSTED, f"before attempt {attempt}"
                )
            try:
                return call()
            except ProviderError as error:
                wait = policy.wait_before_retry(attempt, error, deadline, events)
                if wait is None:
                    raise
                sleep(wait)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


class RetryingEmbedder:
    """An :class:`Embedder` whose calls retry under the request's deadline.

    Capabilities (``profile``, ``counts_tokens``, ``count_tokens``, ``in_flight``) are
    the inner embedder's; token counting is local and never retried. Safe to call from
    several threads at once when the inner embedder is: each call keeps its own attempt
    count, and a deadline set by a caller's thread is current only in that thread.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        policy: RetryPolicy,
        call_budget: float,
        sleep: Callable[[float], None] = time.sleep,
        events: EventSink | None = None,
    ) -> None:
        if call_budget <= 0:
            raise ValueError(f"call_budget must be positive, got {call_budget}")
        self.inner = inner
        self.profile: EmbeddingProfile = inner.profile
        self.counts_tokens: bool = inner.counts_tokens
        self.in_flight: int = getattr(inner, "in_flight", 1)
        self.policy = policy
        self.call_budget = call_budget
        self._sleep = sleep
        self._events = events or _ignore

    def _retry(self, call: Callable[[], T]) -> T:
        return call_with_retry(
            call,
            policy=self.policy,
            error_type=EmbeddingProviderError,
            provider=self.profile.provider,
            call_budget=self.call_budget,
            sleep=self._sleep,
            events=self._events,
        )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._retry(lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._retry(lambda: self.inner.embed_query(text))


class RetryingReranker:
    """A :class:`Reranker` whose calls retry under the request's deadline."""

    def __init__(
        self,
        inner: Reranker,
        *,
        policy: RetryPolicy,
        call_budget: float,
        provider: str = "rerank",
        sleep: Callable[[float], None] = time.sleep,
        events: EventSink | None = None,
    ) -> None:
        if call_budget <= 0:
            raise ValueError(f"call_budget must be positive, got {call_budget}")
        self.inner = inner
        self.provider = provider
        self.policy = policy
        self.call_budget = call_budget
        self._sleep = sleep
        self._events = events or _ignore

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        return call_with_retry(
            lambda: self.inner.rerank(question, texts),
            policy=self.policy,
            error_type=RerankError,
            provider=self.provider,
            call_budget=self.call_budget,
            sleep=self._sleep,
            events=self._events,
        )
