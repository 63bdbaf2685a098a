"""Bounded retry under the operation's one shared deadline.

The decision after a failed attempt is the shared :class:`~ragwright.retry.RetryPolicy`
(the one embedding and rerank calls use too):

* At most ``max_attempts`` attempts (default 2), only for categories that are
  :attr:`~ragwright.errors.FailureCategory.retryable` — transient, throttled and
  timeout; everything else — cancellation included — propagates at once.
* Each attempt runs under the *same* deadline: no fresh per-attempt timeout, and the
  wait between attempts counts against it. A wait that would not fit the remaining
  budget is not started: the operation ends as ``deadline_exhausted`` instead of
  sleeping into a certain failure. So a timed-out attempt is retried only while the
  deadline leaves room for a wait and another try.
* The wait is exponential backoff with full jitter, or the provider's ``retry_after``
  when it is given and fits.
* Every attempt gets the same frozen request, so no attempt can see what an inner
  layer did to a previous one.
* Streams are never retried: once text may have reached the caller, a restart could
  duplicate or contradict it. A failure after the first update becomes an explicit
  ``interrupted`` outcome (not retryable); one before it propagates as it was.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.chat.probes import EventSink
from ragwright.errors import ChatError, FailureCategory
from ragwright.retry import RetryPolicy


class Retry:
    """Retries an inner :class:`ChatModel` under the caller's deadline."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_attempts: int = 2,
        base_delay: float = 0.05,
        max_delay: float = 2.0,
        events: EventSink | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.policy = RetryPolicy(max_attempts, base_delay, max_delay, jitter)
        self._events = events or (lambda _event: None)
        self._sleep = sleep

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        for attempt in range(1, self.policy.max_attempts + 1):
            if deadline.expired:
                raise ChatError(self.name, FailureCategory.DEADLINE_EXHAUSTED, "before an attempt")
            try:
                async with asyncio.timeout(deadline.remaining()):
                    return await self.inner.complete(request, deadline)
            except TimeoutError as error:
                raise ChatError(
                    self.name, FailureCategory.DEADLINE_EXHAUSTED, f"during attempt {attempt}"
                ) from error
            except ChatError as error:
                wait = self.policy.wait_before_retry(attempt, error, deadline, self._events)
                if wait is None:
                    raise
                await self._sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        delivered = 0
        try:
            async for update in self.inner.stream(request, deadline):
                delivered += 1
                yield update
        except ChatError as error:
            if not delivered:
                raise
            # Never restarted: the caller already holds a prefix of the answer.
            raise ChatError(
                self.name,
                FailureCategory.INTERRUPTED,
                f"stream failed after {delivered} updates ({error.category.value})",
            ) from error
