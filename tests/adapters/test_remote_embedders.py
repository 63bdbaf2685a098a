from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder
from ragwright.errors import ArtifactMismatch, DimensionMismatch, FailureCategory, ProviderError
from ragwright.testing.fakes import HASHING_PROFILE

DIGEST = "sha256:" + "ab" * 32
OLLAMA = dataclasses.replace(
    HASHING_PROFILE,
    profile_id="gemma-v1",
    provider="ollama",
    model="embeddinggemma:300m",
    artifact_digest=DIGEST,
    dimensions=3,
)
OPENAI = dataclasses.replace(
    HASHING_PROFILE,
    profile_id="oai-v1",
    provider="openai",
    model="text-embedding-3-small",
    dimensions=3,
)


class Recorder:
    """A fake provider that records requests and answers from a script."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    def body(self, index: int) -> dict[str, object]:
        return json.loads(self.requests[index].content)


def tags(digest: str = "ab" * 32) -> httpx.Response:
    return httpx.Response(200, json={"models": [{"name": "embeddinggemma:300m", "digest": digest}]})


def test_ollama_sends_truncate_false_and_returns_vectors() -> None:
    fake = Recorder(tags(), httpx.Response(200, json={"embeddings": [[1, 0, 0], [0, 1, 0]]}))
    embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake))
    assert embedder.embed_documents(["a", "b"]) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert fake.requests[1].url.path == "/api/embed"
    assert fake.body(1) == {"model": "embeddinggemma:300m", "input": ["a", "b"], "truncate": False}


def test_ollama_refuses_a_model_with_another_digest() -> None:
    with pytest.raises(ArtifactMismatch) as caught:
        OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(Recorder(tags("cd" * 32))))
    assert caught.value.expected == DIGEST


def test_ollama_missing_model_is_a_configuration_error() -> None:
    empty = httpx.Response(200, json={"models": []})
    with pytest.raises(ProviderError) as caught:
        OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(Recorder(empty)))
    assert caught.value.category is FailureCategory.INVALID_CONFIGURATION


@pytest.mark.parametrize(
    ("status", "category", "retryable"),
    [
        (400, FailureCategory.INVALID_INPUT, False),
        (429, FailureCategory.THROTTLED, True),
        (503, FailureCategory.TRANSIENT, True),
        (401, FailureCategory.INVALID_CONFIGURATION, False),
    ],
)
def test_ollama_failures_are_classified_by_status(
    status: int, category: FailureCategory, retryable: bool
) -> None:
    fake = Recorder(tags(), httpx.Response(status, json={"error": "input length exceeds context"}))
    embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake))
    with pytest.raises(ProviderError) as caught:
        embedder.embed_documents(["x" * 10])
    assert (caught.value.category, caught.value.retryable) == (category, retryable)


def test_a_vector_of_the_wrong_size_stops_the_run() -> None:
    fake = Recorder(tags(), httpx.Response(200, json={"embeddings": [[1, 0]]}))
    with pytest.raises(DimensionMismatch) as caught:
        OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake)).embed_documents(["a"])
    assert (caught.value.expected, caught.value.actual) == (3, 2)


def _openai_response(model: str = "text-embedding-3-small") -> httpx.Response:
    data = [{"index": 1, "embedding": [0, 1, 0]}, {"index": 0, "embedding": [1, 0, 0]}]
    return httpx.Response(200, json={"data": data, "model": model})


def test_openai_orders_by_index_and_authenticates_with_bearer() -> None:
    fake = Recorder(_openai_response())
    embedder = OpenAIEmbedder(OPENAI, api_key="sk-test", transport=httpx.MockTransport(fake))
    assert embedder.embed_documents(["a", "b"]) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    request = fake.requests[0]
    assert request.url.path == "/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert fake.body(0)["model"] == "text-embedding-3-small"


def test_azure_uses_the_deployment_path_api_version_and_key_header() -> None:
    fake = Recorder(_openai_response())
    embedder = OpenAIEmbedder(
        OPENAI,
        api_key="k",
        base_url="https://example.openai.azure.com",
        azure_deployment="support-embeddings",
        transport=httpx.MockTransport(fake),
    )
    embedder.embed_documents(["a", "b"])
    request = fake.requests[0]
    assert request.url.path == "/openai/deployments/support-embeddings/embeddings"
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == "k"
    assert "model" not in fake.body(0)


def test_openai_response_from_another_model_is_refused() -> None:
    fake = Recorder(_openai_response(model="text-embedding-3-large"))
    embedder = OpenAIEmbedder(OPENAI, api_key="k", transport=httpx.MockTransport(fake))
    with pytest.raises(ArtifactMismatch):
        embedder.embed_documents(["a", "b"])


def test_openai_needs_credentials() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIEmbedder(OPENAI)
    assert caught.value.category is FailureCategory.INVALID_CONFIGURATION


def test_transport_timeout_is_classified() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    embedder = OpenAIEmbedder(OPENAI, api_key="k", transport=httpx.MockTransport(timeout))
    with pytest.raises(ProviderError) as caught:
        embedder.embed_documents(["a"])
    assert caught.value.category is FailureCategory.TIMEOUT
