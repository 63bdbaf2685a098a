"""``ScriptedChatModel``: a provider fake that plays a script and records events.

Each call takes the next step: a reply, a failure (any category, with ``retry_after``),
a wait that only ends when the caller cancels, or a stream that yields some text and
then fails. Every call records ``provider:N`` (and ``provider:stream:N``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory


@dataclass(frozen=True)
class Reply:
    text: str = "Draft reply."


@dataclass(frozen=True)
class Fail:
    category: FailureCategory = FailureCategory.TRANSIENT
    retry_after: float | None = None


@dataclass(frozen=True)
class Hang:
    """Waits until cancelled (a slow provider)."""


@dataclass(frozen=True)
class Stream:
    chunks: tuple[str, ...] = ("You can find",)
    fail: Fail | None = Fail()


Step = Reply | Fail | Hang | Stream


@dataclass
class ScriptedChatModel:
    """Plays ``script`` one step per call; ``events`` receives ``provider:N``; replies
    report ``model`` as the model that answered."""

    script: list[Step]
    events: Callable[[str], None] = lambda _event: None
    name: str = "scripted"
    model: str = "scripted-model"
    calls: int = 0
    requests: list[ChatRequest] = field(default_factory=list)

    def _next(self, request: ChatRequest, label: str) -> Step:
        self.calls += 1
        self.requests.append(request)
        self.events(f"{label}:{self.calls}")
        if not self.script:
            raise AssertionError("the script ran out of steps")
        return self.script.pop(0)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        step = self._next(request, "provider")
        if isinstance(step, Fail):
            raise _error(self.name, step)
        if isinstance(step, Hang):
            await asyncio.Event().wait()
        if isinstance(step, Reply):
            return ChatResponse(step.text, "stop", self.model, provider=self.name)
        raise AssertionError(f"step {step!r} is not a buffered step")

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        step = self._next(request, "provider:stream")
        if not isinstance(step, Stream):
            raise AssertionError(f"step {step!r} is not a stream step")
        for chunk in step.chunks:
            yield ChatUpdate(chunk)
        if step.fail is not None:
            raise _error(self.name, step.fail)


def _error(provider: str, step: Fail) -> ChatError:
    return ChatError(provider, step.category, "scripted", retry_after=step.retry_after)
