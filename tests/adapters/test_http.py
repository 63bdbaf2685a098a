"""One classifier: every status and exception maps to one category, for every adapter."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import httpx
import openai
import pytest

from ragwright.adapters.chatmodels.local import LocalChatModel, LocalModelServer
from ragwright.adapters.chatmodels.ollama import OllamaChatModel
from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel
from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder
from ragwright.adapters.http import classify_exception, classify_status, retry_after
from ragwright.adapters.rerankers import HttpReranker
from ragwright.chat.contract import ChatMessage, ChatModel, ChatRequest, Deadline
from ragwright.errors import (
    ChatError,
    EmbeddingProviderError,
    FailureCategory,
    ProviderError,
    RerankError,
)
from ragwright.testing.fakes import HASHING_PROFILE

F = FailureCategory
REQUEST = httpx.Request("POST", "http://provider.test/v1/x")


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (400, F.INVALID_INPUT),
        (401, F.INVALID_CONFIGURATION),
        (403, F.INVALID_CONFIGURATION),
        (404, F.INVALID_CONFIGURATION),
        (408, F.TIMEOUT),
        (409, F.INVALID_OUTPUT),
        (413, F.INVALID_INPUT),
        (422, F.INVALID_INPUT),
        (429, F.THROTTLED),
        (500, F.TRANSIENT),
        (502, F.TRANSIENT),
        (503, F.TRANSIENT),
        (504, F.TIMEOUT),
        (302, F.INVALID_OUTPUT),
    ],
)
def test_status_table(status: int, category: FailureCategory) -> None:
    assert classify_status(status) is category


def _status_error(status: int) -> openai.APIStatusError:
    return openai.APIStatusError(
        "any text", response=httpx.Response(status, request=REQUEST), body=None
    )


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (httpx.ReadTimeout("t", request=REQUEST), F.TIMEOUT),
        (httpx.ConnectTimeout("t", request=REQUEST), F.TIMEOUT),
        (httpx.PoolTimeout("t", request=REQUEST), F.TIMEOUT),
        (httpx.ConnectError("refused", request=REQUEST), F.TRANSIENT),
        (httpx.RemoteProtocolError("cut", request=REQUEST), F.TRANSIENT),
        (
            httpx.HTTPStatusError(
                "x", request=REQUEST, response=httpx.Response(504, request=REQUEST)
            ),
            F.TIMEOUT,
        ),
        (openai.APITimeoutError(request=REQUEST), F.TIMEOUT),
        (openai.APIConnectionError(request=REQUEST), F.TRANSIENT),
        (_status_error(408), F.TIMEOUT),
        (_status_error(429), F.THROTTLED),
        (_status_error(401), F.INVALID_CONFIGURATION),
        (_status_error(503), F.TRANSIENT),
        (
            openai.APIResponseValidationError(httpx.Response(200, request=REQUEST), None),
            F.INVALID_OUTPUT,
        ),
        (ValueError("not JSON"), F.INVALID_OUTPUT),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else None,
)
def test_exception_table(error: Exception, category: FailureCategory) -> None:
    assert classify_exception(error) is category


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({}, None),
    ],
)
def test_retry_after_header(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(httpx.Response(429, headers=headers)) == seconds


@pytest.mark.parametrize(
    ("category", "retryable"),
    [
        (F.TRANSIENT, True),
        (F.THROTTLED, True),
        (F.TIMEOUT, True),
        (F.DEADLINE_EXHAUSTED, False),
        (F.CANCELLED, False),
        (F.INTERRUPTED, False),
        (F.INVALID_CONFIGURATION, False),
        (F.UNSUPPORTED_OPTION, False),
        (F.INVALID_INPUT, False),
        (F.INVALID_OUTPUT, False),
        (F.REFUSAL, False),
        (F.CAPACITY, False),
    ],
)
def test_the_category_alone_decides_retryability(
    category: FailureCategory, retryable: bool
) -> None:
    assert category.retryable is retryable


# --- every adapter classifies through the one table -------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]
CHAT = ChatRequest((ChatMessage("user", "Where is the manual?"),))
OLLAMA_PROFILE = dataclasses.replace(
    HASHING_PROFILE, provider="ollama", model="m", artifact_digest="sha256:" + "ab" * 32
)
OPENAI_PROFILE = dataclasses.replace(HASHING_PROFILE, provider="openai", model="m")


def _chat(model: ChatModel) -> None:
    async def go() -> None:
        try:
            await model.complete(CHAT, Deadline.after(5))
        finally:
            await model.close()  # type: ignore[attr-defined]

    asyncio.run(go())


def _openai_chat(handler: Handler) -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    _chat(OpenAIChatModel("m", base_url="http://provider.test/v1", http_client=client))


def _azure_chat(handler: Handler) -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    _chat(OpenAIChatModel("m", azure_endpoint="http://provider.test", http_client=client))


def _ollama_chat(handler: Handler) -> None:
    _chat(OllamaChatModel("m", transport=httpx.MockTransport(handler)))


def _local_chat(handler: Handler) -> None:
    server = cast(LocalModelServer, SimpleNamespace(base_url="http://127.0.0.1:9", api_key="k"))
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    local = LocalChatModel(server, http_client=client)
    schema_request = dataclasses.replace(
        CHAT, options=dataclasses.replace(CHAT.options, json_schema={"type": "object"})
    )

    async def go() -> None:
        try:
            await local.complete(schema_request, Deadline.after(5))
        finally:
            await local.close()

    asyncio.run(go())


def _ollama_embedder(handler: Handler) -> None:
    def with_tags(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/tags":
            models = [{"name": "m", "digest": "ab" * 32}]
            return httpx.Response(200, json={"models": models})
        return handler(request)

    OllamaEmbedder(OLLAMA_PROFILE, transport=httpx.MockTransport(with_tags)).embed_query("q")


def _openai_embedder(handler: Handler) -> None:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    OpenAIEmbedder(OPENAI_PROFILE, api_key="k", http_client=client).embed_query("q")


def _azure_embedder(handler: Handler) -> None:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    OpenAIEmbedder(
        OPENAI_PROFILE,
        api_key="k",
        base_url="http://provider.test",
        azure_deployment="d",
        http_client=client,
    ).embed_query("q")


def _reranker(handler: Handler) -> None:
    HttpReranker("http://provider.test", transport=httpx.MockTransport(handler)).rerank("q", ["a"])


ADAPTERS: list[tuple[str, Callable[[Handler], None], type[ProviderError]]] = [
    ("openai-chat", _openai_chat, ChatError),
    ("azure-chat", _azure_chat, ChatError),
    ("ollama-chat", _ollama_chat, ChatError),
    ("local-chat", _local_chat, ChatError),
    ("ollama-embedder", _ollama_embedder, EmbeddingProviderError),
    ("openai-embedder", _openai_embedder, EmbeddingProviderError),
    ("azure-embedder", _azure_embedder, EmbeddingProviderError),
    ("http-reranker", _reranker, RerankError),
]


@pytest.mark.parametrize(("name", "call", "error_type"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
@pytest.mark.parametrize(
    ("status", "category"),
    [
        (408, F.TIMEOUT),
        (504, F.TIMEOUT),
        (429, F.THROTTLED),
        (502, F.TRANSIENT),
        (403, F.INVALID_CONFIGURATION),
    ],
)
def test_every_adapter_classifies_status_through_the_one_table(
    name: str,
    call: Callable[[Handler], None],
    error_type: type[ProviderError],
    status: int,
    category: FailureCategory,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, headers={"retry-after": "1"}, json={"error": "any text"})

    with pytest.raises(error_type) as caught:
        call(handler)
    assert caught.value.category is category is classify_status(status)
    assert caught.value.retry_after == 1.0
    assert len(seen) == 1  # one attempt: no adapter or SDK retries behind the pipeline


@pytest.mark.parametrize(("name", "call", "error_type"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
@pytest.mark.parametrize(
    ("error", "category"),
    [(httpx.ReadTimeout, F.TIMEOUT), (httpx.ConnectError, F.TRANSIENT)],
)
def test_every_adapter_classifies_transport_failures_through_the_one_table(
    name: str,
    call: Callable[[Handler], None],
    error_type: type[ProviderError],
    error: type[httpx.TransportError],
    category: FailureCategory,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error("any text", request=request)

    with pytest.raises(error_type) as caught:
        call(handler)
    assert caught.value.category is category
