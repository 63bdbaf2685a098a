"""Failover to ordered, qualified alternates — only for failures the policy allows.

A fallback model is not a transparent replacement: it is used only when the primary
failed in a category the policy lists (by default transient unavailability, throttling
and attempt timeouts), only while the operation's deadline leaves ``min_remaining``
seconds, and never for cancellation, exhausted deadlines, invalid credentials or
configuration, unsupported options, refusals or invalid output. A stream never switches
once any text reached the caller. Every provider attempt — first tries, retries and
alternates — is counted against one budget (``chat/budget.py``). The response says which provider
answered and whether it was a fallback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.chat.probes import EventSink
from ragwright.errors import ChatError, FailureCategory


@dataclass(frozen=True, slots=True)
class FailoverPolicy:
    """When a switch to the next alternate is allowed."""

    switch_on: frozenset[FailureCategory] = frozenset(
        {FailureCategory.TRANSIENT, FailureCategory.THROTTLED, FailureCategory.TIMEOUT}
    )
    min_remaining: float = 0.5


class Failover:
    """Tries ``candidates`` in order (the first is the primary)."""

    def __init__(
        self,
        candidates: Sequence[ChatModel],
        *,
        policy: FailoverPolicy = FailoverPolicy(),
        events: EventSink | None = None,
    ) -> None:
        if not candidates:
            raise ValueError("failover needs at least a primary")
        self.candidates = tuple(candidates)
        self.name = self.candidates[0].name
        self.policy = policy
        self._events = events or (lambda _event: None)

    def _may_switch(self, error: ChatError, index: int, deadline: Deadline) -> bool:
        return (
            index + 1 < len(self.candidates)
            and error.category in self.policy.switch_on
            and deadline.remaining() >= self.policy.min_remaining
        )

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        for index, model in enumerate(self.candidates):
            try:
                response = await model.complete(request, deadline)
            except ChatError as error:
                if not self._may_switch(error, index, deadline):
                    raise
                self._events(f"failover:switch:{self.candidates[index + 1].name}")
                continue
            return dataclasses.replace(response, provider=model.name, fallback=index > 0)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        for index, model in enumerate(self.candidates):
            delivered = False
            try:
                async for update in model.stream(request, deadline):
                    delivered = True
                    yield update
                return
            except ChatError as error:
                if delivered or not self._may_switch(error, index, deadline):
                    raise
                self._events(f"failover:switch:{self.candidates[index + 1].name}")
