"""The answer use case's result in its stable JSON form, with its mode and reason.

Every answer states which mode served it and why (docs/service.md):

========================  =====================================================
mode                      when
========================  =====================================================
``generated``             the model answered and the answer passed validation
``previous_draft``        the model was unavailable; an earlier answer to the same
                          question, made from the same inputs (cited revisions,
                          assembly policy, instructions version, tenant) and within
                          ``draft_max_age``, is shown with its age (``draft``)
``approved_template``     the model was unavailable; a reviewed template for the
                          question's class is offered (``answer`` stays empty)
``evidence_only``         the most relevant evidence without an answer: the
                          configured style, or the model was unavailable
``insufficient``          the evidence does not answer (or is missing), or the
                          model's answer was not supported by its citations
``unavailable``           the model was unavailable and evidence-only results are
                          turned off; nothing to stand behind is returned
========================  =====================================================

While the model is unavailable the precedence is: previous draft, else approved
template, else evidence only, else unavailable.

``reason`` is ``None`` in normal operation (a configured evidence-only style is not
degraded traffic) and otherwise one of :data:`REASONS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragwright.application.drafts import ShownDraft
from ragwright.application.left_out import LeftOut
from ragwright.application.requests.evidence import ThresholdOrigin
from ragwright.core.answers import AnswerStyle
from ragwright.core.templates import ApprovedTemplate
from ragwright.pipeline.answer import AnswerResult
from ragwright.pipeline.retrieve import Mode as SearchMode
from ragwright.pipeline.retrieve import Thresholds
from ragwright.types import CollectionContract

Mode = Literal[
    "generated",
    "previous_draft",
    "approved_template",
    "evidence_only",
    "insufficient",
    "unavailable",
]
REASONS = (
    "model_unavailable",
    "request_deadline_exceeded",
    "required_evidence_unavailable",
    "evidence_does_not_answer",
    "answer_not_supported",
    "retrieval_unavailable",
)


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """The request's own options, as applied: its JSON form extends the pipeline's
    ``options`` (the keys both have, ``k``, ``mode``, ``policy``, ``style`` and
    ``thresholds``, take these values in the pipeline's places)."""

    k: int
    mode: SearchMode
    policy: str
    chunking_version: str
    document_types: tuple[str, ...]
    publication_states: tuple[str, ...]
    documents: tuple[str, ...]
    tenant: str | None
    history_messages: int
    current_revisions: Mapping[str, str]
    deadline_seconds: float
    style: AnswerStyle
    answerability_threshold: float | None
    answerability_source: str
    primary: str
    fallbacks: tuple[str, ...]
    thresholds: Thresholds
    threshold_origin: ThresholdOrigin

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "mode": self.mode,
            "policy": self.policy,
            "chunking_version": self.chunking_version,
            "document_types": list(self.document_types),
            "publication_states": list(self.publication_states),
            "documents": list(self.documents),
            "tenant": self.tenant,
            "history_messages": self.history_messages,
            "current_revisions": dict(self.current_revisions),
            "deadline_seconds": self.deadline_seconds,
            "style": self.style,
            "answerability_threshold": self.answerability_threshold,
            "answerability_source": self.answerability_source,
            "primary": self.primary,
            "fallbacks": list(self.fallbacks),
            "thresholds": asdict(self.thresholds),
            **self.threshold_origin.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class AnswerProvenance:
    """Who made the answer and from what: the model that answered, the instructions'
    version, the assembly policy, the chunking version and the index's profiles (the
    previous-draft check compares them)."""

    provider: str | None
    model: str | None
    fallback: bool
    instructions_version: str | None
    assembly_policy: str
    chunking_version: str
    embedding_profile: str
    embedding_digest: str
    lexical_profile: str

    @classmethod
    def of(
        cls, result: AnswerResult, chunking_version: str, contract: CollectionContract
    ) -> AnswerProvenance:
        """The provenance of a pipeline result answered from an index under ``contract``."""
        return cls(
            provider=result.provider,
            model=result.model,
            fallback=result.fallback,
            instructions_version=(
                result.request.prompt_version if result.request is not None else None
            ),
            assembly_policy=result.context.policy,
            chunking_version=chunking_version,
            embedding_profile=contract.profile_id,
            embedding_digest=contract.profile_digest,
            lexical_profile=contract.lexical_profile_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "fallback": self.fallback,
            "instructions_version": self.instructions_version,
            "assembly_policy": self.assembly_policy,
            "chunking_version": self.chunking_version,
            "index_contract": {
                "embedding_profile": self.embedding_profile,
                "embedding_digest": self.embedding_digest,
                "lexical_profile": self.lexical_profile,
            },
        }


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """An answer (or the reason there is none) and the request options that shaped it.

    ``to_dict`` is the documented JSON form (docs/application.md): the pipeline result's
    form (``AnswerResult.to_dict``) with ``options`` extended by the request's own
    (:class:`RequestOptions`: eligibility, tenant, history, deadline), plus ``mode``,
    ``reason``, ``template`` and ``provenance`` (:class:`AnswerProvenance`). The same
    for ``ragwright ask --json`` and the HTTP service.
    ``template`` is the approved template offered because the model was unavailable;
    ``evidence_allowed`` false turns a degraded evidence-only result into ``unavailable``.
    ``draft`` is the earlier answer shown because the model was unavailable: it takes
    precedence over ``template``, and ``to_dict`` then carries the draft's answer,
    citations, quotes, sources and provenance (who wrote it), with ``draft`` saying when.
    ``left_out`` ends it: why the query read its chunking version and the live chunks
    its versions, types and states left out (:mod:`ragwright.application.left_out`).
    """

    result: AnswerResult
    options: RequestOptions | None = None
    template: ApprovedTemplate | None = None
    evidence_allowed: bool = True
    provenance: AnswerProvenance | None = None
    draft: ShownDraft | None = None
    left_out: LeftOut = field(default_factory=LeftOut)

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def mode(self) -> Mode | None:
        """Which mode served the request (``None`` for a preview, which answers nothing)."""
        status = self.result.status
        if status == "answered":
            return "generated"
        if status in ("insufficient", "unsupported", "no_eligible_evidence"):
            return "insufficient"
        if status == "evidence_only":
            if self.result.degraded is None:
                return "evidence_only"
            if self.draft is not None:
                return "previous_draft"
            if self.template is not None:
                return "approved_template"
            return "evidence_only" if self.evidence_allowed else "unavailable"
        return None

    @property
    def reason(self) -> str | None:
        """Why the mode is not a plain generated answer (``None`` when nothing degraded)."""
        status = self.result.status
        if status == "no_eligible_evidence":
            return "required_evidence_unavailable"
        if status == "insufficient":
            return "evidence_does_not_answer"
        if status == "unsupported":
            return "answer_not_supported"
        if status == "evidence_only" and self.result.degraded is not None:
            if self.result.degraded == "deadline_exhausted":
                return "request_deadline_exceeded"
            return "model_unavailable"
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "reason": self.reason}
        out.update(self.result.to_dict())
        own = self.options.to_dict() if self.options is not None else {}
        out["options"] = {**(out.get("options") or {}), **own}
        out["template"] = self.template.to_dict() if self.template is not None else None
        out["provenance"] = self.provenance.to_dict() if self.provenance is not None else {}
        out["draft"] = None
        if self.mode == "previous_draft" and self.draft is not None:
            earlier = self.draft.draft.result
            for name in ("style", "answer", "citations", "quotes", "sources"):
                out[name] = earlier.get(name)
            out["provenance"] = dict(earlier.get("provenance") or {})
            out["draft"] = self.draft.label()
        if self.mode == "unavailable":
            # Nothing the system stands behind: no evidence, no selection.
            out["quotes"], out["citations"] = [], []
        out.update(self.left_out.to_dict())
        return out

    def public_dict(self) -> dict[str, Any]:
        """The form a caller of the service receives (an HTTP answer, a job's result):
        everything but the exact model request, whose instructions stay on the server
        (their version is in ``provenance``)."""
        out = self.to_dict()
        out.pop("request", None)
        return out
