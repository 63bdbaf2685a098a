"""The model's stages of the answer path: generate → validate → support.

Like the stages before them (:mod:`ragwright.pipeline.answer_stages`), each is a function
over the :class:`~ragwright.pipeline.answer_plan.AnswerPlan` and the previous stage's
record. An alternate of a failover is prepared on demand (:class:`Alternates`), and an
answer is always read against the context the model that gave it received.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, Deadline, ModelProfile
from ragwright.core.answers import Answer, parse_answer, parse_quoted_answer
from ragwright.core.screen import screened_sources
from ragwright.core.support import SupportReport, check_support
from ragwright.errors import AnswerContractError, AssemblyError, ConfigError
from ragwright.pipeline.answer_plan import AnswerPlan
from ragwright.pipeline.answer_records import AnswerResult, Status
from ragwright.pipeline.answer_stages import (
    Evidence,
    Prepared,
    Retrieved,
    Timings,
    assemble_alternate,
)
from ragwright.pipeline.answerability import select_evidence
from ragwright.threads import run_in_thread


class Alternates:
    """Per-alternate preparations, made once each, on demand (a switch or a cache hit)."""

    def __init__(
        self, profiles: Sequence[ModelProfile], prepare: Callable[[ModelProfile], Prepared]
    ) -> None:
        self._profiles = {p.name: p for p in profiles}
        self._prepare = prepare
        self._done: dict[str, Prepared] = {}

    def _for(self, profile: ModelProfile) -> Prepared:
        if profile.name not in self._done:
            self._done[profile.name] = self._prepare(profile)
        return self._done[profile.name]

    def get(self, name: str) -> Prepared:
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


def alternates_for(plan: AnswerPlan, retrieved: Retrieved) -> Alternates:
    """The plan's fallback profiles, each assembled for on demand."""
    return Alternates(plan.fallbacks, lambda profile: assemble_alternate(plan, retrieved, profile))


def validate(
    plan: AnswerPlan, response: ChatResponse, primary: Prepared, alternates: Alternates
) -> tuple[Prepared, Answer]:
    """The answer in ``response``, checked against the context its model received (an
    alternate's own after a failover), with that preparation.

    Raises:
        AnswerContractError: the answer breaks the contract.
    """
    used = alternates.get(response.provider) if response.fallback else primary
    if plan.answer_style == "quoted":
        return used, parse_quoted_answer(response.text, used.shown, used.context.sources)
    return used, parse_answer(response.text, used.context.sources)


async def generate(
    plan: AnswerPlan,
    chat: ChatModel,
    primary: Prepared,
    alternates: Alternates,
    deadline: Deadline,
    timings: Timings,
) -> ChatResponse:
    """Ask the model. The request carries the failover's ``prepare`` hook (an alternate
    gets a request assembled for it) and the cache's ``accept`` hook (only an answer
    that passes :func:`validate` is stored).

    Raises:
        ChatError: the call failed (the caller degrades reachability failures).
    """

    def accept(response: ChatResponse) -> bool:
        try:
            validate(plan, response, primary, alternates)
        except AnswerContractError:
            return False
        return True

    assert primary.request is not None
    request = dataclasses.replace(primary.request, prepare=alternates.request_for, accept=accept)
    with timings.timed("generate"):
        return await chat.complete(request, deadline)


async def support(answer: Answer, used: Prepared) -> SupportReport | None:
    """The support check of an answered answer against the evidence its model received
    (``None`` when the plan turned it off or nothing was answered)."""
    if not (used.options.support_check and answer.status == "answered"):
        return None
    sources = used.context.sources
    return await run_in_thread(
        check_support,
        answer.text,
        [(c.label, c.included_text) for c in answer.citations],
        evidence=[(s.label, s.included_text) for s in sources],
        frames={s.label: (s.candidate.title, s.candidate.heading) for s in sources},
        screened=screened_sources(sources),
    )


def answered(
    chat: ChatModel,
    response: ChatResponse,
    used: Prepared,
    answer: Answer,
    report: SupportReport | None,
    evidence: Evidence,
    timings: Timings,
) -> AnswerResult:
    """The result of a model's answer. One its cited evidence does not support is
    ``unsupported``: its text is withheld (``withheld_answer``, never ``answer``)."""
    status: Status = answer.status
    text, withheld = answer.text, None
    if report is not None and not report.supported:
        status, text, withheld = "unsupported", "", answer.text
    quotes = answer.quotes
    if status == "insufficient" and evidence.scores:
        # The model declined although the evidence passed the gate (or none is
        # calibrated): show the most relevant evidence, never as an answer.
        quotes = tuple(select_evidence(evidence.sentences, evidence.scores))
    return AnswerResult(
        status,
        text,
        answer.citations,
        used.context,
        usage=response.usage,
        model=response.model,
        provider=response.provider or chat.name,
        support=report,
        fallback=response.fallback,
        request=dataclasses.replace(used.request, prepare=None, accept=None)
        if used.request is not None
        else None,
        options=used.options,
        withheld_answer=withheld,
        quotes=quotes,
        answerability=evidence.signal,
        timings=timings.ms,
    )
