"""Stores that wait on a server (``blocking = True``, as the Redis ones say) are called
off the event loop, and a lease taken for a caller that left meanwhile goes back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragwright.chat.cache import MemoryCacheStore, ResponseCache
from ragwright.chat.capacity import CapacityGate, LocalCapacityPool
from ragwright.chat.contract import ChatMessage, ChatRequest, Deadline
from ragwright.testing.scripted import Reply, ScriptedChatModel

REQUEST = ChatRequest(messages=(ChatMessage("user", "hello"),), scope="tenant-a")
WAIT = 60.0  # bound on the test's own waits


class SlowPool(LocalCapacityPool):
    """A pool whose acquire waits for ``go`` (a server slow to answer)."""

    blocking = True

    def __init__(self) -> None:
        super().__init__(1)
        self.entered, self.go, self.released = (threading.Event() for _ in range(3))

    def try_acquire(self) -> object | None:
        self.entered.set()
        assert self.go.wait(WAIT)
        return super().try_acquire()

    def release(self, lease: object) -> None:
        super().release(lease)
        self.released.set()


class ThreadRecordingStore(MemoryCacheStore):
    blocking = True

    def __init__(self) -> None:
        super().__init__(max_entries=10)
        self.threads: list[threading.Thread] = []

    def get(self, key: str) -> bytes | None:
        self.threads.append(threading.current_thread())
        return super().get(key)

    def set(self, key: str, value: bytes, ttl: float) -> None:
        self.threads.append(threading.current_thread())
        super().set(key, value, ttl)


def test_a_blocking_cache_store_is_called_off_the_event_loop() -> None:
    store = ThreadRecordingStore()
    cache = ResponseCache(ScriptedChatModel([Reply()]), store, ttl=60)
    response = asyncio.run(cache.complete(REQUEST, Deadline.after(WAIT)))
    assert response.text
    assert len(store.threads) == 2  # the lookup (a miss) and the store
    assert threading.current_thread() not in store.threads


def test_a_lease_acquired_for_a_caller_that_left_goes_back() -> None:
    pool = SlowPool()
    gate = CapacityGate(ScriptedChatModel([Reply()]), pool)

    async def leave_while_acquiring() -> None:
        call = asyncio.ensure_future(gate.complete(REQUEST, Deadline.after(WAIT)))
        # The loop is free while the acquire waits on its thread.
        assert await asyncio.to_thread(pool.entered.wait, WAIT)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        pool.go.set()  # the acquire now succeeds, for nobody
        assert await asyncio.to_thread(pool.released.wait, WAIT)

    asyncio.run(leave_while_acquiring())
    assert pool.in_use == 0
