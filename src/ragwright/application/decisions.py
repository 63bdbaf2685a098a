"""Request defaults every use case applies the same way, decided in this one place:
the chunking policy with a request's overrides, the question's token limit, the
eligibility a request asks for, and the answer style."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragwright.application.requests.corpus import ChunkingOptions
from ragwright.application.requests.evidence import EvidenceFilter
from ragwright.core.answers import AnswerStyle
from ragwright.core.eligibility import Eligibility
from ragwright.core.points import format_query_input
from ragwright.errors import RequestError
from ragwright.protocols import Embedder
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy


class Decisions:
    """The defaults of :mod:`ragwright.application` over one :class:`Settings`."""

    def __init__(self, settings: Settings, embedder: Callable[[], Embedder]) -> None:
        self.settings = settings
        self._embedder = embedder

    def chunking_policy(self, options: ChunkingOptions = ChunkingOptions()) -> ChunkingPolicy:
        """The configured chunking policy with a request's overrides, validated like
        settings (an out-of-range value names its setting)."""
        overrides: dict[str, Any] = {
            name: value
            for name, value in (
                ("chunking", options.policy),
                ("max_words", options.max_words),
                ("max_tokens", options.max_tokens),
                ("overlap", options.overlap),
            )
            if value is not None
        }
        if not overrides:
            return self.settings.chunking_policy()
        return self.settings.with_overrides(**overrides).chunking_policy()

    def check_question_tokens(self, question: str) -> None:
        """Refuse a question the embedding model cannot read whole (blank and overlong
        questions are already refused by the request).

        Raises:
            RequestError: naming ``question``, its tokens and the model's limit, with
                advice for questions (the embedder's own error speaks of chunks).
        """
        embedder = self._embedder()
        if not embedder.counts_tokens:
            return
        limit = embedder.profile.max_input_tokens
        tokens = embedder.count_tokens([format_query_input(embedder.profile, question)])[0]
        if tokens > limit:
            raise RequestError(
                "question",
                f"has {tokens} tokens, the embedding model reads at most {limit}; "
                "shorten the question to what you want to know",
            )

    def eligibility(self, evidence: EvidenceFilter) -> Eligibility:
        """The eligibility a request asks for, defaults applied in this one place."""
        return Eligibility(
            chunking_version=evidence.chunking_version or self.chunking_policy().version,
            document_types=evidence.effective_types,
            publication_states=evidence.effective_states,
            document_ids=evidence.documents,
        )

    def answer_style(self, requested: AnswerStyle | None = None) -> AnswerStyle:
        """The request's style, else the ``answer_style`` setting; ``auto`` is ``quoted``
        for the embedded local model (a small model should select, not write) and
        ``generated`` for every other provider."""
        if requested is not None:
            return requested
        configured = self.settings.answers.style
        if configured != "auto":
            return configured
        return "quoted" if self.settings.chat.provider == "local" else "generated"
