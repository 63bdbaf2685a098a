"""Request defaults every use case applies the same way, decided in this one place:
the chunking policy with a request's overrides, the question's token limit, the
eligibility a request asks for (and the chunking version a query reads), and the answer
style."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragwright.application.left_out import (
    LeftOut,
    Searched,
    VersionSource,
    held_versions,
    left_out_by,
)
from ragwright.application.requests.corpus import ChunkingOptions
from ragwright.application.requests.evidence import EvidenceFilter
from ragwright.core.answers import AnswerStyle
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.points import format_query_input
from ragwright.errors import RequestError
from ragwright.protocols import Embedder, VectorIndex
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy


@dataclass(frozen=True, slots=True)
class QueryEvidence:
    """The eligibility a query runs under and what its conditions left out."""

    eligibility: Eligibility
    left_out: LeftOut


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

    def evidence_scope(
        self, index: VectorIndex, evidence: EvidenceFilter, scope: CallerScope
    ) -> QueryEvidence:
        """The eligibility a query on ``index`` runs under, its chunking version chosen
        (:mod:`ragwright.application.left_out`), and the live chunks it leaves out that
        ``scope``'s caller could read by asking for another version, type or state."""
        version, source, held = self._chunking_version(index, evidence, scope)
        eligibility = Eligibility(
            chunking_version=version,
            document_types=evidence.effective_types,
            publication_states=evidence.effective_states,
            document_ids=evidence.documents,
        )
        versions = (
            {}
            if held is not None and not set(held) - {version}  # nothing else to count
            else left_out_by(index, eligibility, scope, "chunking_version")
        )
        types = (
            {}
            if evidence.types
            else left_out_by(
                index, eligibility, scope, "document_type", evidence.also_visible_types
            )
        )
        states = (
            {}
            if evidence.states
            else left_out_by(
                index, eligibility, scope, "publication_state", evidence.also_visible_states
            )
        )
        searched = Searched.of(evidence)
        return QueryEvidence(eligibility, LeftOut(source, versions, types, states, searched))

    def _chunking_version(
        self, index: VectorIndex, evidence: EvidenceFilter, scope: CallerScope
    ) -> tuple[str, VersionSource, dict[str, int] | None]:
        """The version a query reads, why, and (when it looked) the live chunks per
        version the caller may see: a requested version, else the one the chunking
        settings produce when one was given, else the only version holding chunks the
        caller may see, else the default policy's."""
        if evidence.chunking_version:
            return evidence.chunking_version, "request", None
        default = self.chunking_policy().version
        if self.settings.chunking_configured:
            return default, "settings", None
        held = held_versions(
            index,
            scope,
            documents=evidence.documents,
            types=_visible(evidence.effective_types, evidence.also_visible_types),
            states=_visible(evidence.effective_states, evidence.also_visible_states),
        )
        if len(held) == 1 and default not in held:
            return next(iter(held)), "index", held
        return default, "default", held

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


def _visible(own: tuple[str, ...], also: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """What a caller may see of a field: its own values and the others it may also see
    (``None``: any)."""
    return None if also is None else (*own, *also)
