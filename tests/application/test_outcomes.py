"""Every answer states its mode and reason; degraded results are never plain answers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragwright.application import AnswerOutcome
from ragwright.core.templates import ApprovedTemplate

TEMPLATE = ApprovedTemplate("ack", "1", ("shutdown",), "T")


@pytest.mark.parametrize(
    ("status", "degraded", "template", "evidence_allowed", "mode", "reason"),
    [
        ("answered", None, None, True, "generated", None),
        ("no_eligible_evidence", None, None, True, "insufficient", "required_evidence_unavailable"),
        ("insufficient", None, None, True, "insufficient", "evidence_does_not_answer"),
        ("unsupported", None, None, True, "insufficient", "answer_not_supported"),
        ("evidence_only", None, None, True, "evidence_only", None),  # the configured style
        ("evidence_only", "transient", None, True, "evidence_only", "model_unavailable"),
        ("evidence_only", "throttled", TEMPLATE, True, "approved_template", "model_unavailable"),
        (
            "evidence_only",
            "deadline_exhausted",
            None,
            True,
            "evidence_only",
            "request_deadline_exceeded",
        ),
        ("evidence_only", "capacity", None, False, "unavailable", "model_unavailable"),
        ("evidence_only", "timeout", TEMPLATE, False, "approved_template", "model_unavailable"),
        ("preview", None, None, True, None, None),
    ],
)
def test_mode_and_reason(
    status: str,
    degraded: str | None,
    template: ApprovedTemplate | None,
    evidence_allowed: bool,
    mode: str | None,
    reason: str | None,
) -> None:
    result: Any = SimpleNamespace(status=status, degraded=degraded)
    outcome = AnswerOutcome(result, template=template, evidence_allowed=evidence_allowed)
    assert (outcome.mode, outcome.reason) == (mode, reason)
