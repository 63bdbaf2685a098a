"""What a route receives, as ``Annotated`` FastAPI dependencies: the process's shared
state (:class:`~ragwright.service.state.ServiceState`), the application, the caller (an
authenticated API key with the route's scope), admission (a permit or a refusal at
once) and the request's budget.

Every one reads ``request.app.state.ragwright`` when it is resolved, so a route module
holds no closure and can be mounted alone: a test includes one router in a bare
``FastAPI()`` and replaces what it needs through ``app.dependency_overrides`` (the
functions and :class:`Caller` instances below are the keys).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ragwright.application import Application
from ragwright.application.keys import ApiKey
from ragwright.service.admission import Admission, Permit
from ragwright.service.authentication import authenticated, gated_key
from ragwright.service.guards import unavailable
from ragwright.service.problems import Problem
from ragwright.service.recording import AnswerRecorder
from ragwright.service.state import ServiceState
from ragwright.service.throttling import client_address

T = TypeVar("T")

# How often a waiting request checks whether its client is still connected.
DISCONNECT_POLL = 0.25


def service_state(request: Request) -> ServiceState:
    """The process's shared state (``create_app`` sets it)."""
    return cast(ServiceState, request.app.state.ragwright)


State = Annotated[ServiceState, Depends(service_state)]


def application_of(state: State) -> Application:
    return state.application


App = Annotated[Application, Depends(application_of)]


def recorder_of(state: State) -> AnswerRecorder:
    return state.recorder


Recorder = Annotated[AnswerRecorder, Depends(recorder_of)]

bearer = HTTPBearer(auto_error=False, description="An API key from `ragwright keys add`.")


class Caller:
    """The caller of a route needing ``scope``: the active key of the request's bearer
    token (401/429/503 from :func:`~ragwright.service.authentication.authenticated`),
    or 403 ``insufficient-scope``."""

    def __init__(self, scope: str) -> None:
        self.scope = scope

    async def __call__(
        self,
        request: Request,
        state: State,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> ApiKey:
        # A request with a body was authenticated by the body gate before it was read.
        key = gated_key(request.scope.get("state")) or await authenticated(
            state.application,
            None if credentials is None else credentials.credentials,
            address=client_address(request.scope),
            failures=state.failures,
        )
        if not key.allows(self.scope):
            raise Problem(
                403,
                "insufficient-scope",
                "Not allowed",
                f"this API key lacks the {self.scope!r} scope",
                required_scope=self.scope,
            )
        return key


answer_caller = Caller("answer")
search_caller = Caller("search")
ingest_caller = Caller("ingest")
AnswerCaller = Annotated[ApiKey, Depends(answer_caller)]
SearchCaller = Annotated[ApiKey, Depends(search_caller)]
IngestCaller = Annotated[ApiKey, Depends(ingest_caller)]


@dataclass(frozen=True)
class Admitting:
    """This request's way through the process's admission."""

    admission: Admission
    request: Request

    def enter(self, tenant: str | None) -> Permit:
        """A permit, or a :class:`Problem` at once (503 process full, 429 tenant full)."""
        return self.admission.enter(tenant)

    async def run(self, key: ApiKey, start: Callable[[], Awaitable[T]]) -> T:
        """Admit the request (or refuse it at once) and run ``start()``'s work until it
        ends or the client leaves; the permit goes back when the work has ended."""
        permit = self.enter(key.tenant)
        try:
            work = start()
        except BaseException:
            permit.release()
            raise
        return await until_disconnect(self.request, work, permit)


def admitting(request: Request, state: State) -> Admitting:
    return Admitting(state.admission, request)


Admit = Annotated[Admitting, Depends(admitting)]


@dataclass(frozen=True)
class TimeBudget:
    """The request's time budget (``RAGWRIGHT_ANSWER_DEADLINE`` seconds), which started
    at the edge (``EdgeClock``): time spent before the handler (authentication, a slow
    key store) counts."""

    request: Request
    seconds: float

    def left(self, *, answering: bool = True) -> float:
        """Seconds left; 503 ``request_deadline_exceeded`` when none are."""
        spent = time.monotonic() - float(self.request.state.arrived)
        left = self.seconds - spent
        if left <= 0:
            raise unavailable(
                "request_deadline_exceeded",
                "the request's deadline has passed",
                answering=answering,
            )
        return left


def budget(request: Request, application: App) -> TimeBudget:
    return TimeBudget(request, application.settings.answers.deadline)


RequestBudget = Annotated[TimeBudget, Depends(budget)]


async def until_disconnect(request: Request, work: Awaitable[T], permit: Permit | None = None) -> T:
    """Await ``work``, cancelling it when the client goes away (its budget is theirs).

    ``permit`` goes back when the work has ended, not when it was cancelled: a worker
    thread cannot be stopped, and until it returns the capacity it uses is taken (the
    work waits for its threads: :func:`~ragwright.threads.run_in_thread`)."""
    task = asyncio.ensure_future(work)
    if permit is not None:
        task.add_done_callback(lambda _: permit.release())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL)
            if done:
                return task.result()
            if await request.is_disconnected():
                task.cancel()
                raise Problem(499, "client-closed", "Client closed the request", "cancelled")
    finally:
        if not task.done():
            task.cancel()
