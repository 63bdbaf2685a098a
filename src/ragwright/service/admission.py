"""Admission control: a fixed number of interactive requests in progress, no queue.

A request either takes a permit at once or is refused at once, before retrieval or
generation starts (the backpressure contract in docs/service.md):

* the process limit is full: ``503`` (the service's shared capacity is busy);
* the caller's tenant is at its own limit: ``429`` (that tenant's allowance).

Neither refusal carries ``Retry-After``: a concurrency limiter cannot know when an
in-progress request will finish, and a guessed interval makes clients retry together.
The permit is held until the request's work has ended (for a stream, its last event):
when the client leaves, the work is cancelled, and the permit comes back once a worker
thread it was running (a query embedding) has returned — a thread cannot be stopped,
and the capacity it uses is taken until then.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from ragwright.service.problems import Problem


@dataclass
class Permit:
    """One admitted request; ``release`` is idempotent."""

    admission: Admission
    tenant: str | None
    released: bool = False

    def release(self) -> None:
        self.admission._release(self)


@dataclass
class Admission:
    """At most ``limit`` requests in progress, and ``tenant_limit`` per tenant."""

    limit: int
    tenant_limit: int | None = None
    _active: int = 0
    _per_tenant: Counter[str | None] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    refused: Counter[str] = field(default_factory=Counter)

    @property
    def active(self) -> int:
        return self._active

    def enter(self, tenant: str | None) -> Permit:
        """A permit, or :class:`Problem` 503 (process full) / 429 (tenant full)."""
        with self._lock:
            if self._active >= self.limit:
                self.refused["capacity"] += 1
                raise Problem(
                    503,
                    "capacity-busy",
                    "Answer capacity is busy",
                    f"all {self.limit} interactive requests of this process are in progress; "
                    "this request was not started (retry later with backoff and jitter)",
                )
            if self.tenant_limit is not None and self._per_tenant[tenant] >= self.tenant_limit:
                self.refused["tenant"] += 1
                raise Problem(
                    429,
                    "tenant-limit",
                    "Too many requests for this tenant",
                    f"this tenant already has {self.tenant_limit} "
                    f"request{'s' if self.tenant_limit != 1 else ''} in progress; "
                    "this request was not started",
                )
            self._active += 1
            self._per_tenant[tenant] += 1
            return Permit(self, tenant)

    def _release(self, permit: Permit) -> None:
        with self._lock:
            if permit.released:
                return
            permit.released = True
            self._active -= 1
            self._per_tenant[permit.tenant] -= 1
            if self._per_tenant[permit.tenant] <= 0:
                del self._per_tenant[permit.tenant]

    def describe(self) -> dict[str, object]:
        return {
            "limit": self.limit,
            "tenant_limit": self.tenant_limit,
            "in_progress": self._active,
            "refused": dict(self.refused),
        }
