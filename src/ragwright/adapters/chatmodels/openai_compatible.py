"""``OpenAIChatModel``: OpenAI, Azure OpenAI and any OpenAI-compatible server.

Built on the official ``openai`` SDK with its internal retries **off**
(``max_retries=0``): attempts are counted by our pipeline only. Each call's timeout is
the operation's remaining deadline, never a fresh one.

Failures are classified by the one classifier in ``adapters/http.py`` (exception type
and HTTP status, never message text), refined for chat in two ways only:

| outcome | category |
|---|---|
| an invalid-input status (400, 413, 422) for a request that used an option | unsupported option |
| ``refusal`` in the message, ``content_filter`` finish | refusal |
| no choices, empty or non-JSON text under a JSON schema | invalid output |

Caller cancellation propagates as ``asyncio.CancelledError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai

from ragwright.adapters.chatmodels import require_json
from ragwright.adapters.chatmodels.completions import (
    completion_body,
    completion_usage,
    refine_rejection,
)
from ragwright.adapters.http import exception_error
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory


class OpenAIChatModel:
    """A chat model reached through the OpenAI chat-completions API.

    ``outlives_cancellation``: a call whose caller is cancelled goes on at the server (it
    generates a buffered reply before it writes, and does not see the closed connection
    until then), so the capacity gate keeps its lease until it ends.
    """

    outlives_cancellation = True

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

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        try:
            completion = await self._client.chat.completions.create(
                **completion_body(self.model, request), timeout=deadline.remaining()
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
        return ChatResponse(
            text=text,
            finish_reason=choice.finish_reason or "unknown",
            model=completion.model or self.model,
            usage=completion_usage(completion.model_dump()),
            provider=self.name,
        )

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        try:
            chunks = await self._client.chat.completions.create(
                **completion_body(self.model, request), stream=True, timeout=deadline.remaining()
            )
            try:
                async for chunk in chunks:
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    if choice.finish_reason == "content_filter":
                        raise ChatError(self.name, FailureCategory.REFUSAL, "the model declined")
                    if choice.delta and choice.delta.content:
                        yield ChatUpdate(choice.delta.content)
            finally:
                # An abandoned stream closes its connection now, so the server stops
                # generating at its next token (not when the response is collected).
                await chunks.close()
        except (openai.APIError, httpx.HTTPError) as error:
            # The SDK wraps failures of the request, not of reading the event stream.
            raise self._classify(error, request) from error

    def _classify(self, error: Exception, request: ChatRequest) -> ChatError:
        return refine_rejection(exception_error(ChatError, self.name, error), request)

    async def close(self) -> None:
        await self._client.close()
