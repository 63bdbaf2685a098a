"""``POST /v1/search``: the ``k`` best eligible chunks, admitted like an answer."""

from __future__ import annotations

from collections.abc import Awaitable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ragwright.application import SearchRequest, SearchResult
from ragwright.application.callers import search_request_for
from ragwright.deadline import Deadline, deadline_scope
from ragwright.service.dependencies import Admit, App, RequestBudget, SearchCaller
from ragwright.service.guards import checked, guarded
from ragwright.service.problems import INTERACTIVE_ERRORS
from ragwright.service.schemas import SearchBody
from ragwright.threads import run_in_thread

router = APIRouter(tags=["search"])


@router.post("/v1/search", responses=INTERACTIVE_ERRORS)
async def search(
    body: SearchBody,
    key: SearchCaller,
    application: App,
    admit: Admit,
    budget: RequestBudget,
) -> JSONResponse:
    """The ``k`` best eligible chunks (the same shape as ``ragwright search --json``)."""

    async def searched(search_request: SearchRequest, seconds: float) -> SearchResult:
        # The query embedding (a remote provider's retries and waits) spends what is
        # left of the request's budget.
        with deadline_scope(Deadline.after(seconds)):
            return await guarded(run_in_thread(application.search, search_request), answering=False)

    def start() -> Awaitable[SearchResult]:
        search_request = checked(
            search_request_for,
            key,
            question=body.question,
            k=body.k,
            documents=body.documents,
        )
        return searched(search_request, budget.left(answering=False))

    result = await admit.run(key, start)
    return JSONResponse(result.to_dict())
