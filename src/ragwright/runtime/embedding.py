"""The embedder the settings choose: a bundled model, or a remote provider behind retry
and a capacity gate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ragwright.adapters.embedders.e5 import E5_SMALL_PROFILE, E5Embedder
from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import ConfigError
from ragwright.protocols import CapacityPool, Embedder
from ragwright.retry import RetryingEmbedder, RetryPolicy
from ragwright.runtime.kept import kept
from ragwright.runtime.registry import Closers, Registry
from ragwright.runtime.shared import REDIS_RETRY_INTERVAL, redis_outage
from ragwright.settings import Settings
from ragwright.types import EmbeddingProfile

SETTING = "RAGWRIGHT_EMBEDDING_PROVIDER"

EMBEDDING_POOL = "embedding"
"""The shared pool's name (its Redis keys are ``ragwright:capacity:embedding*``)."""


class RemoteEmbedder(Embedder, Protocol):
    """An embedder over HTTP: it holds a client that ``close`` releases."""

    def close(self) -> None: ...


BUNDLED_PROFILES: dict[str, EmbeddingProfile] = {"onnx": MINILM_PROFILE, "e5": E5_SMALL_PROFILE}
"""The profiles of the models that ship with ragwright, by provider."""

BUNDLED_EMBEDDERS: Registry[Callable[[Settings], Embedder]] = Registry(
    SETTING,
    {
        "onnx": lambda settings: OnnxEmbedder(batch_size=32, threads=settings.embedding.threads),
        "e5": lambda settings: E5Embedder(threads=settings.embedding.threads),
    },
)
"""Embedders run in this process (no retry, no capacity gate)."""


def embedding_profile(settings: Settings) -> EmbeddingProfile:
    """The profile the settings describe (a bundled one for ``onnx`` and ``e5``)."""
    bundled = BUNDLED_PROFILES.get(settings.embedding.provider)
    if bundled is not None:
        return bundled
    missing = [
        name
        for name in ("profile_id", "model", "digest", "dimensions")
        if getattr(settings.embedding, name) is None
    ]
    if missing:
        raise ConfigError(
            f"RAGWRIGHT_EMBEDDING_{missing[0].upper()}",
            f"required when RAGWRIGHT_EMBEDDING_PROVIDER={settings.embedding.provider}",
        )
    return EmbeddingProfile(
        profile_id=str(settings.embedding.profile_id),
        provider=settings.embedding.provider,
        model=str(settings.embedding.model),
        artifact_digest=str(settings.embedding.digest),
        dimensions=int(settings.embedding.dimensions or 0),
        distance="cosine",
        document_format=settings.embedding.document_format,
        query_format=settings.embedding.query_format,
        max_input_tokens=settings.embedding.max_input_tokens,
    )


def open_embedder(
    settings: Settings, *, pool: CapacityPool | None = None, closers: Closers | None = None
) -> Embedder:
    """Create the configured embedder (verifies model artifacts or identity first).

    A remote one is, outer → inner: retry → capacity gate (a lease of ``pool``, by
    default :func:`open_embedding_pool`'s, per attempt) → provider, with
    ``embedding_in_flight`` batches in flight. ``closers`` (when given) receives what
    releases the provider's HTTP client and the pool's Redis client.
    """
    kind = settings.embedding.provider
    if kind in BUNDLED_EMBEDDERS:
        # A warm command process keeps the model's session between commands (kept.py).
        return kept(
            ("embedder", kind, settings.embedding.threads),
            lambda: BUNDLED_EMBEDDERS[kind](settings),
        )
    provider = _open_remote_embedder(settings)
    if closers is not None:
        closers.add(provider.close)
    return RetryingEmbedder(
        EmbeddingCapacityGate(
            provider,
            pool or open_embedding_pool(settings, closers=closers),
            cooldown=settings.chat.throttle_cooldown,
        ),
        policy=RetryPolicy(settings.remote.call_attempts),
        call_budget=settings.remote.call_budget,
    )


def open_embedding_pool(
    settings: Settings,
    *,
    retry_interval: float = REDIS_RETRY_INTERVAL,
    closers: Closers | None = None,
) -> CapacityPool:
    """The remote embedder's capacity pool: ``embedding_in_flight`` leases, shared by
    every process through Redis with ``RAGWRIGHT_REDIS_URL``, else in-process.

    As for the chat pools, Redis is optional even when configured: while it does not
    answer the pool runs in-process (one warning says so) and Redis is tried again
    after ``retry_interval`` seconds. A lease outlives a dead holder by at most the
    remote call budget. ``closers`` (when given) receives the Redis client's ``close``.
    """
    limit = settings.embedding.in_flight
    if not settings.storage.redis_url:
        return LocalCapacityPool(limit)
    # Imported here, as in runtime/shared.py: without Redis configured, no client library.
    from ragwright.adapters.redis import RedisCapacityPool, ResilientCapacityPool, connect

    client = connect(settings.storage.redis_url)
    if closers is not None:
        closers.add(client.close)
    outage = redis_outage(settings.storage.redis_url, retry_interval)
    outage.check(client)
    shared = RedisCapacityPool(
        client, EMBEDDING_POOL, limit=limit, lease_ttl=settings.remote.call_budget + 10.0
    )
    return ResilientCapacityPool(shared, outage, fallback=LocalCapacityPool(limit))


def _ollama(settings: Settings, profile: EmbeddingProfile) -> RemoteEmbedder:
    from ragwright.adapters.embedders.remote import OllamaEmbedder

    return OllamaEmbedder(
        profile, base_url=settings.embedding.ollama_url, in_flight=settings.embedding.in_flight
    )


def _azure_openai(settings: Settings, profile: EmbeddingProfile) -> RemoteEmbedder:
    from ragwright.adapters.embedders.remote import OpenAIEmbedder

    if not settings.embedding.azure_deployment:
        raise ConfigError("RAGWRIGHT_AZURE_DEPLOYMENT", "required for azure-openai")
    return OpenAIEmbedder(
        profile,
        api_key=_openai_key(settings),
        base_url=settings.embedding.openai_base_url,
        azure_deployment=settings.embedding.azure_deployment,
        azure_api_version=settings.embedding.azure_api_version,
        in_flight=settings.embedding.in_flight,
    )


def _openai(settings: Settings, profile: EmbeddingProfile) -> RemoteEmbedder:
    from ragwright.adapters.embedders.remote import OpenAIEmbedder

    return OpenAIEmbedder(
        profile,
        api_key=_openai_key(settings),
        base_url=settings.embedding.openai_base_url,
        in_flight=settings.embedding.in_flight,
        verify_listed_model=settings.embedding.verify_model,
    )


def _openai_key(settings: Settings) -> str | None:
    return (
        settings.embedding.openai_api_key.get_secret_value()
        if settings.embedding.openai_api_key
        else None
    )


REMOTE_EMBEDDERS: Registry[Callable[[Settings, EmbeddingProfile], RemoteEmbedder]] = Registry(
    SETTING, {"ollama": _ollama, "openai": _openai, "azure-openai": _azure_openai}
)
"""Embedders behind an HTTP API, by provider (the profile comes from the settings)."""


def _open_remote_embedder(settings: Settings) -> RemoteEmbedder:
    profile = embedding_profile(settings)
    return REMOTE_EMBEDDERS[settings.embedding.provider](settings, profile)
