"""Inputs an embedding provider refuses, found and left out with ``--skip-invalid``.

A provider that counts no tokens here (a hosted or remote model) refuses an input over
its limit, or one it will not embed, with a classified ``invalid_input`` or ``refusal``
error, and only when the writing pass sends it. :class:`LocatingEmbedder` finds which
inputs of the failing call were refused, by halving the call until each refused input
stands alone (about 2·log2(batch) more calls for one refused input), and raises
:class:`RefusedInputs` naming them; the ingestion then leaves their documents out of
another pass (:func:`ragwright.pipeline.ingest.ingest`). Without ``--skip-invalid`` the
provider's error stops the run as before: everything written stays consistent and the
next run resumes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragwright.errors import EmbeddingProviderError, FailureCategory, RagwrightError
from ragwright.protocols import Embedder

REFUSED = frozenset({FailureCategory.INVALID_INPUT, FailureCategory.REFUSAL})


class RefusedInputs(RagwrightError):
    """Embedding inputs the provider refused (each alone), with its first error."""

    def __init__(self, texts: tuple[str, ...], error: EmbeddingProviderError) -> None:
        self.texts = texts
        self.error = error
        super().__init__(f"the embedding provider refused {len(texts)} input(s): {error}")


class LocatingEmbedder:
    """``inner`` whose refused calls are narrowed down to the inputs refused."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.profile = inner.profile
        self.counts_tokens = inner.counts_tokens

    def __getattr__(self, name: str) -> Any:  # in_flight and the like
        return getattr(self.inner, name)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            return self.inner.embed_documents(texts)
        except EmbeddingProviderError as error:
            if error.category not in REFUSED:
                raise
            refused = self._refused(list(texts), error)
            raise RefusedInputs(tuple(refused), error) from error

    def _refused(self, texts: list[str], error: EmbeddingProviderError) -> list[str]:
        """The texts refused alone: ``texts`` as one call failed with ``error``."""
        if len(texts) == 1:
            return texts
        middle = len(texts) // 2
        refused: list[str] = []
        for half in (texts[:middle], texts[middle:]):
            try:
                self.inner.embed_documents(half)
            except EmbeddingProviderError as again:
                if again.category not in REFUSED:
                    raise
                refused += self._refused(half, again)
        # Neither half alone refused: the call as a whole was (its total size).
        return refused or texts
