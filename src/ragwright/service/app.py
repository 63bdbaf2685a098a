"""The HTTP service: a second thin entry point beside the command line.

Each route authenticates the caller, admits the request (or refuses it at once), turns
the body into the same typed request the CLI builds, calls one use case of the
:class:`~ragwright.application.Application`, and sends its typed result. Retrieval,
assembly and answering live below; nothing here decides what evidence says.

Trusted context comes only from the API key: the tenant, the document allowlist and the
eligible types and publication states. The body may narrow the documents within the
allowlist, never widen it. docs/service.md is the contract.

This module only assembles: the shared state on ``app.state.ragwright``
(:mod:`~ragwright.service.state`), the middleware, the routers
(:mod:`ragwright.service.routes`, the page's :mod:`ragwright.web.routes`) and the
lifespan (:func:`serving`).
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragwright import __version__
from ragwright.application import Application
from ragwright.application.job_runner import JobRunner
from ragwright.application.jobs import AnswerJob, JobLimits
from ragwright.service.activity import Activity
from ragwright.service.admission import Admission
from ragwright.service.authentication import bearer_caller
from ragwright.service.converting import remove_orphans
from ragwright.service.ingestions import document_ingest_body
from ragwright.service.limits import Admit, BodyGate, BodyLimit
from ragwright.service.model_health import RECHECK_SECONDS, ModelHealth
from ragwright.service.problems import document_problems, install_problem_handlers
from ragwright.service.readiness import degraded_mode
from ragwright.service.recording import AnswerRecorder
from ragwright.service.routes import ROUTERS
from ragwright.service.state import ServiceState, nothing
from ragwright.service.throttling import failure_backoff, sign_in_limit
from ragwright.web import routes as page
from ragwright.web.access import session_caller
from ragwright.web.sessions import SessionStore

logger = logging.getLogger("ragwright.service")


def create_app(
    application: Application,
    *,
    probe_model: bool = True,
    model_recheck: float = RECHECK_SECONDS,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    on_job_persisted: Callable[[AnswerJob], None] = nothing,
) -> FastAPI:
    """The service over ``application`` (``ragwright serve`` builds it from settings).

    On startup the chat session is opened once and kept warm for every request, and the
    model is probed (``probe_model``; false when the caller has just probed it); a model
    that does not answer leaves the service up in its declared degradation mode,
    reported by ``/readyz``. After that the model check follows the answers, and a model
    marked down is probed again every ``model_recheck`` seconds until it answers
    (:mod:`ragwright.service.model_health`). ``on_job_persisted`` runs once a submitted
    answer job is durable, before its 202 is sent (the crash tests inject a fault there).
    """
    settings = application.settings
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("ragwright.service")
    meter = (meter_provider or metrics.get_meter_provider()).get_meter("ragwright.service")
    outcomes = meter.create_counter(
        "ragwright.answers",
        description="Answers by mode and degradation reason (never their content).",
    )
    state = ServiceState(
        application,
        Admission(settings.service.concurrency, settings.service.tenant_concurrency),
        AnswerRecorder(tracer, outcomes, Activity()),
        ModelHealth(recheck_seconds=model_recheck),
        job_persisted=on_job_persisted,
        sessions=SessionStore(max_per_key=settings.service.sessions_per_key),
        failures=failure_backoff(settings.service),
        sign_ins=sign_in_limit(settings.service),
    )
    app = FastAPI(
        title="ragwright",
        version=__version__,
        summary="Answers from your own documents, with the evidence cited.",
        lifespan=lambda _app: serving(state, probe_model=probe_model),
    )
    app.state.ragwright = state
    install_problem_handlers(app)
    app.openapi = lambda: openapi(app)  # type: ignore[method-assign]
    app.add_middleware(BodyGate, routes=body_limits(state), prefixes=unrouted_limits(state))
    app.add_middleware(EdgeClock)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(page.router)
    return app


def body_limits(state: ServiceState) -> dict[tuple[str, str], BodyLimit]:
    """The body gate's table: every route that takes a body, by method and path, with
    its limit and the caller check made before it is read (``/v1/``: the bearer key;
    the page's signed-in routes: the session cookie; its sign-in and sign-out forms:
    anyone, within their small limit). ``tests/service/test_body_limits.py`` fails on a
    route missing here."""
    service = state.application.settings.service
    default = BodyLimit(service.max_body, "RAGWRIGHT_SERVE_MAX_BODY", admit=key_of(state))
    ingest = BodyLimit(
        service.max_ingest_body, "RAGWRIGHT_SERVE_MAX_INGEST_BODY", admit=key_of(state)
    )
    signed_in = session_of(state)
    return {
        ("POST", "/v1/answers"): default,
        ("POST", "/v1/answers/stream"): default,
        ("POST", "/v1/search"): default,
        ("POST", "/v1/answer-jobs"): default,
        ("DELETE", "/v1/answer-jobs/{job_id}"): default,
        ("POST", "/v1/ingestions"): ingest,
        ("POST", "/v1/ingestions/files"): ingest,
        ("POST", "/ui/sign-in"): BodyLimit(page.PAGE_FORM_BYTES, "the page's form limit"),
        ("POST", "/ui/sign-out"): BodyLimit(page.PAGE_FORM_BYTES, "the page's form limit"),
        ("POST", "/ui/ask"): BodyLimit(
            service.max_body, "RAGWRIGHT_SERVE_MAX_BODY", admit=signed_in
        ),
        ("POST", "/ui/ingest"): BodyLimit(
            page.UPLOAD_FORM_BYTES, "the page's upload limit", admit=signed_in
        ),
    }


def unrouted_limits(state: ServiceState) -> dict[str, BodyLimit]:
    """A body to a path no declared route takes: under ``/v1/`` the key is checked,
    then ``RAGWRIGHT_SERVE_MAX_BODY`` (its 404 or 405 comes after); anywhere else the
    gate reads none of it."""
    service = state.application.settings.service
    return {"/v1/": BodyLimit(service.max_body, "RAGWRIGHT_SERVE_MAX_BODY", admit=key_of(state))}


def key_of(state: ServiceState) -> Admit:
    return lambda scope: bearer_caller(state, scope)


def session_of(state: ServiceState) -> Admit:
    # state.sessions read at each request, not captured: the store is the state's.
    return lambda scope: session_caller(state.sessions, scope)


@asynccontextmanager
async def serving(state: ServiceState, *, probe_model: bool) -> AsyncIterator[None]:
    """The service's lifespan. The process owns the embedded index for its lifetime
    (queries go on while it ingests) and keeps one warm chat session per workload for
    every request; it probes the model, re-probes it while it is down, and runs the job
    runner when ``RAGWRIGHT_JOB_WORKERS`` > 0. Everything is released in reverse order."""
    application = state.application
    remove_orphans()  # upload folders of a server killed mid-upload
    async with AsyncExitStack() as stack:
        stack.callback(application.close)  # last: every pool and connection it opened
        stack.enter_context(application.hold_index())
        await stack.enter_async_context(application.chat_kept_open())
        if probe_model:
            state.model.problem = await application.probe_model()
            if state.model.problem is not None:
                logger.warning(
                    "warning: the chat model does not answer (%s); answers degrade "
                    "to %s until it does",
                    state.model.problem,
                    degraded_mode(application),
                )
        rechecking = asyncio.create_task(state.model.recheck(application.probe_model))
        stack.push_async_callback(cancelled, rechecking)
        if application.settings.jobs.workers > 0:
            await stack.enter_async_context(application.chat_kept_open("jobs"))
            await start_runner(state, stack)
        yield


async def start_runner(state: ServiceState, stack: AsyncExitStack) -> None:
    """Start claiming answer jobs; on exit, stop claiming and let the ones in progress
    finish (:func:`stopped`)."""
    application = state.application
    settings = application.settings
    stop = asyncio.Event()
    runner = JobRunner(
        application,
        application.jobs(),
        concurrency=settings.jobs.workers,
        limits=JobLimits(settings.jobs.capacity, settings.jobs.tenant_capacity),
        lease_seconds=settings.jobs.lease,
        deadline_seconds=settings.jobs.deadline,
    )
    state.runner = runner
    # Names the worker in the process log, so a job's lease owner (in the store) can be
    # traced to its process.
    logger.info("job runner %s: up to %d jobs at once", runner.worker_id, runner.concurrency)
    dispatching = asyncio.create_task(runner.run(stop))
    stack.push_async_callback(stopped, stop, dispatching)


def openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with problem details and the ingestion body the route reads
    itself."""
    if app.openapi_schema is None:
        app.openapi_schema = document_problems(
            document_ingest_body(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    summary=app.summary,
                    routes=app.routes,
                )
            )
        )
    return app.openapi_schema


class EdgeClock:
    """Stamps each request's arrival (its budget starts there, before any wait) and logs
    one line per request: method, path, status, milliseconds; never a body.

    A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` would hide a client's
    disconnect from the route, which must cancel its work."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()
        scope.setdefault("state", {})["arrived"] = arrived
        status = [0]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            logger.info(
                "%s %s %s %.1fms",
                scope["method"],
                scope["path"],
                status[0] or "-",
                (time.monotonic() - arrived) * 1000,
            )


async def cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def stopped(stop: asyncio.Event, dispatching: asyncio.Task[None]) -> None:
    """Stop claiming jobs and let the ones in progress finish (a job cut off by a hard
    stop is claimed again once its lease expires)."""
    stop.set()
    await dispatching
