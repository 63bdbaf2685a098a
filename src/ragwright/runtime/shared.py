"""State processes share through Redis: the response cache and the capacity pools.

Without ``RAGWRIGHT_REDIS_URL`` both stay in-process. With it, Redis is optional even
when configured: while it does not answer, the cache is skipped and the pools run
in-process (one warning says so), and Redis is tried again after a while.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ragwright.application import Workload
from ragwright.chat.cache import MemoryCacheStore
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.protocols import CacheStore, CapacityPool
from ragwright.runtime.registry import Closable
from ragwright.settings import Settings

if TYPE_CHECKING:
    from ragwright.adapters.redis import RedisOutage

logger = logging.getLogger(__name__)

REDIS_RETRY_INTERVAL = 30.0
# What users see of a workload's capacity pools keeps the names from before "batch"
# meant only an embedding call's inputs: the keys of the status's ``model_capacity``
# (``batch/<provider>`` for answer jobs) and the Redis key prefixes.
POOL_NAMES: dict[Workload, str] = {"interactive": "interactive", "jobs": "batch"}
REDIS_POOL_PREFIXES: dict[Workload, str] = {"interactive": "chat", "jobs": "batch"}
"""Seconds a process skips Redis after it failed before trying it again."""


@dataclasses.dataclass(frozen=True)
class SharedState:
    """The response cache's store and one capacity pool per chat provider (by name).

    Each provider has a pool of its own (``chat`` for the primary, ``chat:<name>`` for
    each alternate, ``RAGWRIGHT_CHAT_CAPACITY`` leases each), so a throttled primary
    cools down its own pool and failover can still reach an alternate. ``describe()``
    on a pool gives its state for status and readiness views; ``close()`` closes the
    Redis client the state opened (if any).
    """

    store: CacheStore
    pools: Mapping[str, CapacityPool]
    workload: Workload = "interactive"
    client: Closable | None = None

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each provider's pool as ``describe()`` reports it, by ``workload/provider``
        (the workload as :data:`POOL_NAMES` shows it)."""
        shown = POOL_NAMES[self.workload]
        return {f"{shown}/{name}": dict(pool.describe()) for name, pool in self.pools.items()}

    def close(self) -> None:
        """Close the Redis client's connections (safe to call twice)."""
        if self.client is not None:
            self.client.close()


def open_shared_state(
    settings: Settings,
    names: Sequence[str],
    *,
    retry_interval: float = REDIS_RETRY_INTERVAL,
    workload: Workload = "interactive",
) -> SharedState:
    """Redis-backed cache and pools with ``RAGWRIGHT_REDIS_URL``, else in-process.

    ``workload`` picks the capacity pools: interactive answers use ``chat`` (and
    ``chat:<name>`` per alternate) of ``RAGWRIGHT_CHAT_CAPACITY`` leases; answer jobs
    (``jobs``) use ``batch`` (``batch:<name>``) of ``RAGWRIGHT_BATCH_CAPACITY``, so a
    backlog of jobs never takes the leases interactive answers need.

    Redis is optional even when configured: whenever it does not answer — at start or
    mid-run — the answer is still produced with the shared cache skipped (a miss) and an
    in-process capacity gate, one warning says so, and Redis is tried again after
    ``retry_interval`` seconds, so a long-running process uses it again once it is back.
    Meanwhile processes share neither capacity nor cached answers.
    """
    if not names:
        raise ValueError("names must list at least the primary provider")
    prefix = REDIS_POOL_PREFIXES[workload]
    limit = settings.chat.capacity if workload == "interactive" else settings.jobs.capacity
    if not settings.storage.redis_url:
        return SharedState(
            store=MemoryCacheStore(max_entries=settings.chat.cache_max_entries),
            pools={name: LocalCapacityPool(limit) for name in names},
            workload=workload,
        )
    # Imported here: a process without Redis configured (every command on the embedded
    # defaults) does not load the client library (0.15 s of each command's start).
    from ragwright.adapters.redis import (
        RedisCacheStore,
        RedisCapacityPool,
        ResilientCacheStore,
        ResilientCapacityPool,
        connect,
    )

    client = connect(settings.storage.redis_url)
    outage = redis_outage(settings.storage.redis_url, retry_interval)
    outage.check(client)
    pools: dict[str, CapacityPool] = {}
    for index, name in enumerate(names):
        pool = RedisCapacityPool(client, prefix if index == 0 else f"{prefix}:{name}", limit=limit)
        pools[name] = ResilientCapacityPool(pool, outage, fallback=LocalCapacityPool(limit))
    return SharedState(
        store=ResilientCacheStore(RedisCacheStore(client), outage),
        pools=pools,
        workload=workload,
        client=client,
    )


def redis_outage(url: str, retry_interval: float) -> RedisOutage:
    """The tracker that notices Redis is down and when to try it again (logs name the
    server without credentials)."""
    from ragwright.adapters.redis import RedisOutage

    return RedisOutage(without_credentials(url), retry_interval=retry_interval, log=logger)


def without_credentials(url: str) -> str:
    """``scheme://host:port`` of ``url`` (no user, password, path or query)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}:{parts.port}" if parts.port else f"{parts.scheme}://{host}"
