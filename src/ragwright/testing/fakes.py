"""Deterministic fakes that record what was asked of them.

``HashingEmbedder`` is a real (if crude) embedding: a signed feature-hashing bag of words,
L2-normalised, so similar texts get similar vectors and tests can assert on ranking
without loading a model. It records every call so tests can assert what was embedded.
``WordCounter`` is a :class:`~ragwright.protocols.TokenCounter` that counts words, so
budgets in tests are easy to compute by hand; ``ManualClock`` is a clock tests move.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ragwright.errors import InputTooLong
from ragwright.types import EmbeddingProfile

HASHING_PROFILE = EmbeddingProfile(
    profile_id="hashing-64-v1",
    provider="fake",
    model="feature-hashing bag of words",
    artifact_digest="sha256:" + hashlib.sha256(b"hashing-64-v1").hexdigest(),
    dimensions=64,
    distance="cosine",
    document_format="{title}\n\n{text}",
    query_format="{query}",
    max_input_tokens=512,
)


@dataclass
class HashingEmbedder:
    """Feature-hashing embedder; ``calls`` lists the batches it embedded."""

    profile: EmbeddingProfile = HASHING_PROFILE
    counts_tokens: bool = True
    calls: list[list[str]] = field(default_factory=list)
    fail_after_calls: int | None = None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(re.findall(r"\w+|[^\w\s]", t)) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_after_calls is not None and len(self.calls) >= self.fail_after_calls:
            raise RuntimeError("scripted embedder failure")
        for text, tokens in zip(texts, self.count_tokens(texts), strict=True):
            if tokens > self.profile.max_input_tokens:
                raise InputTooLong(text[:40], tokens, self.profile.max_input_tokens)
        self.calls.append(list(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    @property
    def embedded_texts(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def _vector(self, text: str) -> list[float]:
        dimensions = self.profile.dimensions
        vector = [0.0] * dimensions
        for word in _WORD.findall(text.lower()):
            slot, sign = _feature(word, dimensions)
            vector[slot] += sign
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


_WORD = re.compile(r"\w+")


# A word's slot and sign, cached: hashing each word of each text again was most of this
# embedder's cost (about 100 µs a chunk in benchmarks/ingest_scale.py, where embedding
# stands in for a fast remote model and should cost almost nothing). Same vectors.
@lru_cache(maxsize=2**16)
def _feature(word: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
    return int.from_bytes(digest[:4], "big") % dimensions, 1.0 if digest[4] & 1 else -1.0


class WordCounter:
    """Counts whitespace-separated words as tokens."""

    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


@dataclass
class ManualClock:
    """A monotonic clock that moves only when told; call it for the time."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
