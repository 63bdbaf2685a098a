"""Embedding providers reached over HTTP: Ollama, OpenAI and Azure OpenAI.

None of them can count tokens locally for their models, so they make the provider reject
over-long input instead of truncating it: Ollama gets ``truncate: false``; the OpenAI
embeddings API rejects inputs over the model's limit with HTTP 400. Either way the run
stops with a classified :class:`ProviderError` (``invalid_input``), never a shortened
vector.

Model identity: Ollama reports a digest per installed model, which must equal the
profile's ``artifact_digest`` before the first embedding. Hosted OpenAI models have no
digest; every response's reported model name must equal the profile's model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from ragwright.adapters.http import decode, post_json
from ragwright.errors import ArtifactMismatch, DimensionMismatch, FailureCategory, ProviderError
from ragwright.types import EmbeddingProfile


def _vectors(provider: str, raw: object, count: int, dimensions: int) -> list[list[float]]:
    if not isinstance(raw, list) or len(raw) != count:
        raise ProviderError(
            provider, FailureCategory.INVALID_OUTPUT, f"expected {count} vectors", retryable=False
        )
    vectors: list[list[float]] = []
    for vector in raw:
        if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
            raise ProviderError(
                provider,
                FailureCategory.INVALID_OUTPUT,
                "a vector is not a list of numbers",
                retryable=False,
            )
        if len(vector) != dimensions:
            raise DimensionMismatch(dimensions, len(vector))
        vectors.append([float(x) for x in vector])
    return vectors


class OllamaEmbedder:
    """Ollama's ``/api/embed`` with ``truncate: false``."""

    counts_tokens = False

    def __init__(
        self,
        profile: EmbeddingProfile,
        *,
        base_url: str = "http://127.0.0.1:11434",
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        batch_size: int = 32,
    ) -> None:
        self.profile = profile
        self.batch_size = batch_size
        self._client = httpx.Client(base_url=base_url, timeout=timeout, transport=transport)
        self._verify_digest()

    def _verify_digest(self) -> None:
        try:
            response = self._client.get("/api/tags")
        except httpx.TransportError as error:
            raise ProviderError(
                "ollama", FailureCategory.TRANSIENT, type(error).__name__, retryable=True
            ) from error
        models = decode("ollama", response).get("models", [])
        found = next(
            (
                m
                for m in models
                if m.get("name") == self.profile.model or m.get("model") == self.profile.model
            ),
            None,
        )
        if found is None:
            raise ProviderError(
                "ollama",
                FailureCategory.INVALID_CONFIGURATION,
                f"model {self.profile.model!r} is not installed",
                retryable=False,
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
            data = post_json(self._client, "ollama", "/api/embed", body)
            vectors.extend(
                _vectors("ollama", data.get("embeddings"), len(batch), self.profile.dimensions)
            )
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        self._client.close()


class OpenAIEmbedder:
    """OpenAI's ``/v1/embeddings``, or an Azure OpenAI deployment when ``azure`` is set.

    For Azure, ``base_url`` is the resource endpoint and ``deployment`` the deployment
    name; authentication is an API key or a bearer token from a token credential.
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
        transport: httpx.BaseTransport | None = None,
        batch_size: int = 64,
    ) -> None:
        if not (api_key or bearer_token):
            raise ProviderError(
                "openai",
                FailureCategory.INVALID_CONFIGURATION,
                "an API key or token is required",
                retryable=False,
            )
        self.profile = profile
        self.batch_size = batch_size
        self._azure = azure_deployment is not None
        self.provider = "azure-openai" if self._azure else "openai"
        headers: dict[str, str] = {}
        if self._azure and api_key:
            headers["api-key"] = api_key
            self._path = f"/openai/deployments/{azure_deployment}/embeddings"
            params: dict[str, str] = {"api-version": azure_api_version}
        else:
            headers["Authorization"] = f"Bearer {bearer_token or api_key}"
            self._path = (
                f"/openai/deployments/{azure_deployment}/embeddings"
                if self._azure
                else "/v1/embeddings"
            )
            params = {"api-version": azure_api_version} if self._azure else {}
        self._client = httpx.Client(
            base_url=base_url, headers=headers, params=params, timeout=timeout, transport=transport
        )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        raise NotImplementedError(
            "the hosted tokenizer is not available offline; the API rejects over-long input"
        )

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            body: dict[str, Any] = {"input": batch, "encoding_format": "float"}
            if not self._azure:
                body["model"] = self.profile.model
            data = post_json(self._client, self.provider, self._path, body)
            reported = data.get("model")
            if reported is not None and not str(reported).startswith(self.profile.model):
                raise ArtifactMismatch(f"{self.provider}:model", self.profile.model, str(reported))
            items = sorted(data.get("data", []), key=lambda item: item.get("index", 0))
            vectors.extend(
                _vectors(
                    self.provider,
                    [i.get("embedding") for i in items],
                    len(batch),
                    self.profile.dimensions,
                )
            )
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        self._client.close()
