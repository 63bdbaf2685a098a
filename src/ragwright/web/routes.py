"""The page's routes: ``/`` (sign in, then ask), ``/ui/status`` and the endpoints the
page's script calls.

Nothing here decides who may see what. Signing in turns an API key into a server-side
session (web/sessions.py); every request re-reads that key from the key store and hands
it to the service's own paths, reached through the service's dependencies
(:mod:`ragwright.service.dependencies`) as its routes reach them: the answer path of
``POST /v1/answers/stream`` (its request builder, admission and recording), the status
of ``GET /v1/status``, the ingestion of ``POST /v1/ingestions``, and the grant-checked
passage reader. Every state-changing request carries the session's CSRF token.
"""

from __future__ import annotations

import asyncio
import json
import logging
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.datastructures import UploadFile

from ragwright.application import Application
from ragwright.application.keys import ApiKey
from ragwright.application.passages import read_passage
from ragwright.errors import IndexNotFound, StorageError, VectorIndexError
from ragwright.service.answering import Answers
from ragwright.service.dependencies import App, State
from ragwright.service.ingesting import Ingest
from ragwright.service.ingestions import ingestion_summary
from ragwright.service.problems import Problem
from ragwright.service.readiness import readiness, status_of
from ragwright.service.schemas import AnswerBody
from ragwright.service.state import ServiceState
from ragwright.web.sessions import (
    CSRF_HEADER,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    Session,
    SessionStore,
    tokens_match,
)
from ragwright.web.uploads import MAX_UPLOAD_BYTES, UploadRefused, load_upload
from ragwright.web.words import MODE_WORDS, REASON_WORDS, reason_words

logger = logging.getLogger("ragwright.web")

STATIC = {"ragwright.js": "text/javascript", "ragwright.css": "text/css"}
# Every asset comes from this process: no inline script, no other origin.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def web_routes(sessions: SessionStore | None = None) -> APIRouter:
    """The page's router (its sessions in ``sessions``)."""
    router = APIRouter(include_in_schema=False)
    store = sessions or SessionStore()
    templates = Environment(
        loader=PackageLoader("ragwright.web", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["reason_words"] = reason_words
    assets = {
        name: (resources.files("ragwright.web") / "static" / name).read_bytes() for name in STATIC
    }
    words = json.dumps({"modes": MODE_WORDS, "reasons": REASON_WORDS}, ensure_ascii=False)

    def page(template: str, code: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(template).render(words=words, **context)
        return HTMLResponse(html, status_code=code, headers=PAGE_HEADERS)

    async def signed_in(
        request: Request, application: Application
    ) -> tuple[Session, ApiKey] | None:
        """The request's session and its key as the store holds it now; a session whose
        key is gone or revoked is ended here."""
        session = store.get(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        try:
            key = await asyncio.to_thread(application.key, session.key_id)
        except StorageError as error:
            raise keys_unavailable(error) from error
        if key is None or not key.active:
            store.delete(session.session_id)
            return None
        return session, key

    async def required(request: Request, application: Application) -> tuple[Session, ApiKey]:
        who = await signed_in(request, application)
        if who is None:
            raise Problem(401, "signed-out", "Signed out", "sign in again with your API key")
        return who

    def sign_in_page(request: Request, status: int = 200, error: str = "") -> HTMLResponse:
        token = Session.new_token()
        response = page("sign_in.html", status, csrf_token=token, error=error)
        response.set_cookie(
            SIGN_IN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=over_tls(request),
            path="/",
        )
        return response

    @router.get("/")
    async def home(request: Request, application: App) -> Response:
        who = await signed_in(request, application)
        if who is None:
            return sign_in_page(request)
        session, key = who
        return page("ask.html", key=key, csrf_token=session.csrf_token)

    @router.post("/ui/sign-in")
    async def sign_in(request: Request, application: App) -> Response:
        form = await request.form(max_files=0, max_fields=4)
        secret = form.get("key")
        if not tokens_match(request.cookies.get(SIGN_IN_COOKIE), as_text(form.get("csrf"))):
            return sign_in_page(request, 403, "The sign-in form had expired. Try again.")
        if not isinstance(secret, str) or not secret.strip():
            return sign_in_page(request, 422, "key: enter your API key.")
        try:
            key = await asyncio.to_thread(application.authenticate, secret.strip())
        except StorageError:
            return sign_in_page(
                request, 503, "The key store cannot be read now; nothing was done. Try again."
            )
        if key is None:
            return sign_in_page(request, 401, "That API key is unknown or revoked.")
        store.delete(request.cookies.get(SESSION_COOKIE))
        session = store.create(key.id)
        logger.info("signed in key=%s", key.id)
        response = RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
        response.delete_cookie(SIGN_IN_COOKIE, path="/")
        response.set_cookie(
            SESSION_COOKIE,
            session.session_id,
            httponly=True,
            samesite="strict",
            secure=over_tls(request),
            path="/",
        )
        return response

    @router.post("/ui/sign-out")
    async def sign_out(request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=4)
        session = store.get(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            if not session.csrf_matches(as_text(form.get("csrf"))):
                raise csrf_refused()
            store.delete(session.session_id)
        response = RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @router.post("/ui/ask")
    async def ask(
        body: AnswerBody, request: Request, application: App, answering: Answers
    ) -> Response:
        session, key = await required(request, application)
        if not session.csrf_matches(request.headers.get(CSRF_HEADER)):
            raise csrf_refused()
        # The same stream, builder, admission and grant as POST /v1/answers/stream
        # (whose caller() refuses a key without the scope the same way).
        if not key.allows("answer"):
            raise missing_scope("answer")
        return await answering.stream(body, key, "ui/ask")

    @router.get("/ui/passages")
    async def passage(
        request: Request,
        application: App,
        document_id: Annotated[str, Query(min_length=1, max_length=200)],
        chunk_id: Annotated[str, Query(min_length=1, max_length=400)],
    ) -> Response:
        _, key = await required(request, application)
        if not (key.allows("answer") or key.allows("search")):
            raise missing_scope("answer")
        try:
            found = await asyncio.to_thread(read_passage, application, key, document_id, chunk_id)
        except IndexNotFound:
            found = None
        except VectorIndexError as error:
            raise Problem(
                503,
                "retrieval-unavailable",
                "The index cannot be used now",
                f"the evidence index cannot be read ({type(error).__name__})",
                reason="retrieval_unavailable",
            ) from error
        if found is None:
            # Absent and not the caller's to see are one answer: nothing to probe.
            raise Problem(
                404, "passage-not-found", "No such passage", "no passage with that id for you"
            )
        if "text/html" in request.headers.get("accept", ""):
            return page("passage.html", passage=found)
        return JSONResponse(found.to_dict(), headers={"Cache-Control": "no-store"})

    async def status_page(
        request: Request,
        state: ServiceState,
        code: int = 200,
        ingestion: dict[str, Any] | None = None,
    ) -> Response:
        who = await signed_in(request, state.application)
        if who is None:
            return RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
        session, key = who
        context: dict[str, Any] = {"key": key, "csrf_token": session.csrf_token}
        if not key.allows("search"):
            return page("status.html", 403, **context, status=None, ingestion=ingestion)
        try:
            status_body: dict[str, Any] | None = await status_of(state, key)
            index_problem = None
        except Problem as problem:
            status_body, index_problem = None, problem.detail
        return page(
            "status.html",
            code,
            **context,
            status=status_body,
            index_problem=index_problem,
            checks=await asyncio.to_thread(readiness, state),
            refusals=state.activity.refusals_of(key.tenant),
            last_ingestion=state.activity.last_ingestion(key.tenant),
            ingestion=ingestion,
        )

    @router.get("/ui/status")
    async def status(request: Request, state: State) -> Response:
        return await status_page(request, state)

    @router.post("/ui/ingest")
    async def ingest(request: Request, state: State, ingesting: Ingest) -> Response:
        application = state.application
        session, key = await required(request, application)
        # The form's files are closed however this ends (refusals included).
        async with request.form(max_files=1, max_fields=4) as form:
            if not session.csrf_matches(as_text(form.get("csrf"))):
                raise csrf_refused()
            if not key.allows("ingest"):
                raise missing_scope("ingest")
            upload = form.get("file")
            if not isinstance(upload, UploadFile) or not upload.filename:
                return await status_page(
                    request, state, 422, {"error": "file: choose a file to ingest."}
                )
            filename = upload.filename
            data = await upload.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            error = f"file: larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; nothing was read"
            return await status_page(request, state, 413, {"error": error})
        try:
            loaded = await asyncio.to_thread(load_upload, application, key, filename, data)
        except UploadRefused as error:
            return await status_page(request, state, 422, {"error": str(error)})
        outcome: dict[str, Any] = {"name": loaded.name, "skipped": loaded.skipped}
        if loaded.body is None:
            return await status_page(request, state, 422, outcome)
        try:
            result = await ingesting.ingest_body(loaded.body, key)
        except Problem as problem:
            return await status_page(
                request, state, problem.status, {**outcome, "error": problem.detail}
            )
        # The caller's view of the run: nothing about other tenants (no shared ids).
        return await status_page(
            request, state, 200, {**outcome, "result": ingestion_summary(result)}
        )

    @router.get("/ui/static/{name}")
    async def static(name: str) -> Response:
        if name not in assets:
            raise Problem(404, "http-404", "Not Found", f"no asset {name!r}")
        return Response(
            assets[name],
            media_type=STATIC[name],
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    return router


def over_tls(request: Request) -> bool:
    """Whether the browser reached us over TLS (uvicorn sets the scheme from a trusted
    proxy's ``X-Forwarded-Proto``), so the cookie is sent over TLS only."""
    return request.url.scheme == "https"


def as_text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def csrf_refused() -> Problem:
    return Problem(
        403,
        "csrf",
        "Refused: no valid CSRF token",
        f"a state-changing request from the page needs its session's token "
        f"(the form's 'csrf' field or the {CSRF_HEADER} header); reload the page",
    )


def missing_scope(scope: str) -> Problem:
    return Problem(
        403,
        "insufficient-scope",
        "Not allowed",
        f"this API key lacks the {scope!r} scope",
        required_scope=scope,
    )


def keys_unavailable(error: Exception) -> Problem:
    return Problem(
        503,
        "keys-unavailable",
        "Callers cannot be authenticated now",
        f"the API key store is unavailable ({type(error).__name__}); nothing was done: retry",
    )
