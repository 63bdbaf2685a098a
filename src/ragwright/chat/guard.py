"""Message guard: refuse oversized requests before anything else spends work.

Counts messages and input tokens (every message's content, with the injected
:class:`~ragwright.protocols.TokenCounter` — o200k_base in the application) for both
buffered and streaming calls, and raises ``invalid_input`` without calling the inner
model when a limit is exceeded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.protocols import TokenCounter


class MessageGuard:
    """Rejects requests over ``max_messages`` or ``max_input_tokens``."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_messages: int,
        max_input_tokens: int,
        counter: TokenCounter,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_messages = max_messages
        self.max_input_tokens = max_input_tokens
        self.counter = counter

    def check(self, request: ChatRequest) -> None:
        """Raise ``invalid_input`` naming the limit that was exceeded."""
        if len(request.messages) > self.max_messages:
            raise ChatError(
                self.name,
                FailureCategory.INVALID_INPUT,
                f"{len(request.messages)} messages exceed the limit of {self.max_messages}",
            )
        tokens = sum(self.counter.count(m.content) for m in request.messages)
        if tokens > self.max_input_tokens:
            raise ChatError(
                self.name,
                FailureCategory.INVALID_INPUT,
                f"{tokens} input tokens exceed the limit of {self.max_input_tokens}",
            )

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        self.check(request)
        return await self.inner.complete(request, deadline)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        self.check(request)
        async for update in self.inner.stream(request, deadline):
            yield update
