"""Wiring: settings → embedder and index. The one place that picks adapters."""

from __future__ import annotations

import dataclasses

from ragwright.adapters.edge import EdgeIndex
from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder
from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.qdrant import QdrantIndex
from ragwright.adapters.rerankers import BiEncoderReranker, HttpReranker
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.errors import ConfigError
from ragwright.pipeline.retrieve import Retriever
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
    return LexicalProfile(k1=settings.bm25_k1, b=settings.bm25_b, avgdl=settings.bm25_avgdl)


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
