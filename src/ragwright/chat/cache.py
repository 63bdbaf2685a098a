"""Scoped response cache for buffered calls.

The key is a hash of the full request identity — every message, the options (response
format and JSON schema included), the inner model's name, the prompt version — and the
request's tenant/data **scope**, which is mandatory: a request without a scope is passed
through uncached (``cache:bypass``). Only completed, accepted responses are stored:
``finish_reason == "stop"``, non-empty text, the cache's own ``accept`` check and the
request's ``accept`` hook (the answer use case passes its answer-contract check there,
so an answer it would reject is never served to the next caller; ``cache:reject``). The
hooks are not part of the key. A hit returns a fresh response object with its full
provenance — provider and fallback flag included — so an alternate's answer is never
reported as the primary's. An operation whose deadline is already spent is never
answered from the cache. Streaming bypasses the cache.

A store that waits on a server (``blocking = True``: Redis) is called on an I/O thread
(:func:`ragwright.threads.off_loop`), so a hung server never stalls the event loop; an
in-process store is called directly. A store's own failure propagates from here: this
layer cannot tell an outage from a bug. A store that may go away (Redis) is wrapped
where it is built so an outage reads as a miss and a skipped store
(``adapters/redis.py``, ``ResilientCacheStore``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict

from cachetools import TLRUCache

from ragwright.chat.contract import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    Deadline,
    Usage,
)
from ragwright.chat.probes import EventSink
from ragwright.deadline import Clock
from ragwright.errors import ChatError, FailureCategory
from ragwright.protocols import CacheStore
from ragwright.threads import off_loop


class MemoryCacheStore:
    """An in-process store bounded in size and time, on an injected clock.

    Holds at most ``max_entries`` entries; past that the least recently used one is
    evicted (cachetools' ``TLRUCache``), so a busy process cannot grow without bound.
    Each entry expires ``ttl`` seconds after it was set.
    """

    def __init__(self, clock: Clock = time.monotonic, *, max_entries: int = 1024) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        # The value carries its own ttl so each entry can expire on its own schedule.
        self._entries: TLRUCache[str, tuple[float, bytes]] = TLRUCache(
            maxsize=max_entries, ttu=_expires_at, timer=clock
        )

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def set(self, key: str, value: bytes, ttl: float) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        self._entries[key] = (ttl, value)


def _expires_at(_key: str, entry: tuple[float, bytes], now: float) -> float:
    return now + entry[0]


def cache_key(request: ChatRequest, model: str) -> str:
    """Hash of everything that decides the answer, scope included."""
    identity = {
        "model": model,
        "prompt_version": request.prompt_version,
        "scope": request.scope,
        "messages": [[m.role, m.content] for m in request.messages],
        "options": asdict(request.options),
    }
    canonical = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "ragwright:chat:" + hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    """Caches completed, validated buffered responses per scope."""

    def __init__(
        self,
        inner: ChatModel,
        store: CacheStore,
        *,
        ttl: float,
        events: EventSink | None = None,
        accept: Callable[[ChatResponse], bool] | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        self.inner = inner
        self.name = inner.name
        self.store = store
        self.ttl = ttl
        self._events = events or (lambda _event: None)
        self._accept = accept or (lambda _response: True)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        if deadline.expired:
            raise ChatError(self.name, FailureCategory.DEADLINE_EXHAUSTED, "before cache lookup")
        if request.scope is None:
            self._events("cache:bypass")
            return await self.inner.complete(request, deadline)
        key = cache_key(request, self.inner.name)
        stored = await off_loop(self.store, self.store.get, key)
        if stored is not None:
            self._events("cache:hit")
            return _decode(stored)
        self._events("cache:miss")
        response = await self.inner.complete(request, deadline)
        if response.finish_reason != "stop" or not response.text.strip():
            return response
        if not self._accept(response) or (request.accept and not request.accept(response)):
            self._events("cache:reject")
            return response
        await off_loop(self.store, self.store.set, key, _encode(response), self.ttl)
        self._events("cache:store")
        return response

    def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        return self.inner.stream(request, deadline)


def _encode(response: ChatResponse) -> bytes:
    return json.dumps(asdict(response)).encode()


def _decode(data: bytes) -> ChatResponse:
    raw = json.loads(data)
    usage = raw.get("usage")
    return ChatResponse(
        text=raw["text"],
        finish_reason=raw["finish_reason"],
        model=raw["model"],
        usage=Usage(**usage) if usage else None,
        provider=raw.get("provider", ""),
        fallback=bool(raw.get("fallback", False)),
    )
