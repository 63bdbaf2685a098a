"""Answer outcomes counted and traced by mode and reason (``ragwright.answers``), and the
refusals kept for the status page (:mod:`ragwright.service.activity`): never a question,
evidence or answer."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from opentelemetry.metrics import Counter
from opentelemetry.trace import Tracer

from ragwright.application.keys import ApiKey
from ragwright.service.activity import Activity
from ragwright.service.problems import Problem

logger = logging.getLogger("ragwright.service")


@dataclass(frozen=True)
class AnswerRecorder:
    """Where every answer outcome of the process is recorded."""

    tracer: Tracer
    outcomes: Counter
    activity: Activity

    def record(
        self, key: ApiKey, route: str, mode: str | None, reason: str | None, status: str | None
    ) -> None:
        """Count one answer outcome by mode and reason, refusals included; never its
        question, evidence or answer."""
        attributes = {"mode": mode or "none", "reason": reason or "none", "route": route}
        self.outcomes.add(1, attributes)
        with self.tracer.start_as_current_span("ragwright.answer") as span:
            span.set_attributes({f"ragwright.{k}": v for k, v in attributes.items()})
            span.set_attribute("ragwright.key_id", key.id)
        logger.info("answer key=%s mode=%s reason=%s status=%s", key.id, mode, reason, status)
        self.activity.refused(key.tenant, route, mode, reason)

    def refusal(self, problem: Problem, key: ApiKey, route: str) -> None:
        """Record a refused answer. Only an answer refused as such has a mode: invalid
        input, a missing scope or a full service is not an answer outcome."""
        if "mode" in problem.extensions:
            self.record(
                key, route, problem.extensions["mode"], problem.extensions.get("reason"), None
            )
