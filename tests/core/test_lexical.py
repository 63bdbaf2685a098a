from __future__ import annotations

import math
import uuid
from pathlib import Path

import bm25s
import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile, analyze, document_vector, query_vector
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import IndexPoint, PointFilter

CORPUS = [
    "Drain the queue only while the shutdown deadline allows it.",
    "A bounded queue makes producers wait for capacity.",
    "Rotate the TLS certificate before it expires.",
    "Queues, queues and more queues: draining queued work during shutdown.",
    "Refunds go back to the original payment method.",
]


def test_analysis_lowercases_drops_stop_words_and_stems() -> None:
    assert analyze("The Queues were DRAINED", str.lower) == ["queues", "drained"]
    assert Bm25Encoder().terms("The Queues were DRAINED") == ["queue", "drain"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The Queues were DRAINED",
        "Drain, drains, draining and drained: the same stem four times over.",
        "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich; it's fine.",
        "a an the of to and or but if then when while only unless except",
        "v2.3.1 TLS_CERT /var/log/app-01.log 4xx errors at 12:00 UTC",
        *CORPUS,
    ],
)
def test_counting_terms_without_stemming_gives_the_number_of_analysed_terms(text: str) -> None:
    # The validation pass measures BM25 lengths with count_terms; the vectors are built
    # from terms(): the two must agree, or the recorded mean is not the corpus's.
    encoder = Bm25Encoder()
    assert encoder.count_terms(text) == len(encoder.terms(text))


def test_document_weight_saturates_and_normalises_length() -> None:
    profile = LexicalProfile(k1=1.2, b=0.75)
    one = document_vector(["a", "b", "c", "d"], profile, avgdl=4)
    assert one.values == pytest.approx([1.0] * 4)  # tf=1 at average length
    repeated = document_vector(["a"] * 3 + ["b"], profile, avgdl=4)
    weight_a = max(repeated.values)
    assert weight_a == pytest.approx(3 * 2.2 / (3 + 1.2))
    assert weight_a < 3


def test_query_vector_has_unit_weight_per_distinct_term() -> None:
    vector = query_vector(["queue", "queue", "drain"])
    assert len(vector.indices) == 2 and vector.values == (1.0, 1.0)


def test_engine_scores_equal_bm25s_lucene(tmp_path: Path) -> None:
    """Our tf half + Qdrant's IDF modifier == a reference BM25 implementation."""
    encoder = Bm25Encoder()
    tokenized = [encoder.terms(text) for text in CORPUS]
    avgdl = sum(len(t) for t in tokenized) / len(tokenized)
    profile = LexicalProfile(k1=0.9, b=0.4)
    reference = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    reference.index(tokenized, show_progress=False)
    query = "how do I drain queues at shutdown"
    # bm25s's Lucene variant omits the constant (k1 + 1) numerator, as Lucene 8+ does.
    expected = reference.get_scores(encoder.terms(query)) * (profile.k1 + 1)

    contract = contract_for(HASHING_PROFILE, "v", profile)
    with EdgeIndex(tmp_path, contract) as index:
        index.upsert(
            [
                IndexPoint(
                    uuid.UUID(int=i + 1),
                    [1.0] + [0.0] * 63,
                    {"i": i},
                    document_vector(terms, profile, avgdl),
                )
                for i, terms in enumerate(tokenized)
            ]
        )
        hits = index.search_sparse(encoder.encode_query(query), PointFilter(), limit=10)
    got = {h.payload["i"]: h.score for h in hits}
    for i, score in enumerate(expected):
        if score > 0:
            assert got[i] == pytest.approx(float(score), rel=1e-4)
        else:
            assert i not in got
    assert max(got, key=lambda i: got[i]) == 3
    assert not math.isnan(sum(got.values()))
