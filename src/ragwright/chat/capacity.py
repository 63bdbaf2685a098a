"""Model-capacity gate: a lease per attempt on a shared pool, with no queue.

Place it just above the provider (inside the retry), so each attempt takes a lease and
a retry wait holds none. When the pool is full the attempt is refused at once with the
``capacity`` category. A lease is held until the provider call has really ended, not
just until its caller stopped waiting (issue 20: clients that left while a model server
kept generating let 31 requests reach a server of capacity 4):

- a buffered attempt on a provider whose calls outlive their caller's cancellation
  (``drain=True``: an HTTP model server generates a whole reply before it writes, and
  does not notice a closed connection until then) is not abandoned when its caller is
  cancelled: the caller gets its cancellation at once, the call runs on to its end
  (bounded by the request's deadline, which is its HTTP timeout) and its lease goes
  back then; an in-process provider (``drain=False``) ends when cancelled, and its
  lease goes back as it ends;
- a stream holds its lease until it is fully consumed, fails, or is abandoned, and an
  abandoned stream is closed (its connection with it) before the lease goes back.

This module has the
in-process pool; ``adapters/redis.py`` has the pool shared across processes. Both keep
the :class:`~ragwright.protocols.CapacityPool` contract. The gate calls a pool that
waits on a server (``blocking = True``: Redis) on an I/O thread
(:func:`ragwright.threads.off_loop`), so a hung Redis never stalls the event loop; a
lease acquired for a caller that was cancelled meanwhile goes back.

Throttling cools the whole pool down. When an attempt fails ``throttled`` (the provider
answered 429), the gate puts the pool in a cooldown of the provider's ``retry_after``,
else ``cooldown`` seconds, never more than :data:`MAX_COOLDOWN`. Until it ends every
attempt through the pool — from any process sharing it — is refused at once as
``throttled`` with ``retry_after`` set to the cooldown left, so callers back off
together instead of each spending an attempt on a provider that already said no.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.deadline import Clock
from ragwright.errors import CapacityCoolingDown, ChatError, FailureCategory
from ragwright.protocols import CapacityPool, CapacityStatus
from ragwright.threads import in_background, off_loop

MAX_COOLDOWN = 60.0
"""Longest cooldown one throttled attempt can set (seconds): a provider's ``retry_after``
of an hour must not stop every process for an hour on one answer's word."""


class LocalCapacityPool:
    """At most ``limit`` concurrent leases in this process; cooldowns on ``clock``
    (monotonic by default, so a wall-clock jump neither ends nor stretches one)."""

    def __init__(self, limit: int, *, clock: Clock = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._held: set[int] = set()
        self._next = 0
        self._cool_until = 0.0

    @property
    def in_use(self) -> int:
        return len(self._held)

    def try_acquire(self) -> object | None:
        with self._lock:
            remaining = self._cool_until - self._clock()
            if remaining > 0:
                raise CapacityCoolingDown(remaining)
            if len(self._held) >= self.limit:
                return None
            self._next += 1
            self._held.add(self._next)
            return self._next

    def release(self, lease: object) -> None:
        with self._lock:
            self._held.discard(lease)

    def cool_down(self, seconds: float) -> None:
        with self._lock:
            self._cool_until = max(self._cool_until, self._clock() + seconds)

    def cooldown_remaining(self) -> float:
        with self._lock:
            return max(0.0, self._cool_until - self._clock())

    def describe(self) -> CapacityStatus:
        return {
            "backend": "local",
            "limit": self.limit,
            "in_use": self.in_use,
            "cooldown_seconds": self.cooldown_remaining(),
            "degraded": None,
        }


class CapacityGate:
    """Refuses an attempt at once when ``pool`` has no lease free or is cooling down,
    and cools the pool down when an attempt is throttled.

    ``cooldown`` (seconds) is used when a throttled failure gives no ``retry_after``;
    either is capped at ``max_cooldown``. ``drain``: the provider's calls go on after
    their caller is cancelled (see the module docstring), so a cancelled buffered call
    keeps its lease until it ends.
    """

    def __init__(
        self,
        inner: ChatModel,
        pool: CapacityPool,
        *,
        cooldown: float = 5.0,
        max_cooldown: float = MAX_COOLDOWN,
        drain: bool = False,
    ) -> None:
        if not 0 < cooldown <= max_cooldown:
            raise ValueError(
                f"cooldown must be above 0 and at most max_cooldown ({max_cooldown}), "
                f"got {cooldown}"
            )
        self.inner = inner
        self.name = inner.name
        self.pool = pool
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.drain = drain
        self._draining: set[asyncio.Future[ChatResponse]] = set()

    async def _lease(self) -> object:
        try:
            lease = await off_loop(self.pool, self.pool.try_acquire, undo=self._give_back)
        except CapacityCoolingDown as cooling:
            raise ChatError(
                self.name,
                FailureCategory.THROTTLED,
                "model capacity is cooling down after throttling",
                retry_after=cooling.remaining,
            ) from None
        if lease is None:
            raise ChatError(self.name, FailureCategory.CAPACITY, "no model capacity is free")
        return lease

    def _give_back(self, lease: object | None) -> None:
        if lease is not None:  # taken for a caller that left meanwhile
            self.pool.release(lease)

    def _cooldown(self, error: ChatError) -> float:
        """Seconds to cool the pool down for after ``error`` (0: not throttled)."""
        if error.category is not FailureCategory.THROTTLED:
            return 0.0
        wanted = self.cooldown if error.retry_after is None else error.retry_after
        return max(0.0, min(wanted, self.max_cooldown))

    async def _note(self, error: ChatError) -> None:
        if seconds := self._cooldown(error):
            await off_loop(self.pool, self.pool.cool_down, seconds)

    @property
    def draining(self) -> int:
        """Calls whose callers left and that still hold their lease (``drain=True``)."""
        return len(self._draining)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        lease = await self._lease()
        if not self.drain:
            try:
                return await self.inner.complete(request, deadline)
            except ChatError as error:
                await self._note(error)
                raise
            finally:
                await off_loop(self.pool, self.pool.release, lease)
        call = asyncio.ensure_future(self.inner.complete(request, deadline))
        call.add_done_callback(lambda _: in_background(self.pool, self.pool.release, lease))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            if not call.done():
                # The caller left; the provider goes on generating whatever we do, so
                # the call runs to its end with its lease, and its outcome is dropped.
                self._draining.add(call)
                call.add_done_callback(self._drained)
            raise
        except ChatError as error:
            await self._note(error)
            raise

    def _drained(self, call: asyncio.Future[ChatResponse]) -> None:
        self._draining.discard(call)
        if (
            not call.cancelled()
            and isinstance(error := call.exception(), ChatError)
            and (seconds := self._cooldown(error))
        ):
            in_background(self.pool, self.pool.cool_down, seconds)  # a throttled reply

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        lease = await self._lease()
        try:
            updates = self.inner.stream(request, deadline)
            try:
                async for update in updates:
                    yield update
            finally:
                # Closed explicitly however this ends (an abandoned ``async for`` would
                # leave the provider's stream, and its connection, open until collected).
                close = getattr(updates, "aclose", None)
                if close is not None:
                    await close()
        except ChatError as error:
            await self._note(error)
            raise
        finally:
            await off_loop(self.pool, self.pool.release, lease)
