"""The chat-model contract: requests, responses, stream updates, and one shared deadline.

``Deadline`` lives in ``ragwright.deadline`` (embedding and rerank calls use it too) and
is re-exported here.

Records are frozen: no middleware can change a caller's messages or options, so every
attempt is rebuilt from the same known-safe request by construction. Usage a provider
does not report is ``None`` ("unknown"), never zero. The ``ChatModel`` protocol lives
with the other protocols in :mod:`ragwright.protocols`; it is re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragwright.core.answers import SchemaStyle
from ragwright.deadline import Deadline as Deadline  # noqa: PLC0414 - re-exported

# Re-exported so ``from ragwright.chat.contract import ChatModel`` keeps working.
from ragwright.protocols import ChatModel as ChatModel  # noqa: PLC0414

Role = Literal["system", "user", "assistant"]


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
class ModelProfile:
    """What a request must be prepared for on one provider of a failover.

    ``name`` is the provider's ``ChatModel.name`` (unique within a pipeline); ``system``
    the provider kind (``openai``, ``ollama``…); ``model`` the configured model.
    ``context_window`` and ``output_limit`` size the request, ``schema_style`` picks the
    answer schema, and ``token_ratio`` is how many of this model's tokens one token of the
    application's counter makes (above 1 for a finer tokenizer, so assembly leaves room).
    """

    name: str
    system: str
    model: str
    context_window: int = 4096
    output_limit: int = 512
    schema_style: SchemaStyle = "variants"
    token_ratio: float = 1.0


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Messages and options of one logical operation.

    ``scope`` names the tenant/data scope the messages were built from (trusted context);
    a request without one is never served from or stored in a shared response cache.
    ``prompt_version`` identifies the instructions, so a prompt change is a cache miss.

    Two hooks travel with the request and are no part of its identity (the cache key
    ignores them): ``prepare`` rebuilds the request for an alternate's
    :class:`ModelProfile` when failover switches (``None`` from it: the request cannot
    fit that model, which is then skipped), and ``accept`` is the caller's acceptance
    check — a response it refuses is returned but never cached.
    """

    messages: tuple[ChatMessage, ...]
    options: ChatOptions = ChatOptions()
    scope: str | None = None
    prompt_version: str | None = None
    prepare: Callable[[ModelProfile], ChatRequest | None] | None = field(
        default=None, compare=False, repr=False
    )
    accept: Callable[[ChatResponse], bool] | None = field(default=None, compare=False, repr=False)


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
