"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness, with every reason)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ragwright.service.dependencies import State
from ragwright.service.readiness import readiness, reasons_of

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process serves HTTP."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Not ready"}})
async def readyz(state: State) -> JSONResponse:
    """Readiness, with every reason when not ready."""
    checks = await asyncio.to_thread(readiness, state)
    ready = all(c["ok"] for c in checks.values())
    return JSONResponse(
        {"ready": ready, "checks": checks, "reasons": reasons_of(checks)},
        status_code=200 if ready else 503,
    )
