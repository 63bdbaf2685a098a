"""The page's routes: ``/`` (sign in, then ask), the sign-in and sign-out forms, the
endpoints the page's script calls, and its assets; ``/ui/status`` and ``/ui/ingest``
are in :mod:`ragwright.web.status`, included in :data:`router`.

Nothing here decides who may see what. Signing in turns an API key into a server-side
session (web/sessions.py); a wrong key counts against the client's address as a wrong
bearer key does, and one key's sign-ins are limited per minute
(:mod:`ragwright.service.throttling`). Every request re-reads that key from the key store
(:mod:`ragwright.web.access`) and hands it to the service's own paths, reached through
the service's dependencies (:mod:`ragwright.service.dependencies`) as its routes reach
them: the answer path of ``POST /v1/answers/stream`` (its request builder, admission and
recording), the status of ``GET /v1/status``, the ingestion of ``POST /v1/ingestions``,
and the grant-checked passage reader. Every state-changing request carries the
session's CSRF token.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ragwright.application.passages import read_passage
from ragwright.errors import IndexNotFound, StorageError, VectorIndexError
from ragwright.service.answering import Answers
from ragwright.service.dependencies import App, State
from ragwright.service.problems import Problem
from ragwright.service.schemas import AnswerBody
from ragwright.service.throttling import client_address, retry_after
from ragwright.web import status
from ragwright.web.access import Sessions, csrf_refused, missing_scope, required, signed_in
from ragwright.web.pages import (
    PAGE_HEADERS,
    STATIC,
    as_text,
    assets,
    over_tls,
    page,
    sign_in_page,
)
from ragwright.web.sessions import CSRF_HEADER, SESSION_COOKIE, SIGN_IN_COOKIE, tokens_match
from ragwright.web.uploads import MAX_UPLOAD_BYTES

logger = logging.getLogger("ragwright.web")

router = APIRouter(include_in_schema=False)
# The body gate's limits for the page's routes (service/app.py): the sign-in and
# sign-out forms hold two short fields; the upload form its file (at most
# MAX_UPLOAD_BYTES) with the multipart framing and the form's token around it.
PAGE_FORM_BYTES = 8 * 1024
UPLOAD_FORM_BYTES = MAX_UPLOAD_BYTES + 64 * 1024


@router.get("/")
async def home(request: Request, application: App, store: Sessions) -> Response:
    who = await signed_in(request, application, store)
    if who is None:
        return sign_in_page(request)
    session, key = who
    return page("ask.html", key=key, csrf_token=session.csrf_token)


@router.post("/ui/sign-in")
async def sign_in(request: Request, application: App, store: Sessions, state: State) -> Response:
    # The same count as a wrong bearer key: an address guessing keys waits on both paths.
    address = client_address(request.scope)
    wait = state.failures.wait(address)
    if wait > 0:
        return throttled(
            request, wait, "Too many failed sign-ins from your address; nothing was checked."
        )
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
        state.failures.failed(address)
        return sign_in_page(request, 401, "That API key is unknown or revoked.")
    wait = state.sign_ins.take(key.id)
    if wait > 0:
        return throttled(
            request, wait, "This API key has signed in too often; no session was made."
        )
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


def throttled(request: Request, wait: float, reason: str) -> Response:
    """429: the sign-in form again, with ``reason`` and when to try (``Retry-After``)."""
    after = retry_after(wait)
    response = sign_in_page(request, 429, f"{reason} Try again in {after} s.")
    response.headers["Retry-After"] = after
    return response


@router.post("/ui/sign-out")
async def sign_out(request: Request, store: Sessions) -> Response:
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
    body: AnswerBody, request: Request, application: App, store: Sessions, answering: Answers
) -> Response:
    session, key = await required(request, application, store)
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
    store: Sessions,
    document_id: Annotated[str, Query(min_length=1, max_length=200)],
    chunk_id: Annotated[str, Query(min_length=1, max_length=400)],
) -> Response:
    _, key = await required(request, application, store)
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


router.include_router(status.router)


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    if name not in STATIC:
        raise Problem(404, "http-404", "Not Found", f"no asset {name!r}")
    return Response(
        assets()[name],
        media_type=STATIC[name],
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )
