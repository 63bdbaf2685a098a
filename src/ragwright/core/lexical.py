"""Text → BM25 sparse vectors, split between ingestion and the engine.

BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
2009) scores a document ``d`` for a query ``q`` as::

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d) · (k1 + 1) / (tf(t,d) + k1 · (1 − b + b · |d| / avgdl))

The document side of the product — the saturated, length-normalised term frequency — is
computed here at ingestion and stored as a sparse vector. The engine supplies
``idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))`` through Qdrant's ``IDF`` modifier,
from the live collection, so idf stays right as documents come and go. A query vector
has weight 1 for each distinct query term, so the dot product is exactly the sum above.

``avgdl`` is a corpus statistic, not a setting: the mean analysed length of the
collection's points. Every stored vector carries the ``avgdl`` it was encoded with, so
the collection records it (:class:`~ragwright.types.LexicalStats` in its contract) and
ingestion encodes new points with the recorded value. After each run ingestion counts
the corpus again; when the true mean has drifted from the recorded one by more than
:data:`AVGDL_TOLERANCE` (relative), every point's sparse vector is rebuilt from its stored
text under the new mean (no embedding) and the new value recorded (:func:`avgdl_drifted`).
Within the tolerance a length-normalisation term ``b · |d| / avgdl`` moves by at most
``b · 5 %``; the query side needs no ``avgdl`` at all.

Tokenisation: lower-case, Unicode word characters, English stop words removed, then a
stemmer supplied by the caller (the core stays free of third-party code).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

# LexicalProfile lives with the shared records (the SparseEncoder protocol names it).
from ragwright.types import LexicalProfile as LexicalProfile  # noqa: PLC0414 - re-exported
from ragwright.types import SparseVector

_TOKEN = re.compile(r"\w+", re.UNICODE)

# Common English function words, which carry no topical signal for BM25.
STOPWORDS = frozenset(
    " ".join(
        (
            "a about above after again against all am an and any are as at be because been",
            "before being below between both but by can could did do does doing down during",
            "each few for from further had has have having he her here hers herself him",
            "himself his how i if in into is it its itself just me more most my myself no nor",
            "not now of off on once only or other our ours ourselves out over own same she",
            "should so some such than that the their theirs them themselves then there these",
            "they this those through to too under until up very was we were what when where",
            "which while who whom why will with would you your yours yourself yourselves",
        )
    ).split()
)


AVGDL_TOLERANCE = 0.05
"""Relative drift of the corpus mean length from the recorded ``avgdl`` that ingestion
tolerates before it re-encodes every sparse vector."""


def avgdl_drifted(recorded: float, current: float, tolerance: float = AVGDL_TOLERANCE) -> bool:
    """Whether ``current`` (the corpus mean now) is more than ``tolerance`` away from
    ``recorded`` (the mean the stored vectors carry), relative to ``recorded``."""
    return abs(current - recorded) > tolerance * recorded


Stemmer = Callable[[str], str]


def analyze(text: str, stem: Stemmer) -> list[str]:
    """Lower-case word tokens without stop words, stemmed."""
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def count_terms(text: str) -> int:
    """``len(analyze(text, stem))`` for any stemmer: stemming maps a token to one term,
    so the count needs no stemming (the validation pass's BM25 lengths)."""
    return sum(1 for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS)


# Each chunk hashes each of its distinct terms: a corpus's vocabulary is small, so the
# indexes of its frequent terms are kept (about 10 MB at most).
@lru_cache(maxsize=2**16)
def term_index(term: str) -> int:
    """Stable 32-bit index of a term (BLAKE2b); collisions are negligible at our scale."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def document_vector(terms: list[str], profile: LexicalProfile, avgdl: float) -> SparseVector:
    """The document half of BM25 per distinct term under the corpus mean length ``avgdl``
    (see the module docstring)."""
    if avgdl <= 0:
        raise ValueError(f"avgdl must be positive, got {avgdl}")
    if not terms:
        return SparseVector((), ())
    counts = Counter(terms)
    norm = profile.k1 * (1.0 - profile.b + profile.b * len(terms) / avgdl)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + tf * (profile.k1 + 1.0) / (tf + norm)
    ordered = sorted(weights)
    return SparseVector(tuple(ordered), tuple(weights[i] for i in ordered))


def query_vector(terms: list[str]) -> SparseVector:
    """Weight 1 for each distinct query term."""
    indexes = sorted({term_index(t) for t in terms})
    return SparseVector(tuple(indexes), tuple(1.0 for _ in indexes))
