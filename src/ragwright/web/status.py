"""``/ui/status`` (what the index holds for the caller, the service's checks, recent
refusals and the last ingestion) and ``/ui/ingest`` (one uploaded file, ingested
through the service's ``POST /v1/ingestions`` path), which answers with the status page.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import UploadFile

from ragwright.service.converting import converting
from ragwright.service.dependencies import State
from ragwright.service.ingesting import Ingest
from ragwright.service.ingestions import ingestion_summary
from ragwright.service.problems import Problem
from ragwright.service.readiness import readiness, status_of
from ragwright.service.state import ServiceState
from ragwright.web.access import Sessions, csrf_refused, missing_scope, required, signed_in
from ragwright.web.pages import PAGE_HEADERS, as_text, page
from ragwright.web.sessions import SessionStore
from ragwright.web.uploads import MAX_UPLOAD_BYTES, UploadRefused, load_upload

router = APIRouter(include_in_schema=False)


async def status_page(
    request: Request,
    state: ServiceState,
    store: SessionStore,
    code: int = 200,
    ingestion: dict[str, Any] | None = None,
) -> Response:
    """The status page for the signed-in caller (the sign-in page when signed out),
    with ``ingestion``: what the file just sent came to."""
    who = await signed_in(request, state.application, store)
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
async def status(request: Request, state: State, store: Sessions) -> Response:
    return await status_page(request, state, store)


@router.post("/ui/ingest")
async def ingest(request: Request, state: State, store: Sessions, ingesting: Ingest) -> Response:
    application = state.application
    session, key = await required(request, application, store)
    # The form's files are closed however this ends (refusals included).
    async with request.form(max_files=1, max_fields=4) as form:
        if not session.csrf_matches(as_text(form.get("csrf"))):
            raise csrf_refused()
        if not key.allows("ingest"):
            raise missing_scope("ingest")
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or not upload.filename:
            return await status_page(
                request, state, store, 422, {"error": "file: choose a file to ingest."}
            )
        filename = upload.filename
        data = await upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        error = f"file: larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; nothing was read"
        return await status_page(request, state, store, 413, {"error": error})
    try:
        loaded = await converting(request, lambda: load_upload(application, key, filename, data))
    except UploadRefused as error:
        return await status_page(request, state, store, 422, {"error": str(error)})
    outcome: dict[str, Any] = {"name": loaded.name, "skipped": loaded.skipped}
    if loaded.body is None:
        return await status_page(request, state, store, 422, outcome)
    try:
        result = await ingesting.ingest_body(loaded.body, key)
    except Problem as problem:
        return await status_page(
            request, state, store, problem.status, {**outcome, "error": problem.detail}
        )
    # The caller's view of the run: nothing about other tenants (no shared ids).
    return await status_page(
        request, state, store, 200, {**outcome, "result": ingestion_summary(result)}
    )
