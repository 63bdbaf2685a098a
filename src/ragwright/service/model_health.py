"""What the service knows about its chat model now (``/readyz``'s ``model`` check and
``/v1/status``'s ``service.model``).

The startup probe gives the first word; after it, the latest evidence decides:

* an answer that degraded because the model did not answer (``transient``,
  ``throttled``, ``timeout``), or failed because it cannot be used as configured
  (``invalid_configuration``), marks the model down with that category;
* while it is marked down, the model is probed again every ``recheck_seconds`` (one
  probe at a time, each bounded by its own timeout), and a probe that answers clears
  the mark. Nothing is probed while the model is up.

An exhausted request deadline and a full capacity gate say nothing about the model (one
request's budget, this process's own limit) and change nothing. A generated answer does
not clear the mark by itself: it may have come from the response cache, which answers
while the model is down; the probe is never cached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

logger = logging.getLogger("ragwright.service")

RECHECK_SECONDS = 15.0
"""How often a model marked down is probed again (seconds)."""

MODEL_DOWN = frozenset({"transient", "throttled", "timeout", "invalid_configuration"})
"""Failure categories of an answer's model call that mark the model down."""


@dataclass
class ModelHealth:
    """``problem`` is ``None`` while the model answers, else why not (one line, the
    failure category first, as :meth:`Application.probe_model` words it)."""

    problem: str | None = None
    recheck_seconds: float = RECHECK_SECONDS

    def failed(self, category: str | None) -> None:
        """An answer's model call failed with ``category`` (a degraded answer's
        ``degraded``, or a refused one's ``failure_category``)."""
        if category not in MODEL_DOWN:
            return
        if self.problem is None:
            logger.warning(
                "warning: the chat model stopped answering (%s); probing it every %g s",
                category,
                self.recheck_seconds,
            )
        self.problem = f"{category}: the latest answer's model call failed"

    def probed(self, problem: str | None) -> None:
        """A probe's finding (``None``: the model answered)."""
        if problem is None and self.problem is not None:
            logger.info("the chat model answers again")
        self.problem = problem

    async def recheck(self, probe: Callable[[], Awaitable[str | None]]) -> None:
        """Probe the model every ``recheck_seconds`` while it is marked down, until
        cancelled (the service's lifespan runs this)."""
        while True:
            await asyncio.sleep(self.recheck_seconds)
            if self.problem is not None:
                self.probed(await probe())
