"""The chat-completions wire format, shared by the OpenAI SDK adapter and the local model.

What a request's body holds, what a response's JSON means (text, finish reason, usage
with the server's own timings) and how a rejected request is refined to an unsupported
option: one definition whether the call goes through the ``openai`` SDK
(:mod:`~ragwright.adapters.chatmodels.openai_compatible`) or straight over ``httpx``
(:mod:`~ragwright.adapters.chatmodels.llama_server`, the local model, which does not
pay the SDK's import on every command). Imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragwright.chat.contract import ChatRequest, Usage
from ragwright.errors import ChatError, FailureCategory


def completion_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a chat-completions call for ``request`` (without ``stream``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
    }
    options = request.options
    if options.max_output_tokens is not None:
        body["max_tokens"] = options.max_output_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "response",
                "schema": dict(options.json_schema),
                "strict": True,
            },
        }
    return body


def completion_usage(completion: Mapping[str, Any]) -> Usage | None:
    """The usage a chat-completions response reports, with what the server adds.

    OpenAI reports prompt-cache hits as ``usage.prompt_tokens_details.cached_tokens``;
    llama.cpp's server adds ``timings`` beside ``usage`` (``cache_n`` tokens reused from
    its slot's cache, ``prompt_ms`` reading the rest, ``predicted_ms`` generating).
    Anything absent or of the wrong type stays unknown (``None``), never 0.
    """
    usage = completion.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt, generated = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or generated is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    timings = completion.get("timings")
    timings = timings if isinstance(timings, Mapping) else {}
    if cached is None:
        cached = _count(timings.get("cache_n"))
    return Usage(
        prompt,
        generated,
        cached_input_tokens=cached,
        input_ms=_milliseconds(timings.get("prompt_ms")),
        output_ms=_milliseconds(timings.get("predicted_ms")),
    )


def refine_rejection(classified: ChatError, request: ChatRequest) -> ChatError:
    """An invalid-input rejection of a request that used an option names the option.

    The server rejected the request's shape; with a schema or a temperature set, that
    option is the likely cause (a schema or temperature the model does not accept).
    """
    options = request.options
    if classified.category is FailureCategory.INVALID_INPUT and (
        options.json_schema is not None or options.temperature is not None
    ):
        return ChatError(classified.provider, FailureCategory.UNSUPPORTED_OPTION, classified.detail)
    return classified


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _milliseconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return round(float(value), 1)
