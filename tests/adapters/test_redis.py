"""Against the Redis server on 127.0.0.1:6379 (``make test`` starts one if it is down)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
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
from ragwright.errors import CapacityCoolingDown, ChatError, FailureCategory
from ragwright.runtime import build_chat_pipeline, open_shared_state
from ragwright.settings import load_settings
from ragwright.testing.fakes import WordCounter
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel
from tests.processes import read_line

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
    assert read_line(process) == "held"
    process.send_signal(signal.SIGKILL)  # dies holding its lease, never releasing it
    process.wait(30)
    assert process.stdout is not None
    process.stdout.close()
    pool = RedisCapacityPool(client, name, limit=1, lease_ttl=1.0)
    assert pool.try_acquire() is None
    time.sleep(1.2)
    assert pool.try_acquire() is not None


def test_a_throttled_attempt_cools_down_the_pool_for_another_process(
    client: redis.Redis,
) -> None:
    name = f"test-{uuid.uuid4().hex}"
    here = RedisCapacityPool(client, name, limit=2)
    # Another process: its own connection, its own pool object, the same key.
    other_client = connect(URL)
    there = RedisCapacityPool(other_client, name, limit=2)
    throttled = ScriptedChatModel([Fail(FailureCategory.THROTTLED, retry_after=0.6)])
    request = ChatRequest((ChatMessage("user", "x"),))
    with pytest.raises(ChatError):
        asyncio.run(CapacityGate(throttled, here).complete(request, Deadline.after(5)))
    assert 0 < client.pttl(here.cooldown_key) <= 600
    provider = ScriptedChatModel([Reply()])
    gate = CapacityGate(provider, there)
    with pytest.raises(ChatError) as refused:
        asyncio.run(gate.complete(request, Deadline.after(5)))
    assert refused.value.category is FailureCategory.THROTTLED
    assert refused.value.retry_after is not None and 0.3 < refused.value.retry_after <= 0.6
    assert provider.calls == 0 and there.in_use == 0
    time.sleep(refused.value.retry_after + 0.05)
    assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "Draft reply."
    other_client.close()
    client.delete(here.key, here.cooldown_key)


def test_two_processes_share_one_lease(client: redis.Redis) -> None:
    name = f"test-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    opened = (
        "from ragwright.adapters.redis import RedisCapacityPool, connect\n"
        f"pool = RedisCapacityPool(connect({URL!r}), {name!r}, limit=1)\n"
    )
    holder = opened + (
        "import sys\n"
        "lease = pool.try_acquire()\n"
        "print('held' if lease is not None else 'refused', flush=True)\n"
        "sys.stdin.readline()\n"
        "pool.release(lease)\n"
        "print('released', flush=True)\n"
    )
    asker = opened + "print('granted' if pool.try_acquire() is not None else 'refused')\n"

    def ask() -> str:
        result = subprocess.run(
            [sys.executable, "-c", asker],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return result.stdout.strip()

    a = subprocess.Popen(
        [sys.executable, "-c", holder],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert a.stdout is not None and a.stdin is not None
        assert read_line(a) == "held"
        assert ask() == "refused"  # B, another process, while A holds the only lease
        a.stdin.write("release\n")
        a.stdin.flush()
        assert read_line(a) == "released"
        assert ask() == "granted"
    finally:
        a.kill()
        a.wait(timeout=5)
        for stream in (a.stdin, a.stdout):
            if stream is not None:
                stream.close()
        client.delete(f"ragwright:capacity:{name}")


class ThrowawayRedis:
    """A redis-server of this test's own on a free loopback port, to kill and restart."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            for _ in range(50):
                try:
                    probe.ping()
                    return
                except redis.ConnectionError:
                    time.sleep(0.1)
            pytest.fail(f"redis-server did not start on port {self.port}")
        finally:
            probe.close()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=5)
            self.process = None


@pytest.fixture
def throwaway() -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis()
    server.start()
    yield server
    server.kill()


def redis_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "Redis at" in r.getMessage()
    ]


def test_redis_dying_mid_run_degrades_to_in_process_and_recovers(
    throwaway: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(redis_url=throwaway.url, chat_capacity=1)
    shared = open_shared_state(settings, ["primary"], retry_interval=0.2)
    pool = shared.pools["primary"]
    request = ChatRequest((ChatMessage("user", "x"),))
    provider = ScriptedChatModel([Reply("one"), Reply("two"), Reply("three"), Reply("four")])
    gate = CapacityGate(provider, pool)
    assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "one"
    assert pool.describe()["backend"] == "redis"
    throwaway.kill()
    with caplog.at_level(logging.WARNING):
        assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "two"
        time.sleep(0.25)  # past the retry interval: Redis is tried again, still down
        assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "three"
        status = pool.describe()
        # The in-process pool of the same limit gates meanwhile.
        held = pool.try_acquire()
        assert held is not None and pool.try_acquire() is None
        pool.release(held)
    assert status["backend"] == "local" and status["limit"] == 1
    assert status["degraded"] is not None and "111" in status["degraded"]
    warnings = redis_warnings(caplog)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"warning: Redis at redis://127.0.0.1:{throwaway.port} ")
    throwaway.start()
    time.sleep(0.25)
    assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "four"
    assert pool.describe() == {
        "backend": "redis",
        "limit": 1,
        "in_use": 0,
        "cooldown_seconds": 0.0,
        "degraded": None,
    }
    lease = pool.try_acquire()
    direct = redis.Redis(port=throwaway.port)
    assert direct.zcard("ragwright:capacity:chat") == 1  # the lease is in Redis again
    pool.release(lease)
    assert direct.zcard("ragwright:capacity:chat") == 0
    direct.close()
    assert len(redis_warnings(caplog)) == 1


def test_a_cooldown_set_while_redis_was_down_reaches_redis_when_it_is_back(
    throwaway: ThrowawayRedis,
) -> None:
    settings = load_settings(redis_url=throwaway.url)
    pool = open_shared_state(settings, ["primary"], retry_interval=0.2).pools["primary"]
    throwaway.kill()
    pool.cool_down(5.0)
    assert pool.describe()["backend"] == "local" and 4.5 < pool.cooldown_remaining() <= 5.0
    throwaway.start()
    time.sleep(0.25)
    with pytest.raises(CapacityCoolingDown):
        pool.try_acquire()
    direct = redis.Redis(port=throwaway.port)
    assert 4000 < direct.pttl("ragwright:capacity:chat:cooldown") <= 5000
    direct.close()


def test_the_response_cache_answers_when_redis_dies_mid_run(
    throwaway: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(redis_url=throwaway.url)
    events: list[str] = []
    provider = ScriptedChatModel([Reply("Manual."), Reply("Manual again.")])
    shared = open_shared_state(settings, [provider.name], retry_interval=0.2)
    pipeline = build_chat_pipeline(
        settings, [provider], counter=WordCounter(), events=events.append, shared=shared
    )
    request = ChatRequest((ChatMessage("user", "manual?"),), scope="tenant:public")
    assert asyncio.run(pipeline.complete(request, Deadline.after(5))).text == "Manual."
    assert asyncio.run(pipeline.complete(request, Deadline.after(5))).text == "Manual."
    assert provider.calls == 1 and events.count("cache:hit") == 1
    throwaway.kill()
    events.clear()
    with caplog.at_level(logging.WARNING):
        shared.store.set("elsewhere", b"v", 60)  # a store that fails is skipped, not raised
        time.sleep(0.25)  # past the retry interval, so the answer's lookup tries Redis too
        answer = asyncio.run(pipeline.complete(request, Deadline.after(5)))
    assert answer.text == "Manual again." and provider.calls == 2
    assert "cache:miss" in events and "call:ok" in events
    assert len(redis_warnings(caplog)) == 1


def test_redis_down_at_start_is_used_once_it_answers(
    throwaway: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    throwaway.kill()
    settings = load_settings(redis_url=throwaway.url)
    with caplog.at_level(logging.WARNING):
        shared = open_shared_state(settings, ["primary"], retry_interval=0.2)
        pool = shared.pools["primary"]
        status = pool.describe()
        gate = CapacityGate(ScriptedChatModel([Reply("one")]), pool)
        request = ChatRequest((ChatMessage("user", "x"),))
        assert asyncio.run(gate.complete(request, Deadline.after(5))).text == "one"
        shared.store.set("k", b"v", 60)
        assert shared.store.get("k") is None  # skipped, not raised
    assert status["backend"] == "local" and status["degraded"] is not None
    assert len(redis_warnings(caplog)) == 1
    throwaway.start()
    time.sleep(0.25)
    assert pool.describe()["backend"] == "redis"
    shared.store.set("k", b"v", 60)
    assert shared.store.get("k") == b"v"
