"""``POST /v1/answers/stream``: the answer as typed Server-Sent Events.

Events, in order (each ``data`` is one JSON object):

``evidence``   the labelled sources the model is given (document, chunk, chunking
               version, revision), sent as soon as assembly is done, before the model
``delta``      pieces of the answer text, only once the answer passed validation (the
               contract and, for generated answers, the support check) — never
               provisional model tokens that a later check could withdraw
``citations``  the resolved citations
``outcome``    the result: mode, reason, status, quotes, template, provenance, timings,
               the types and states searched (``searched``), and ``interrupted`` (true
               when the stream failed after it began)
``error``      problem details, sent just before an ``outcome`` that did not succeed

The stream is committed (HTTP 200) only when there is something to show: a request that
fails before its evidence is assembled gets an ordinary problem response with its real
status. After the first event nothing is retried at this layer, and a failure ends the
stream with ``error`` and an ``outcome`` whose ``interrupted`` is true — never a silent
cut. Model retries and failover happen before any answer text is visible, because no
answer text is sent before it is validated.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.sse import format_sse_event
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ragwright.application import AnswerOutcome
from ragwright.core.assembly import AssembledContext
from ragwright.service.admission import Permit
from ragwright.service.problems import Problem, logger, unavailable_outcome

KEEPALIVE_SECONDS = 15.0
DISCONNECT_POLL = 0.25
# After a sentence's end and its whitespace, so the pieces keep every character.
_SENTENCE_END = re.compile(r"(?<=[.!?]\s)")


class AnswerStream(StreamingResponse):
    """An event stream that cancels its answer's work however the stream ends (sent in
    full, client gone, or cut while an event was being sent)."""

    def __init__(self, content: AsyncIterator[bytes], task: asyncio.Future[AnswerOutcome]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._task = task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._task.cancel()  # nothing when it has ended


def event(name: str, data: dict[str, Any]) -> bytes:
    return format_sse_event(event=name, data_str=json.dumps(data, ensure_ascii=False))


def evidence_data(context: AssembledContext) -> dict[str, Any]:
    return {
        "policy": context.policy,
        "sources": [
            {
                "label": s.label,
                "document_id": s.candidate.document_id,
                "chunk_id": s.candidate.chunk_id,
                "chunking_version": s.candidate.chunking_version,
                "revision": s.candidate.revision,
            }
            for s in context.sources
        ],
    }


def deltas(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The validated answer in pieces whose texts join to exactly ``answer``: each quote
    of a quoted answer (with the separator the answer has), or each sentence."""
    answer: str = body["answer"]
    quotes = body.get("quotes") or []
    if body.get("style") == "quoted" and quotes:
        pieces, at = [], 0
        for number, quote in enumerate(quotes):
            start = answer.find(quote["text"], at)
            if start < 0:  # not how the answer was joined: fall back to sentences
                break
            end = start + len(quote["text"])
            if number == len(quotes) - 1:
                end = len(answer)
            pieces.append({"text": answer[at:end], "quote": quote["id"]})
            at = end
        else:
            return pieces
    return [{"text": piece} for piece in _SENTENCE_END.split(answer) if piece]


async def answer_stream(
    request: Request,
    permit: Permit,
    start: Callable[[Callable[[AssembledContext], None]], Awaitable[AnswerOutcome]],
    *,
    present: Callable[[AnswerOutcome], dict[str, Any]],
    record: Callable[[dict[str, Any]], None],
) -> StreamingResponse:
    """Start the answer; return a problem if it fails before its evidence, else the
    stream. ``permit`` goes back when the answer's work has ended, however the request
    ends: a cancelled answer ends only once its running worker thread has returned, so
    a client that leaves frees no capacity that is still in use. ``record`` receives
    every ``outcome`` event's data as it is sent, a failed stream's included."""
    evidence: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.ensure_future(start(lambda ctx: evidence.put_nowait(evidence_data(ctx))))
    task.add_done_callback(lambda _: permit.release())
    try:
        while not task.done() and evidence.empty():
            await asyncio.wait({task}, timeout=DISCONNECT_POLL)
            if not task.done() and evidence.empty() and await request.is_disconnected():
                raise Problem(499, "client-closed", "Client closed the request", "cancelled")
        if task.done() and evidence.empty():
            task.result()  # a failure before any evidence: an ordinary problem response
    except BaseException:
        task.cancel()
        raise
    return AnswerStream(_events(task, evidence, present, record), task)


async def _events(
    task: asyncio.Future[AnswerOutcome],
    evidence: asyncio.Queue[dict[str, Any]],
    present: Callable[[AnswerOutcome], dict[str, Any]],
    record: Callable[[dict[str, Any]], None],
) -> AsyncIterator[bytes]:
    began = False

    def ended(data: dict[str, Any]) -> bytes:
        record(data)
        return event("outcome", data)

    try:
        if not evidence.empty():
            yield event("evidence", evidence.get_nowait())
            began = True
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=KEEPALIVE_SECONDS)
            if not done:
                yield b": keep-alive\n\n"
        try:
            outcome = task.result()
        except Problem as problem:
            yield event("error", problem.body())
            yield ended(
                failed_outcome(
                    problem.extensions.get("mode", "unavailable"),
                    problem.extensions.get("reason"),
                    interrupted=began,
                )
            )
            return
        body = present(outcome)
        if outcome.mode == "unavailable":
            yield event("error", unavailable_outcome(outcome.reason).body())
            yield ended({**_outcome_fields(body), "interrupted": began})
            return
        if outcome.mode == "generated":
            for piece in deltas(body):
                yield event("delta", piece)
        yield event("citations", {"citations": body["citations"]})
        yield ended({**_outcome_fields(body), "interrupted": False})
    except asyncio.CancelledError:
        # The client left: the finally below stops the work (logged without content).
        logger.info("stream closed by the client after %s", "evidence" if began else "nothing")
        raise
    except Exception as error:  # after output began: end explicitly, never cut silently
        yield event(
            "error",
            Problem(
                500, "internal", "Internal error", f"the answer failed ({type(error).__name__})"
            ).body(),
        )
        yield ended(failed_outcome("unavailable", None, interrupted=True))
    finally:
        if not task.done():
            task.cancel()


def failed_outcome(mode: str, reason: str | None, *, interrupted: bool) -> dict[str, Any]:
    """The ``outcome`` event of a stream that could not finish: every documented field,
    empty but for the mode, the reason and whether output had begun."""
    return {
        **dict.fromkeys(OUTCOME_FIELDS),
        "answerability_source": None,
        "mode": mode,
        "reason": reason,
        "quotes": [],
        "interrupted": interrupted,
    }


OUTCOME_FIELDS = (
    "mode",
    "reason",
    "status",
    "style",
    "answer",
    "quotes",
    "template",
    "draft",
    "degraded",
    "answerability",
    "provenance",
    "timings",
    "searched",
)


def _outcome_fields(body: dict[str, Any]) -> dict[str, Any]:
    fields = {k: body.get(k) for k in OUTCOME_FIELDS}
    # Where the answerability threshold came from (``uncalibrated-default`` before any
    # calibration): a stream's reader gets no ``options``.
    fields["answerability_source"] = (body.get("options") or {}).get("answerability_source")
    return fields
