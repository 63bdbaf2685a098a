"""The HTTP service: a second thin entry point beside the command line.

Each route authenticates the caller, admits the request (or refuses it at once), turns
the body into the same typed request the CLI builds, calls one use case of the
:class:`~ragwright.application.Application`, and sends its typed result. Retrieval,
assembly and answering live below; nothing here decides what evidence says.

Trusted context comes only from the API key: the tenant, the document allowlist and the
eligible types and publication states. The body may narrow the documents within the
allowlist, never widen it. docs/service.md is the contract.
"""

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragwright import __version__
from ragwright.application import (
    AnswerOutcome,
    AnswerRequest,
    Application,
    IngestRequest,
    IngestResult,
    SearchRequest,
    SearchResult,
    StatusRequest,
)
from ragwright.application.callers import (
    OutsideAllowlist,
    answer_request_for,
    search_request_for,
)
from ragwright.application.grants import OutsideGrant, write_grant_for
from ragwright.application.job_runner import JobRunner
from ragwright.application.jobs import BatchLimits
from ragwright.application.keys import ApiKey
from ragwright.deadline import Deadline, deadline_scope
from ragwright.errors import (
    AnswerContractError,
    AssemblyError,
    ChatError,
    ChunkingError,
    DocumentError,
    EmbeddingError,
    IndexNotFound,
    InputTooLong,
    ProviderError,
    RequestError,
    StorageError,
    VectorIndexError,
)
from ragwright.service.activity import Activity
from ragwright.service.admission import Admission, Permit
from ragwright.service.authentication import authenticated, gated_key
from ragwright.service.ingestions import (
    INGEST_BODY_OPENAPI,
    document_ingest_body,
    documents_of,
    ingestion_summary,
    outside_grant_problem,
    place_of,
    read_ingestion,
)
from ragwright.service.jobs import job_routes
from ragwright.service.limits import BodyGate
from ragwright.service.model_health import RECHECK_SECONDS, ModelHealth
from ragwright.service.problems import (
    INTERACTIVE_ERRORS,
    Problem,
    answer_unavailable,
    document_problems,
    install_problem_handlers,
    invalid_field,
    problem_responses,
    unavailable_outcome,
)
from ragwright.service.schemas import AnswerBody, IngestBody, SearchBody
from ragwright.service.streaming import answer_stream
from ragwright.service.uploads import file_ingestion_routes
from ragwright.threads import run_in_thread
from ragwright.types import SourceDocument
from ragwright.web.routes import ServiceHooks, web_routes

logger = logging.getLogger("ragwright.service")
T = TypeVar("T")

# How often a waiting request checks whether its client is still connected.
DISCONNECT_POLL = 0.25


@dataclass
class ServiceState:
    """What every request of one process shares."""

    application: Application
    admission: Admission
    model: ModelHealth = field(default_factory=ModelHealth)
    started_at: float = field(default_factory=time.time)
    runner: JobRunner | None = None
    # Parses and validates an ingestion's body (in a worker thread); tests substitute
    # one that records when it runs.
    ingestion_reader: Callable[..., tuple[IngestBody, tuple[SourceDocument, ...]]] = field(
        default=read_ingestion
    )
    activity: Activity = field(default_factory=Activity)


def create_app(
    application: Application,
    *,
    probe_model: bool = True,
    model_recheck: float = RECHECK_SECONDS,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> FastAPI:
    """The service over ``application`` (``ragwright serve`` builds it from settings).

    On startup the chat session is opened once and kept warm for every request, and the
    model is probed (``probe_model``; false when the caller has just probed it); a model
    that does not answer leaves the service up in its declared degradation mode,
    reported by ``/readyz``. After that the model check follows the answers, and a model
    marked down is probed again every ``model_recheck`` seconds until it answers
    (:mod:`ragwright.service.model_health`).
    """
    settings = application.settings
    state = ServiceState(
        application,
        Admission(settings.service.concurrency, settings.service.tenant_concurrency),
        ModelHealth(recheck_seconds=model_recheck),
    )
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("ragwright.service")
    meter = (meter_provider or metrics.get_meter_provider()).get_meter("ragwright.service")
    outcomes = meter.create_counter(
        "ragwright.answers",
        description="Answers by mode and degradation reason (never their content).",
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The process owns the embedded index for its lifetime (queries go on while it
        # ingests) and keeps one warm chat session per workload for every request.
        async with AsyncExitStack() as stack:
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
            if settings.jobs.workers > 0:
                await stack.enter_async_context(application.chat_kept_open("batch"))
                stop = asyncio.Event()
                runner = JobRunner(
                    application,
                    application.jobs(),
                    concurrency=settings.jobs.workers,
                    limits=BatchLimits(settings.jobs.capacity, settings.jobs.tenant_capacity),
                    lease_seconds=settings.jobs.lease,
                    deadline_seconds=settings.jobs.deadline,
                )
                state.runner = runner
                # Names the worker in the process log, so a job's lease owner (in the
                # store) can be traced to its process.
                logger.info(
                    "job runner %s: up to %d jobs at once", runner.worker_id, runner.concurrency
                )
                dispatching = asyncio.create_task(runner.run(stop))
                stack.push_async_callback(stopped, stop, dispatching)
            yield

    app = FastAPI(
        title="ragwright",
        version=__version__,
        summary="Answers from your own documents, with the evidence cited.",
        lifespan=lifespan,
    )
    app.state.ragwright = state
    install_problem_handlers(app)

    def openapi() -> dict[str, Any]:
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

    app.openapi = openapi  # type: ignore[method-assign]
    bearer = HTTPBearer(auto_error=False, description="An API key from `ragwright keys add`.")

    def caller(scope: str) -> Callable[..., Awaitable[ApiKey]]:
        async def authenticate(
            request: Request,
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        ) -> ApiKey:
            # A request with a body was authenticated by the body gate before it was read.
            key = gated_key(request.scope.get("state")) or await authenticated(
                application, None if credentials is None else credentials.credentials
            )
            if not key.allows(scope):
                raise Problem(
                    403,
                    "insufficient-scope",
                    "Not allowed",
                    f"this API key lacks the {scope!r} scope",
                    required_scope=scope,
                )
            return key

        return authenticate

    app.add_middleware(
        BodyGate,
        authenticate=lambda token: authenticated(application, token),
        default=(settings.service.max_body, "RAGWRIGHT_SERVE_MAX_BODY"),
        limits={
            path: (settings.service.max_ingest_body, "RAGWRIGHT_SERVE_MAX_INGEST_BODY")
            for path in ("/v1/ingestions", "/v1/ingestions/files")
        },
    )
    app.add_middleware(EdgeClock)
    app.include_router(
        job_routes(
            application,
            application.jobs,
            caller,
            checked,
            lambda: state.runner is not None and state.runner.health.failure is not None,
        )
    )

    def remaining(request: Request, *, answering: bool = True) -> float:
        """Seconds left of the request's budget, which started at the edge (EdgeClock):
        time spent before the handler (authentication, a slow key store) counts."""
        spent = time.monotonic() - float(request.state.arrived)
        left = settings.answers.deadline - spent
        if left <= 0:
            raise unavailable(
                "request_deadline_exceeded",
                "the request's deadline has passed",
                answering=answering,
            )
        return left

    async def admitted(request: Request, key: ApiKey, start: Callable[[], Awaitable[T]]) -> T:
        """Admit the request (or refuse it at once) and run ``start()``'s work until it
        ends or the client leaves; the permit goes back when the work has ended."""
        permit = state.admission.enter(key.tenant)
        try:
            work = start()
        except BaseException:
            permit.release()
            raise
        return await until_disconnect(request, work, permit)

    def record(
        key: ApiKey, route: str, mode: str | None, reason: str | None, status: str | None
    ) -> None:
        """Count one answer outcome by mode and reason, refusals included; never its
        question, evidence or answer."""
        attributes = {"mode": mode or "none", "reason": reason or "none", "route": route}
        outcomes.add(1, attributes)
        with tracer.start_as_current_span("ragwright.answer") as span:
            span.set_attributes({f"ragwright.{k}": v for k, v in attributes.items()})
            span.set_attribute("ragwright.key_id", key.id)
        logger.info("answer key=%s mode=%s reason=%s status=%s", key.id, mode, reason, status)
        state.activity.refused(key.tenant, route, mode, reason)

    def record_refusal(problem: Problem, key: ApiKey, route: str) -> None:
        # Only an answer refused as such has a mode: invalid input, a missing scope or
        # a full service is not an answer outcome.
        if "mode" in problem.extensions:
            record(key, route, problem.extensions["mode"], problem.extensions.get("reason"), None)

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process serves HTTP."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], responses={503: {"description": "Not ready"}})
    async def readyz() -> JSONResponse:
        """Readiness, with every reason when not ready."""
        checks = await asyncio.to_thread(readiness, state)
        ready = all(c["ok"] for c in checks.values())
        return JSONResponse(
            {"ready": ready, "checks": checks, "reasons": reasons_of(checks)},
            status_code=200 if ready else 503,
        )

    @app.post(
        "/v1/answers",
        tags=["answers"],
        responses=INTERACTIVE_ERRORS,
    )
    async def answers(
        body: AnswerBody,
        request: Request,
        key: Annotated[ApiKey, Depends(caller("answer"))],
    ) -> JSONResponse:
        """A grounded answer with its citations, mode, provenance and stage timings."""
        try:
            outcome = await admitted(
                request,
                key,
                lambda: answer_or_problem(build_answer_request(body, key, remaining(request))),
            )
        except Problem as problem:
            record_refusal(problem, key, "answers")
            raise
        record(key, "answers", outcome.mode, outcome.reason, outcome.status)
        if outcome.mode == "unavailable":
            # A pool cooling down after a provider's 429 refuses every attempt for a known
            # time: the one case where the server knows when capacity can free.
            cooldown = application.model_cooldown()
            raise unavailable_outcome(
                outcome.reason,
                headers={"Retry-After": str(math.ceil(cooldown))} if cooldown else None,
                timings=outcome.to_dict()["timings"],
            )
        return JSONResponse(outcome.public_dict())

    @app.post(
        "/v1/answers/stream",
        tags=["answers"],
        responses=INTERACTIVE_ERRORS,
    )
    async def answers_stream(
        body: AnswerBody,
        request: Request,
        key: Annotated[ApiKey, Depends(caller("answer"))],
    ) -> Response:
        """The same answer as Server-Sent Events: ``evidence``, ``delta``, ``citations``,
        ``outcome`` (``error`` before ``outcome`` when it fails after it began)."""
        return await stream_answer(body, request, key, "answers/stream")

    async def stream_answer(
        body: AnswerBody, request: Request, key: ApiKey, route: str
    ) -> Response:
        # One path for the API's stream and the page's (web/routes.py): the same
        # request builder, admission and recording.
        permit = state.admission.enter(key.tenant)
        try:
            answer_request = build_answer_request(body, key, remaining(request))
        except BaseException as error:
            permit.release()
            if isinstance(error, Problem):
                record_refusal(error, key, route)
            raise
        try:
            # From here the stream holds the permit until the answer's work has ended.
            return await answer_stream(
                request,
                permit,
                lambda on_evidence: answer_or_problem(answer_request, on_evidence),
                present=AnswerOutcome.public_dict,
                record=lambda data: record(
                    key, route, data["mode"], data["reason"], data["status"]
                ),
            )
        except Problem as problem:
            record_refusal(problem, key, route)
            raise

    @app.post(
        "/v1/search",
        tags=["search"],
        responses=INTERACTIVE_ERRORS,
    )
    async def search(
        body: SearchBody,
        request: Request,
        key: Annotated[ApiKey, Depends(caller("search"))],
    ) -> JSONResponse:
        """The ``k`` best eligible chunks (the same shape as ``ragwright search --json``)."""

        async def searched(search_request: SearchRequest, seconds: float) -> SearchResult:
            # The query embedding (a remote provider's retries and waits) spends what is
            # left of the request's budget.
            with deadline_scope(Deadline.after(seconds)):
                return await guarded(
                    run_in_thread(application.search, search_request), answering=False
                )

        def start() -> Awaitable[SearchResult]:
            search_request = checked(
                search_request_for,
                key,
                question=body.question,
                k=body.k,
                documents=body.documents,
            )
            return searched(search_request, remaining(request, answering=False))

        result = await admitted(request, key, start)
        return JSONResponse(result.to_dict())

    @app.get("/v1/status", tags=["operations"], responses=problem_responses(401, 403, 503))
    async def status(key: Annotated[ApiKey, Depends(caller("search"))]) -> JSONResponse:
        """What the index holds for the caller's tenant, and the service's capacity."""
        return JSONResponse(await status_of(key))

    async def status_of(key: ApiKey) -> dict[str, Any]:
        # The caller's view: its tenant, and its allowlist when the key has one.
        scope = StatusRequest(tenants=(key.tenant,), documents=key.documents or None)
        result = await guarded(asyncio.to_thread(application.status, scope), answering=False)
        return {
            **result.to_dict(),
            "tenant": key.tenant,
            "service": {
                "version": __version__,
                "admission": state.admission.describe(),
                "model_capacity": application.capacity(),
                "answer_deadline_seconds": settings.answers.deadline,
                "model": state.model.problem or "ok",
                "degraded_mode": degraded_mode(application),
            },
        }

    ingesting = asyncio.Lock()

    @app.post(
        "/v1/ingestions",
        tags=["ingestion"],
        responses=problem_responses(400, 401, 403, 409, 413, 415, 422, 503),
        openapi_extra=INGEST_BODY_OPENAPI,
    )
    async def ingestions(
        request: Request, key: Annotated[ApiKey, Depends(caller("ingest"))]
    ) -> JSONResponse:
        """Ingest documents of the caller's tenant while queries go on; returns the run's
        summary (the shape of ``ragwright ingest --json`` without ``shared_ids``). Writes
        stay within the key's grant (allowlist, types, states; else 403) and ``prune``
        deletes only this tenant's documents within it that are missing from the
        request. One ingestion at a time (409)."""
        grant = write_grant_for(key)
        # Parsed and validated off the event loop: a large body takes seconds of CPU
        # while health checks and other requests must go on.
        raw, content_type = await request.body(), request.headers.get("content-type")
        body, documents = await asyncio.to_thread(
            state.ingestion_reader,
            raw,
            content_type,
            key.tenant,
            grant,
            settings.index.document_types,
        )
        result = await run_ingestion(
            documents,
            key,
            body.prune,
            lambda error: ingestion_input_problem(error, body),
            lambda document_id: place_of(document_id, body),
        )
        return JSONResponse(ingestion_summary(result))

    async def ingest_body(body: IngestBody, key: ApiKey) -> IngestResult:
        """An ingestion body already parsed (the page's upload form): validated within
        the key's grant off the event loop, then run as the JSON route runs it."""
        documents = await asyncio.to_thread(
            documents_of, body, key.tenant, write_grant_for(key), settings.index.document_types
        )
        return await run_ingestion(
            documents,
            key,
            body.prune,
            lambda error: ingestion_input_problem(error, body),
            lambda document_id: place_of(document_id, body),
        )

    async def run_ingestion(
        documents: tuple[SourceDocument, ...],
        key: ApiKey,
        prune: bool,
        refused: Callable[[DocumentError | ChunkingError | InputTooLong], Problem] = (
            lambda error: invalid_field(getattr(error, "field", "documents"), str(error))
        ),
        place: Callable[[str], str] = lambda document_id: f"document {document_id!r}",
    ) -> IngestResult:
        """One ingestion at a time (409), within the key's write grant (403 for a stored
        document outside it), refused documents as ``refused`` names them."""
        grant = write_grant_for(key)
        if ingesting.locked():
            raise Problem(
                409,
                "ingestion-running",
                "An ingestion is running",
                "this service runs one ingestion at a time; submit again when it ends",
            )
        ingest_request = IngestRequest(
            (), documents=documents, tenant=key.tenant, prune=prune, grant=grant
        )

        def ingest() -> IngestResult:
            try:
                return application.ingest(ingest_request)
            except (DocumentError, ChunkingError, InputTooLong) as error:
                # Refused by the validation pass, before anything is written.
                raise refused(error) from error
            except OutsideGrant as error:  # it would replace a stored document outside it
                raise outside_grant_problem(error, place(error.document_id)) from error

        async with ingesting:
            # Not cancelled with the client: a run is resumable, but stopping it halfway
            # would only leave work for the next one.
            result = await guarded(asyncio.to_thread(ingest), answering=False)
        logger.info(
            "ingestion key=%s documents=%d embedded=%d deleted=%d",
            key.id,
            result.documents,
            result.embedded,
            result.deleted,
        )
        state.activity.ingested(
            key.tenant,
            {"documents": result.documents, "embedded": result.embedded, "deleted": result.deleted},
        )
        return result

    app.include_router(file_ingestion_routes(application, caller, run_ingestion))

    def build_answer_request(body: AnswerBody, key: ApiKey, deadline: float) -> AnswerRequest:
        return checked(
            answer_request_for,
            key,
            question=body.question,
            history=[(m.role, m.content) for m in body.history],
            documents=body.documents,
            deadline_seconds=deadline,
        )

    async def answer_or_problem(
        answer_request: AnswerRequest,
        on_evidence: Callable[[Any], None] | None = None,
    ) -> AnswerOutcome:
        try:
            outcome = await guarded(application.answer(answer_request, on_evidence=on_evidence))
        except Problem as problem:
            if problem.extensions.get("reason") == "model_unavailable":
                state.model.failed(problem.extensions.get("failure_category"))
            raise
        state.model.failed(outcome.result.degraded)
        return outcome

    app.include_router(
        web_routes(
            ServiceHooks(
                application,
                state.activity,
                stream_answer=stream_answer,
                status=status_of,
                ingest=ingest_body,
                readiness=lambda: readiness(state),
            )
        )
    )
    return app


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


def ingestion_input_problem(
    error: DocumentError | ChunkingError | InputTooLong, body: IngestBody
) -> Problem:
    """A document the run's validation pass refused, as 422 naming it by its place in
    the request (``documents[3].sections[1]: ...``): the run wrote nothing."""
    document_id = error.document_id
    # The last document of that id: a duplicate is refused where it repeats.
    index = max(
        (i for i, d in enumerate(body.documents) if d.document_id == document_id), default=None
    )
    if index is None:
        return invalid_field("documents", str(error))
    if isinstance(error, DocumentError):
        return invalid_field(f"documents[{index}].{error.field}", error.rule)
    item = body.documents[index]
    if isinstance(error, ChunkingError):
        section = next(
            (j for j, s in enumerate(item.sections) if s.section_id == error.section_id), None
        )
        field = f"documents[{index}]" + ("" if section is None else f".sections[{section}]")
        return invalid_field(field, f"paragraph {error.paragraph_index}: {error.reason}")
    return invalid_field(
        f"documents[{index}]",
        f"chunk {error.chunk_id!r} has {error.tokens} tokens, the embedding profile allows "
        f"{error.limit}; split its paragraphs (or use a profile with a larger limit)",
    )


def degraded_mode(application: Application) -> str:
    """What answers become while the model is unavailable."""
    if application.settings.answers.draft_max_age > 0:
        return "previous_draft, else " + _without_draft_mode(application)
    return _without_draft_mode(application)


def _without_draft_mode(application: Application) -> str:
    if application.templates():
        return "approved_template, else evidence_only" + (
            ""
            if application.settings.answers.evidence_only_on_model_failure
            else " (off: unavailable)"
        )
    return (
        "evidence_only"
        if application.settings.answers.evidence_only_on_model_failure
        else "unavailable"
    )


def assembly_field(reason: str) -> tuple[str, str]:
    """The request field an assembly refusal is about: the history (``history[3]: ...``)
    or the question (it alone exceeds the model's window)."""
    head, _, rest = reason.partition(": ")
    if head.startswith("history") and rest:
        return head, rest
    if reason.startswith("instructions and question"):
        return "question", f"too long for the model's window ({reason})"
    return "history" if "history" in reason else "question", reason


def checked(build: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Build a typed request; a rule it breaks is invalid input naming the field, and
    documents outside the key's allowlist are refused (403), never silently dropped."""
    try:
        return build(*args, **kwargs)
    except RequestError as error:
        raise invalid_field(error.field, error.rule) from error
    except OutsideAllowlist as error:
        raise Problem(403, "outside-allowlist", "Not allowed", str(error)) from error


def unavailable(reason: str, detail: str, *, answering: bool, **extensions: Any) -> Problem:
    """503 with ``reason``: an answer that cannot be given (``answer-unavailable``, with
    ``mode``), or else a search, status or ingestion that cannot be served
    (``retrieval-unavailable``: not about an answer, no ``mode``)."""
    if answering:
        return answer_unavailable(reason, detail, **extensions)
    return Problem(
        503,
        "retrieval-unavailable",
        "The index cannot be used now",
        detail,
        reason=reason,
        **extensions,
    )


async def guarded(work: Awaitable[T], *, answering: bool = True) -> T:
    """Run a use case; turn the failures a caller can act on into problem details
    (``answering`` false: a search, status or ingestion, whose refusals are not about an
    answer: kind ``retrieval-unavailable``, no ``mode``)."""

    def down(reason: str, detail: str, **extensions: Any) -> Problem:
        return unavailable(reason, detail, answering=answering, **extensions)

    try:
        return await work
    except RequestError as error:
        raise invalid_field(error.field, error.rule) from error
    except AssemblyError as error:
        raise invalid_field(*assembly_field(error.reason)) from error
    except IndexNotFound as error:
        raise down("retrieval_unavailable", "no documents have been ingested yet") from error
    except (VectorIndexError, StorageError, EmbeddingError) as error:
        logger.error("retrieval unavailable: %s", type(error).__name__)
        raise down(
            "retrieval_unavailable", f"the evidence index cannot be read ({type(error).__name__})"
        ) from error
    except (ChatError, AnswerContractError) as error:
        category = error.category.value if isinstance(error, ChatError) else "invalid_output"
        logger.error("model failed: %s", category)
        raise down(
            "model_unavailable", f"the model failed ({category})", failure_category=category
        ) from error
    except ProviderError as error:  # a remote embedder or reranker
        logger.error("retrieval provider failed: %s", error.category.value)
        raise down(
            "retrieval_unavailable",
            f"a retrieval provider failed ({error.category.value})",
            failure_category=error.category.value,
        ) from error


async def until_disconnect(request: Request, work: Awaitable[T], permit: Permit) -> T:
    """Await ``work``, cancelling it when the client goes away (its budget is theirs).

    ``permit`` goes back when the work has ended, not when it was cancelled: a worker
    thread cannot be stopped, and until it returns the capacity it uses is taken (the
    work waits for its threads: :func:`~ragwright.threads.run_in_thread`)."""
    task = asyncio.ensure_future(work)
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


def readiness(state: ServiceState) -> dict[str, dict[str, Any]]:
    """Each dependency's check: ``{"ok": bool, "detail": str}``."""
    application = state.application
    checks: dict[str, dict[str, Any]] = {}
    index_problem = application.index_problem()
    checks["index"] = {"ok": index_problem is None, "detail": index_problem or "ok"}
    model = state.model.problem
    # A model that does not answer is not a readiness failure when a degradation mode
    # is declared: the service answers in that mode and says so in every result.
    # A stored draft answers only questions asked before: not a mode that serves traffic.
    declared = _without_draft_mode(application) != "unavailable"
    checks["model"] = {
        "ok": model is None or declared,
        "detail": "ok" if model is None else f"{model} (answering: {degraded_mode(application)})",
    }
    if state.runner is not None:
        # A runner that cannot claim or publish (the job store refuses writes) leaves
        # every accepted job waiting: not ready, with the reason.
        jobs = state.runner.health.problem()
        checks["jobs"] = {"ok": jobs is None, "detail": jobs or "ok"}
    return checks


def reasons_of(checks: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{name}: {check['detail']}" for name, check in checks.items() if not check["ok"]]
