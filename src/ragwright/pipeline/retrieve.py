"""Retrieval: eligibility → dense / BM25 / hybrid → payload validation → optional rerank.

* The query is embedded with the collection's profile (query format, dimension check);
  a retriever whose embedder or BM25 profile differs from the collection contract cannot
  be built (:class:`ContractMismatch`).
* Every search leg sends the same eligibility filter to the engine in the same request
  as the vector, so ``limit`` counts eligible points only.
* Every returned payload is validated fail-closed and checked against the eligibility
  that was asked; one bad point raises and nothing is returned.
* ``hybrid`` fuses the dense and BM25 rankings with reciprocal rank fusion (k=60 and
  equal leg weights by default); ties break by (document id, chunking version, chunk id).
* A reranker reorders a shortlist of eligible hits; it never sees anything else.
* Score thresholds are per stage (dense cosine, BM25, RRF and rerank scores live in
  different spaces); default none.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ragwright.core.contracts import require_compatible
from ragwright.core.eligibility import CallerScope, Eligibility, check_payload, eligibility_filter
from ragwright.core.fusion import rrf
from ragwright.core.points import ChunkPayload, format_query_input, read_payload
from ragwright.errors import DimensionMismatch
from ragwright.protocols import Embedder, Reranker, SparseEncoder, VectorIndex
from ragwright.types import SparseVector, StoredPoint

Mode = Literal["dense", "sparse", "hybrid"]
MODES: tuple[Mode, ...] = ("dense", "sparse", "hybrid")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Minimum score per stage; ``None`` accepts every score."""

    dense: float | None = None
    sparse: float | None = None
    fusion: float | None = None
    rerank: float | None = None


@dataclass(frozen=True, slots=True)
class QueryVectors:
    """A question embedded once, reusable for every cutoff and mode."""

    question: str
    dense: tuple[float, ...]
    sparse: SparseVector


@dataclass(frozen=True, slots=True)
class Hit:
    """One eligible, validated chunk with the scores of every stage that saw it."""

    payload: ChunkPayload
    score: float
    dense_score: float | None = None
    sparse_score: float | None = None
    fused_score: float | None = None
    rerank_score: float | None = None

    @property
    def identity(self) -> tuple[str, str, str]:
        """(document id, chunking version, chunk id): citations and tie-breaks use it."""
        return (self.payload.document_id, self.payload.chunking_version, self.payload.chunk_id)


@dataclass(frozen=True, slots=True)
class Candidates:
    """Each leg's (point id, score) list as the engine ranked it, before thresholds, with
    the validated payloads of every point listed; ``k`` is the cut :meth:`Retriever.rank`
    applies."""

    vectors: QueryVectors
    mode: Mode
    k: int
    payloads: Mapping[uuid.UUID, ChunkPayload]
    dense: tuple[tuple[uuid.UUID, float], ...]
    sparse: tuple[tuple[uuid.UUID, float], ...]
    timings_ms: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    """Ranked hits (best first) and where the time went, in milliseconds."""

    hits: tuple[Hit, ...]
    mode: Mode
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def no_eligible_evidence(self) -> bool:
        """True when nothing eligible matched; conditions are never relaxed to fill it."""
        return not self.hits


class Retriever:
    """Searches one collection with mandatory eligibility."""

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        *,
        reranker: Reranker | None = None,
        rrf_k: int = 60,
        rrf_weights: tuple[float, float] = (1.0, 1.0),
        candidates: int = 100,
        rerank_depth: int = 20,
    ) -> None:
        require_compatible(index.contract, embedder.profile, sparse_encoder.profile.profile_id)
        self.index = index
        self.embedder = embedder
        self.sparse_encoder = sparse_encoder
        self.reranker = reranker
        self.rrf_k = rrf_k
        self.rrf_weights = rrf_weights
        self.candidates = candidates
        self.rerank_depth = rerank_depth

    def embed(self, question: str) -> QueryVectors:
        """Both query vectors for a question (the dense one in the profile's query format)."""
        dense = self.embedder.embed_query(format_query_input(self.embedder.profile, question))
        if len(dense) != self.embedder.profile.dimensions:
            raise DimensionMismatch(self.embedder.profile.dimensions, len(dense))
        return QueryVectors(question, tuple(dense), self.sparse_encoder.encode_query(question))

    def search(
        self,
        query: str | QueryVectors,
        eligibility: Eligibility,
        scope: CallerScope,
        *,
        k: int = 5,
        mode: Mode = "hybrid",
        thresholds: Thresholds = Thresholds(),
    ) -> RetrievalResult:
        """The ``k`` best eligible hits for ``query``."""
        return self.rank(self.fetch(query, eligibility, scope, k=k, mode=mode), thresholds)

    def fetch(
        self,
        query: str | QueryVectors,
        eligibility: Eligibility,
        scope: CallerScope,
        *,
        k: int = 5,
        mode: Mode = "hybrid",
    ) -> Candidates:
        """The first half of :meth:`search`: each leg's eligible, validated points with
        their scores, before any threshold. ``rank(fetch(...), t)`` is
        ``search(..., thresholds=t)``; calibration ranks one fetch under many thresholds."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        vectors = self.embed(query) if isinstance(query, str) else query
        timings["embed"] = _elapsed(started)
        if scope.sees_nothing:
            return Candidates(vectors, mode, k, {}, (), (), timings)
        point_filter = eligibility_filter(eligibility, scope)
        depth = k if mode in {"dense", "sparse"} else max(k, self.candidates)
        if self.reranker is not None:
            depth = max(depth, self.rerank_depth)

        started = time.perf_counter()
        dense: list[StoredPoint] = []
        sparse: list[StoredPoint] = []
        # Both legs read one state: a document switched between them would fuse its
        # old revision's dense hits with its new revision's BM25 hits.
        with self.index.reading():
            if mode in ("dense", "hybrid"):
                dense = self.index.search(vectors.dense, point_filter, limit=depth)
            if mode in ("sparse", "hybrid"):
                sparse = self.index.search_sparse(vectors.sparse, point_filter, limit=depth)
        timings["search"] = _elapsed(started)

        started = time.perf_counter()
        payloads: dict[uuid.UUID, ChunkPayload] = {}
        # Each leg's copy is checked: a point both legs return is read twice by the engine.
        for point in (*dense, *sparse):
            payload = read_payload(point.point_id, point.payload)
            check_payload(payload, eligibility, scope)
            payloads.setdefault(point.point_id, payload)
        timings["validate"] = _elapsed(started)
        return Candidates(
            vectors,
            mode,
            k,
            payloads,
            tuple((p.point_id, float(p.score or 0.0)) for p in dense),
            tuple((p.point_id, float(p.score or 0.0)) for p in sparse),
            timings,
        )

    def rank(
        self, candidates: Candidates, thresholds: Thresholds = Thresholds()
    ) -> RetrievalResult:
        """The second half of :meth:`search`: thresholds, fusion, rerank, cut to ``k``."""
        timings = dict(candidates.timings_ms)
        started = time.perf_counter()
        dense_scores = _scores(candidates.dense, thresholds.dense)
        sparse_scores = _scores(candidates.sparse, thresholds.sparse)
        hits = self._combine(
            candidates.mode, candidates.payloads, dense_scores, sparse_scores, thresholds.fusion
        )
        timings["fuse"] = _elapsed(started)

        if self.reranker is not None and hits:
            started = time.perf_counter()
            shortlist = hits[: self.rerank_depth]
            hits = _rerank(self.reranker, candidates.vectors.question, shortlist, thresholds.rerank)
            timings["rerank"] = _elapsed(started)
        return RetrievalResult(tuple(hits[: candidates.k]), candidates.mode, timings)

    def _combine(
        self,
        mode: Mode,
        payloads: Mapping[uuid.UUID, ChunkPayload],
        dense: dict[uuid.UUID, float],
        sparse: dict[uuid.UUID, float],
        fusion_threshold: float | None,
    ) -> list[Hit]:
        def identity(pid: uuid.UUID) -> tuple[str, str, str]:
            p = payloads[pid]
            return (p.document_id, p.chunking_version, p.chunk_id)

        if mode != "hybrid":
            scores = dense if mode == "dense" else sparse
            ordered = sorted(scores, key=lambda pid: (-scores[pid], identity(pid)))
            return [
                Hit(
                    payloads[pid],
                    scores[pid],
                    dense_score=dense.get(pid),
                    sparse_score=sparse.get(pid),
                )
                for pid in ordered
            ]
        rankings = [
            sorted(dense, key=lambda pid: (-dense[pid], identity(pid))),
            sorted(sparse, key=lambda pid: (-sparse[pid], identity(pid))),
        ]
        fused = rrf(rankings, k=self.rrf_k, weights=self.rrf_weights, tie_key=identity)
        return [
            Hit(
                payloads[pid],
                score,
                dense_score=dense.get(pid),
                sparse_score=sparse.get(pid),
                fused_score=score,
            )
            for pid, score in fused
            if fusion_threshold is None or score >= fusion_threshold
        ]


def _rerank(
    reranker: Reranker, question: str, shortlist: Sequence[Hit], threshold: float | None
) -> list[Hit]:
    scores = reranker.rerank(question, [h.payload.text for h in shortlist])
    if len(scores) != len(shortlist):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(shortlist)} texts")
    rescored = [
        replace(hit, score=score, rerank_score=score)
        for hit, score in zip(shortlist, scores, strict=True)
        if threshold is None or score >= threshold
    ]
    return sorted(rescored, key=lambda h: (-h.score, h.identity))


def _scores(
    scored: Sequence[tuple[uuid.UUID, float]], threshold: float | None
) -> dict[uuid.UUID, float]:
    return {pid: score for pid, score in scored if threshold is None or score >= threshold}


def _elapsed(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
