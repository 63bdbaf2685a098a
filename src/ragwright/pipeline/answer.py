"""The support-answer use case: retrieve → assemble → gate → generate → validate → support.

:func:`answer_question` takes one :class:`~ragwright.pipeline.answer_plan.AnswerPlan`
(the question, the caller, the parts and the options, checked when it is made) and runs
the stages of :mod:`ragwright.pipeline.answer_stages` and
:mod:`ragwright.pipeline.answer_generation` in order; each stage is a function over the
plan that can be called alone. The result's records are in
:mod:`ragwright.pipeline.answer_records`.

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

from ragwright.chat.contract import Deadline
from ragwright.deadline import deadline_scope
from ragwright.errors import ChatError, FailureCategory
from ragwright.pipeline.answer_generation import (
    alternates_for,
    answered,
    generate,
    support,
    validate,
)
from ragwright.pipeline.answer_plan import AnswerPlan, ScaledCounter, history_turns
from ragwright.pipeline.answer_records import (
    AnswerOptions,
    AnswerResult,
    Budget,
    Status,
    instructions_version,
)
from ragwright.pipeline.answer_stages import (
    Evidence,
    Timings,
    assemble_primary,
    candidates_from,
    ended_early,
    evidence_only,
    gate,
    retrieve,
    score,
)
from ragwright.threads import run_in_thread

__all__ = [
    "DEGRADE_TO_EVIDENCE",
    "AnswerOptions",
    "AnswerPlan",
    "AnswerResult",
    "Budget",
    "ScaledCounter",
    "Status",
    "answer_question",
    "candidates_from",
    "history_turns",
    "instructions_version",
]

DEGRADE_TO_EVIDENCE = frozenset(
    {
        FailureCategory.TRANSIENT,
        FailureCategory.THROTTLED,
        FailureCategory.TIMEOUT,
        FailureCategory.CAPACITY,
        FailureCategory.DEADLINE_EXHAUSTED,
    }
)
"""Model failures after which the answer degrades to evidence only (the model could not
be reached in time); configuration, input and output failures stay errors."""


async def answer_question(plan: AnswerPlan) -> AnswerResult:
    """Answer ``plan.question`` from eligible evidence, or say why not.

    Empty context ends as ``no_eligible_evidence``, a preview as ``preview`` (with the
    request the model would receive) and evidence below the answerability threshold as
    ``insufficient``, all without a model call; the ``evidence`` style (or no model)
    ends as ``evidence_only``. A model that cannot be reached in time
    (:data:`DEGRADE_TO_EVIDENCE`) degrades the result to ``evidence_only`` with
    ``degraded`` naming the failure. ``AnswerResult.timings`` records each stage in
    milliseconds; a cancelled answer ends once its running thread has returned.

    Example:
        >>> plan = AnswerPlan(  # doctest: +SKIP
        ...     "Drain queued work on shutdown?", retriever=retriever,
        ...     eligibility=Eligibility(version), scope=CallerScope(), chat=chat,
        ...     counter=counter, fallbacks=profiles[1:], style="quoted")
        >>> result = await answer_question(plan)  # doctest: +SKIP
        >>> [q["id"] for q in result.to_dict()["quotes"]]  # doctest: +SKIP
        ['S1.2']

    Raises:
        AnswerContractError: the model's answer breaks the contract.
        ChatError: the model call fails for a reason other than reachability.
    """
    deadline = plan.deadline or Deadline.after(120)
    timings = Timings()
    retrieved = await retrieve(plan, deadline, timings)
    with timings.timed("assemble"), deadline_scope(deadline):
        primary = await run_in_thread(assemble_primary, plan, retrieved)
    if primary.request is None:
        return ended_early("no_eligible_evidence", primary, Evidence(), timings)
    if plan.on_evidence is not None:
        plan.on_evidence(primary.context)
    evidence = await score(plan, retrieved, primary, deadline, timings)
    stop = gate(plan, evidence)
    if stop is not None:
        return ended_early(stop, primary, evidence, timings)
    if plan.answer_style == "evidence" or plan.chat is None:
        return await evidence_only(plan, primary, evidence, None, timings)
    alternates = alternates_for(plan, retrieved)
    try:
        response = await generate(plan, plan.chat, primary, alternates, deadline, timings)
    except ChatError as error:
        if error.category in DEGRADE_TO_EVIDENCE:
            return await evidence_only(plan, primary, evidence, error.category.value, timings)
        raise
    with timings.timed("validate"):
        used, answer = validate(plan, response, primary, alternates)
        report = await support(answer, used)
    return answered(plan.chat, response, used, answer, report, evidence, timings)
