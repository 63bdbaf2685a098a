"""The records of one answer: its budget, the options that shaped it, and the result
with its stable JSON form (``AnswerResult.to_dict``; ``docs/assembly.md`` documents
every key)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ragwright.chat.contract import ChatRequest, ModelProfile, Usage
from ragwright.core.answers import AnswerStyle, Citation, SchemaStyle
from ragwright.core.assembly import AssembledContext, Candidate
from ragwright.core.sentences import EvidenceSentence
from ragwright.core.support import SupportReport
from ragwright.pipeline.answerability import Answerability
from ragwright.pipeline.retrieve import Mode, Thresholds

Status = Literal[
    "answered", "unsupported", "insufficient", "no_eligible_evidence", "evidence_only", "preview"
]


@dataclass(frozen=True, slots=True)
class Budget:
    """The model window split into input allowance, output reserve and framing reserve."""

    window: int = 4096
    output_reserve: int = 512
    framing_reserve: int = 256

    @classmethod
    def for_profile(cls, profile: ModelProfile, *, framing_reserve: int = 256) -> Budget:
        """The budget of a model profile (its window and output limit)."""
        return cls(profile.context_window, profile.output_limit, framing_reserve)

    @property
    def max_input_tokens(self) -> int:
        return self.window - self.output_reserve - self.framing_reserve

    @property
    def max_answer_chars(self) -> int:
        """Cap on the answer text in a grammar-constrained schema: about 2 characters per
        reserved token (English runs near 4), so the JSON closes inside the reserve."""
        return 2 * self.output_reserve


@dataclass(frozen=True, slots=True)
class AnswerOptions:
    """The options that shaped one answer, as used for the model that answered."""

    k: int
    mode: Mode
    policy: str
    schema_style: SchemaStyle
    temperature: float | None
    budget: Budget
    thresholds: Thresholds
    support_check: bool
    style: AnswerStyle = "generated"


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What the use case produced, with everything needed to audit it.

    ``context`` and ``request`` are what the answering model received (an alternate's
    own assembly after a failover); ``request`` is also set for a preview (what the
    primary would receive) and ``None`` when no model was involved. An ``unsupported``
    result has an empty ``answer``; the model's text is in ``withheld_answer``, its
    citations in ``citations`` and the reasons in ``support``.
    """

    status: Status
    answer: str
    citations: tuple[Citation, ...]
    context: AssembledContext
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    support: SupportReport | None = None
    fallback: bool = False
    request: ChatRequest | None = None
    options: AnswerOptions | None = None
    withheld_answer: str | None = None
    quotes: tuple[EvidenceSentence, ...] = ()
    answerability: Answerability | None = None
    degraded: str | None = None
    timings: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (``docs/assembly.md`` documents every key).

        It holds the request's message content (evidence and question): it is meant for
        the caller who asked, never for logs or telemetry.
        """
        by_label = {s.label: s for s in self.context.sources}
        return {
            "status": self.status,
            "style": self.options.style if self.options is not None else None,
            "answer": self.answer,
            "withheld_answer": self.withheld_answer,
            "quotes": [{"id": q.label, "source": q.source, "text": q.text} for q in self.quotes],
            "answerability": (
                {
                    "score": self.answerability.score,
                    "best_sentence": self.answerability.best_sentence,
                    "threshold": self.answerability.threshold,
                    "answerable": self.answerability.answerable,
                }
                if self.answerability is not None
                else None
            ),
            "degraded": self.degraded,
            "citations": [
                {
                    "label": c.label,
                    "document_id": c.document_id,
                    "chunk_id": c.chunk_id,
                    "chunking_version": c.chunking_version,
                    "revision": by_label[c.label].candidate.revision,
                    **_where(by_label[c.label].candidate),
                }
                for c in self.citations
            ],
            "sources": [
                {
                    "label": s.label,
                    "document_id": s.candidate.document_id,
                    "chunk_id": s.candidate.chunk_id,
                    "chunking_version": s.candidate.chunking_version,
                    "revision": s.candidate.revision,
                    "score": s.candidate.score,
                    **_where(s.candidate),
                }
                for s in self.context.sources
            ],
            "decisions": [dataclasses.asdict(d) for d in self.context.decisions],
            "policy": self.context.policy,
            "input_tokens": self.context.input_tokens,
            "history": {
                "included": self.context.history_turns,
                "dropped": self.context.history_dropped,
            },
            "request": _request_dict(self.request) if self.request is not None else None,
            "usage": dataclasses.asdict(self.usage) if self.usage is not None else None,
            "provider": self.provider,
            "model": self.model,
            "fallback": self.fallback,
            "support": _support_dict(self.support) if self.support is not None else None,
            "options": _options_dict(self.options) if self.options is not None else None,
            "timings": {stage: round(ms, 3) for stage, ms in self.timings.items()},
        }


def instructions_version(style: str, context: AssembledContext) -> str:
    """The version of the instructions a model request carries (its ``prompt_version``):
    the answer style, the assembly policy id and a digest of the instructions text. A
    degraded result has no request; the previous-draft check recomputes it from this."""
    digest = hashlib.sha256(context.instructions.encode()).hexdigest()[:12]
    return f"{style}:{context.policy}:{digest}"


def _request_dict(request: ChatRequest) -> dict[str, Any]:
    return {
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "options": {
            "max_output_tokens": request.options.max_output_tokens,
            "temperature": request.options.temperature,
            "json_schema": request.options.json_schema,
        },
        "scope": request.scope,
        "prompt_version": request.prompt_version,
    }


def _support_dict(support: SupportReport) -> dict[str, Any]:
    return {
        "flagged": support.flagged,
        "supported": support.supported,
        "citations": [dataclasses.asdict(c) for c in support.citations],
        "unsupported_sentences": list(support.unsupported_sentences),
        "checked_sentences": support.checked_sentences,
        "followed_instructions": list(support.followed_instructions),
        "instruction_sources": list(support.instruction_sources),
    }


def _options_dict(options: AnswerOptions) -> dict[str, Any]:
    return {
        "k": options.k,
        "mode": options.mode,
        "policy": options.policy,
        "schema_style": options.schema_style,
        "temperature": options.temperature,
        "budget": {
            "window": options.budget.window,
            "output_reserve": options.budget.output_reserve,
            "framing_reserve": options.budget.framing_reserve,
            "max_input_tokens": options.budget.max_input_tokens,
        },
        "thresholds": dataclasses.asdict(options.thresholds),
        "support_check": options.support_check,
        "style": options.style,
    }


def _where(candidate: Candidate) -> dict[str, Any]:
    """A cited chunk's file, pages (paged formats) and the two as a reader sees them."""
    return {
        "source_uri": candidate.source_uri,
        "pages": None if candidate.pages is None else list(candidate.pages),
        "location": candidate.location,
    }
