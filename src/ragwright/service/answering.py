"""The answer path every answering route shares (``POST /v1/answers``, its stream and
the page's ``POST /ui/ask``): the same request builder (tenant, allowlist, types and
states from the key), admission, deadline, model-health update and recording."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends
from fastapi.responses import Response

from ragwright.application import AnswerOutcome, AnswerRequest, Application
from ragwright.application.callers import answer_request_for
from ragwright.application.keys import ApiKey
from ragwright.service.dependencies import Admit, Admitting, App, Recorder, RequestBudget, State
from ragwright.service.guards import checked, guarded
from ragwright.service.model_health import ModelHealth
from ragwright.service.problems import Problem
from ragwright.service.recording import AnswerRecorder
from ragwright.service.schemas import AnswerBody
from ragwright.service.streaming import answer_stream


@dataclass(frozen=True)
class RequestAnswering:
    """One request's answer: built from its body and key, admitted, bounded by its
    budget, recorded."""

    application: Application
    model: ModelHealth
    recorder: AnswerRecorder
    admit: Admitting
    deadline: Callable[[], float]

    def request_for(self, body: AnswerBody, key: ApiKey) -> AnswerRequest:
        """The typed request (422 for a rule it breaks, 403 outside the allowlist), with
        what is left of the budget (503 when nothing is)."""
        return checked(
            answer_request_for,
            key,
            question=body.question,
            history=[(m.role, m.content) for m in body.history],
            documents=body.documents,
            deadline_seconds=self.deadline(),
        )

    async def answer(
        self, answer_request: AnswerRequest, on_evidence: Callable[[Any], None] | None = None
    ) -> AnswerOutcome:
        """The outcome, or a problem; the model's health follows what the answer met."""
        try:
            outcome = await guarded(
                self.application.answer(answer_request, on_evidence=on_evidence)
            )
        except Problem as problem:
            if problem.extensions.get("reason") == "model_unavailable":
                self.model.failed(problem.extensions.get("failure_category"))
            raise
        self.model.failed(outcome.result.degraded)
        return outcome

    async def reply(self, body: AnswerBody, key: ApiKey, route: str) -> AnswerOutcome:
        """Admit and answer as one JSON document, recording the outcome (a refusal's
        too)."""
        try:
            outcome = await self.admit.run(key, lambda: self.answer(self.request_for(body, key)))
        except Problem as problem:
            self.recorder.refusal(problem, key, route)
            raise
        self.recorder.record(key, route, outcome.mode, outcome.reason, outcome.status)
        return outcome

    async def stream(self, body: AnswerBody, key: ApiKey, route: str) -> Response:
        """Admit and answer as an event stream (:mod:`ragwright.service.streaming`)."""
        permit = self.admit.enter(key.tenant)
        try:
            answer_request = self.request_for(body, key)
        except BaseException as error:
            permit.release()
            if isinstance(error, Problem):
                self.recorder.refusal(error, key, route)
            raise
        try:
            # From here the stream holds the permit until the answer's work has ended.
            return await answer_stream(
                self.admit.request,
                permit,
                lambda on_evidence: self.answer(answer_request, on_evidence),
                present=AnswerOutcome.public_dict,
                record=lambda data: self.recorder.record(
                    key, route, data["mode"], data["reason"], data["status"]
                ),
            )
        except Problem as problem:
            self.recorder.refusal(problem, key, route)
            raise


def answering(
    application: App, state: State, recorder: Recorder, admit: Admit, budget: RequestBudget
) -> RequestAnswering:
    return RequestAnswering(application, state.model, recorder, admit, budget.left)


Answers = Annotated[RequestAnswering, Depends(answering)]
