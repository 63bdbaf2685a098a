"""Failover to ordered, qualified alternates — only for failures the policy allows.

A fallback model is not a transparent replacement: it is used only when the primary
failed in a category the policy lists (by default transient unavailability, throttling
and attempt timeouts), only while the operation's deadline leaves ``min_remaining``
seconds, and never for cancellation, exhausted deadlines, invalid credentials or
configuration, unsupported options, refusals or invalid output. A stream never switches
once any text reached the caller. Every provider attempt — first tries, retries and
alternates — is counted against one budget (``chat/budget.py``).

Nor does an alternate get the primary's request unchanged. With ``profiles`` (one
:class:`ModelProfile` per candidate) and a request that carries a ``prepare`` hook, each
alternate receives ``request.prepare(its profile)``: the caller rebuilds the request
for that model's schema style, context window, output limit and token counting. A
profile the request cannot be prepared for (``prepare`` returns ``None``) is skipped
(``failover:unfit:NAME``). The response says which provider answered and whether it
was a fallback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from ragwright.chat.contract import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    Deadline,
    ModelProfile,
)
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
    """Tries ``candidates`` in order (the first is the primary).

    Candidate names must be unique: the response's ``provider`` names the one that
    answered, and callers map it back to the profile the request was prepared for.
    """

    def __init__(
        self,
        candidates: Sequence[ChatModel],
        *,
        profiles: Sequence[ModelProfile] | None = None,
        policy: FailoverPolicy = FailoverPolicy(),
        events: EventSink | None = None,
    ) -> None:
        if not candidates:
            raise ValueError("failover needs at least a primary")
        names = [c.name for c in candidates]
        if len(set(names)) != len(names):
            raise ValueError(f"failover candidates need unique names, got {names}")
        if profiles is not None and [p.name for p in profiles] != names:
            raise ValueError(
                f"profiles must name the candidates in order: {[p.name for p in profiles]} "
                f"vs {names}"
            )
        self.candidates = tuple(candidates)
        self.profiles = tuple(profiles) if profiles is not None else None
        self.name = self.candidates[0].name
        self.policy = policy
        self._events = events or (lambda _event: None)

    def _may_switch(self, error: ChatError, index: int, deadline: Deadline) -> bool:
        return (
            index + 1 < len(self.candidates)
            and error.category in self.policy.switch_on
            and deadline.remaining() >= self.policy.min_remaining
        )

    def _prepared(self, request: ChatRequest, index: int) -> ChatRequest | None:
        """The request as candidate ``index`` must receive it (``None``: it cannot)."""
        if index == 0 or self.profiles is None or request.prepare is None:
            return request
        prepared = request.prepare(self.profiles[index])
        if prepared is None:
            self._events(f"failover:unfit:{self.candidates[index].name}")
        return prepared

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        failure: ChatError | None = None
        for index, model in enumerate(self.candidates):
            prepared = self._prepared(request, index)
            if prepared is None:
                continue
            try:
                response = await model.complete(prepared, deadline)
            except ChatError as error:
                if not self._may_switch(error, index, deadline):
                    raise
                failure = error
                self._events(f"failover:switch:{self.candidates[index + 1].name}")
                continue
            return dataclasses.replace(response, provider=model.name, fallback=index > 0)
        # Reached only when every remaining alternate was unfit for the request.
        raise _last(failure)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        failure: ChatError | None = None
        for index, model in enumerate(self.candidates):
            prepared = self._prepared(request, index)
            if prepared is None:
                continue
            delivered = False
            try:
                async for update in model.stream(prepared, deadline):
                    delivered = True
                    yield update
                return
            except ChatError as error:
                if delivered or not self._may_switch(error, index, deadline):
                    raise
                failure = error
                self._events(f"failover:switch:{self.candidates[index + 1].name}")
        raise _last(failure)


def _last(failure: ChatError | None) -> ChatError:
    if failure is None:  # pragma: no cover - the primary always runs
        raise AssertionError("unreachable: the primary always runs")
    return failure
