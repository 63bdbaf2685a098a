"""Rerankers: an offline bi-encoder rescorer and an adapter for the common ``/rerank`` API.

No cross-encoder ships inside any installable package here, so the offline reranker
rescores each candidate by the cosine similarity between the question and the chunk
text alone (without the document formatting the index used), with any embedder.

``HttpReranker`` speaks the request shape shared by llama.cpp server, TEI, vLLM, Jina and
Cohere: ``POST {base}/rerank`` with ``{"model", "query", "documents", "top_n"}``,
answered by ``{"results": [{"index", "relevance_score"}]}`` (a bare list of
``{"index", "score"}``, as TEI returns, is accepted too). Its failures are
:class:`RerankError` from the one classifier (``adapters/http.py``); each request's
timeout is what is left of the current deadline, else ``timeout``. Retries are not done
here: ``runtime.open_retriever`` wraps it in :class:`ragwright.retry.RetryingReranker`.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from ragwright.adapters.http import post_json
from ragwright.errors import FailureCategory, RerankError
from ragwright.protocols import Embedder


class BiEncoderReranker:
    """Cosine of question and chunk text under ``embedder`` (offline)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        query = np.asarray(self.embedder.embed_query(question), dtype=np.float32)
        passages = np.asarray(self.embedder.embed_documents(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(passages, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
        scores: list[float] = (passages @ query / np.maximum(norms, 1e-12)).tolist()
        return scores


class HttpReranker:
    """A remote ``/rerank`` endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key: str | None = None,
        path: str = "/rerank",
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.path = path
        self.timeout = timeout
        self._client = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        body: dict[str, object] = {"query": question, "documents": list(texts), "top_n": len(texts)}
        if self.model:
            body["model"] = self.model
        data = post_json(
            self._client, RerankError, "rerank", self.path, body, default_timeout=self.timeout
        )
        items = data.get("results") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise RerankError("rerank", FailureCategory.INVALID_OUTPUT, "no results list")
        scores: list[float | None] = [None] * len(texts)
        for item in items:
            index = item.get("index") if isinstance(item, dict) else None
            score = (
                item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
            )
            if (
                not isinstance(index, int)
                or not 0 <= index < len(texts)
                or not isinstance(score, int | float)
            ):
                raise RerankError(
                    "rerank", FailureCategory.INVALID_OUTPUT, f"bad result item {item!r}"
                )
            scores[index] = float(score)
        if any(s is None for s in scores):
            raise RerankError(
                "rerank", FailureCategory.INVALID_OUTPUT, "not every document was scored"
            )
        return [s for s in scores if s is not None]

    def close(self) -> None:
        self._client.close()
