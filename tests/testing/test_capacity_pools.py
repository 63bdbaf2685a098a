"""The CapacityPool suite on the in-process pool and on the Redis pool."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from ragwright.adapters.redis import RedisCapacityPool, RedisOutage, ResilientCapacityPool
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.testing import CapacityPoolConformance


class TestLocalCapacityPool(CapacityPoolConformance):
    def open_pool(self, limit: int) -> LocalCapacityPool:
        return LocalCapacityPool(limit)


class TestRedisCapacityPool(CapacityPoolConformance):
    @pytest.fixture(autouse=True)
    def _client(self, redis_client: redis.Redis) -> Iterator[None]:
        self.client = redis_client
        self.keys: list[str] = []
        yield
        if self.keys:
            redis_client.delete(*self.keys)

    def open_pool(self, limit: int) -> RedisCapacityPool:
        pool = RedisCapacityPool(self.client, f"test-{uuid.uuid4().hex}", limit=limit)
        self.keys.append(pool.key)
        return pool


class TestResilientCapacityPool(TestRedisCapacityPool):
    """The wrapper keeps the contract while Redis answers (its outage tests are in
    tests/adapters/test_redis.py)."""

    def open_pool(self, limit: int) -> ResilientCapacityPool:  # type: ignore[override]
        shared = super().open_pool(limit)
        return ResilientCapacityPool(
            shared, RedisOutage("redis://test"), fallback=LocalCapacityPool(limit)
        )


def test_a_limit_below_one_is_rejected(redis_client: redis.Redis) -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        LocalCapacityPool(0)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        RedisCapacityPool(redis_client, "unused", limit=0)
