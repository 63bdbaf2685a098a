"""``/v1/answer-jobs``: durable answer jobs (202 Accepted, idempotency keys).

A submission is validated like an answer request (the question's tokens included: a
question the embedder cannot read is 422 now, not a job that can never run), persisted
with a digest of the submitting key's grant, and only then acknowledged with 202, the
job's ``id`` and its status URL (also in ``Location``). The ``Idempotency-Key`` header
is required: the same key (for the caller's tenant) with the same input is the same job
(a replay is authorised like a read of the job);
with another input it is 409. Status, result and cancellation are authorised against the
caller's current permissions: another tenant's job does not exist for it (404), and a
result citing documents outside its allowlist (403 ``outside-allowlist``) or that it may
not see now by document type or publication state (403 ``not-eligible``) is refused.
If the store cannot durably accept the job, the answer is 503: never a 202 for work that
might be lost. docs/service.md ("Durable answer jobs").
"""

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse

from ragwright.application import Application
from ragwright.application.callers import answer_request_for, grant_digest
from ragwright.application.job_runner import job_status
from ragwright.application.jobs import AnswerJob, JobStore, canonical_input
from ragwright.application.keys import ApiKey
from ragwright.errors import IdempotencyConflict, JobNotFound, RagwrightError, VectorIndexError
from ragwright.service.dependencies import AnswerCaller, App, State
from ragwright.service.guards import checked
from ragwright.service.problems import Problem, problem_responses
from ragwright.service.schemas import AnswerBody

# An Idempotency-Key is an opaque token the client makes (a UUID, typically).
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")

router = APIRouter(tags=["answer jobs"])


@dataclass(frozen=True)
class JobAccess:
    """The job store as the routes reach it: ``open`` returns it (opened on first use,
    so a store that cannot open is the 503 of the route that needed it),
    ``store_failing`` says whether this process's job runner cannot write to it (a
    waiting job's ``waiting_reason`` then says so), and ``persisted`` runs once a
    submitted job is durable, before its 202 (:class:`~ragwright.service.state.ServiceState`)."""

    open: Callable[[], JobStore]
    store_failing: Callable[[], bool]
    persisted: Callable[[AnswerJob], None]

    def status_of(self, job: AnswerJob) -> dict[str, Any]:
        return dict(job_status(job, store_failing=self.store_failing()))


def job_access(application: App, state: State) -> JobAccess:
    return JobAccess(application.jobs, state.runner_failing, state.job_persisted)


Jobs = Annotated[JobAccess, Depends(job_access)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="A token the client makes for this request (e.g. a UUID); "
        "the same token with the same body is the same job.",
    ),
]


@router.post(
    "/v1/answer-jobs",
    status_code=202,
    responses=problem_responses(400, 401, 403, 409, 413, 415, 422, 503),
)
async def submit(
    body: AnswerBody,
    key: AnswerCaller,
    application: App,
    jobs: Jobs,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Accept an answer job: persisted before this returns 202 with its status URL."""
    token = checked_idempotency_key(idempotency_key)
    checked(  # the same rules as an interactive answer, refused now, not later
        answer_request_for,
        key,
        question=body.question,
        history=[(m.role, m.content) for m in body.history],
        documents=body.documents,
    )
    # Off the event loop: counting may load the embedder's tokenizer.
    await asyncio.to_thread(checked, application.check_question_tokens, body.question)
    request = body.model_dump(mode="json")
    try:
        submitted = await asyncio.to_thread(
            jobs.open().submit,
            tenant=key.tenant,
            key_id=key.id,
            idempotency_key=token,
            input_hash=canonical_input(request),
            request=request,
            ttl_seconds=application.settings.jobs.ttl,
            grant_digest=grant_digest(key),
        )
    except IdempotencyConflict as error:
        # Not the other job's id: another key of the tenant may have used the key, and
        # its job is not this caller's to learn of.
        raise Problem(
            409,
            "idempotency-conflict",
            "Idempotency key reused",
            "Idempotency-Key: already used for another request; use a new key",
        ) from error
    except RagwrightError as error:
        raise not_accepted(error) from error
    jobs.persisted(submitted.job)
    # A replay is a read of a stored job: the same visibility check as a GET, so a
    # key cannot learn through a replayed Idempotency-Key what it may not read.
    job = submitted.job if submitted.created else await visible(application, submitted.job, key)
    url = f"/v1/answer-jobs/{job.id}"
    return JSONResponse(
        {**jobs.status_of(job), "status_url": url, "replayed": not submitted.created},
        status_code=202,
        headers={"Location": url},
    )


@router.get("/v1/answer-jobs/{job_id}", responses=problem_responses(401, 403, 404, 503))
async def status(job_id: str, key: AnswerCaller, application: App, jobs: Jobs) -> JSONResponse:
    """The job's state and, once it succeeded, its answer (the shape of
    ``POST /v1/answers``)."""
    job = await visible(application, await read(jobs.open, job_id), key)
    return JSONResponse(jobs.status_of(job))


@router.delete("/v1/answer-jobs/{job_id}", responses=problem_responses(401, 403, 404, 503))
async def cancel(job_id: str, key: AnswerCaller, application: App, jobs: Jobs) -> JSONResponse:
    """Cancel a job that has not finished (a finished one is returned as it is)."""
    await visible(application, await read(jobs.open, job_id), key)
    try:
        job = await asyncio.to_thread(jobs.open().cancel, job_id)
    except JobNotFound as error:
        raise missing() from error
    except RagwrightError as error:
        raise store_unavailable(error) from error
    return JSONResponse(jobs.status_of(job))


def checked_idempotency_key(idempotency_key: str | None) -> str:
    """The header's token; 400 unless it is there and 1 to 200 visible ASCII
    characters."""
    if idempotency_key is None or not _IDEMPOTENCY_KEY.match(idempotency_key):
        rule = (
            "required: a token you make per request (e.g. a UUID)"
            if idempotency_key is None
            else "1 to 200 visible ASCII characters"
        )
        raise Problem(
            400,
            "idempotency-key",
            "Idempotency-Key needed",
            f"Idempotency-Key: {rule}",
            errors=[{"field": "Idempotency-Key", "rule": rule}],
        )
    return idempotency_key


async def read(store: Callable[[], JobStore], job_id: str) -> AnswerJob | None:
    try:
        job = await asyncio.to_thread(store().get, job_id)
        if job is not None and not job.finished and overdue(job):
            # Workers sweep overdue jobs every few seconds; a replica without workers
            # (RAGWRIGHT_JOB_WORKERS=0) must not report one as still queued.
            await asyncio.to_thread(store().expire)
            job = await asyncio.to_thread(store().get, job_id)
        return job
    except RagwrightError as error:
        raise store_unavailable(error) from error


async def visible(application: Application, job: AnswerJob | None, key: ApiKey) -> AnswerJob:
    """The job, if the caller may see it now: its tenant's, and a result whose cited
    documents are within the key's allowlist and eligible for it now (document
    types, publication states). Another tenant's job is indistinguishable from none."""
    job = within_allowlist(job, key)
    citations = job.result.get("citations", []) if job.result is not None else []
    if not citations:
        return job
    try:
        refused = await asyncio.to_thread(application.ineligible_citations, key, citations)
    except VectorIndexError as error:
        raise Problem(
            503,
            "retrieval-unavailable",
            "The index cannot be used now",
            f"the job's cited documents cannot be checked ({type(error).__name__})",
            reason="retrieval_unavailable",
        ) from error
    if refused:
        raise Problem(
            403,
            "not-eligible",
            "Not allowed",
            f"the job's result cites {len(refused)} document(s) this key may not see now "
            f"(document type, publication state, or gone; first: {refused[0]!r})",
        )
    return job


def overdue(job: AnswerJob) -> bool:
    """Past its expiry by this machine's clock (the store's own sweep decides)."""
    expires = datetime.fromisoformat(job.expires_at.replace("Z", "+00:00"))
    return expires <= datetime.now(UTC)


def within_allowlist(job: AnswerJob | None, key: ApiKey) -> AnswerJob:
    """The job if it is the caller's tenant's and its result cites nothing outside the
    key's allowlist (checked without the index)."""
    if job is None or job.tenant != key.tenant:
        raise missing()
    if key.documents and job.result is not None:
        cited = {c["document_id"] for c in job.result.get("citations", [])}
        outside = sorted(cited - set(key.documents))
        if outside:
            raise Problem(
                403,
                "outside-allowlist",
                "Not allowed",
                f"the job's result cites {len(outside)} document(s) outside this key's "
                f"allowlist (first: {outside[0]!r})",
            )
    return job


def missing() -> Problem:
    return Problem(404, "job-not-found", "No such job", "no job with this id for this caller")


def not_accepted(error: Exception) -> Problem:
    return Problem(
        503,
        "jobs-unavailable",
        "Jobs cannot be accepted now",
        f"the job store cannot durably accept the job ({type(error).__name__}); "
        "nothing was accepted: submit again with the same Idempotency-Key",
    )


def store_unavailable(error: Exception) -> Problem:
    return Problem(
        503,
        "jobs-unavailable",
        "Jobs cannot be read now",
        f"the job store is unavailable ({type(error).__name__})",
    )
