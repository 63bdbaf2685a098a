"""The index backend, the BM25 encoder and the retriever (with its reranker) the settings
choose."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.errors import ConfigError, IndexNotFound
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import Embedder, Reranker, VectorIndex
from ragwright.retry import RetryingReranker, RetryPolicy
from ragwright.runtime.embedding import open_embedder
from ragwright.runtime.registry import Closers, Registry
from ragwright.runtime.shared import without_credentials
from ragwright.settings import Settings
from ragwright.types import CollectionContract, EmbeddingProfile


class OpenOptions(NamedTuple):
    """How :func:`open_index` opens a collection (see there)."""

    add_chunking_version: bool
    create: bool
    rebuild: bool
    verify: bool


class IndexBackend(NamedTuple):
    """One ``RAGWRIGHT_BACKEND``: how it opens, how status names where it is, and whether
    a process holds it open for its lifetime (an embedded index one process owns)."""

    open: Callable[[Settings, CollectionContract, OpenOptions], VectorIndex]
    location: Callable[[Settings], str]
    held: bool


def _open_edge(settings: Settings, contract: CollectionContract, how: OpenOptions) -> VectorIndex:
    return EdgeIndex(
        settings.index_path,
        contract,
        add_chunking_version=how.add_chunking_version,
        create=how.create,
        rebuild=how.rebuild,
        verify=how.verify,
    )


def _open_qdrant(settings: Settings, contract: CollectionContract, how: OpenOptions) -> VectorIndex:
    if not settings.index.qdrant_location:
        raise ConfigError("RAGWRIGHT_QDRANT_LOCATION", "required when RAGWRIGHT_BACKEND=qdrant")
    from ragwright.adapters.qdrant import QdrantIndex  # the client loads only when used

    return QdrantIndex(
        settings.index.qdrant_location,
        settings.index.collection,
        contract,
        api_key=settings.index.qdrant_api_key.get_secret_value()
        if settings.index.qdrant_api_key
        else None,
        add_chunking_version=how.add_chunking_version,
        create=how.create,
        rebuild=how.rebuild,
        verify=how.verify,
    )


def _qdrant_location(settings: Settings) -> str:
    location = settings.index.qdrant_location or ""
    if location.startswith(("http://", "https://")):
        location = without_credentials(location)
    return f"{location} collection {settings.index.collection}"


INDEX_BACKENDS: Registry[IndexBackend] = Registry(
    "RAGWRIGHT_BACKEND",
    {
        "edge": IndexBackend(_open_edge, lambda settings: str(settings.index_path), held=True),
        "qdrant": IndexBackend(_open_qdrant, _qdrant_location, held=False),
    },
)


def lexical_profile(settings: Settings) -> LexicalProfile:
    """BM25 parameters from the settings (part of the collection contract)."""
    return LexicalProfile(k1=settings.index.bm25_k1, b=settings.index.bm25_b)


def open_sparse_encoder(settings: Settings) -> Bm25Encoder:
    """The BM25 encoder for the configured lexical profile."""
    return Bm25Encoder(lexical_profile(settings))


def open_index(
    settings: Settings,
    profile: EmbeddingProfile,
    *,
    add_chunking_version: bool = False,
    write: bool = True,
    any_chunking_version: bool = False,
    chunking_version: str | None = None,
    rebuild: bool = False,
    verify: bool = True,
) -> VectorIndex:
    """Open the configured collection, checking its contract and its integrity.

    ``write=False`` never creates anything (a missing index is :class:`IndexNotFound`);
    ``any_chunking_version`` accepts whatever chunking versions the collection holds
    (``status`` inspects them all); ``rebuild`` empties the collection first;
    ``verify=False`` skips the open-time integrity check (``verify`` reads every point).
    """
    version = chunking_version or settings.chunking_policy().version
    contract = contract_for(profile, version, lexical_profile(settings))
    if any_chunking_version:
        contract = dataclasses.replace(contract, chunking_versions=())
    how = OpenOptions(add_chunking_version, create=write, rebuild=rebuild, verify=verify)
    return INDEX_BACKENDS[settings.index.backend].open(settings, contract, how)


def open_held_edge(
    settings: Settings, profile: EmbeddingProfile, create_version: str | None
) -> EdgeIndex:
    """The embedded index a process holds: an existing one under any chunking version
    (requests check theirs), a new one with ``create_version``, none when that is
    ``None`` (:class:`IndexNotFound`)."""
    path, lexical = settings.index_path, lexical_profile(settings)
    if (path / "contract.json").is_file():
        contract = dataclasses.replace(contract_for(profile, "", lexical), chunking_versions=())
    elif create_version is None:
        raise IndexNotFound(str(path))
    else:
        contract = contract_for(profile, create_version, lexical)
    return EdgeIndex(path, contract, create=True, verify=True)


def _no_reranker(settings: Settings, embedder: Embedder, closers: Closers | None) -> None:
    return None


def _bi_encoder(settings: Settings, embedder: Embedder, closers: Closers | None) -> Reranker:
    from ragwright.adapters.rerankers import BiEncoderReranker

    return BiEncoderReranker(embedder)


def _http(settings: Settings, embedder: Embedder, closers: Closers | None) -> Reranker:
    from ragwright.adapters.rerankers import HttpReranker

    if not settings.retrieval.reranker_url:
        raise ConfigError("RAGWRIGHT_RERANKER_URL", "required when RAGWRIGHT_RERANKER=http")
    reranker = HttpReranker(
        settings.retrieval.reranker_url, model=settings.retrieval.reranker_model
    )
    if closers is not None:
        closers.add(reranker.close)
    return RetryingReranker(
        reranker,
        policy=RetryPolicy(settings.remote.call_attempts),
        call_budget=settings.remote.call_budget,
    )


RERANKERS: Registry[Callable[[Settings, Embedder, Closers | None], Reranker | None]] = Registry(
    "RAGWRIGHT_RERANKER", {"none": _no_reranker, "bi-encoder": _bi_encoder, "http": _http}
)


def open_reranker(
    settings: Settings, embedder: Embedder, *, closers: Closers | None = None
) -> Reranker | None:
    """The configured reranker, or ``None``; ``closers`` receives its HTTP client's close."""
    return RERANKERS[settings.retrieval.reranker](settings, embedder, closers)


def open_retriever(
    settings: Settings,
    index: VectorIndex,
    *,
    embedder: Embedder | None = None,
    candidates: int | None = None,
    reranker: Reranker | None = None,
) -> Retriever:
    """A retriever over ``index`` with the configured embedder, BM25 and reranker
    (``reranker``: one already open, else the configured one is opened)."""
    embedder = embedder or open_embedder(settings)
    return Retriever(
        index,
        embedder,
        open_sparse_encoder(settings),
        reranker=reranker if reranker is not None else open_reranker(settings, embedder),
        rrf_k=settings.retrieval.rrf_k,
        rrf_weights=settings.retrieval.rrf_weights,
        candidates=candidates or settings.retrieval.hybrid_candidates,
    )
