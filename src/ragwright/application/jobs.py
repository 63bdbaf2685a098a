"""Durable answer jobs: the records and the store every replica shares.

A job is accepted (202) only once it is persisted; a worker claims it atomically with a
lease it renews while it runs; a worker that dies loses the lease and the job is claimed
again; its result is published at most once, by the holder of the current lease
(``publish`` is guarded by the lease owner and the state, so a late worker whose lease
was taken over cannot publish a second result).

The idempotency rule is ours, whatever stores the rows: a submission names an
``Idempotency-Key``, scoped to the caller's tenant and bound to the input's hash. The
same key with the same input returns the existing job; the same key with another input
is :class:`IdempotencyConflict`.

Standard library only (like :mod:`ragwright.application.keys`): the service imports it
on every request path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ragwright.errors import IdempotencyConflict, JobError, JobNotFound

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled", "expired"]
FINISHED: tuple[JobState, ...] = ("succeeded", "failed", "cancelled", "expired")


@dataclass(frozen=True, slots=True)
class AnswerJob:
    """One durable answer job.

    ``tenant`` and ``key_id`` are the submitting caller's (trusted context, from the
    key); ``request`` is the body as submitted (question, history, documents);
    ``input_hash`` is SHA-256 of its canonical JSON. ``lease_owner`` and
    ``lease_expires_at`` are set while a worker holds it; ``attempts`` counts claims.
    ``result`` is the answer's JSON form once ``succeeded``; ``failure`` says why a job
    ``failed``. ``grant_digest`` is the submitting key's grant when it was accepted
    (:func:`~ragwright.application.callers.grant_digest`; ``None`` for a job accepted
    before stores recorded it, schema version 1). Times are UTC ISO 8601 strings.
    """

    id: str
    tenant: str | None
    key_id: str
    idempotency_key: str
    input_hash: str
    request: Mapping[str, Any]
    state: JobState
    created_at: str
    expires_at: str
    attempts: int = 0
    lease_owner: str | None = None
    lease_expires_at: str | None = None
    result: Mapping[str, Any] | None = None
    failure: str | None = None
    finished_at: str | None = None
    grant_digest: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a submission did: the job, and whether this call created it."""

    job: AnswerJob
    created: bool


@dataclass(frozen=True, slots=True)
class JobLimits:
    """The job pool a claim must fit: jobs running at once across every worker of
    every replica (``pool``, ``RAGWRIGHT_BATCH_CAPACITY``), and per tenant
    (``per_tenant``, ``RAGWRIGHT_BATCH_TENANT_CAPACITY``; ``None``: no own limit)."""

    pool: int
    per_tenant: int | None = None


@dataclass(frozen=True, slots=True)
class JobCounts:
    """Jobs per state, and the age in seconds of the oldest queued one."""

    states: Mapping[str, int] = field(default_factory=dict)
    oldest_queued_seconds: float | None = None


class JobStore(Protocol):
    """Where answer jobs live; safe to share between threads, processes and replicas.

    Every method is one transaction. ``now`` is read from the store's own clock (the
    database server's for PostgreSQL), so replicas whose clocks disagree still agree on
    leases and expiry.
    """

    def submit(
        self,
        *,
        tenant: str | None,
        key_id: str,
        idempotency_key: str,
        input_hash: str,
        request: Mapping[str, Any],
        ttl_seconds: float,
        grant_digest: str,
    ) -> Submitted:
        """Persist a new queued job, or return the existing one for this tenant and key.
        ``grant_digest`` records the submitting key's grant (not part of the input: the
        same key and input with another grant is still the same job).

        Raises:
            IdempotencyConflict: the key names a job with another ``input_hash``.
        """
        ...

    def get(self, job_id: str) -> AnswerJob | None:
        """The job, or ``None``."""
        ...

    def cancel(self, job_id: str) -> AnswerJob:
        """Cancel a job that has not finished (a running one's worker sees it at its next
        renewal and stops); a finished job is returned unchanged.

        Raises:
            JobNotFound: no such job.
        """
        ...

    def claim(self, worker: str, *, lease_seconds: float, limits: JobLimits) -> AnswerJob | None:
        """Atomically take the oldest claimable job: queued, or running with an expired
        lease (its worker died), not past its expiry, within ``limits`` (jobs holding a
        live lease count). ``None`` when there is none or the pool is full."""
        ...

    def renew(self, job_id: str, worker: str, *, lease_seconds: float) -> bool:
        """Extend ``worker``'s lease; ``False`` when it no longer holds it (taken over,
        cancelled, expired): the worker must stop and not publish."""
        ...

    def release(self, job_id: str, worker: str, *, reason: str) -> bool:
        """Give a running job back to the queue (``worker`` still holding its lease),
        e.g. its inputs changed and it should run again; ``False`` otherwise."""
        ...

    def publish(
        self,
        job_id: str,
        worker: str,
        *,
        state: Literal["succeeded", "failed"],
        result: Mapping[str, Any] | None = None,
        failure: str | None = None,
    ) -> bool:
        """Record the outcome, only if ``worker`` still holds the lease of a running job:
        ``True`` once per job; a second or late publish is ``False``."""
        ...

    def expire(self) -> int:
        """Mark unfinished jobs past their expiry ``expired``; how many."""
        ...

    def purge(self, *, older_than: float) -> int:
        """Delete finished jobs (succeeded, failed, cancelled, expired) that finished at
        least ``older_than`` seconds ago, results included; how many. Their
        idempotency keys are free again."""
        ...

    def counts(self) -> JobCounts:
        """Jobs per state now (for status, readiness and benchmarks)."""
        ...

    def close(self) -> None: ...


def canonical_input(request: Mapping[str, Any]) -> str:
    """The SHA-256 of ``request``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__: Sequence[str] = (
    "FINISHED",
    "AnswerJob",
    "IdempotencyConflict",
    "JobCounts",
    "JobError",
    "JobLimits",
    "JobNotFound",
    "JobState",
    "JobStore",
    "Submitted",
    "canonical_input",
)
