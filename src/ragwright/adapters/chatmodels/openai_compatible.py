"""``OpenAIChatModel``: OpenAI, Azure OpenAI and any OpenAI-compatible server.

Built on the official ``openai`` SDK with its internal retries **off**
(``max_retries=0``): attempts are counted by our pipeline only. Each call's timeout is
the operation's remaining deadline, never a fresh one.

Failures are classified by exception type and HTTP status — never by message text:

| SDK outcome | category |
|---|---|
| connection error, 5xx | transient (retryable) |
| 429 | throttled (retryable, ``retry-after`` honoured) |
| client timeout | timeout (the attempt's share of the deadline ran out) |
| 401, 403, 404 | invalid configuration |
| 400, 422 | unsupported option when the request used one, else invalid input |
| ``refusal`` in the message, ``content_filter`` finish | refusal |
| no choices, empty or non-JSON text under a JSON schema | invalid output |

Caller cancellation propagates as ``asyncio.CancelledError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import openai

from ragwright.adapters.chatmodels import require_json
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline, Usage
from ragwright.errors import ChatError, FailureCategory


class OpenAIChatModel:
    """A chat model reached through the OpenAI chat-completions API."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str = "unused",
        base_url: str | None = None,
        azure_endpoint: str | None = None,
        azure_api_version: str = "2024-10-21",
        azure_ad_token_provider: Any = None,
        name: str | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.name = name or ("azure-openai" if azure_endpoint else "openai")
        if azure_endpoint is not None:
            self._client: openai.AsyncOpenAI = openai.AsyncAzureOpenAI(
                azure_endpoint=azure_endpoint,
                azure_deployment=model,
                api_version=azure_api_version,
                api_key=None if azure_ad_token_provider else api_key,
                azure_ad_token_provider=azure_ad_token_provider,
                max_retries=0,
                http_client=http_client,
            )
        else:
            self._client = openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, max_retries=0, http_client=http_client
            )

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        options = request.options
        if options.max_output_tokens is not None:
            arguments["max_tokens"] = options.max_output_tokens
        if options.temperature is not None:
            arguments["temperature"] = options.temperature
        if options.json_schema is not None:
            arguments["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "response",
                    "schema": dict(options.json_schema),
                    "strict": True,
                },
            }
        return arguments

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        try:
            completion = await self._client.chat.completions.create(
                **self._arguments(request), timeout=deadline.remaining()
            )
        except openai.APIError as error:
            raise self._classify(error, request) from error
        if not completion.choices:
            raise ChatError(self.name, FailureCategory.INVALID_OUTPUT, "no choices")
        choice = completion.choices[0]
        message = choice.message
        if getattr(message, "refusal", None) or choice.finish_reason == "content_filter":
            raise ChatError(self.name, FailureCategory.REFUSAL, "the model declined")
        text = message.content or ""
        if request.options.json_schema is not None:
            require_json(self.name, text, choice.finish_reason)
        usage = completion.usage
        return ChatResponse(
            text=text,
            finish_reason=choice.finish_reason or "unknown",
            model=completion.model or self.model,
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else None,
            provider=self.name,
        )

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        try:
            chunks = await self._client.chat.completions.create(
                **self._arguments(request), stream=True, timeout=deadline.remaining()
            )
            async for chunk in chunks:
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                if choice.finish_reason == "content_filter":
                    raise ChatError(self.name, FailureCategory.REFUSAL, "the model declined")
                if choice.delta and choice.delta.content:
                    yield ChatUpdate(choice.delta.content)
        except openai.APIError as error:
            raise self._classify(error, request) from error

    def _classify(self, error: openai.APIError, request: ChatRequest) -> ChatError:
        if isinstance(error, openai.APITimeoutError):
            return ChatError(
                self.name, FailureCategory.TIMEOUT, "request timed out", retryable=True
            )
        if isinstance(error, openai.APIConnectionError):
            return ChatError(
                self.name, FailureCategory.TRANSIENT, "connection failed", retryable=True
            )
        status = getattr(error, "status_code", None)
        if status == 429:
            return ChatError(
                self.name,
                FailureCategory.THROTTLED,
                "HTTP 429",
                retryable=True,
                retry_after=_retry_after(getattr(error, "response", None)),
            )
        if status in (401, 403, 404):
            return ChatError(self.name, FailureCategory.INVALID_CONFIGURATION, f"HTTP {status}")
        if status in (400, 422):
            uses_option = (
                request.options.json_schema is not None or request.options.temperature is not None
            )
            category = (
                FailureCategory.UNSUPPORTED_OPTION if uses_option else FailureCategory.INVALID_INPUT
            )
            return ChatError(self.name, category, f"HTTP {status}")
        if isinstance(status, int) and status >= 500:
            return ChatError(self.name, FailureCategory.TRANSIENT, f"HTTP {status}", retryable=True)
        return ChatError(self.name, FailureCategory.INVALID_OUTPUT, type(error).__name__)

    async def close(self) -> None:
        await self._client.close()


def _retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    headers: Mapping[str, str] = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                return None
    return None
