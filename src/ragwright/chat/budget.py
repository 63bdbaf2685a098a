"""One attempt budget per operation, spent where attempts happen.

``Budgeted`` (outermost) gives each logical operation ``attempts`` provider attempts;
``AttemptLimit`` (just above each provider, below retry and failover) spends one per
attempt and refuses with ``deadline_exhausted`` once none is left — a category neither
retry nor failover acts on, so first tries, retries and alternates together never exceed
the budget. The budget lives in a context variable, so concurrent operations each have
their own.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory


class AttemptBudget:
    """A countdown of provider attempts."""

    def __init__(self, attempts: int) -> None:
        if attempts < 1:
            raise ValueError(f"an attempt budget needs at least 1 attempt, got {attempts}")
        self.remaining = attempts

    def take(self, provider: str) -> None:
        """Spend one attempt, or raise ``deadline_exhausted`` when none is left."""
        if self.remaining <= 0:
            raise ChatError(provider, FailureCategory.DEADLINE_EXHAUSTED, "attempt budget spent")
        self.remaining -= 1


_CURRENT: contextvars.ContextVar[AttemptBudget | None] = contextvars.ContextVar(
    "ragwright_attempt_budget", default=None
)


class Budgeted:
    """Runs each operation with a fresh budget of ``attempts`` provider attempts."""

    def __init__(self, inner: ChatModel, *, attempts: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.attempts = attempts

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        token = _CURRENT.set(AttemptBudget(self.attempts))
        try:
            return await self.inner.complete(request, deadline)
        finally:
            _CURRENT.reset(token)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        token = _CURRENT.set(AttemptBudget(self.attempts))
        try:
            async for update in self.inner.stream(request, deadline):
                yield update
        finally:
            _CURRENT.reset(token)


class AttemptLimit:
    """Spends one attempt of the operation's budget per call to the provider."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name

    def _take(self) -> None:
        budget = _CURRENT.get()
        if budget is not None:
            budget.take(self.name)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        self._take()
        return await self.inner.complete(request, deadline)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        self._take()
        async for update in self.inner.stream(request, deadline):
            yield update
