"""What the service says about itself: ``/readyz``'s checks, ``/v1/status``'s body and
the mode answers degrade to while the model does not answer."""

from __future__ import annotations

import asyncio
from typing import Any

from ragwright import __version__
from ragwright.application import Application, StatusRequest
from ragwright.application.keys import ApiKey
from ragwright.service.guards import guarded
from ragwright.service.state import ServiceState
from ragwright.threads import on_io_thread


def readiness(state: ServiceState) -> dict[str, dict[str, Any]]:
    """Each dependency's check: ``{"ok": bool, "detail": str}``."""
    application = state.application
    checks: dict[str, dict[str, Any]] = {}
    index_problem = application.index_problem()
    checks["index"] = {"ok": index_problem is None, "detail": index_problem or "ok"}
    model = state.model.problem
    # A model that does not answer is not a readiness failure when a degradation mode
    # is declared: the service answers in that mode and says so in every result.
    # A stored draft answers only questions asked before: not a mode that serves traffic.
    declared = _without_draft_mode(application) != "unavailable"
    checks["model"] = {
        "ok": model is None or declared,
        "detail": "ok" if model is None else f"{model} (answering: {degraded_mode(application)})",
    }
    if state.runner is not None:
        # A runner that cannot claim or publish (the job store refuses writes) leaves
        # every accepted job waiting: not ready, with the reason.
        jobs = state.runner.health.problem()
        checks["jobs"] = {"ok": jobs is None, "detail": jobs or "ok"}
    return checks


def reasons_of(checks: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{name}: {check['detail']}" for name, check in checks.items() if not check["ok"]]


async def status_of(state: ServiceState, key: ApiKey) -> dict[str, Any]:
    """``GET /v1/status``'s body: the caller's view (its tenant, and its allowlist when
    the key has one) and the service's capacity."""
    application = state.application
    scope = StatusRequest(tenants=(key.tenant,), documents=key.documents or None)
    result = await guarded(asyncio.to_thread(application.status, scope), answering=False)
    return {
        **result.to_dict(),
        "tenant": key.tenant,
        "service": {
            "version": __version__,
            "admission": state.admission.describe(),
            "model_capacity": await on_io_thread(application.capacity),  # may ask Redis
            "answer_deadline_seconds": application.settings.answers.deadline,
            "model": state.model.problem or "ok",
            "degraded_mode": degraded_mode(application),
        },
    }


def degraded_mode(application: Application) -> str:
    """What answers become while the model is unavailable."""
    if application.settings.answers.draft_max_age > 0:
        return "previous_draft, else " + _without_draft_mode(application)
    return _without_draft_mode(application)


def _without_draft_mode(application: Application) -> str:
    if application.templates():
        return "approved_template, else evidence_only" + (
            ""
            if application.settings.answers.evidence_only_on_model_failure
            else " (off: unavailable)"
        )
    return (
        "evidence_only"
        if application.settings.answers.evidence_only_on_model_failure
        else "unavailable"
    )
