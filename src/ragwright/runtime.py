"""Wiring: settings → embedder and index. The one place that picks adapters."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from ragwright.adapters.chatmodels.local import OnDemandLocalModel
from ragwright.adapters.chatmodels.ollama import OllamaChatModel
from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel
from ragwright.adapters.edge import EdgeIndex
from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder
from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.qdrant import QdrantIndex
from ragwright.adapters.redis import RedisCacheStore, RedisCapacityPool, connect
from ragwright.adapters.rerankers import BiEncoderReranker, HttpReranker
from ragwright.chat.budget import AttemptLimit, Budgeted
from ragwright.chat.builder import ChatPipelineBuilder
from ragwright.chat.cache import CacheStore, MemoryCacheStore, ResponseCache
from ragwright.chat.capacity import CapacityGate, CapacityPool, LocalCapacityPool
from ragwright.chat.contract import ChatModel
from ragwright.chat.failover import Failover
from ragwright.chat.guard import MessageGuard
from ragwright.chat.probes import Probe
from ragwright.chat.retry import Retry
from ragwright.chat.telemetry import Telemetry
from ragwright.core.answers import SchemaStyle
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.errors import ConfigError
from ragwright.pipeline.retrieve import Retriever, Thresholds
from ragwright.protocols import Embedder, Reranker, VectorIndex
from ragwright.settings import Settings
from ragwright.types import EmbeddingProfile


def embedding_profile(settings: Settings) -> EmbeddingProfile:
    """The profile the settings describe (the bundled one for ``onnx``)."""
    if settings.embedding_provider == "onnx":
        return MINILM_PROFILE
    missing = [
        name
        for name in (
            "embedding_profile_id",
            "embedding_model",
            "embedding_digest",
            "embedding_dimensions",
        )
        if getattr(settings, name) is None
    ]
    if missing:
        raise ConfigError(
            f"RAGWRIGHT_{missing[0].upper()}",
            f"required when RAGWRIGHT_EMBEDDING_PROVIDER={settings.embedding_provider}",
        )
    return EmbeddingProfile(
        profile_id=str(settings.embedding_profile_id),
        provider=settings.embedding_provider,
        model=str(settings.embedding_model),
        artifact_digest=str(settings.embedding_digest),
        dimensions=int(settings.embedding_dimensions or 0),
        distance="cosine",
        document_format=settings.embedding_document_format,
        query_format=settings.embedding_query_format,
        max_input_tokens=settings.embedding_max_input_tokens,
    )


def open_embedder(settings: Settings) -> Embedder:
    """Create the configured embedder (verifies model artifacts or identity first)."""
    if settings.embedding_provider == "onnx":
        return OnnxEmbedder(batch_size=32, threads=settings.embedding_threads)
    profile = embedding_profile(settings)
    if settings.embedding_provider == "ollama":
        return OllamaEmbedder(profile, base_url=settings.ollama_url)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if settings.embedding_provider == "azure-openai":
        if not settings.azure_deployment:
            raise ConfigError("RAGWRIGHT_AZURE_DEPLOYMENT", "required for azure-openai")
        return OpenAIEmbedder(
            profile,
            api_key=key,
            base_url=settings.openai_base_url,
            azure_deployment=settings.azure_deployment,
            azure_api_version=settings.azure_api_version,
        )
    return OpenAIEmbedder(profile, api_key=key, base_url=settings.openai_base_url)


def open_sparse_encoder(settings: Settings) -> Bm25Encoder:
    """The BM25 encoder for the configured lexical profile."""
    return Bm25Encoder(lexical_profile(settings))


def lexical_profile(settings: Settings) -> LexicalProfile:
    """BM25 parameters from the settings (part of the collection contract)."""
    return LexicalProfile(k1=settings.bm25_k1, b=settings.bm25_b)


def open_index(
    settings: Settings,
    profile: EmbeddingProfile,
    *,
    add_chunking_version: bool = False,
    write: bool = True,
    any_chunking_version: bool = False,
) -> VectorIndex:
    """Open the configured collection, checking its contract.

    ``write=False`` never creates anything (a missing index is :class:`IndexNotFound`);
    ``any_chunking_version`` accepts whatever chunking versions the collection holds
    (``status`` inspects them all).
    """
    contract = contract_for(profile, settings.chunking_policy().version, lexical_profile(settings))
    if any_chunking_version:
        contract = dataclasses.replace(contract, chunking_versions=())
    if settings.backend == "edge":
        return EdgeIndex(
            settings.index_path, contract, add_chunking_version=add_chunking_version, create=write
        )
    if not settings.qdrant_location:
        raise ConfigError("RAGWRIGHT_QDRANT_LOCATION", "required when RAGWRIGHT_BACKEND=qdrant")
    return QdrantIndex(
        settings.qdrant_location,
        settings.collection,
        contract,
        api_key=settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None,
        add_chunking_version=add_chunking_version,
        create=write,
    )


def open_retriever(settings: Settings, index: VectorIndex) -> Retriever:
    """A retriever over ``index`` with the configured embedder, BM25 and reranker."""
    embedder = open_embedder(settings)
    reranker: Reranker | None = None
    if settings.reranker == "bi-encoder":
        reranker = BiEncoderReranker(embedder)
    elif settings.reranker == "http":
        if not settings.reranker_url:
            raise ConfigError("RAGWRIGHT_RERANKER_URL", "required when RAGWRIGHT_RERANKER=http")
        reranker = HttpReranker(settings.reranker_url, model=settings.reranker_model)
    return Retriever(
        index,
        embedder,
        open_sparse_encoder(settings),
        reranker=reranker,
        rrf_k=settings.rrf_k,
        rrf_weights=settings.rrf_weights,
        candidates=settings.hybrid_candidates,
    )


def open_chat_provider(settings: Settings) -> tuple[ChatModel, Callable[[], Awaitable[None]]]:
    """The configured provider and its async ``close`` (await it in the loop that used it).

    The local model starts on its first call, so a question that ends without eligible
    evidence never starts it.
    """
    key = settings.chat_api_key.get_secret_value() if settings.chat_api_key else "unused"
    if settings.chat_provider == "local":
        local = OnDemandLocalModel(settings.home / "models")
        return local, local.close
    if not settings.chat_model:
        raise ConfigError("RAGWRIGHT_CHAT_MODEL", f"required for {settings.chat_provider}")
    if settings.chat_provider == "ollama":
        ollama = OllamaChatModel(
            settings.chat_model, base_url=settings.chat_base_url or "http://127.0.0.1:11434"
        )
        return ollama, ollama.close
    if settings.chat_provider == "azure-openai":
        if not settings.chat_base_url:
            raise ConfigError(
                "RAGWRIGHT_CHAT_BASE_URL", "the Azure OpenAI resource endpoint is required"
            )
        azure = OpenAIChatModel(
            settings.chat_model, api_key=key, azure_endpoint=settings.chat_base_url
        )
        return azure, azure.close
    openai = OpenAIChatModel(settings.chat_model, api_key=key, base_url=settings.chat_base_url)
    return openai, openai.close


def thresholds(settings: Settings) -> Thresholds:
    """The configured per-stage score thresholds (``RAGWRIGHT_THRESHOLD_*``)."""
    return Thresholds(
        dense=settings.threshold_dense,
        sparse=settings.threshold_sparse,
        fusion=settings.threshold_fusion,
        rerank=settings.threshold_rerank,
    )


def answer_schema_style(settings: Settings) -> SchemaStyle:
    """The answer schema style for the configured provider (``chat_schema_style``)."""
    if settings.chat_schema_style != "auto":
        return settings.chat_schema_style
    return "variants" if settings.chat_provider in ("local", "ollama") else "object"


def build_chat_pipeline(
    settings: Settings,
    providers: Sequence[ChatModel],
    *,
    count_tokens: Callable[[str], int],
    events: Callable[[str], None] | None = None,
) -> ChatModel:
    """The default pipeline over ``providers`` (the first is the primary), outer → inner:

    guard → call telemetry/probe → cache → retry → failover → (per provider: attempt
    budget → capacity gate → attempt telemetry/probe → provider).
    """
    sink = events or _ignore
    client = connect(settings.redis_url) if settings.redis_url else None
    store: CacheStore = RedisCacheStore(client) if client is not None else MemoryCacheStore()
    pool: CapacityPool = (
        RedisCapacityPool(client, "chat", limit=settings.chat_capacity)
        if client is not None
        else LocalCapacityPool(settings.chat_capacity)
    )

    def leg(provider: ChatModel) -> ChatModel:
        return (
            ChatPipelineBuilder(provider)
            .use(AttemptLimit)
            .use(lambda inner: CapacityGate(inner, pool))
            .use(lambda inner: Probe(inner, name="attempt", events=sink))
            .use(
                lambda inner: Telemetry(
                    inner,
                    layer="attempt",
                    provider=provider.name,
                    model=settings.chat_model or provider.name,
                )
            )
            .build()
        )

    legs = [leg(p) for p in providers]
    core: ChatModel = legs[0] if len(legs) == 1 else Failover(legs, events=sink)
    primary = providers[0]
    return (
        ChatPipelineBuilder(core)
        .use(
            lambda inner: MessageGuard(
                inner,
                max_messages=settings.chat_max_messages,
                max_input_tokens=settings.chat_max_input_tokens,
                count_tokens=count_tokens,
            )
        )
        .use(lambda inner: Budgeted(inner, attempts=settings.chat_max_attempts))
        .use(
            lambda inner: Telemetry(
                inner,
                layer="call",
                provider=primary.name,
                model=settings.chat_model or primary.name,
            )
        )
        .use(lambda inner: Probe(inner, name="call", events=sink))
        .use(lambda inner: ResponseCache(inner, store, ttl=settings.chat_cache_ttl, events=sink))
        .use(lambda inner: Retry(inner, max_attempts=settings.chat_retries, events=sink))
        .build()
    )


def _ignore(_event: str) -> None:
    return None
