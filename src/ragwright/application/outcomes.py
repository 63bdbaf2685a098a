"""The answer use case's result in its stable JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ragwright.pipeline.answer import AnswerResult


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """An answer (or the reason there is none) and the options that shaped it.

    ``to_dict`` is the documented JSON form (docs/answers.md): the same for
    ``ragwright ask --json`` and the HTTP service.
    """

    result: AnswerResult
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.result.status

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        context = result.context
        out: dict[str, Any] = {
            "status": result.status,
            "answer": result.answer,
            "citations": [
                {
                    "label": c.label,
                    "document_id": c.document_id,
                    "chunk_id": c.chunk_id,
                    "chunking_version": c.chunking_version,
                }
                for c in result.citations
            ],
            "sources": [
                {
                    "label": s.label,
                    "document_id": s.candidate.document_id,
                    "chunk_id": s.candidate.chunk_id,
                    "chunking_version": s.candidate.chunking_version,
                }
                for s in context.sources
            ],
            "decisions": [
                {
                    "document_id": d.document_id,
                    "chunk_id": d.chunk_id,
                    "chunking_version": d.chunking_version,
                    "outcome": d.outcome,
                    "label": d.label,
                    "removed_paragraphs": d.removed_paragraphs,
                }
                for d in context.decisions
            ],
            "input_tokens": context.input_tokens,
            "policy": context.policy,
            "usage": asdict(result.usage) if result.usage else None,
            "model": result.model,
            "provider": result.provider,
            "options": self.options,
            "messages": [
                {"role": "system", "content": context.instructions},
                {"role": "user", "content": context.user_message},
            ]
            if context.sources
            else [],
            "support": None,
        }
        if result.support is not None:
            out["support"] = {
                "flagged": result.support.flagged,
                "citations": [asdict(c) for c in result.support.citations],
                "unsupported_sentences": list(result.support.unsupported_sentences),
            }
        return out
