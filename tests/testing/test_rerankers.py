"""The Reranker suite on the bi-encoder (hashing fake and bundled model) and on the HTTP
``/rerank`` adapter against a fake server behind an httpx transport."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.rerankers import BiEncoderReranker, HttpReranker
from ragwright.testing import HashingEmbedder, RerankerConformance


def rerank_server(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    scores = BiEncoderReranker(HashingEmbedder()).rerank(body["query"], body["documents"])
    # Like real servers: best first, so the adapter must map results back by index.
    ranked = sorted(enumerate(scores), key=lambda item: -item[1])
    results = [{"index": i, "relevance_score": s} for i, s in ranked[: body["top_n"]]]
    return httpx.Response(200, json={"results": results})


class TestHashingBiEncoderReranker(RerankerConformance):
    @pytest.fixture
    def reranker(self) -> BiEncoderReranker:
        return BiEncoderReranker(HashingEmbedder())


@pytest.fixture(scope="module")
def bundled() -> BiEncoderReranker:
    return BiEncoderReranker(OnnxEmbedder(batch_size=4))


class TestBundledBiEncoderReranker(RerankerConformance):
    @pytest.fixture
    def reranker(self, bundled: BiEncoderReranker) -> BiEncoderReranker:
        return bundled


class TestHttpReranker(RerankerConformance):
    @pytest.fixture
    def reranker(self) -> Iterator[HttpReranker]:
        reranker = HttpReranker("http://rerank.test", transport=httpx.MockTransport(rerank_server))
        yield reranker
        reranker.close()
