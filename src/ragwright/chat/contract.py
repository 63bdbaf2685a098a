"""The chat-model contract: requests, responses, stream updates, and one shared deadline.

Records are frozen: no middleware can change a caller's messages or options, so every
attempt is rebuilt from the same known-safe request by construction. Usage a provider
does not report is ``None`` ("unknown"), never zero. The ``ChatModel`` protocol lives
with the other protocols in :mod:`ragwright.protocols`; it is re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

# Re-exported so ``from ragwright.chat.contract import ChatModel`` keeps working.
from ragwright.protocols import ChatModel as ChatModel  # noqa: PLC0414

Role = Literal["system", "user", "assistant"]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Generation options; ``json_schema`` requests schema-constrained output."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    json_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Messages and options of one logical operation.

    ``scope`` names the tenant/data scope the messages were built from (trusted context);
    a request without one is never served from or stored in a shared response cache.
    ``prompt_version`` identifies the instructions, so a prompt change is a cache miss.
    """

    messages: tuple[ChatMessage, ...]
    options: ChatOptions = ChatOptions()
    scope: str | None = None
    prompt_version: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A complete response; ``model`` is the identity the provider reported.

    ``provider`` names the adapter that answered and ``fallback`` says whether it was an
    alternate, so callers and telemetry can see which promise was kept.
    """

    text: str
    finish_reason: str
    model: str
    usage: Usage | None = None
    provider: str = ""
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class ChatUpdate:
    """One piece of a streamed response."""

    text: str


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
