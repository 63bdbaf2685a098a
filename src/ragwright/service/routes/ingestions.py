"""``POST /v1/ingestions``: documents of the caller's tenant as JSON, ingested while
queries go on (the body rules: :mod:`ragwright.service.ingestions`)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ragwright.application.grants import write_grant_for
from ragwright.service.dependencies import IngestCaller, State
from ragwright.service.ingesting import Ingest
from ragwright.service.ingestions import INGEST_BODY_OPENAPI, ingestion_summary
from ragwright.service.problems import problem_responses

router = APIRouter(tags=["ingestion"])


@router.post(
    "/v1/ingestions",
    responses=problem_responses(400, 401, 403, 409, 413, 415, 422, 503),
    openapi_extra=INGEST_BODY_OPENAPI,
)
async def ingestions(
    request: Request, key: IngestCaller, state: State, ingesting: Ingest
) -> JSONResponse:
    """Ingest documents of the caller's tenant while queries go on; returns the run's
    summary (the shape of ``ragwright ingest --json`` without ``shared_ids`` and the
    collection's BM25 figures: nothing about other tenants' documents). Writes
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
        state.application.settings.index.document_types,
    )
    result = await ingesting.run_body(body, documents, key)
    return JSONResponse(ingestion_summary(result))
