"""What every request of one process shares: the application, admission, the model's
health, the job runner, the recent activity, the page's sessions, the authentication
throttles and the hooks tests set. ``create_app`` puts one :class:`ServiceState` on
``app.state.ragwright``; routes reach its parts through the dependencies of
:mod:`ragwright.service.dependencies`, never through a closure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ragwright.application import Application
from ragwright.application.job_runner import JobRunner
from ragwright.application.jobs import AnswerJob
from ragwright.service.activity import Activity
from ragwright.service.admission import Admission
from ragwright.service.ingestions import read_ingestion
from ragwright.service.model_health import ModelHealth
from ragwright.service.recording import AnswerRecorder
from ragwright.service.schemas import IngestBody
from ragwright.service.throttling import (
    FailureBackoff,
    SlidingLimit,
    failure_backoff,
    sign_in_limit,
)
from ragwright.settings.answering import ServiceSettings
from ragwright.types import SourceDocument
from ragwright.web.sessions import SessionStore


def nothing(_job: AnswerJob) -> None:
    """The default ``job_persisted`` hook: nothing happens between persisting and 202."""


@dataclass
class ServiceState:
    """What every request of one process shares."""

    application: Application
    admission: Admission
    recorder: AnswerRecorder
    model: ModelHealth = field(default_factory=ModelHealth)
    started_at: float = field(default_factory=time.time)
    runner: JobRunner | None = None
    # Parses and validates an ingestion's body (in a worker thread); tests substitute
    # one that records when it runs.
    ingestion_reader: Callable[..., tuple[IngestBody, tuple[SourceDocument, ...]]] = field(
        default=read_ingestion
    )
    # One ingestion at a time in this process (a second one is 409).
    ingesting: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Called once a submitted answer job is durable, before its 202 is sent: the crash
    # tests end the process here (tests/failpoints.py); nothing in production.
    job_persisted: Callable[[AnswerJob], None] = nothing
    # The page's signed-in sessions (ragwright.web), in this process's memory.
    sessions: SessionStore = field(
        default_factory=lambda: SessionStore(max_per_key=ServiceSettings().sessions_per_key)
    )
    # Failed authentications per client address (bearer and sign-in), and sign-ins per
    # key: ragwright.service.throttling.
    failures: FailureBackoff = field(default_factory=lambda: failure_backoff(ServiceSettings()))
    sign_ins: SlidingLimit = field(default_factory=lambda: sign_in_limit(ServiceSettings()))

    @property
    def activity(self) -> Activity:
        return self.recorder.activity

    def runner_failing(self) -> bool:
        """Whether this process's job runner cannot write to the job store."""
        return self.runner is not None and self.runner.health.failure is not None
