"""Suites for the shared-state protocols: :class:`CacheStore` and :class:`CapacityPool`.

``CacheStoreConformance`` needs a ``store`` fixture and :meth:`elapse`, which makes
``seconds`` pass for that store (advance an injected clock, or sleep for a store on a
server's clock; set ``short_ttl`` small enough to keep that quick).
``CapacityPoolConformance`` needs :meth:`open_pool`; pools opened in one test must
share nothing with pools opened in another. Its cooldown tests sleep through short
cooldowns (a few tenths of a second), so they run on a real clock.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ragwright.chat.capacity import CapacityGate
from ragwright.chat.contract import ChatMessage, ChatRequest, Deadline
from ragwright.errors import CapacityCoolingDown, ChatError, FailureCategory
from ragwright.protocols import CacheStore, CapacityPool
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel, Stream

REQUEST = ChatRequest((ChatMessage("user", "Where is the manual?"),))


class CacheStoreConformance:
    """Inherit, override the ``store`` fixture and implement :meth:`elapse`."""

    short_ttl: float = 1.0

    @pytest.fixture
    def store(self) -> CacheStore:
        raise NotImplementedError("override the store fixture")

    def elapse(self, seconds: float) -> None:
        """Make ``seconds`` pass for the store under test."""
        raise NotImplementedError

    def test_a_key_never_set_is_missing(self, store: CacheStore) -> None:
        assert store.get("never-set") is None

    def test_get_after_set_returns_the_exact_bytes(self, store: CacheStore) -> None:
        value = bytes(range(256)) + "Zwölf Boxkämpfer".encode()
        store.set("k", value, 60)
        assert store.get("k") == value

    def test_set_overwrites_the_value(self, store: CacheStore) -> None:
        store.set("k", b"first", 60)
        store.set("k", b"second", 60)
        assert store.get("k") == b"second"

    def test_keys_are_independent(self, store: CacheStore) -> None:
        store.set("a", b"alpha", 60)
        store.set("b", b"beta", 60)
        assert (store.get("a"), store.get("b")) == (b"alpha", b"beta")

    def test_an_entry_expires_after_its_own_ttl(self, store: CacheStore) -> None:
        store.set("short", b"s", self.short_ttl)
        store.set("long", b"l", self.short_ttl * 50)
        assert store.get("short") == b"s"
        self.elapse(self.short_ttl * 1.5)
        assert store.get("short") is None
        assert store.get("long") == b"l"

    def test_overwriting_restarts_the_ttl(self, store: CacheStore) -> None:
        store.set("k", b"old", self.short_ttl)
        self.elapse(self.short_ttl * 0.6)
        store.set("k", b"new", self.short_ttl * 50)
        # Past the first entry's expiry: only the new value's ttl counts.
        self.elapse(self.short_ttl * 0.6)
        assert store.get("k") == b"new"

    @pytest.mark.parametrize("ttl", [0.0, -1.0])
    def test_a_ttl_that_is_not_positive_is_rejected(self, store: CacheStore, ttl: float) -> None:
        with pytest.raises(ValueError, match="ttl must be positive"):
            store.set("k", b"v", ttl)
        assert store.get("k") is None


class CapacityPoolConformance:
    """Inherit and implement :meth:`open_pool`."""

    def open_pool(self, limit: int) -> CapacityPool:
        """A fresh, empty pool of ``limit`` leases."""
        raise NotImplementedError

    def test_grants_at_most_limit_distinct_leases(self) -> None:
        pool = self.open_pool(3)
        assert pool.limit == 3
        leases = [pool.try_acquire() for _ in range(3)]
        assert None not in leases
        assert len(set(map(str, leases))) == 3
        assert pool.try_acquire() is None

    def test_release_frees_exactly_one_slot_and_is_idempotent(self) -> None:
        pool = self.open_pool(2)
        first, second = pool.try_acquire(), pool.try_acquire()
        assert first is not None and second is not None
        pool.release(first)
        pool.release(first)  # a second release must not free another slot
        assert pool.try_acquire() is not None
        assert pool.try_acquire() is None

    def test_concurrent_holders_never_exceed_the_limit(self) -> None:
        pool, limit = self.open_pool(3), 3
        holders = peak = 0
        lock = threading.Lock()

        def work() -> None:
            nonlocal holders, peak
            for _ in range(30):
                lease = pool.try_acquire()
                if lease is None:
                    continue
                with lock:
                    holders += 1
                    peak = max(peak, holders)
                time.sleep(0.001)
                with lock:
                    holders -= 1
                pool.release(lease)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 1 <= peak <= limit
        # Nothing leaked: every slot is free again.
        assert None not in [pool.try_acquire() for _ in range(limit)]

    def test_a_full_pool_refuses_at_once_without_calling_the_model(self) -> None:
        pool = self.open_pool(1)
        assert pool.try_acquire() is not None
        provider = ScriptedChatModel([Reply()])
        deadline = Deadline.after(30)
        with pytest.raises(ChatError) as caught:
            asyncio.run(CapacityGate(provider, pool).complete(REQUEST, deadline))
        assert caught.value.category is FailureCategory.CAPACITY
        assert provider.calls == 0
        # The pool does not queue: the refusal spent almost none of the 30 s deadline.
        assert deadline.remaining() > 25

    def test_the_gate_releases_when_the_attempt_fails(self) -> None:
        pool = self.open_pool(1)
        gate = CapacityGate(ScriptedChatModel([Fail(FailureCategory.TRANSIENT)]), pool)
        with pytest.raises(ChatError):
            asyncio.run(gate.complete(REQUEST, Deadline.after(5)))
        assert pool.try_acquire() is not None

    def test_the_gate_releases_when_a_stream_fails(self) -> None:
        pool = self.open_pool(1)
        gate = CapacityGate(ScriptedChatModel([Stream(("partial",), Fail())]), pool)

        async def consume() -> list[str]:
            return [u.text async for u in gate.stream(REQUEST, Deadline.after(5))]

        with pytest.raises(ChatError):
            asyncio.run(consume())
        assert pool.try_acquire() is not None

    def test_the_gate_releases_when_the_attempt_is_cancelled(self) -> None:
        pool = self.open_pool(1)
        gate = CapacityGate(ScriptedChatModel([Hang()]), pool)
        with pytest.raises(TimeoutError):
            asyncio.run(asyncio.wait_for(gate.complete(REQUEST, Deadline.after(5)), 0.05))
        assert pool.try_acquire() is not None

    def test_a_cooldown_refuses_every_lease_until_it_ends(self) -> None:
        pool = self.open_pool(2)
        pool.cool_down(0.3)
        with pytest.raises(CapacityCoolingDown) as caught:
            pool.try_acquire()
        assert 0.1 < caught.value.remaining <= 0.3
        assert 0.1 < pool.cooldown_remaining() <= 0.3
        time.sleep(0.35)
        assert pool.cooldown_remaining() == 0.0
        assert pool.try_acquire() is not None

    def test_a_cooldown_only_extends_never_shortens(self) -> None:
        pool = self.open_pool(1)
        pool.cool_down(5.0)
        pool.cool_down(0.1)  # a shorter cooldown later must not cut the first short
        assert 4.5 < pool.cooldown_remaining() <= 5.0
        pool.cool_down(8.0)
        assert 7.5 < pool.cooldown_remaining() <= 8.0

    def test_describe_reports_limit_leases_and_cooldown(self) -> None:
        pool = self.open_pool(2)
        lease = pool.try_acquire()
        status = pool.describe()
        assert (status["limit"], status["in_use"], status["cooldown_seconds"]) == (2, 1, 0.0)
        assert status["degraded"] is None and status["backend"] in ("redis", "local")
        pool.release(lease)
        pool.cool_down(5.0)
        status = pool.describe()
        assert status["in_use"] == 0 and 4.5 < status["cooldown_seconds"] <= 5.0

    def test_a_throttled_attempt_cools_the_pool_down_for_every_caller(self) -> None:
        pool = self.open_pool(2)
        throttled = ScriptedChatModel([Fail(FailureCategory.THROTTLED, retry_after=0.4)])
        with pytest.raises(ChatError) as first:
            asyncio.run(CapacityGate(throttled, pool).complete(REQUEST, Deadline.after(5)))
        assert first.value.category is FailureCategory.THROTTLED
        # Another caller on the same pool is refused without reaching its provider.
        other = ScriptedChatModel([Reply()])
        gate = CapacityGate(other, pool)
        with pytest.raises(ChatError) as refused:
            asyncio.run(gate.complete(REQUEST, Deadline.after(5)))
        assert refused.value.category is FailureCategory.THROTTLED
        assert refused.value.retry_after is not None and 0.2 < refused.value.retry_after <= 0.4
        assert other.calls == 0
        time.sleep(0.45)
        assert asyncio.run(gate.complete(REQUEST, Deadline.after(5))).text == "Draft reply."
        assert other.calls == 1

    def test_the_gate_cools_down_for_its_default_and_caps_a_long_retry_after(self) -> None:
        pool = self.open_pool(1)
        gate = CapacityGate(ScriptedChatModel([Fail(FailureCategory.THROTTLED)]), pool, cooldown=2)
        with pytest.raises(ChatError):
            asyncio.run(gate.complete(REQUEST, Deadline.after(5)))
        assert 1.5 < pool.cooldown_remaining() <= 2.0
        hour = ScriptedChatModel([Stream((), Fail(FailureCategory.THROTTLED, retry_after=3600))])
        capped = CapacityGate(hour, self.open_pool(1), max_cooldown=3.0, cooldown=1.0)

        async def consume() -> None:
            async for _ in capped.stream(REQUEST, Deadline.after(5)):
                pass

        with pytest.raises(ChatError):
            asyncio.run(consume())
        assert 2.5 < capped.pool.cooldown_remaining() <= 3.0

    def test_other_failures_do_not_cool_the_pool_down(self) -> None:
        pool = self.open_pool(1)
        categories = (FailureCategory.TRANSIENT, FailureCategory.TIMEOUT, FailureCategory.CAPACITY)
        gate = CapacityGate(ScriptedChatModel([Fail(c) for c in categories]), pool)
        for _ in categories:
            with pytest.raises(ChatError):
                asyncio.run(gate.complete(REQUEST, Deadline.after(5)))
        assert pool.cooldown_remaining() == 0.0
        assert pool.try_acquire() is not None
