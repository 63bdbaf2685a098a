"""Small protocols for every pluggable part. Capabilities are attributes, not isinstance.

``Embedder``, ``SparseEncoder``, ``VectorIndex``, ``Reranker``, ``TokenCounter``,
``ChatModel``, ``CacheStore`` and ``CapacityPool``. Each protocol with two or more
implementations has a conformance suite in :mod:`ragwright.testing` that states its
contract as tests. ``TokenCounter`` is defined in :mod:`ragwright.types` (the pure core
counts tokens and may not import this module) and re-exported here. The job store comes
with the service.

The protocols stand below every layer: they import only the shared records
(:mod:`ragwright.types`, among them the chat records ``ChatModel`` names) and
:mod:`ragwright.deadline`, never the core, the chat package or anything above
(``tests/test_import_graph.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Literal, Protocol, TypedDict

from ragwright.deadline import Deadline
from ragwright.types import (
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    CollectionContract,
    EmbeddingProfile,
    IndexPoint,
    LexicalProfile,
    LexicalStats,
    PointFilter,
    SparseVector,
    StoredPoint,
    TokenCounter,
)

__all__ = [
    "BULK_EMBEDDING",
    "CacheStore",
    "CapacityPool",
    "CapacityStatus",
    "ChatModel",
    "Embedder",
    "IndexPart",
    "Reranker",
    "SparseEncoder",
    "TokenCounter",
    "VectorIndex",
]


class Embedder(Protocol):
    """Turns texts into dense vectors under one :class:`EmbeddingProfile`.

    ``counts_tokens`` says whether :meth:`count_tokens` is exact for this model; when it
    is, ingestion rejects over-long inputs before the first embedding call. Providers
    that cannot count locally must make the provider reject over-long input instead
    (never truncate).

    An embedder may have an int ``in_flight`` (absent means 1): ingestion then keeps up
    to that many :meth:`embed_documents` calls outstanding from worker threads, so such
    an embedder must be safe to call from several threads at once. Wrappers pass it on.

    Ingestion makes its calls with :data:`BULK_EMBEDDING` set; an embedder may read it
    to keep working memory between calls (the bundled model keeps its arena then).
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


BULK_EMBEDDING: ContextVar[bool] = ContextVar("ragwright_bulk_embedding", default=False)
"""True while ingestion embeds its slices: many calls of full runs follow one another.
Everything else (a question, its evidence sentences) embeds a few small calls."""


IndexPart = Literal["payload", "dense", "sparse"]
"""A stored part of a point that :meth:`VectorIndex.read_part` reads back on its own."""


class VectorIndex(Protocol):
    """One collection of points bound to a :class:`CollectionContract`.

    Every write returns only after the engine applied it (``wait=true``). Filters are
    evaluated by the engine inside the same request as the search.

    Opening verifies the index against the manifest its last writer committed (point
    count, a sample read back) and raises :class:`~ragwright.errors.IndexDamaged` when
    it does not hold; ``committed_points`` is that manifest's count (``None`` when no
    writer closed cleanly since the last write began, or nothing was recorded).
    """

    @property
    def contract(self) -> CollectionContract:
        """The collection's contract (BM25 statistics kept current by ingestion)."""
        ...

    @property
    def committed_points(self) -> int | None:
        """The point count the last clean commit recorded (``None``: unknown)."""
        ...

    def read_part(self, ids: Sequence[uuid.UUID], part: IndexPart) -> dict[uuid.UUID, Any]:
        """One stored part of each listed point: the payload (a mapping), the dense vector
        (a list of floats) or the sparse vector (:class:`SparseVector`). Points without
        that part are absent; an unreadable part raises
        :class:`~ragwright.errors.IndexDamaged`."""
        ...

    @property
    def atomic_upsert(self) -> bool:
        """Whether one :meth:`upsert` call is applied whole or not at all, a crash
        included (the embedded engine writes it as one WAL record, replayed whole on the
        next open). The writing pass then writes a slice's new documents live in one
        upsert, without a staged copy and a flip (docs/ingestion.md)."""
        ...

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (vector and complete payload)."""
        ...

    def retrieve(
        self,
        ids: Sequence[uuid.UUID],
        *,
        with_vectors: bool = False,
        payload_fields: Sequence[str] | None = None,
    ) -> list[StoredPoint]:
        """Points by id with full payload, or only ``payload_fields`` when given; missing
        ids are absent from the result."""
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

    def prefetch_payloads(self) -> int:
        """A hint that the caller is about to read most stored payloads: a backend that
        reads them through memory-mapped files starts reading them in bulk now instead
        of one page fault at a time. Returns the bytes prefetched (0: nothing to do here). Changes
        nothing any read returns."""
        ...

    def facet(
        self,
        field: str,
        point_filter: PointFilter | None = None,
        *,
        exact: bool = True,
        limit: int | None = None,
    ) -> dict[str | int, int]:
        """Every value of the payload-indexed ``field`` among the points matching the
        filter, with its exact number of points. Answered from the payload index, so a
        whole-collection statistic never reads the points' payloads. ``exact=False``
        lets the engine count faster and maybe wrongly, and ``limit`` keeps only that
        many values (the most frequent): a hint, to be checked with :meth:`count`
        before anything relies on it."""
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

    def reading(self) -> AbstractContextManager[object]:
        """A block whose reads see no write made by this process between them, so the
        legs of one query see one state of a document an ingestion in another thread is
        switching (embedded: the index's lock; a server orders nothing across requests,
        so there it is a no-op)."""
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

    def count_terms(self, text: str) -> int:
        """How many analysed terms a text has: ``len(terms(text))``, without stemming."""
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


class ChatModel(Protocol):
    """A chat provider, or a middleware wrapping one. Capabilities are attributes.

    A buffered call returns the whole response or raises a :class:`ChatError` whose
    category says what went wrong (a provider's own exceptions never escape). A response
    names the adapter that produced it in ``provider``. A streamed call yields the text in
    order; updates may reach the caller before a failure. Both spend only the time left
    on the caller's ``deadline``.
    """

    name: str

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        """A buffered call: the whole response or a :class:`ChatError`."""
        ...

    def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        """A streamed call; updates may reach the caller before a failure."""
        ...


class CacheStore(Protocol):
    """Bytes by key, each entry with its own time to live.

    ``get`` returns exactly the bytes of the latest ``set`` of that key until ``ttl``
    seconds have passed, then ``None``; a key never set is ``None``. A store may drop an
    entry earlier (a bounded store evicts), so a miss is always a legal answer.
    """

    def get(self, key: str) -> bytes | None:
        """The live value of ``key``, or ``None``."""
        ...

    def set(self, key: str, value: bytes, ttl: float) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds, replacing any earlier value."""
        ...


class CapacityStatus(TypedDict):
    """What a capacity pool reports for status and readiness views (JSON-ready).

    ``backend`` is where the leases live now (``redis`` or ``local``); ``degraded`` says
    why a pool meant to be shared is running in-process instead (``None`` when it is
    not); ``cooldown_seconds`` is the throttle cooldown left (0.0 when none).
    """

    backend: Literal["redis", "local"]
    limit: int
    in_use: int
    cooldown_seconds: float
    degraded: str | None


class CapacityPool(Protocol):
    """Non-blocking leases: at most ``limit`` are held at any moment.

    ``try_acquire`` never waits: it returns a lease at once or ``None`` when the pool is
    full, so the caller's deadline is never spent queueing. Releasing a lease frees
    exactly one slot, and releasing it again does nothing.

    A pool also carries a throttle cooldown: after a provider said "slow down" (429),
    :meth:`cool_down` refuses every lease — for every holder of the pool, in every
    process that shares it — until the cooldown ends. A cooldown only ever extends:
    a shorter one never cuts a longer one short.
    """

    limit: int

    def try_acquire(self) -> object | None:
        """A lease token, or ``None`` when the pool is full.

        Raises :class:`~ragwright.errors.CapacityCoolingDown` (with the seconds left)
        while the pool is cooling down, checked in the same step as the grant.
        """
        ...

    def release(self, lease: object) -> None:
        """Return a lease (idempotent)."""
        ...

    def cool_down(self, seconds: float) -> None:
        """Refuse every lease for ``seconds`` from now, unless a longer cooldown runs."""
        ...

    def cooldown_remaining(self) -> float:
        """Seconds of cooldown left; 0.0 when the pool is not cooling down."""
        ...

    def describe(self) -> CapacityStatus:
        """The pool's state now, for status and readiness views; never raises."""
        ...
