"""The support-answer use case: retrieve → assemble → generate → validate.

* Retrieval runs with the caller's eligibility and trusted scope (never relaxed).
* Assembly applies the chosen policy inside the o200k_base input allowance
  (window − output reserve − framing reserve).
* Empty context means no model call: the outcome is ``no_eligible_evidence``.
* The model gets the grounded-answer instructions as the system message and the
  assembled JSON evidence as the user message, with the answer JSON schema; the answer
  is validated in code and its citations resolved from the assembler's labels.
* The result records the estimated input tokens and the provider-reported usage
  (``None`` when unknown, never 0).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ragwright.chat.contract import (
    ChatMessage,
    ChatModel,
    ChatOptions,
    ChatRequest,
    Deadline,
    Usage,
)
from ragwright.core.answers import Citation, SchemaStyle, answer_schema, parse_answer
from ragwright.core.assembly import AssembledContext, Candidate, assemble
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.support import SupportReport, check_support
from ragwright.pipeline.retrieve import Hit, Mode, Retriever, Thresholds
from ragwright.protocols import TokenCounter

Status = Literal["answered", "insufficient", "no_eligible_evidence", "preview"]


@dataclass(frozen=True, slots=True)
class Budget:
    """The model window split into input allowance, output reserve and framing reserve."""

    window: int = 4096
    output_reserve: int = 512
    framing_reserve: int = 256

    @property
    def max_input_tokens(self) -> int:
        return self.window - self.output_reserve - self.framing_reserve

    @property
    def max_answer_chars(self) -> int:
        """Cap on the answer text in a grammar-constrained schema: about 2 characters per
        reserved token (English runs near 4), so the JSON closes inside the reserve."""
        return 2 * self.output_reserve


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What the use case produced, with everything needed to audit it."""

    status: Status
    answer: str
    citations: tuple[Citation, ...]
    context: AssembledContext
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    support: SupportReport | None = None


def candidates_from(hits: Sequence[Hit]) -> list[Candidate]:
    """Assembly candidates from validated retrieval hits."""
    return [
        Candidate(
            document_id=h.payload.document_id,
            chunk_id=h.payload.chunk_id,
            chunking_version=h.payload.chunking_version,
            section_id=h.payload.section_id,
            title=h.payload.title,
            heading=h.payload.heading,
            text=h.payload.text,
            score=h.score,
            positions=h.payload.positions,
        )
        for h in hits
    ]


async def answer_question(
    question: str,
    *,
    retriever: Retriever,
    eligibility: Eligibility,
    scope: CallerScope,
    chat: ChatModel | None,
    counter: TokenCounter,
    k: int = 5,
    mode: Mode = "hybrid",
    policy: str = "seed-baseline",
    budget: Budget = Budget(),
    deadline: Deadline | None = None,
    preview: bool = False,
    support_check: bool = False,
    schema_style: SchemaStyle = "variants",
    temperature: float | None = 0.0,
    thresholds: Thresholds = Thresholds(),
) -> AnswerResult:
    """Answer ``question`` from eligible evidence, or say why not.

    ``chat`` may be ``None`` only for a preview. The request's schema is narrowed to the
    labels assembly issued (``schema_style`` as in :func:`answer_schema`); ``temperature``
    0 makes a greedy, repeatable answer (``None`` leaves it to the provider).
    ``thresholds`` (calibrated with ``eval calibrate``) let a question whose best evidence
    scores too low end as ``no_eligible_evidence`` without a model call.

    Raises :class:`AnswerContractError` when the model's answer breaks the contract, and
    :class:`ChatError` when the model call fails.
    """
    result = retriever.search(question, eligibility, scope, k=k, mode=mode, thresholds=thresholds)
    context = assemble(
        candidates_from(result.hits),
        question,
        counter=counter,
        max_input_tokens=budget.max_input_tokens,
        policy=policy,
    )
    if not context.sources:
        return AnswerResult("no_eligible_evidence", "", (), context)
    if preview:
        return AnswerResult("preview", "", (), context)
    if chat is None:
        raise ValueError("a chat model is required unless previewing")
    request = ChatRequest(
        (ChatMessage("system", context.instructions), ChatMessage("user", context.user_message)),
        ChatOptions(
            max_output_tokens=budget.output_reserve,
            temperature=temperature,
            json_schema=answer_schema(
                [s.label for s in context.sources],
                style=schema_style,
                max_answer_chars=budget.max_answer_chars,
            ),
        ),
        scope=f"tenant:{scope.tenant}" if scope.tenant else "tenant:-",
        prompt_version=f"{context.policy}:{hashlib.sha256(context.instructions.encode()).hexdigest()[:12]}",
    )
    response = await chat.complete(request, deadline or Deadline.after(120))
    answer = parse_answer(response.text, context.sources)
    support = (
        check_support(answer.text, [(c.label, c.included_text) for c in answer.citations])
        if support_check and answer.status == "answered"
        else None
    )
    return AnswerResult(
        answer.status,
        answer.text,
        answer.citations,
        context,
        usage=response.usage,
        model=response.model,
        provider=response.provider or chat.name,
        support=support,
    )
