"""``Bm25Encoder``: the core BM25 maths with the Snowball English stemmer."""

from __future__ import annotations

import threading
from functools import lru_cache

import snowballstemmer

from ragwright.core.lexical import LexicalProfile, analyze, count_terms, query_vector
from ragwright.types import SparseVector


class Bm25Encoder:
    """Analyses chunk texts and encodes questions for the ``bm25`` sparse vector.

    Document vectors need the collection's ``avgdl``, so ingestion builds them from
    :meth:`terms` with :func:`ragwright.core.lexical.document_vector`.
    """

    def __init__(self, profile: LexicalProfile | None = None) -> None:
        self.profile = profile or LexicalProfile()
        stemmer = snowballstemmer.stemmer("english")
        # A Snowball stemmer keeps the word it works on in the instance, so two threads
        # stemming at once (a worker's two items, the service's concurrent searches) get
        # each other's stems, and the cache below would keep the wrong one for good. The
        # pure-Python stemmer gains nothing from threads, so one lock serialises it; a
        # cached word never takes the lock.
        lock = threading.Lock()

        def stem(word: str) -> str:
            with lock:
                return str(stemmer.stemWord(word))

        # Stemming dominates analysis cost and vocabularies are small: cache per word.
        self._stem = lru_cache(maxsize=200_000)(stem)

    def terms(self, text: str) -> list[str]:
        """Analysed terms of a text (lower-case, stop words out, stemmed)."""
        return analyze(text, self._stem)

    def count_terms(self, text: str) -> int:
        """``len(self.terms(text))``, without stemming."""
        return count_terms(text)

    def encode_query(self, text: str) -> SparseVector:
        return query_vector(self.terms(text))
