"""Suites for the model-facing protocols: Embedder, Reranker and TokenCounter.

Each suite needs one fixture named after what it tests (``embedder``, ``reranker``,
``counter``); give it any scope (a real model is worth loading once per module).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ragwright.errors import RagwrightError
from ragwright.protocols import Embedder, Reranker, TokenCounter

TEXTS = [
    "Drain the queue before shutdown.",
    "Rotate the TLS certificates every 90 days.",
    "Refunds go back to the original payment method.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
]
QUESTION = "How do I drain the queue before a shutdown?"
RELEVANT = 0
# Vectors from one batch may differ from the same text embedded alone by float noise.
TOLERANCE = 1e-5


class EmbedderConformance:
    """Inherit and override the ``embedder`` fixture.

    Checks what ingestion and retrieval rely on: one vector per text with the profile's
    dimensions, in input order, the same vector for the same text whatever the batch
    (and whatever other calls run at once, for an embedder with ``in_flight``), and
    over-long input rejected (counted first when the embedder counts tokens), never
    truncated.
    """

    @pytest.fixture
    def embedder(self) -> Embedder:
        raise NotImplementedError("override the embedder fixture")

    def test_one_vector_per_text_with_the_profile_dimensions(self, embedder: Embedder) -> None:
        vectors = embedder.embed_documents(TEXTS)
        assert len(vectors) == len(TEXTS)
        assert {len(v) for v in vectors} == {embedder.profile.dimensions}
        assert all(isinstance(x, float) and math.isfinite(x) for v in vectors for x in v)

    def test_order_is_preserved(self, embedder: Embedder) -> None:
        forward = np.array(embedder.embed_documents(TEXTS))
        backward = np.array(embedder.embed_documents(TEXTS[::-1]))
        one_by_one = np.array([embedder.embed_documents([t])[0] for t in TEXTS])
        assert np.allclose(forward, backward[::-1], atol=TOLERANCE)
        assert np.allclose(forward, one_by_one, atol=TOLERANCE)

    def test_embedding_is_deterministic(self, embedder: Embedder) -> None:
        first = np.array(embedder.embed_documents(TEXTS))
        assert np.allclose(first, np.array(embedder.embed_documents(TEXTS)), atol=TOLERANCE)

    def test_a_query_embeds_like_the_same_document_input(self, embedder: Embedder) -> None:
        query = np.array(embedder.embed_query(TEXTS[1]))
        assert np.allclose(query, np.array(embedder.embed_documents([TEXTS[1]])[0]), atol=1e-5)

    def test_different_texts_get_different_vectors(self, embedder: Embedder) -> None:
        vectors = np.array(embedder.embed_documents(TEXTS))
        for i in range(len(TEXTS)):
            for j in range(i + 1, len(TEXTS)):
                assert not np.allclose(vectors[i], vectors[j], atol=1e-3), (i, j)

    def test_calls_in_flight_together_get_their_own_vectors(self, embedder: Embedder) -> None:
        # An embedder with in_flight > 1 is called from that many threads at once.
        workers = getattr(embedder, "in_flight", 1)
        serial = [embedder.embed_documents([text]) for text in TEXTS]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            together = list(pool.map(embedder.embed_documents, [[text] for text in TEXTS] * 2))
        assert np.allclose(np.array(together), np.array(serial * 2), atol=TOLERANCE)

    def test_an_empty_batch_embeds_nothing(self, embedder: Embedder) -> None:
        assert embedder.embed_documents([]) == []

    def test_over_long_input_is_rejected_not_truncated(self, embedder: Embedder) -> None:
        limit = embedder.profile.max_input_tokens
        too_long = " ".join(["word"] * (limit + 10))
        if embedder.counts_tokens:
            short, long = embedder.count_tokens([TEXTS[0], too_long])
            assert 0 < short < limit < long
        with pytest.raises(RagwrightError):
            embedder.embed_documents([TEXTS[0], too_long])


class RerankerConformance:
    """Inherit and override the ``reranker`` fixture.

    Checks one score per text in input order, higher for the text that answers the
    question, and the same scores for the same input.
    """

    @pytest.fixture
    def reranker(self) -> Reranker:
        raise NotImplementedError("override the reranker fixture")

    def test_one_finite_score_per_text_in_input_order(self, reranker: Reranker) -> None:
        scores = reranker.rerank(QUESTION, TEXTS)
        assert len(scores) == len(TEXTS)
        assert all(isinstance(s, float) and math.isfinite(s) for s in scores)
        backward = reranker.rerank(QUESTION, TEXTS[::-1])
        assert np.allclose(scores, backward[::-1], atol=TOLERANCE)

    def test_the_text_that_answers_scores_highest(self, reranker: Reranker) -> None:
        scores = reranker.rerank(QUESTION, TEXTS)
        assert max(range(len(TEXTS)), key=scores.__getitem__) == RELEVANT

    def test_scoring_is_deterministic(self, reranker: Reranker) -> None:
        first = reranker.rerank(QUESTION, TEXTS)
        assert np.allclose(first, reranker.rerank(QUESTION, TEXTS), atol=TOLERANCE)

    def test_no_texts_get_no_scores(self, reranker: Reranker) -> None:
        assert reranker.rerank(QUESTION, []) == []


class TokenCounterConformance:
    """Inherit and override the ``counter`` fixture.

    Checks the contract documented on :class:`~ragwright.protocols.TokenCounter`.
    """

    @pytest.fixture
    def counter(self) -> TokenCounter:
        raise NotImplementedError("override the counter fixture")

    def test_names_its_encoding(self, counter: TokenCounter) -> None:
        assert isinstance(counter.encoding_name, str) and counter.encoding_name.strip()

    def test_the_empty_text_is_zero_tokens(self, counter: TokenCounter) -> None:
        assert counter.count("") == 0

    @pytest.mark.parametrize("text", ["a", "7", "Zwölf", "？", "drain the queue", "🙂"])
    def test_visible_text_counts_at_least_one_token(self, counter: TokenCounter, text: str) -> None:
        count = counter.count(text)
        assert isinstance(count, int) and count >= 1

    def test_counting_is_deterministic(self, counter: TokenCounter) -> None:
        first = counter.count(TEXTS[3])
        counter.count(" ".join(TEXTS))  # counting other text must not change the next count
        assert counter.count(TEXTS[3]) == first

    def test_special_token_text_is_ordinary_text(self, counter: TokenCounter) -> None:
        assert counter.count("<|endoftext|>") >= 1
        assert counter.count("before <|endofprompt|> after") >= 3
