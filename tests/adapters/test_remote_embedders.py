from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder, reports_model
from ragwright.deadline import Deadline, deadline_scope
from ragwright.errors import (
    ArtifactMismatch,
    DimensionMismatch,
    EmbeddingError,
    EmbeddingProviderError,
    FailureCategory,
    ProviderError,
)
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
    ("status", "category"),
    [
        (400, FailureCategory.INVALID_INPUT),
        (408, FailureCategory.TIMEOUT),
        (429, FailureCategory.THROTTLED),
        (503, FailureCategory.TRANSIENT),
        (401, FailureCategory.INVALID_CONFIGURATION),
    ],
)
def test_ollama_failures_are_classified_by_status(status: int, category: FailureCategory) -> None:
    fake = Recorder(tags(), httpx.Response(status, json={"error": "input length exceeds context"}))
    embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake))
    with pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_documents(["x" * 10])
    assert caught.value.category is category
    assert isinstance(caught.value, EmbeddingError)  # still stops ingestion as before


def test_ollama_request_timeout_is_the_remaining_deadline() -> None:
    fake = Recorder(tags(), httpx.Response(200, json={"embeddings": [[1, 0, 0]]}))
    embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake), timeout=120.0)
    now = [100.0]
    with deadline_scope(Deadline(107.5, clock=lambda: now[0])):
        embedder.embed_documents(["a"])
    assert fake.requests[1].extensions["timeout"]["read"] == pytest.approx(7.5)


def test_ollama_sends_nothing_once_the_deadline_is_spent() -> None:
    fake = Recorder(tags())
    embedder = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake))
    with deadline_scope(Deadline(0.0, clock=lambda: 1.0)), pytest.raises(ProviderError) as caught:
        embedder.embed_documents(["a"])
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert len(fake.requests) == 1  # only the digest check made at construction


def test_a_vector_of_the_wrong_size_stops_the_run() -> None:
    fake = Recorder(tags(), httpx.Response(200, json={"embeddings": [[1, 0]]}))
    with pytest.raises(DimensionMismatch) as caught:
        OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(fake)).embed_documents(["a"])
    assert (caught.value.expected, caught.value.actual) == (3, 2)


def _openai_response(model: str = "text-embedding-3-small", status: int = 200) -> httpx.Response:
    data = [{"index": 1, "embedding": [0, 1, 0]}, {"index": 0, "embedding": [1, 0, 0]}]
    return httpx.Response(status, json={"object": "list", "data": data, "model": model})


def openai_embedder(fake: Recorder, **options: object) -> OpenAIEmbedder:
    """The SDK-backed embedder over a fake transport (the SDK's own ``http_client``)."""
    client = httpx.Client(transport=httpx.MockTransport(fake))
    return OpenAIEmbedder(OPENAI, http_client=client, **options)  # type: ignore[arg-type]


def test_openai_orders_by_index_and_authenticates_with_bearer() -> None:
    fake = Recorder(_openai_response())
    embedder = openai_embedder(fake, api_key="sk-test")
    assert embedder.embed_documents(["a", "b"]) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    request = fake.requests[0]
    assert (request.url.host, request.url.path) == ("api.openai.com", "/v1/embeddings")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert fake.body(0) == {
        "input": ["a", "b"],
        "model": "text-embedding-3-small",
        "encoding_format": "float",
    }


def test_openai_batches_in_input_order() -> None:
    second = httpx.Response(
        200,
        json={"data": [{"index": 0, "embedding": [0, 0, 1]}], "model": "text-embedding-3-small"},
    )
    fake = Recorder(_openai_response(), second)
    embedder = openai_embedder(fake, api_key="k", batch_size=2)
    assert embedder.embed_documents(["a", "b", "c"])[2] == [0.0, 0.0, 1.0]
    assert [fake.body(i)["input"] for i in (0, 1)] == [["a", "b"], ["c"]]


def test_azure_uses_the_deployment_path_api_version_and_key_header() -> None:
    fake = Recorder(_openai_response())
    embedder = openai_embedder(
        fake,
        api_key="k",
        base_url="https://example.openai.azure.com",
        azure_deployment="support-embeddings",
    )
    embedder.embed_documents(["a", "b"])
    request = fake.requests[0]
    assert request.url.host == "example.openai.azure.com"
    assert request.url.path == "/openai/deployments/support-embeddings/embeddings"
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == "k"
    assert "authorization" not in request.headers
    assert embedder.provider == "azure-openai"


def test_azure_with_a_token_sends_it_as_bearer() -> None:
    fake = Recorder(_openai_response())
    embedder = openai_embedder(
        fake,
        bearer_token="entra-token",
        base_url="https://example.openai.azure.com",
        azure_deployment="support-embeddings",
    )
    embedder.embed_documents(["a", "b"])
    assert fake.requests[0].headers["authorization"] == "Bearer entra-token"
    assert "api-key" not in fake.requests[0].headers


def test_openai_response_from_another_model_is_refused() -> None:
    embedder = openai_embedder(
        Recorder(_openai_response(model="text-embedding-3-large")), api_key="k"
    )
    with pytest.raises(ArtifactMismatch):
        embedder.embed_documents(["a", "b"])


@pytest.mark.parametrize(
    ("profile_model", "reported", "accepted"),
    [
        ("text-embedding-3-small", "text-embedding-3-small", True),
        # OpenAI's answer to text-embedding-ada-002 until January 2024.
        ("text-embedding-ada-002", "text-embedding-ada-002-v2", True),
        ("embed", "embed-2024-05-13", True),
        ("embed", "embed-20240513", True),
        ("embed", "embed-0613", True),
        ("embed", "embed-v1.5", True),
        # A name the profile's is a prefix of is another model.
        ("text-embedding-3", "text-embedding-3-large", False),
        ("text-embedding-3", "text-embedding-3-small", False),
        ("text-embedding-ada", "text-embedding-ada-002", False),
        ("embed", "embed-large-v2", False),
        ("embed", "embed-v2-large", False),
        ("embed", "embed2", False),
        ("embed", "embed-", False),
        ("embed", "embed-05-13", False),
        ("embed", "Embed", False),
        ("embed-v2", "embed", False),
    ],
)
def test_the_reported_model_must_be_the_profiles_up_to_a_version_or_date(
    profile_model: str, reported: str, accepted: bool
) -> None:
    assert reports_model(reported, profile_model) is accepted
    profile = dataclasses.replace(OPENAI, model=profile_model)
    client = httpx.Client(transport=httpx.MockTransport(Recorder(_openai_response(reported))))
    embedder = OpenAIEmbedder(profile, api_key="k", http_client=client)
    if accepted:
        assert len(embedder.embed_documents(["a", "b"])) == 2
    else:
        with pytest.raises(ArtifactMismatch) as caught:
            embedder.embed_documents(["a", "b"])
        assert (caught.value.expected, caught.value.actual) == (profile_model, reported)


def test_openai_vector_of_the_wrong_size_stops_the_run() -> None:
    body = {"data": [{"index": 0, "embedding": [1, 0]}], "model": "text-embedding-3-small"}
    embedder = openai_embedder(Recorder(httpx.Response(200, json=body)), api_key="k")
    with pytest.raises(DimensionMismatch) as caught:
        embedder.embed_documents(["a"])
    assert (caught.value.expected, caught.value.actual) == (3, 2)


def test_openai_missing_vectors_are_invalid_output() -> None:
    body = {"data": [{"index": 0, "embedding": [1, 0, 0]}], "model": "text-embedding-3-small"}
    embedder = openai_embedder(Recorder(httpx.Response(200, json=body)), api_key="k")
    with pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_documents(["a", "b"])
    assert caught.value.category is FailureCategory.INVALID_OUTPUT


def test_openai_needs_credentials() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIEmbedder(OPENAI)
    assert caught.value.category is FailureCategory.INVALID_CONFIGURATION


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (400, FailureCategory.INVALID_INPUT),
        (408, FailureCategory.TIMEOUT),
        (429, FailureCategory.THROTTLED),
        (504, FailureCategory.TIMEOUT),
        (503, FailureCategory.TRANSIENT),
        (401, FailureCategory.INVALID_CONFIGURATION),
    ],
)
def test_openai_failures_are_classified_once_without_sdk_retries(
    status: int, category: FailureCategory
) -> None:
    fake = Recorder(
        httpx.Response(status, headers={"retry-after": "3"}, json={"error": {"message": "x"}}),
        _openai_response(),
    )
    with pytest.raises(EmbeddingProviderError) as caught:
        openai_embedder(fake, api_key="k").embed_documents(["a"])
    assert caught.value.category is category
    assert caught.value.retry_after == 3.0
    assert len(fake.requests) == 1  # max_retries=0: the SDK did not retry behind our back


def test_transport_timeout_is_classified() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    client = httpx.Client(transport=httpx.MockTransport(timeout))
    embedder = OpenAIEmbedder(OPENAI, api_key="k", http_client=client)
    with pytest.raises(ProviderError) as caught:
        embedder.embed_documents(["a"])
    assert caught.value.category is FailureCategory.TIMEOUT


def test_openai_request_timeout_is_the_remaining_deadline() -> None:
    fake = Recorder(_openai_response())
    embedder = openai_embedder(fake, api_key="k", timeout=60.0)
    now = [50.0]
    with deadline_scope(Deadline(52.5, clock=lambda: now[0])):
        embedder.embed_documents(["a", "b"])
    assert fake.requests[0].extensions["timeout"]["read"] == pytest.approx(2.5)


def test_openai_without_a_deadline_uses_its_own_timeout() -> None:
    fake = Recorder(_openai_response())
    openai_embedder(fake, api_key="k", timeout=42.0).embed_documents(["a", "b"])
    assert fake.requests[0].extensions["timeout"]["read"] == 42.0


def test_openai_sends_nothing_once_the_deadline_is_spent() -> None:
    fake = Recorder(_openai_response())
    embedder = openai_embedder(fake, api_key="k")
    with deadline_scope(Deadline(0.0, clock=lambda: 1.0)), pytest.raises(ProviderError) as caught:
        embedder.embed_documents(["a"])
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert fake.requests == []


def test_both_adapters_say_how_many_batches_may_be_in_flight() -> None:
    ollama = OllamaEmbedder(OLLAMA, transport=httpx.MockTransport(Recorder(tags())), in_flight=6)
    assert ollama.in_flight == 6
    assert openai_embedder(Recorder(), api_key="k", in_flight=3).in_flight == 3
    with pytest.raises(ValueError, match="in_flight must be at least 1"):
        openai_embedder(Recorder(), api_key="k", in_flight=0)
