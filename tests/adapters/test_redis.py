"""Against the Redis server on 127.0.0.1:6379 (``make test`` starts one if it is down)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from ragwright.adapters.redis import RedisCacheStore, RedisCapacityPool, connect
from ragwright.chat.cache import ResponseCache
from ragwright.chat.capacity import CapacityGate
from ragwright.chat.contract import ChatMessage, ChatRequest, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.testing.scripted import Reply, ScriptedChatModel

URL = os.environ.get("RAGWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    connection = connect(URL)
    try:
        connection.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {URL}; `make test` starts it")
    yield connection
    connection.close()


def test_cache_store_round_trip_and_expiry(client: redis.Redis) -> None:
    store = RedisCacheStore(client, prefix=f"test:{uuid.uuid4().hex}:")
    store.set("k", b"value", 0.2)
    assert store.get("k") == b"value"
    time.sleep(0.3)
    assert store.get("k") is None


def test_response_cache_is_shared_through_redis(client: redis.Redis) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    request = ChatRequest((ChatMessage("user", "manual?"),), scope="tenant:public")
    first = ResponseCache(
        ScriptedChatModel([Reply("Manual.")]), RedisCacheStore(client, prefix=prefix), ttl=60
    )
    asyncio.run(first.complete(request, Deadline.after(5)))
    # Another process's pipeline, same store: served from Redis, provider never called.
    provider = ScriptedChatModel([])
    second = ResponseCache(provider, RedisCacheStore(client, prefix=prefix), ttl=60)
    assert asyncio.run(second.complete(request, Deadline.after(5))).text == "Manual."
    assert provider.calls == 0


def test_capacity_is_shared_between_pools(client: redis.Redis) -> None:
    name = uuid.uuid4().hex
    a, b = RedisCapacityPool(client, name, limit=2), RedisCapacityPool(client, name, limit=2)
    first, second = a.try_acquire(), b.try_acquire()
    assert first is not None and second is not None
    assert a.try_acquire() is None and b.try_acquire() is None
    b.release(first)
    assert a.try_acquire() is not None


def test_gate_on_a_full_redis_pool_refuses_at_once(client: redis.Redis) -> None:
    pool = RedisCapacityPool(client, uuid.uuid4().hex, limit=1)
    held = pool.try_acquire()
    provider = ScriptedChatModel([Reply()])
    gate = CapacityGate(provider, pool)
    request = ChatRequest((ChatMessage("user", "x"),))
    with pytest.raises(ChatError) as caught:
        asyncio.run(gate.complete(request, Deadline.after(5)))
    assert caught.value.category is FailureCategory.CAPACITY and provider.calls == 0
    pool.release(held)
    assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "Draft reply."
    assert pool.in_use == 0


def test_a_crashed_holders_lease_expires(client: redis.Redis) -> None:
    name = uuid.uuid4().hex
    holder = (
        "import sys, time\n"
        "from ragwright.adapters.redis import RedisCapacityPool, connect\n"
        f"pool = RedisCapacityPool(connect({URL!r}), {name!r}, limit=1, lease_ttl=1.0)\n"
        "assert pool.try_acquire() is not None\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    process.send_signal(signal.SIGKILL)  # dies holding its lease, never releasing it
    process.wait()
    process.stdout.close()
    pool = RedisCapacityPool(client, name, limit=1, lease_ttl=1.0)
    assert pool.try_acquire() is None
    time.sleep(1.2)
    assert pool.try_acquire() is not None
