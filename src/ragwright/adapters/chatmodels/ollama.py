"""``OllamaChatModel``: Ollama's native ``/api/chat`` (buffered and NDJSON streaming).

A JSON schema goes to Ollama's ``format`` field (schema-constrained output). Failures
are classified by HTTP status and transport exception type (``adapters/http.py``);
usage comes from ``prompt_eval_count``/``eval_count`` and is unknown when absent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ragwright.adapters.chatmodels import require_json
from ragwright.adapters.http import exception_error, status_error
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline, Usage
from ragwright.errors import ChatError, FailureCategory


class OllamaChatModel:
    """A model served by Ollama."""

    outlives_cancellation = True  # an HTTP model server (see OpenAIChatModel)

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:11434",
        name: str = "ollama",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model
        self.name = name
        self._client = httpx.AsyncClient(base_url=base_url, transport=transport, timeout=None)

    def _body(self, request: ChatRequest, stream: bool) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if request.options.max_output_tokens is not None:
            options["num_predict"] = request.options.max_output_tokens
        if request.options.temperature is not None:
            options["temperature"] = request.options.temperature
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": stream,
            "options": options,
        }
        if request.options.json_schema is not None:
            body["format"] = dict(request.options.json_schema)
        return body

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        try:
            response = await self._client.post(
                "/api/chat", json=self._body(request, False), timeout=deadline.remaining()
            )
        except httpx.HTTPError as error:
            raise exception_error(ChatError, self.name, error) from error
        if response.status_code >= 400:
            raise status_error(ChatError, self.name, response)
        try:
            data = response.json()
            text = str(data["message"]["content"])
        except (ValueError, KeyError, TypeError) as error:
            raise ChatError(
                self.name, FailureCategory.INVALID_OUTPUT, "unexpected response"
            ) from error
        if request.options.json_schema is not None:
            require_json(self.name, text, data.get("done_reason"))
        prompt, generated = data.get("prompt_eval_count"), data.get("eval_count")
        return ChatResponse(
            text=text,
            finish_reason=str(data.get("done_reason") or "stop"),
            model=str(data.get("model") or self.model),
            usage=Usage(
                prompt,
                generated,
                input_ms=_milliseconds(data.get("prompt_eval_duration")),
                output_ms=_milliseconds(data.get("eval_duration")),
            )
            if isinstance(prompt, int) and isinstance(generated, int)
            else None,
            provider=self.name,
        )

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        try:
            async with self._client.stream(
                "POST", "/api/chat", json=self._body(request, True), timeout=deadline.remaining()
            ) as response:
                if response.status_code >= 400:
                    raise status_error(ChatError, self.name, response)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        piece = json.loads(line)
                    except ValueError as error:
                        raise ChatError(
                            self.name, FailureCategory.INVALID_OUTPUT, "bad stream line"
                        ) from error
                    if piece.get("error"):
                        raise ChatError(self.name, FailureCategory.TRANSIENT, "stream error")
                    content = (piece.get("message") or {}).get("content")
                    if content:
                        yield ChatUpdate(str(content))
        except httpx.HTTPError as error:
            raise exception_error(ChatError, self.name, error) from error

    async def close(self) -> None:
        await self._client.aclose()


def _milliseconds(nanoseconds: Any) -> float | None:
    """Ollama's durations are integer nanoseconds; anything else stays unknown."""
    if isinstance(nanoseconds, bool) or not isinstance(nanoseconds, int) or nanoseconds < 0:
        return None
    return round(nanoseconds / 1e6, 1)
