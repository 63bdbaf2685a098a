"""``POST /v1/answers`` (one JSON document) and ``POST /v1/answers/stream`` (Server-Sent
Events): the answer path of :mod:`ragwright.service.answering`."""

from __future__ import annotations

import math

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from ragwright.service.answering import Answers
from ragwright.service.dependencies import AnswerCaller
from ragwright.service.problems import INTERACTIVE_ERRORS, unavailable_outcome
from ragwright.service.schemas import AnswerBody
from ragwright.threads import on_io_thread

router = APIRouter(tags=["answers"])


@router.post("/v1/answers", responses=INTERACTIVE_ERRORS)
async def answers(body: AnswerBody, key: AnswerCaller, answering: Answers) -> JSONResponse:
    """A grounded answer with its citations, mode, provenance and stage timings."""
    outcome = await answering.reply(body, key, "answers")
    if outcome.mode == "unavailable":
        # A pool cooling down after a provider's 429 refuses every attempt for a known
        # time: the one case where the server knows when capacity can free.
        cooldown = await on_io_thread(answering.application.model_cooldown)  # may ask Redis
        raise unavailable_outcome(
            outcome.reason,
            headers={"Retry-After": str(math.ceil(cooldown))} if cooldown else None,
            timings=outcome.to_dict()["timings"],
        )
    return JSONResponse(outcome.public_dict())


@router.post("/v1/answers/stream", responses=INTERACTIVE_ERRORS)
async def answers_stream(body: AnswerBody, key: AnswerCaller, answering: Answers) -> Response:
    """The same answer as Server-Sent Events: ``evidence``, ``delta``, ``citations``,
    ``outcome`` (``error`` before ``outcome`` when it fails after it began)."""
    return await answering.stream(body, key, "answers/stream")
