"""Redis backends for state shared by every process and replica.

* :class:`RedisCacheStore` — the response cache's store (``SET key value PX ttl``).
* :class:`RedisCapacityPool` — the model-capacity pool. Leases live in one sorted set
  per pool, scored by their expiry on the Redis server's clock. Acquiring is one Lua
  script (atomic): refuse while the pool's cooldown key lives, drop expired leases,
  then add one only if fewer than ``limit`` remain. A process that dies holding a lease
  cannot leak capacity: its lease expires after ``lease_ttl`` seconds. Size
  ``lease_ttl`` above the longest attempt you allow (the attempt's deadline). The
  throttle cooldown is one key, ``ragwright:capacity:<name>:cooldown``, whose expiry
  is the cooldown's end; setting it is a second script that only ever extends it.
* :class:`ResilientCacheStore` and :class:`ResilientCapacityPool` — the two above,
  kept from failing an answer when Redis goes away mid-run. One :class:`RedisOutage`
  per process decides when Redis counts as down (warning once per outage) and when
  to try it again, so a recovered server is used again without a restart.

Every call here blocks its thread for up to :data:`TIMEOUT` seconds; each class says so
(``blocking = True``), and async callers (the response cache, the capacity gate, the
service's status) make these calls on I/O threads (:mod:`ragwright.threads`), never on
the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass

import redis

from ragwright.deadline import Clock
from ragwright.errors import CapacityCoolingDown
from ragwright.protocols import CacheStore, CapacityPool, CapacityStatus

logger = logging.getLogger(__name__)

# Returns 1 (granted), 0 (full) or minus the cooldown's milliseconds left.
_ACQUIRE = """
local cooling = redis.call('PTTL', KEYS[2])
if cooling > 0 then
  return -cooling
end
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

# Sets the cooldown to ARGV[1] ms unless more than that is left; returns the ms left.
_COOL_DOWN = """
local wanted = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left < wanted then
  redis.call('SET', KEYS[1], '1', 'PX', wanted)
  return wanted
end
return left
"""


# Seconds connecting, and each reply, may take before a call fails (``redis.TimeoutError``).
TIMEOUT = 2.0


def connect(url: str) -> redis.Redis:
    """A client for ``redis://host:port/db`` (connecting and each reply give up after
    :data:`TIMEOUT` seconds, so a server that is down or hung is noticed at once rather
    than stalling an answer)."""
    return redis.Redis.from_url(url, socket_connect_timeout=TIMEOUT, socket_timeout=TIMEOUT)


def _reason(error: redis.RedisError) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class RedisCacheStore:
    """Cache entries as Redis strings with a time to live."""

    blocking = True  # async callers use an I/O thread (ragwright.threads.off_loop)

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

    blocking = True  # async callers use an I/O thread (ragwright.threads.off_loop)

    def __init__(
        self, client: redis.Redis, name: str, *, limit: int, lease_ttl: float = 120.0
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._client = client
        self.key = f"ragwright:capacity:{name}"
        self.cooldown_key = f"{self.key}:cooldown"
        self.limit = limit
        self.lease_ttl_ms = int(lease_ttl * 1000)
        self._acquire = client.register_script(_ACQUIRE)
        self._cool_down = client.register_script(_COOL_DOWN)

    @property
    def in_use(self) -> int:
        """Leases currently held (expired ones not yet swept may be counted)."""
        return int(self._client.zcard(self.key))

    def try_acquire(self) -> object | None:
        token = uuid.uuid4().hex
        granted = int(
            self._acquire(
                keys=[self.key, self.cooldown_key], args=[self.limit, self.lease_ttl_ms, token]
            )
        )
        if granted < 0:
            raise CapacityCoolingDown(-granted / 1000)
        return token if granted == 1 else None

    def release(self, lease: object) -> None:
        self._client.zrem(self.key, str(lease))

    def cool_down(self, seconds: float) -> None:
        if seconds > 0:
            self._cool_down(keys=[self.cooldown_key], args=[max(1, int(seconds * 1000))])

    def cooldown_remaining(self) -> float:
        return max(0, int(self._client.pttl(self.cooldown_key))) / 1000

    def describe(self) -> CapacityStatus:
        """The pool's state; raises :class:`redis.RedisError` when Redis is down (the
        :class:`ResilientCapacityPool` around it reports that instead)."""
        return {
            "backend": "redis",
            "limit": self.limit,
            "in_use": self.in_use,
            "cooldown_seconds": self.cooldown_remaining(),
            "degraded": None,
        }


class RedisOutage:
    """Whether this process treats the shared Redis as down, and when to try it again.

    The first failure of an outage logs one warning naming the server (without
    credentials) and the reason; later failures of the same outage log nothing. While
    down, callers skip Redis until ``retry_interval`` seconds have passed since the
    last failure, then try it once more: success ends the outage, failure restarts the
    wait. One instance shared by the cache store and the capacity pool makes the
    process warn once and skip Redis everywhere at once.
    """

    def __init__(
        self,
        where: str,
        *,
        retry_interval: float = 30.0,
        log: logging.Logger = logger,
        clock: Clock = time.monotonic,
    ) -> None:
        if retry_interval <= 0:
            raise ValueError(f"retry_interval must be positive, got {retry_interval}")
        self.where = where
        self.retry_interval = retry_interval
        self._log = log
        self._clock = clock
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._retry_at = 0.0

    @property
    def reason(self) -> str | None:
        """Why Redis is treated as down, or ``None`` while it is in use."""
        return self._reason

    def check(self, client: redis.Redis) -> None:
        """``PING`` now: a failure starts an outage (its one warning), an answer ends one."""
        try:
            client.ping()
        except redis.RedisError as error:
            self.failed(error)
        else:
            self.succeeded()

    def worth_trying(self) -> bool:
        """Redis is up, or down long enough that it is time to try again."""
        with self._lock:
            return self._reason is None or self._clock() >= self._retry_at

    def failed(self, error: redis.RedisError) -> None:
        with self._lock:
            first = self._reason is None
            self._reason = _reason(error)
            self._retry_at = self._clock() + self.retry_interval
        if first:
            self._log.warning(
                "warning: Redis at %s is unreachable (%s); skipping the shared response "
                "cache and using an in-process capacity gate, retrying Redis every %g s",
                self.where,
                self._reason,
                self.retry_interval,
            )

    def succeeded(self) -> None:
        """Record that Redis answered, ending any outage."""
        with self._lock:
            self._reason = None


class ResilientCacheStore:
    """A :class:`RedisCacheStore` whose Redis failures are misses, never errors.

    While ``outage`` says Redis is down, ``get`` misses and ``set`` is skipped without
    a round trip; the answer is produced as if the entry had expired.
    """

    blocking = True

    def __init__(self, store: RedisCacheStore, outage: RedisOutage) -> None:
        self.store: CacheStore = store
        self.outage = outage

    def get(self, key: str) -> bytes | None:
        if not self.outage.worth_trying():
            return None
        try:
            value = self.store.get(key)
        except redis.RedisError as error:
            self.outage.failed(error)
            return None
        self.outage.succeeded()
        return value

    def set(self, key: str, value: bytes, ttl: float) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        if not self.outage.worth_trying():
            return
        try:
            self.store.set(key, value, ttl)
        except redis.RedisError as error:
            self.outage.failed(error)
            return
        self.outage.succeeded()


@dataclass(frozen=True, slots=True)
class _Lease:
    """A lease and the pool it came from, so it goes back to that pool."""

    shared: bool
    token: object


class ResilientCapacityPool:
    """A :class:`RedisCapacityPool` that falls back to ``fallback`` (an in-process pool
    of the same limit) while Redis is down, and returns to Redis once it answers again.

    Leases remember where they came from: one taken in-process is released
    in-process; one taken from Redis is released to Redis (or, if Redis is gone by
    then, left to expire after the pool's ``lease_ttl``). A cooldown set while Redis
    is down lives in-process and is carried to Redis when it answers again. Leases
    other processes hold in Redis are not counted in-process: during an outage each
    process allows up to ``limit`` on its own.
    """

    blocking = True

    def __init__(
        self, pool: RedisCapacityPool, outage: RedisOutage, *, fallback: CapacityPool
    ) -> None:
        if fallback.limit != pool.limit:
            raise ValueError(
                f"fallback limit must equal the pool's ({pool.limit}), got {fallback.limit}"
            )
        self.shared = pool
        self.local = fallback
        self.limit = pool.limit
        self.outage = outage
        self._apart = False  # this pool used its fallback since it last reached Redis

    def _use_shared(self) -> bool:
        """Whether to go to Redis now; on the way back after an outage, first carry
        over a cooldown this process set meanwhile, so no lease slips through it."""
        if not self.outage.worth_trying():
            self._apart = True
            return False
        if self._apart:
            left = self.local.cooldown_remaining()
            try:
                if left > 0:
                    self.shared.cool_down(left)
            except redis.RedisError as error:
                self.outage.failed(error)
                return False
            self._apart = False
        return True

    def _failed(self, error: redis.RedisError) -> None:
        self.outage.failed(error)
        self._apart = True

    def try_acquire(self) -> object | None:
        if self._use_shared():
            try:
                token = self.shared.try_acquire()
            except CapacityCoolingDown:
                self.outage.succeeded()  # Redis answered: it refused for the cooldown
                raise
            except redis.RedisError as error:
                self._failed(error)
            else:
                self.outage.succeeded()
                return None if token is None else _Lease(True, token)
        token = self.local.try_acquire()
        return None if token is None else _Lease(False, token)

    def release(self, lease: object) -> None:
        if not isinstance(lease, _Lease):
            return
        if not lease.shared:
            self.local.release(lease.token)
        elif self.outage.worth_trying():  # else it expires in Redis after lease_ttl
            try:
                self.shared.release(lease.token)
            except redis.RedisError as error:
                self._failed(error)

    def cool_down(self, seconds: float) -> None:
        self.local.cool_down(seconds)  # kept for an outage, and carried over after one
        if self._use_shared():
            try:
                self.shared.cool_down(seconds)
            except redis.RedisError as error:
                self._failed(error)
            else:
                self.outage.succeeded()

    def cooldown_remaining(self) -> float:
        if self._use_shared():
            try:
                left = self.shared.cooldown_remaining()
            except redis.RedisError as error:
                self._failed(error)
            else:
                self.outage.succeeded()
                return left
        return self.local.cooldown_remaining()

    def describe(self) -> CapacityStatus:
        if self._use_shared():
            try:
                status = self.shared.describe()
            except redis.RedisError as error:
                self._failed(error)
            else:
                self.outage.succeeded()
                return status
        return {**self.local.describe(), "degraded": self.outage.reason}
