"""``LlamaServerChatModel``: llama.cpp's OpenAI-compatible server, spoken over ``httpx``.

The local model (in-process or the background one) is always a llama.cpp server on
127.0.0.1. Reaching it through the ``openai`` SDK cost every command that answers the
SDK's import, about 0.5-0.7 s of a warm ``ask`` on two cores (docs/answers.md); the wire
format is small, so this adapter posts it with ``httpx`` (already loaded) and reads the
JSON or the event stream itself, with the server's key (``api_key``) as a bearer token
when it requires one. Request body, usage (with the server's ``timings``)
and the refinement of a rejected request are the same definitions the SDK adapter uses
(:mod:`~ragwright.adapters.chatmodels.completions`); failures are classified by
``adapters/http.py`` like every other provider's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from ragwright.adapters.chatmodels import require_json
from ragwright.adapters.chatmodels.completions import (
    completion_body,
    completion_usage,
    refine_rejection,
)
from ragwright.adapters.http import exception_error, status_error
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory


class LlamaServerChatModel:
    """A model served by llama.cpp's ``/v1/chat/completions`` at ``base_url``."""

    outlives_cancellation = True  # an HTTP model server (see OpenAIChatModel)

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        name: str = "local",
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.name = name
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        self._client = http_client or httpx.AsyncClient(timeout=None)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        try:
            response = await self._client.post(
                self._url,
                json=completion_body(self.model, request),
                headers=self._headers,
                timeout=deadline.remaining(),
            )
        except httpx.HTTPError as error:
            raise refine_rejection(exception_error(ChatError, self.name, error), request) from error
        if response.status_code >= 400:
            raise refine_rejection(status_error(ChatError, self.name, response), request)
        data = _json(self.name, response.text)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ChatError(self.name, FailureCategory.INVALID_OUTPUT, "no choices")
        choice = choices[0]
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        finish = choice.get("finish_reason")
        if message.get("refusal") or finish == "content_filter":
            raise ChatError(self.name, FailureCategory.REFUSAL, "the model declined")
        text = message.get("content")
        text = text if isinstance(text, str) else ""
        if request.options.json_schema is not None:
            require_json(self.name, text, finish if isinstance(finish, str) else None)
        model = data.get("model")
        return ChatResponse(
            text=text,
            finish_reason=finish if isinstance(finish, str) and finish else "unknown",
            model=model if isinstance(model, str) and model else self.model,
            usage=completion_usage(data),
            provider=self.name,
        )

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        body = {**completion_body(self.model, request), "stream": True}
        try:
            # Leaving the block closes the connection, so an abandoned stream stops the
            # server at its next token, not when the response would have ended.
            async with self._client.stream(
                "POST", self._url, json=body, headers=self._headers, timeout=deadline.remaining()
            ) as response:
                if response.status_code >= 400:
                    raise refine_rejection(status_error(ChatError, self.name, response), request)
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments
                    payload = line[len("data:") :].strip()
                    if payload == "[DONE]":
                        return
                    for piece in _deltas(self.name, payload):
                        yield ChatUpdate(piece)
        except httpx.HTTPError as error:
            raise refine_rejection(exception_error(ChatError, self.name, error), request) from error

    async def close(self) -> None:
        await self._client.aclose()


def _json(provider: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ChatError(provider, FailureCategory.INVALID_OUTPUT, "response is not JSON") from error
    if not isinstance(data, dict):
        raise ChatError(provider, FailureCategory.INVALID_OUTPUT, "response is not an object")
    return data


def _deltas(provider: str, payload: str) -> list[str]:
    """The text of one streamed chunk's first choice (as the SDK adapter reads it); a
    content-filter finish is a refusal."""
    choices = _json(provider, payload).get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return []
    choice = choices[0]
    if choice.get("finish_reason") == "content_filter":
        raise ChatError(provider, FailureCategory.REFUSAL, "the model declined")
    delta = choice.get("delta")
    content = delta.get("content") if isinstance(delta, Mapping) else None
    return [content] if isinstance(content, str) and content else []
