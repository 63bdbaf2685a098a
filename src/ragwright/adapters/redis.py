"""Redis backends for state shared by every process and replica.

* :class:`RedisCacheStore` — the response cache's store (``SET key value PX ttl``).
* :class:`RedisCapacityPool` — the model-capacity pool. Leases live in one sorted set
  per pool, scored by their expiry on the Redis server's clock. Acquiring is one Lua
  script (atomic): drop expired leases, then add one only if fewer than ``limit``
  remain. A process that dies holding a lease cannot leak capacity: its lease expires
  after ``lease_ttl`` seconds. Size ``lease_ttl`` above the longest attempt you allow
  (the attempt's deadline).
"""

from __future__ import annotations

import uuid

import redis

_ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
"""


def connect(url: str) -> redis.Redis:
    """A client for ``redis://host:port/db`` (connecting gives up after 2 s, so a
    server that is down is noticed at once rather than at the first answer)."""
    return redis.Redis.from_url(url, socket_connect_timeout=2.0)


def reachable(client: redis.Redis) -> str | None:
    """``None`` when the server answers ``PING``, else why not (one line)."""
    try:
        client.ping()
    except redis.RedisError as error:
        return str(error) or type(error).__name__
    return None


class RedisCacheStore:
    """Cache entries as Redis strings with a time to live."""

    def __init__(self, client: redis.Redis, *, prefix: str = "") -> None:
        self._client = client
        self._prefix = prefix

    def get(self, key: str) -> bytes | None:
        value = self._client.get(self._prefix + key)
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes, ttl: float) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        self._client.set(self._prefix + key, value, px=max(1, int(ttl * 1000)))


class RedisCapacityPool:
    """At most ``limit`` leases across every process using the same ``name``."""

    def __init__(
        self, client: redis.Redis, name: str, *, limit: int, lease_ttl: float = 120.0
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._client = client
        self.key = f"ragwright:capacity:{name}"
        self.limit = limit
        self.lease_ttl_ms = int(lease_ttl * 1000)
        self._acquire = client.register_script(_ACQUIRE)

    @property
    def in_use(self) -> int:
        """Leases currently held (expired ones not yet swept may be counted)."""
        return int(self._client.zcard(self.key))

    def try_acquire(self) -> object | None:
        token = uuid.uuid4().hex
        granted = self._acquire(keys=[self.key], args=[self.limit, self.lease_ttl_ms, token])
        return token if granted == 1 else None

    def release(self, lease: object) -> None:
        self._client.zrem(self.key, str(lease))
