"""Model-capacity gate: a lease per attempt on a shared pool, with no queue.

Place it just above the provider (inside the retry), so each attempt takes a lease and
a retry wait holds none. When the pool is full the attempt is refused at once with the
``capacity`` category. A buffered attempt releases on success, failure or cancellation;
a stream holds its lease until it is fully consumed or abandoned. This module has the
in-process pool; ``adapters/redis.py`` has the pool shared across processes. Both keep
the :class:`~ragwright.protocols.CapacityPool` contract.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.protocols import CapacityPool


class LocalCapacityPool:
    """At most ``limit`` concurrent leases in this process."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._held: set[int] = set()
        self._next = 0

    @property
    def in_use(self) -> int:
        return len(self._held)

    def try_acquire(self) -> object | None:
        with self._lock:
            if len(self._held) >= self.limit:
                return None
            self._next += 1
            self._held.add(self._next)
            return self._next

    def release(self, lease: object) -> None:
        with self._lock:
            self._held.discard(lease)


class CapacityGate:
    """Refuses an attempt at once when ``pool`` has no lease free."""

    def __init__(self, inner: ChatModel, pool: CapacityPool) -> None:
        self.inner = inner
        self.name = inner.name
        self.pool = pool

    def _lease(self) -> object:
        lease = self.pool.try_acquire()
        if lease is None:
            raise ChatError(self.name, FailureCategory.CAPACITY, "no model capacity is free")
        return lease

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        lease = self._lease()
        try:
            return await self.inner.complete(request, deadline)
        finally:
            self.pool.release(lease)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        lease = self._lease()
        try:
            async for update in self.inner.stream(request, deadline):
                yield update
        finally:
            self.pool.release(lease)
