"""The OpenAI-compatible adapter against a local HTTP server that plays scripted answers."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, Deadline
from ragwright.errors import ChatError, FailureCategory

REQUEST = ChatRequest(
    (ChatMessage("system", "Be brief."), ChatMessage("user", "Where is the manual?"))
)
SCHEMA = ChatRequest(
    REQUEST.messages, ChatOptions(max_output_tokens=50, json_schema={"type": "object"})
)


def completion(
    content: str | None = "On the docs page.",
    finish: str = "stop",
    usage: bool = True,
    refusal: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model-7",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
            }
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    return body


class Handler(BaseHTTPRequestHandler):
    script: ClassVar[list[tuple[int, dict[str, str], Any]]] = []
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append({"path": self.path, "body": body})
        status, headers, payload = Handler.script.pop(0)
        if payload == "hang":
            threading.Event().wait(1)
            return
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if isinstance(payload, list):  # an SSE stream of chunks, then maybe a cut
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for chunk in payload:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            return
        data = json.dumps(payload).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Handler.script.clear()
    Handler.seen.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def call(base: str, request: ChatRequest = REQUEST, seconds: float = 5.0):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        model = OpenAIChatModel("qwen", base_url=base, api_key="sk-test")
        try:
            return await model.complete(request, Deadline.after(seconds))
        finally:
            await model.close()

    return asyncio.run(go())


def test_buffered_call_maps_text_usage_model_and_sends_options(server: str) -> None:
    Handler.script.append((200, {}, completion('{"status": "answered"}')))
    response = call(server, SCHEMA)
    assert (response.text, response.model, response.finish_reason) == (
        '{"status": "answered"}',
        "served-model-7",
        "stop",
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 5)
    sent = Handler.seen[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["max_tokens"] == 50
    assert sent["body"]["response_format"]["type"] == "json_schema"
    assert sent["body"]["messages"][1] == {"role": "user", "content": "Where is the manual?"}


def test_missing_usage_is_unknown_not_zero(server: str) -> None:
    Handler.script.append((200, {}, completion(usage=False)))
    assert call(server).usage is None


def test_a_llama_cpp_server_s_timings_split_the_call_into_prompt_and_generation(
    server: str,
) -> None:
    body = completion()
    body["timings"] = {"cache_n": 96, "prompt_n": 210, "prompt_ms": 1234.56, "predicted_ms": 410.0}
    Handler.script.append((200, {}, body))
    usage = call(server).usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 5)
    assert (usage.cached_input_tokens, usage.input_ms, usage.output_ms) == (96, 1234.6, 410.0)


def test_an_openai_prompt_cache_hit_is_reported_and_absent_figures_stay_unknown(
    server: str,
) -> None:
    body = completion()
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 8}
    Handler.script.append((200, {}, body))
    usage = call(server).usage
    assert (usage.cached_input_tokens, usage.input_ms, usage.output_ms) == (8, None, None)
    body = completion()
    body["timings"] = {"cache_n": "many", "prompt_ms": -1, "predicted_ms": True}
    Handler.script.append((200, {}, body))
    usage = call(server).usage
    assert (usage.cached_input_tokens, usage.input_ms, usage.output_ms) == (None, None, None)


@pytest.mark.parametrize(
    ("status", "headers", "category", "retry_after"),
    [
        (429, {"retry-after": "2"}, FailureCategory.THROTTLED, 2.0),
        (503, {}, FailureCategory.TRANSIENT, None),
        (401, {}, FailureCategory.INVALID_CONFIGURATION, None),
        (404, {}, FailureCategory.INVALID_CONFIGURATION, None),
        (400, {}, FailureCategory.INVALID_INPUT, None),
    ],
)
def test_http_failures_are_classified_once_without_sdk_retries(
    server: str,
    status: int,
    headers: dict[str, str],
    category: FailureCategory,
    retry_after: float | None,
) -> None:
    Handler.script.append((status, headers, {"error": {"message": "whatever the text says"}}))
    with pytest.raises(ChatError) as caught:
        call(server)
    assert caught.value.category is category and caught.value.retry_after == retry_after
    assert len(Handler.seen) == 1  # the SDK did not retry behind our back


def test_a_rejected_schema_is_an_unsupported_option(server: str) -> None:
    Handler.script.append((400, {}, {"error": {"message": "response_format not supported"}}))
    with pytest.raises(ChatError) as caught:
        call(server, SCHEMA)
    assert caught.value.category is FailureCategory.UNSUPPORTED_OPTION


@pytest.mark.parametrize(
    ("body", "request_", "category"),
    [
        (
            completion(content=None, refusal="I can't help with that."),
            REQUEST,
            FailureCategory.REFUSAL,
        ),
        (completion(finish="content_filter"), REQUEST, FailureCategory.REFUSAL),
        (completion("not json at all"), SCHEMA, FailureCategory.INVALID_OUTPUT),
    ],
)
def test_refusals_and_invalid_output(
    server: str, body: dict[str, Any], request_: ChatRequest, category: FailureCategory
) -> None:
    Handler.script.append((200, {}, body))
    with pytest.raises(ChatError) as caught:
        call(server, request_)
    assert caught.value.category is category


def test_json_cut_at_the_token_limit_says_so(server: str) -> None:
    Handler.script.append((200, {}, completion('{"status": "answ', finish="length")))
    with pytest.raises(ChatError) as caught:
        call(server, SCHEMA)
    assert caught.value.category is FailureCategory.INVALID_OUTPUT
    assert "output token limit" in str(caught.value)


def test_the_call_timeout_is_the_remaining_deadline(server: str) -> None:
    Handler.script.append((200, {}, "hang"))
    with pytest.raises(ChatError) as caught:
        call(server, seconds=0.3)
    assert caught.value.category is FailureCategory.TIMEOUT


def test_streaming_yields_deltas(server: str) -> None:
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        for piece in ("On the ", "docs page.")
    ]
    Handler.script.append((200, {}, chunks))

    async def go() -> list[str]:
        model = OpenAIChatModel("qwen", base_url=server, api_key="sk-test")
        try:
            return [u.text async for u in model.stream(REQUEST, Deadline.after(5))]
        finally:
            await model.close()

    assert asyncio.run(go()) == ["On the ", "docs page."]
    assert Handler.seen[0]["body"]["stream"] is True


def test_azure_uses_the_deployment_path_and_api_key_header(server: str) -> None:
    Handler.script.append((200, {}, completion()))
    endpoint = server.removesuffix("/v1")

    async def go():  # type: ignore[no-untyped-def]
        model = OpenAIChatModel("support-chat", api_key="azure-key", azure_endpoint=endpoint)
        try:
            return await model.complete(REQUEST, Deadline.after(5))
        finally:
            await model.close()

    assert asyncio.run(go()).provider == "azure-openai"
    assert Handler.seen[0]["path"].startswith("/openai/deployments/support-chat/chat/completions")
