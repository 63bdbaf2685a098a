"""Small protocols for the pluggable parts. Capabilities are attributes, not isinstance.

The chat model's protocol lives with the chat contract (``chat/contract.py``); the job
store comes with the service.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from ragwright.core.lexical import LexicalProfile
from ragwright.types import (
    CollectionContract,
    EmbeddingProfile,
    IndexPoint,
    LexicalStats,
    PointFilter,
    SparseVector,
    StoredPoint,
)


class Embedder(Protocol):
    """Turns texts into dense vectors under one :class:`EmbeddingProfile`.

    ``counts_tokens`` says whether :meth:`count_tokens` is exact for this model; when it
    is, ingestion rejects over-long inputs before the first embedding call. Providers
    that cannot count locally must make the provider reject over-long input instead
    (never truncate).
    """

    profile: EmbeddingProfile
    counts_tokens: bool

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Model tokens per text, special tokens included."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for already formatted document inputs, in input order."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Vector for an already formatted query input."""
        ...


class VectorIndex(Protocol):
    """One collection of points bound to a :class:`CollectionContract`.

    Every write returns only after the engine applied it (``wait=true``). Filters are
    evaluated by the engine inside the same request as the search.
    """

    contract: CollectionContract

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (vector and complete payload)."""
        ...

    def retrieve(
        self, ids: Sequence[uuid.UUID], *, with_vectors: bool = False
    ) -> list[StoredPoint]:
        """Points by id with full payload; missing ids are absent from the result."""
        ...

    def scroll(
        self,
        point_filter: PointFilter | None = None,
        *,
        payload_fields: Sequence[str] | None = None,
    ) -> Iterator[StoredPoint]:
        """Every point matching the filter, with the selected payload fields (None: all)."""
        ...

    def set_payload(self, ids: Sequence[uuid.UUID], payload: Mapping[str, Any]) -> None:
        """Merge ``payload`` into the payload of every listed point, in one operation."""
        ...

    def delete_payload_keys(self, ids: Sequence[uuid.UUID], keys: Sequence[str]) -> None:
        """Remove payload keys from the listed points."""
        ...

    def delete(self, ids: Sequence[uuid.UUID]) -> None:
        """Delete points by id; unknown ids are ignored."""
        ...

    def count(self, point_filter: PointFilter | None = None) -> int:
        """Exact number of points matching the filter."""
        ...

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        """The ``limit`` best points among those matching the filter, best first."""
        ...

    def search_sparse(
        self, vector: SparseVector, point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        """BM25: the ``limit`` best points by sparse dot product with engine-side IDF."""
        ...

    def update_sparse(self, vectors: Sequence[tuple[uuid.UUID, SparseVector]]) -> None:
        """Replace the sparse vector of existing points; dense vector and payload stay."""
        ...

    def record_lexical_stats(self, stats: LexicalStats) -> None:
        """Store ``stats`` in the collection contract (``contract.lexical_stats``)."""
        ...

    def close(self) -> None:
        """Release the index (files, locks, connections)."""
        ...


class SparseEncoder(Protocol):
    """Text → BM25 sparse vectors under one :class:`LexicalProfile`."""

    profile: LexicalProfile

    def terms(self, text: str) -> list[str]:
        """Analysed terms of a text; document vectors are built from them."""
        ...

    def encode_query(self, text: str) -> SparseVector:
        """Weight 1 per distinct query term."""
        ...


class Reranker(Protocol):
    """Scores candidate texts against a question; higher is better.

    A reranker reorders a shortlist the retriever already judged eligible; it is never
    asked about anything else.
    """

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order."""
        ...


class TokenCounter(Protocol):
    """Counts tokens of one encoding (o200k_base for prompts and budgets)."""

    encoding_name: str

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...
