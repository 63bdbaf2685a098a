"""The CacheStore suite on the in-process store and on Redis; the in-process bounds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from ragwright.adapters.redis import RedisCacheStore
from ragwright.chat.cache import MemoryCacheStore
from ragwright.testing import CacheStoreConformance, ManualClock


class TestMemoryCacheStore(CacheStoreConformance):
    @pytest.fixture
    def store(self) -> MemoryCacheStore:
        self.clock = ManualClock()
        return MemoryCacheStore(self.clock)

    def elapse(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestRedisCacheStore(CacheStoreConformance):
    # Redis expires keys on its own clock, so time really has to pass.
    short_ttl = 0.3

    @pytest.fixture
    def store(self, redis_client: redis.Redis) -> Iterator[RedisCacheStore]:
        prefix = f"test:{uuid.uuid4().hex}:"
        yield RedisCacheStore(redis_client, prefix=prefix)
        stale = list(redis_client.scan_iter(match=prefix + "*"))
        if stale:
            redis_client.delete(*stale)

    def elapse(self, seconds: float) -> None:
        time.sleep(seconds)


def test_entries_beyond_max_entries_evict_the_least_recently_used() -> None:
    store = MemoryCacheStore(max_entries=3)
    for key in ("a", "b", "c"):
        store.set(key, key.encode(), 60)
    assert store.get("a") == b"a"  # "a" is now the most recently used; "b" the least
    store.set("d", b"d", 60)
    assert len(store) == 3
    assert store.get("b") is None
    assert [store.get(k) for k in ("a", "c", "d")] == [b"a", b"c", b"d"]


def test_expiry_follows_the_injected_clock() -> None:
    clock = ManualClock()
    store = MemoryCacheStore(clock, max_entries=8)
    store.set("k", b"v", 10)
    clock.advance(9.9)
    assert store.get("k") == b"v"
    clock.advance(0.1)
    assert store.get("k") is None
    assert len(store) == 0


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entries must be at least 1"):
        MemoryCacheStore(max_entries=0)
