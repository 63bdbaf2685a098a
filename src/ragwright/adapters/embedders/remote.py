"""Embedding providers reached over HTTP: Ollama, OpenAI and Azure OpenAI.

None of them can count tokens locally for their models, so they make the provider reject
over-long input instead of truncating it: Ollama gets ``truncate: false``; the OpenAI
embeddings API rejects inputs over the model's limit with HTTP 400. Either way the run
stops with a classified :class:`EmbeddingProviderError` (``invalid_input``), never a
shortened vector. Every failure goes through the one classifier (``adapters/http.py``);
each request's timeout is what is left of the current deadline
(:func:`ragwright.deadline.current_deadline`), else the adapter's ``timeout``. Retries
are not done here: ``runtime.open_embedder`` wraps these adapters in
:class:`ragwright.retry.RetryingEmbedder`.

Concurrency: both adapters are safe to call from several threads at once (they keep no
state between calls; ``httpx`` and the ``openai`` SDK pool connections per client), and
say how many batches a caller may keep in flight with ``in_flight``. The ingestion
pipeline keeps that many ``embed_documents`` calls outstanding; ``runtime.open_embedder``
puts a capacity gate (:class:`ragwright.embedding_gate.EmbeddingCapacityGate`) between
them and the provider, so a 429 cools every caller down together.

Model identity: Ollama reports a digest per installed model, which must equal the
profile's ``artifact_digest`` before the first embedding. Hosted OpenAI models have no
digest; every response's reported model name must be the profile's model
(:func:`reports_model`: exactly, or with a version or date suffix). A
self-hosted OpenAI-compatible server (llama.cpp, vLLM) may echo whatever model name it
is sent, so ``verify_listed_model`` also requires the profile's model among the ids the
server lists (``GET /v1/models``) before the first embedding. Such a server reports no
file digest: for a GGUF it serves, the profile's ``artifact_digest`` is the file's
SHA-256, recorded by whoever deploys it, and it binds the collection (an index built
under one digest refuses a profile naming another, ``ContractMismatch``); ragwright
cannot read the server's file to check it (the contract field is ``embedding_profile_digest``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import httpx
import openai

from ragwright.adapters.http import call_timeout, decode, exception_error, post_json
from ragwright.errors import (
    ArtifactMismatch,
    DimensionMismatch,
    EmbeddingProviderError,
    FailureCategory,
)
from ragwright.types import EmbeddingProfile

# What a hosted API may append to the model name it was asked for: a version or a date
# ("-v2", "-2024-05-13", "-20240513", "-0613"). OpenAI answered text-embedding-ada-002
# requests as "text-embedding-ada-002-v2" until January 2024 and now reports the name
# as sent; Azure OpenAI reports the deployment's underlying model name.
_MODEL_SUFFIX = re.compile(r"-(?:v\d+(?:\.\d+)*|\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")


def reports_model(reported: str, model: str) -> bool:
    """Whether a response reporting ``reported`` came from ``model``: the same name, or
    the name followed by one version or date suffix. Any other name is another model
    (profile ``text-embedding-3`` is not ``text-embedding-3-large``)."""
    if reported == model:
        return True
    return (
        reported.startswith(model) and _MODEL_SUFFIX.fullmatch(reported[len(model) :]) is not None
    )


def _check_in_flight(in_flight: int) -> int:
    if in_flight < 1:
        raise ValueError(f"in_flight must be at least 1, got {in_flight}")
    return in_flight


def _vectors(provider: str, raw: object, count: int, dimensions: int) -> list[list[float]]:
    if not isinstance(raw, list) or len(raw) != count:
        raise EmbeddingProviderError(
            provider, FailureCategory.INVALID_OUTPUT, f"expected {count} vectors"
        )
    vectors: list[list[float]] = []
    for vector in raw:
        if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
            raise EmbeddingProviderError(
                provider, FailureCategory.INVALID_OUTPUT, "a vector is not a list of numbers"
            )
        if len(vector) != dimensions:
            raise DimensionMismatch(dimensions, len(vector))
        vectors.append([float(x) for x in vector])
    return vectors


class OllamaEmbedder:
    """Ollama's ``/api/embed`` with ``truncate: false``; ``in_flight`` batches at once."""

    counts_tokens = False

    def __init__(
        self,
        profile: EmbeddingProfile,
        *,
        base_url: str = "http://127.0.0.1:11434",
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        batch_size: int = 32,
        in_flight: int = 1,
    ) -> None:
        self.profile = profile
        self.batch_size = batch_size
        self.in_flight = _check_in_flight(in_flight)
        self.timeout = timeout
        self._client = httpx.Client(
            base_url=base_url,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=max(100, in_flight)),
        )
        try:
            self._verify_digest()
        except BaseException:
            self._client.close()  # a refused start leaves no connection behind
            raise

    def _verify_digest(self) -> None:
        try:
            response = self._client.get("/api/tags")
        except httpx.HTTPError as error:
            raise exception_error(EmbeddingProviderError, "ollama", error) from error
        models = decode(EmbeddingProviderError, "ollama", response).get("models", [])
        found = next(
            (
                m
                for m in models
                if m.get("name") == self.profile.model or m.get("model") == self.profile.model
            ),
            None,
        )
        if found is None:
            raise EmbeddingProviderError(
                "ollama",
                FailureCategory.INVALID_CONFIGURATION,
                f"model {self.profile.model!r} is not installed",
            )
        digest = str(found.get("digest", ""))
        actual = digest if digest.startswith("sha256:") else f"sha256:{digest}"
        if actual != self.profile.artifact_digest:
            raise ArtifactMismatch(
                f"ollama:{self.profile.model}", self.profile.artifact_digest, actual
            )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        raise NotImplementedError("Ollama cannot count tokens locally; it rejects over-long input")

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            body = {"model": self.profile.model, "input": batch, "truncate": False}
            data = post_json(
                self._client,
                EmbeddingProviderError,
                "ollama",
                "/api/embed",
                body,
                default_timeout=self.timeout,
            )
            vectors.extend(
                _vectors("ollama", data.get("embeddings"), len(batch), self.profile.dimensions)
            )
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        self._client.close()


class OpenAIEmbedder:
    """OpenAI's embeddings API through the ``openai`` SDK, or an Azure OpenAI deployment.

    ``base_url`` is the server root (``/v1`` is appended) or, for Azure, the resource
    endpoint with ``azure_deployment`` naming the deployment. Authentication is an API key
    or a bearer token (Azure: a Microsoft Entra ID token). The SDK's own retries are off
    (``max_retries=0``): attempts are counted by :class:`ragwright.retry.RetryingEmbedder`
    only. Each request's timeout is what is left of the current deadline
    (:func:`ragwright.deadline.current_deadline`), else ``timeout``. ``http_client``
    replaces the SDK's HTTP client (tests pass one over ``httpx.MockTransport``).
    ``in_flight`` is how many ``embed_documents`` calls a caller may keep outstanding;
    ``verify_listed_model`` checks the model is listed by the server (module docstring).
    """

    counts_tokens = False

    def __init__(
        self,
        profile: EmbeddingProfile,
        *,
        api_key: str | None = None,
        base_url: str = "https://api.openai.com",
        azure_deployment: str | None = None,
        azure_api_version: str = "2024-10-21",
        bearer_token: str | None = None,
        timeout: float = 60.0,
        http_client: httpx.Client | None = None,
        batch_size: int = 64,
        in_flight: int = 1,
        verify_listed_model: bool = False,
    ) -> None:
        if not (api_key or bearer_token):
            raise EmbeddingProviderError(
                "openai", FailureCategory.INVALID_CONFIGURATION, "an API key or token is required"
            )
        self.profile = profile
        self.batch_size = batch_size
        self.in_flight = _check_in_flight(in_flight)
        self.timeout = timeout
        self.provider = "azure-openai" if azure_deployment is not None else "openai"
        if azure_deployment is not None:
            self._client: openai.OpenAI = openai.AzureOpenAI(
                azure_endpoint=base_url,
                azure_deployment=azure_deployment,
                api_version=azure_api_version,
                api_key=None if bearer_token else api_key,
                azure_ad_token=bearer_token,
                max_retries=0,
                http_client=http_client,
            )
        else:
            self._client = openai.OpenAI(
                api_key=bearer_token or api_key,
                base_url=f"{base_url.rstrip('/')}/v1",
                max_retries=0,
                http_client=http_client,
            )
        if verify_listed_model:
            try:
                self._verify_listed_model()
            except BaseException:
                self._client.close()  # a refused start leaves no connection behind
                raise

    def _verify_listed_model(self) -> None:
        try:
            listed = [model.id for model in self._client.models.list(timeout=self.timeout)]
        except openai.APIError as error:
            raise exception_error(EmbeddingProviderError, self.provider, error) from error
        if self.profile.model not in listed:
            raise ArtifactMismatch(
                f"{self.provider}:model", self.profile.model, ", ".join(listed) or "none listed"
            )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        raise NotImplementedError(
            "the hosted tokenizer is not available offline; the API rejects over-long input"
        )

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        timeout = call_timeout(EmbeddingProviderError, self.provider, self.timeout)
        try:
            response = self._client.embeddings.create(
                input=batch,
                model=self.profile.model,
                encoding_format="float",
                timeout=timeout,
            )
        except openai.APIError as error:
            raise exception_error(EmbeddingProviderError, self.provider, error) from error
        reported = getattr(response, "model", None)
        if reported is not None and not reports_model(str(reported), self.profile.model):
            raise ArtifactMismatch(f"{self.provider}:model", self.profile.model, str(reported))
        # The SDK builds response objects without validating them: read defensively and
        # let _vectors judge the shape.
        items = sorted(
            getattr(response, "data", None) or [], key=lambda item: getattr(item, "index", 0)
        )
        return _vectors(
            self.provider,
            [getattr(item, "embedding", None) for item in items],
            len(batch),
            self.profile.dimensions,
        )

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        self._client.close()
