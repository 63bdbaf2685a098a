"""What an operator's status page shows beyond the index: the recent answers that were
not plain answers (their mode and reason, never their question, evidence or answer) and
the last ingestion, per tenant, kept in this process's memory only.

A ring of :data:`RECENT` entries: old ones fall off, and a restart forgets them (the
``ragwright.answers`` counter is the durable record, docs/service.md).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

RECENT = 50


@dataclass(frozen=True, slots=True)
class Refusal:
    """One answer that was not a plain answer: when, for which tenant, through which
    route, its mode and reason."""

    at: float
    tenant: str | None
    route: str
    mode: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.at)),
            "route": self.route,
            "mode": self.mode,
            "reason": self.reason,
        }


@dataclass
class Activity:
    """Recent refusals and the last ingestion of each tenant (thread-safe)."""

    clock: Any = time.time
    _refusals: deque[Refusal] = field(default_factory=lambda: deque(maxlen=RECENT))
    _ingestions: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refused(self, tenant: str | None, route: str, mode: str | None, reason: str | None) -> None:
        """Record an answer outcome when it has a reason (nothing for a plain answer)."""
        if reason is None:
            return
        with self._lock:
            self._refusals.append(Refusal(self.clock(), tenant, route, mode or "none", reason))

    def ingested(self, tenant: str | None, summary: dict[str, Any]) -> None:
        with self._lock:
            self._ingestions[tenant] = {
                "at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.clock())),
                **summary,
            }

    def refusals_of(self, tenant: str | None) -> list[dict[str, Any]]:
        """The tenant's recent refusals, newest first."""
        with self._lock:
            return [r.to_dict() for r in reversed(self._refusals) if r.tenant == tenant]

    def last_ingestion(self, tenant: str | None) -> dict[str, Any] | None:
        with self._lock:
            return self._ingestions.get(tenant)
