"""``GET /v1/status``: what the index holds for the caller, and the service's capacity."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ragwright.service.dependencies import SearchCaller, State
from ragwright.service.problems import problem_responses
from ragwright.service.readiness import status_of

router = APIRouter(tags=["operations"])


@router.get("/v1/status", responses=problem_responses(401, 403, 503))
async def status(key: SearchCaller, state: State) -> JSONResponse:
    """What the index holds for the caller's tenant, and the service's capacity."""
    return JSONResponse(await status_of(state, key))
