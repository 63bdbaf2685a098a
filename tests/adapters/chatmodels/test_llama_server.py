"""The local model's client: llama.cpp's chat-completions API over httpx, no SDK.

The real server is exercised in test_local.py; here a scripted transport records what
the client sends and answers what a llama.cpp server answers, failures included.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragwright.adapters.chatmodels.llama_server import LlamaServerChatModel
from ragwright.chat.contract import (
    ChatMessage,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    Deadline,
)
from ragwright.errors import ChatError, FailureCategory

REQUEST = ChatRequest(
    (ChatMessage("system", "Select sentences."), ChatMessage("user", "Where is the manual?")),
    ChatOptions(max_output_tokens=40, json_schema={"type": "object"}),
)
Handler = Callable[[httpx.Request], httpx.Response]


def _model(handler: Handler) -> LlamaServerChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return LlamaServerChatModel("qwen", base_url="http://127.0.0.1:9/v1", http_client=client)


def complete(handler: Handler, request: ChatRequest = REQUEST) -> ChatResponse:
    async def go() -> ChatResponse:
        model = _model(handler)
        try:
            return await model.complete(request, Deadline.after(5))
        finally:
            await model.close()

    return asyncio.run(go())


def stream(handler: Handler) -> list[ChatUpdate]:
    async def go() -> list[ChatUpdate]:
        model = _model(handler)
        try:
            return [update async for update in model.stream(REQUEST, Deadline.after(5))]
        finally:
            await model.close()

    return asyncio.run(go())


def reply(content: str = '{"status": "answered"}', **extra: Any) -> dict[str, Any]:
    return {
        "model": "/models/qwen.gguf",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": content}}],
        "usage": {"prompt_tokens": 310, "completion_tokens": 14},
        **extra,
    }


def test_a_buffered_call_sends_the_request_and_reads_text_usage_and_timings() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        timings = {"cache_n": 120, "prompt_ms": 812.44, "predicted_ms": 301.0}
        return httpx.Response(200, json=reply(timings=timings))

    response = complete(handler)
    assert response.text == '{"status": "answered"}'
    assert (response.finish_reason, response.provider) == ("stop", "local")
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (310, 14)
    assert (response.usage.cached_input_tokens, response.usage.input_ms) == (120, 812.4)
    assert response.usage.output_ms == 301.0
    assert seen[0].url.path == "/v1/chat/completions"
    body = json.loads(seen[0].content)
    assert body["messages"][1] == {"role": "user", "content": "Where is the manual?"}
    assert body["max_tokens"] == 40
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert "stream" not in body


@pytest.mark.parametrize(
    ("response", "category"),
    [
        (httpx.Response(400, json={"error": "bad grammar"}), FailureCategory.UNSUPPORTED_OPTION),
        (httpx.Response(503, json={"error": "loading"}), FailureCategory.TRANSIENT),
        (httpx.Response(200, text="<html>"), FailureCategory.INVALID_OUTPUT),
        (httpx.Response(200, json={"choices": []}), FailureCategory.INVALID_OUTPUT),
        (httpx.Response(200, json=reply("not json")), FailureCategory.INVALID_OUTPUT),
        (
            httpx.Response(
                200,
                json={"choices": [{"finish_reason": "content_filter", "message": {}}]},
            ),
            FailureCategory.REFUSAL,
        ),
    ],
)
def test_failures_are_classified(response: httpx.Response, category: FailureCategory) -> None:
    # Transport failures (refused, timed out) are in tests/adapters/test_http.py's matrix.
    with pytest.raises(ChatError) as caught:
        complete(lambda _request: response)
    assert caught.value.category is category


def _events(*chunks: dict[str, Any]) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def _delta(text: str | None, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def test_a_stream_yields_each_piece_and_asks_for_a_stream() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        body = _events(_delta('{"status"'), _delta(None), _delta(': "answered"}', "stop"))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    assert [u.text for u in stream(handler)] == ['{"status"', ': "answered"}']
    assert seen[0]["stream"] is True


def test_a_stream_cut_by_the_content_filter_is_a_refusal_and_a_rejected_one_is_classified() -> None:
    def filtered(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_events(_delta("{"), _delta(None, "content_filter")))

    with pytest.raises(ChatError) as caught:
        stream(filtered)
    assert caught.value.category is FailureCategory.REFUSAL
    with pytest.raises(ChatError) as caught:
        stream(lambda _request: httpx.Response(429, headers={"retry-after": "3"}))
    assert (caught.value.category, caught.value.retry_after) == (FailureCategory.THROTTLED, 3.0)


def test_every_call_carries_the_servers_key_as_a_bearer_token() -> None:
    # The local server requires its per-start key (it answers 401 without it).
    keys: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers.get("authorization"))
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=_events(_delta("{}", "stop")))
        return httpx.Response(200, json=reply())

    async def go() -> None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        model = LlamaServerChatModel(
            "qwen", base_url="http://127.0.0.1:9/v1", api_key="k-1", http_client=client
        )
        try:
            await model.complete(REQUEST, Deadline.after(5))
            assert [u.text async for u in model.stream(REQUEST, Deadline.after(5))] == ["{}"]
        finally:
            await model.close()

    asyncio.run(go())
    complete(handler)  # a server that requires no key is sent none
    assert keys == ["Bearer k-1", "Bearer k-1", None]


def test_asking_the_local_model_does_not_import_the_openai_sdk() -> None:
    # The point of this adapter: a command answering with the local model does not pay
    # the SDK's import (about half a second on two cores).
    code = (
        "import sys\n"
        "import ragwright.adapters.chatmodels.local, ragwright.adapters.chatmodels.resident\n"
        "import ragwright.runtime\n"
        "print('openai' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
