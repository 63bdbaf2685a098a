from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from ragwright.adapters.chatmodels.ollama import OllamaChatModel
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, Deadline
from ragwright.errors import ChatError, FailureCategory

REQUEST = ChatRequest(
    (ChatMessage("user", "Where is the manual?"),), ChatOptions(max_output_tokens=40)
)
SCHEMA = ChatRequest(REQUEST.messages, ChatOptions(json_schema={"type": "object"}))


def run(handler, request: ChatRequest = REQUEST, stream: bool = False):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        model = OllamaChatModel("qwen2.5:0.5b", transport=httpx.MockTransport(handler))
        try:
            if stream:
                return [u.text async for u in model.stream(request, Deadline.after(5))]
            return await model.complete(request, Deadline.after(5))
        finally:
            await model.close()

    return asyncio.run(go())


def test_buffered_call_and_request_shape() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "model": "qwen2.5:0.5b",
                "message": {"role": "assistant", "content": "Docs."},
                "done_reason": "stop",
                "prompt_eval_count": 9,
                "eval_count": 2,
            },
        )

    response = run(handler)
    assert (response.text, response.usage.input_tokens, response.usage.output_tokens) == (
        "Docs.",
        9,
        2,
    )
    assert seen[0]["stream"] is False and seen[0]["options"] == {"num_predict": 40}
    assert (response.usage.input_ms, response.usage.output_ms) == (None, None)


def test_eval_durations_split_the_call_into_prompt_and_generation() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "message": {"content": "Docs."},
                "prompt_eval_count": 9,
                "eval_count": 2,
                "prompt_eval_duration": 812_345_678,  # nanoseconds
                "eval_duration": 95_000_000,
            },
        )

    usage = run(handler).usage
    assert (usage.input_ms, usage.output_ms, usage.cached_input_tokens) == (812.3, 95.0, None)


def test_schema_goes_to_format_and_non_json_is_invalid_output() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["format"] == {"type": "object"}
        return httpx.Response(200, json={"message": {"content": "plain words"}})

    with pytest.raises(ChatError) as caught:
        run(handler, SCHEMA)
    assert caught.value.category is FailureCategory.INVALID_OUTPUT
    assert "not JSON" in str(caught.value)


def test_json_cut_at_the_token_limit_says_so() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"message": {"content": '{"status": "answ'}, "done_reason": "length"}
        )

    with pytest.raises(ChatError) as caught:
        run(handler, SCHEMA)
    assert caught.value.category is FailureCategory.INVALID_OUTPUT
    assert "output token limit" in str(caught.value)


def test_missing_counts_mean_unknown_usage() -> None:
    response = run(lambda r: httpx.Response(200, json={"message": {"content": "x"}}))
    assert response.usage is None


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (429, FailureCategory.THROTTLED),
        (500, FailureCategory.TRANSIENT),
        (404, FailureCategory.INVALID_CONFIGURATION),
    ],
)
def test_status_classification(status: int, category: FailureCategory) -> None:
    with pytest.raises(ChatError) as caught:
        run(lambda r: httpx.Response(status, json={"error": "model 'x' not found"}))
    assert caught.value.category is category


def test_connection_failure_is_transient() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ChatError) as caught:
        run(handler)
    assert caught.value.category is FailureCategory.TRANSIENT


def test_streaming_reads_ndjson() -> None:
    lines = [
        {"message": {"content": "On the "}},
        {"message": {"content": "docs page."}},
        {"done": True},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    assert run(lambda r: httpx.Response(200, content=body), stream=True) == [
        "On the ",
        "docs page.",
    ]
