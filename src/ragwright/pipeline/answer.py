"""The support-answer use case: retrieve → assemble → generate → validate.

* Retrieval runs with the caller's eligibility and trusted scope (never relaxed).
* Assembly applies the chosen policy inside the o200k_base input allowance
  (window − output reserve − framing reserve), with the conversation's earlier turns
  (``history``, for the policy's history block) and the caller's current document
  revisions (``+prefer-current-revision``; candidates carry the revision stored in
  their payload).
* Empty context means no model call: the outcome is ``no_eligible_evidence``.
* The model gets the grounded-answer instructions as the system message and the
  assembled JSON evidence as the user message, with the answer JSON schema; the answer
  is validated in code and its citations resolved from the assembler's labels.
* A fallback model is not a transparent replacement: the request carries a ``prepare``
  hook, and when the chat pipeline's failover switches, the alternate receives a request
  assembled again for *its* profile (context window, output limit, schema style, token
  ratio). Citations resolve against the context the answering model actually received,
  and the result names that provider and model and says it was a fallback.
* The support check (:mod:`ragwright.core.support`) runs on every answered answer unless
  turned off: an answer whose claims its cited evidence does not support, or that
  echoes text in the evidence addressed to the model, ends as ``unsupported``. Its text
  is withheld (``withheld_answer``, never ``answer``) and the evidence stays in the
  result, so a caller that only reads ``answer`` never shows it.
* The request also carries an ``accept`` hook running the answer contract against the
  answering model's labels, so the response cache stores only answers that pass it.
* The result records the exact final request (every message, the options and schema),
  the assembly decisions, the estimated input tokens and the provider-reported usage
  (``None`` when unknown, never 0); :meth:`AnswerResult.to_dict` is its JSON form.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragwright.chat.contract import (
    ChatMessage,
    ChatModel,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    Deadline,
    ModelProfile,
    Usage,
)
from ragwright.core.answers import Citation, SchemaStyle, answer_schema, parse_answer
from ragwright.core.assembly import (
    AssembledContext,
    Candidate,
    Turn,
    assemble,
    parse_policy,
)
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.support import SupportReport, check_support
from ragwright.deadline import deadline_scope
from ragwright.errors import AnswerContractError, AssemblyError, ConfigError
from ragwright.pipeline.retrieve import Hit, Mode, Retriever, Thresholds
from ragwright.protocols import TokenCounter

Status = Literal["answered", "unsupported", "insufficient", "no_eligible_evidence", "preview"]


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

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (``docs/assembly.md`` documents every key).

        It holds the request's message content (evidence and question): it is meant for
        the caller who asked, never for logs or telemetry.
        """
        by_label = {s.label: s for s in self.context.sources}
        return {
            "status": self.status,
            "answer": self.answer,
            "withheld_answer": self.withheld_answer,
            "citations": [
                {
                    "label": c.label,
                    "document_id": c.document_id,
                    "chunk_id": c.chunk_id,
                    "chunking_version": c.chunking_version,
                    "revision": by_label[c.label].candidate.revision,
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
        }


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
    }


def candidates_from(hits: Sequence[Hit]) -> list[Candidate]:
    """Assembly candidates from validated retrieval hits (the stored revision included)."""
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
            revision=h.payload.revision,
        )
        for h in hits
    ]


def history_turns(history: Sequence[ChatMessage]) -> tuple[Turn, ...]:
    """Earlier turns from a conversation: ``user`` then ``assistant``, alternating.

    Raises:
        AssemblyError: naming the message (``history[2].role``) and the rule it breaks.
    """
    if len(history) % 2:
        raise AssemblyError(
            f"history[{len(history) - 1}]: the history must end with an assistant message"
        )
    turns: list[Turn] = []
    for index in range(0, len(history), 2):
        question, answer = history[index], history[index + 1]
        expected = ((index, question, "user"), (index + 1, answer, "assistant"))
        for position, message, role in expected:
            if message.role != role:
                raise AssemblyError(
                    f"history[{position}].role: expected {role!r} (user and assistant "
                    f"alternate, user first), got {message.role!r}"
                )
        if not question.content.strip():
            raise AssemblyError(f"history[{index}].content: must not be blank")
        turns.append(Turn(question.content, answer.content))
    return tuple(turns)


class ScaledCounter:
    """Token counts of another tokenizer, estimated as ``ceil(count × ratio)``."""

    def __init__(self, counter: TokenCounter, ratio: float) -> None:
        self._counter = counter
        self._ratio = ratio
        self.encoding_name = f"{counter.encoding_name}x{ratio:g}"

    def count(self, text: str) -> int:
        return math.ceil(self._counter.count(text) * self._ratio)


@dataclass(frozen=True, slots=True)
class _Prepared:
    context: AssembledContext
    request: ChatRequest | None
    options: AnswerOptions


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
    support_check: bool = True,
    schema_style: SchemaStyle = "variants",
    temperature: float | None = 0.0,
    thresholds: Thresholds = Thresholds(),
    history: Sequence[ChatMessage] = (),
    current_revisions: Mapping[str, str] | None = None,
    fallbacks: Sequence[ModelProfile] = (),
) -> AnswerResult:
    """Answer ``question`` from eligible evidence, or say why not.

    ``chat`` may be ``None`` only for a preview. ``budget``, ``schema_style`` and
    ``counter`` describe the primary model; ``fallbacks`` are the profiles of the
    alternates ``chat`` may fail over to (``runtime.chat_profiles(settings)[1:]``), each
    of which gets a request assembled for it. The request's schema is narrowed to the
    labels assembly issued (``schema_style`` as in :func:`answer_schema`);
    ``temperature`` 0 makes a greedy, repeatable answer (``None`` leaves it to the
    provider). ``support_check`` (on by default) turns an answered answer its cited
    evidence does not support into ``unsupported``. ``thresholds`` (calibrated with
    ``eval calibrate``) let a question whose best evidence scores too low end as
    ``no_eligible_evidence`` without a model call.
    ``history`` holds the conversation's earlier messages (user, assistant, …), used by
    a policy with a history share (``+history=0.25``); without one they are recorded as
    dropped. ``current_revisions`` (document id → revision, from a trusted source of
    truth) is required by ``+prefer-current-revision``.

    Example:
        >>> result = await answer_question(  # doctest: +SKIP
        ...     "Drain queued work on shutdown?", retriever=retriever,
        ...     eligibility=Eligibility(version), scope=CallerScope(), chat=chat,
        ...     counter=counter, fallbacks=profiles[1:])
        >>> result.to_dict()["fallback"]  # doctest: +SKIP
        False

    Raises:
        AnswerContractError: the model's answer breaks the contract.
        AssemblyError: malformed history, or ``+prefer-current-revision`` without
            ``current_revisions``.
        ChatError: the model call fails.
    """
    turns = history_turns(history)
    if parse_policy(policy).prefer_current_revision and current_revisions is None:
        raise AssemblyError(
            "policy +prefer-current-revision needs current_revisions (document id → revision)"
        )
    deadline = deadline or Deadline.after(120)
    with deadline_scope(deadline):  # embedding and rerank calls spend the same budget
        result = retriever.search(
            question, eligibility, scope, k=k, mode=mode, thresholds=thresholds
        )
    candidates = candidates_from(result.hits)

    def prepare(run_budget: Budget, style: SchemaStyle, run_counter: TokenCounter) -> _Prepared:
        context = assemble(
            candidates,
            question,
            counter=run_counter,
            max_input_tokens=run_budget.max_input_tokens,
            policy=policy,
            history=turns,
            current_revisions=current_revisions,
        )
        options = AnswerOptions(
            k, mode, context.policy, style, temperature, run_budget, thresholds, support_check
        )
        if not context.sources:
            return _Prepared(context, None, options)
        request = ChatRequest(
            (
                ChatMessage("system", context.instructions),
                ChatMessage("user", context.user_message),
            ),
            ChatOptions(
                max_output_tokens=run_budget.output_reserve,
                temperature=temperature,
                json_schema=answer_schema(
                    [s.label for s in context.sources],
                    style=style,
                    max_answer_chars=run_budget.max_answer_chars,
                ),
            ),
            scope=f"tenant:{scope.tenant}" if scope.tenant else "tenant:-",
            prompt_version=(
                f"{context.policy}:{hashlib.sha256(context.instructions.encode()).hexdigest()[:12]}"
            ),
        )
        return _Prepared(context, request, options)

    primary = prepare(budget, schema_style, counter)
    if primary.request is None:
        return AnswerResult(
            "no_eligible_evidence", "", (), primary.context, options=primary.options
        )
    if preview:
        return AnswerResult(
            "preview", "", (), primary.context, request=primary.request, options=primary.options
        )
    if chat is None:
        raise ValueError("a chat model is required unless previewing")

    def prepare_alternate(profile: ModelProfile) -> _Prepared:
        return prepare(
            Budget.for_profile(profile, framing_reserve=budget.framing_reserve),
            profile.schema_style,
            ScaledCounter(counter, profile.token_ratio),
        )

    alternates = _Alternates(fallbacks, prepare_alternate)

    def prepared_for(response: ChatResponse) -> _Prepared:
        return alternates.get(response.provider) if response.fallback else primary

    def accept(response: ChatResponse) -> bool:
        try:
            parse_answer(response.text, prepared_for(response).context.sources)
        except AnswerContractError:
            return False
        return True

    request = dataclasses.replace(primary.request, prepare=alternates.request_for, accept=accept)
    response = await chat.complete(request, deadline)
    used = prepared_for(response)
    answer = parse_answer(response.text, used.context.sources)
    support = (
        check_support(
            answer.text,
            [(c.label, c.included_text) for c in answer.citations],
            evidence=[(s.label, s.included_text) for s in used.context.sources],
        )
        if support_check and answer.status == "answered"
        else None
    )
    status: Status = answer.status
    text, withheld = answer.text, None
    if support is not None and not support.supported:
        status, text, withheld = "unsupported", "", answer.text
    return AnswerResult(
        status,
        text,
        answer.citations,
        used.context,
        usage=response.usage,
        model=response.model,
        provider=response.provider or chat.name,
        support=support,
        fallback=response.fallback,
        request=dataclasses.replace(used.request, prepare=None, accept=None)
        if used.request is not None
        else None,
        options=used.options,
        withheld_answer=withheld,
    )


class _Alternates:
    """Per-alternate preparations, made once each, on demand (a switch or a cache hit)."""

    def __init__(
        self, profiles: Sequence[ModelProfile], prepare: Callable[[ModelProfile], _Prepared]
    ) -> None:
        self._profiles = {p.name: p for p in profiles}
        self._prepare = prepare
        self._done: dict[str, _Prepared] = {}

    def _for(self, profile: ModelProfile) -> _Prepared:
        if profile.name not in self._done:
            self._done[profile.name] = self._prepare(profile)
        return self._done[profile.name]

    def get(self, name: str) -> _Prepared:
        """The preparation alternate ``name`` answered from (prepared again on a cache hit:
        assembly is deterministic for the same evidence)."""
        if name in self._done:
            return self._done[name]
        profile = self._profiles.get(name)
        if profile is None:
            raise ConfigError(
                "RAGWRIGHT_CHAT_FALLBACKS",
                f"a cached answer came from alternate {name!r}, whose profile was not given "
                "to the answer use case (pass runtime.chat_profiles(settings)[1:] as fallbacks)",
            )
        return self._for(profile)

    def request_for(self, profile: ModelProfile) -> ChatRequest | None:
        """The failover hook: the request for ``profile``, or ``None`` when nothing fits."""
        try:
            return self._for(profile).request
        except AssemblyError:
            # Instructions and question alone exceed this model's window: it cannot take
            # the request, so failover skips it (and records that it did).
            return None
