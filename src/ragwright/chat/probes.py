"""Call and attempt probes: record what crossed one point of the pipeline.

The same class serves both roles; its position decides what it observes. Placed outside
the retry it sees one logical call (``call:begin`` … ``call:ok``); placed just above the
provider it sees every attempt (``attempt:begin`` … ``attempt:fail``). Streaming records
``stream-begin`` and, from a ``finally`` block, ``stream-end`` — an end is not a success.
Events carry no message content.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline

EventSink = Callable[[str], None]


class Probe:
    """Records ``{name}:begin|ok|fail|cancel`` and ``{name}:stream-begin|stream-end``."""

    def __init__(self, inner: ChatModel, *, name: str, events: EventSink) -> None:
        self.inner = inner
        self.name = inner.name  # the model's name passes through; ``label`` names the probe
        self.label = name
        self._events = events

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        self._events(f"{self.label}:begin")
        try:
            response = await self.inner.complete(request, deadline)
        except asyncio.CancelledError:
            self._events(f"{self.label}:cancel")
            raise
        except Exception:
            self._events(f"{self.label}:fail")
            raise
        self._events(f"{self.label}:ok")
        return response

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        self._events(f"{self.label}:stream-begin")
        try:
            async for update in self.inner.stream(request, deadline):
                yield update
        finally:
            self._events(f"{self.label}:stream-end")
