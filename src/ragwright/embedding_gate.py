"""The capacity gate of remote embedding: a lease per attempt, waited for under the deadline.

:class:`EmbeddingCapacityGate` sits between :class:`ragwright.retry.RetryingEmbedder` and
a remote embedder, so each attempt takes a lease from a
:class:`~ragwright.protocols.CapacityPool` and a retry wait holds none. The pool's
``limit`` is the embedding ``in_flight`` setting: in-process it caps this process's
concurrent batches; shared through Redis (``adapters/redis.py``) it caps every ingestion
worker, on every machine, sending to the same provider.

Unlike the chat gate (``chat/capacity.py``), which refuses at once so an interactive
answer never queues, an ingestion run would rather wait its turn: when the pool is full
the gate polls it again every ``poll`` seconds, and while the pool cools down after a
429 it sleeps until the cooldown ends. Either wait spends the current deadline
(:func:`ragwright.deadline.current_deadline`, set by the retrying wrapper); a wait that
does not fit what is left ends the call as ``deadline_exhausted`` at once.

A throttled attempt (the provider answered 429) puts the pool in a cooldown of the
provider's ``retry_after``, else ``cooldown`` seconds, never more than
:data:`~ragwright.chat.capacity.MAX_COOLDOWN`, which every process sharing the pool
sees: they stop sending together instead of each spending an attempt on a provider
that already said no.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ragwright.chat.capacity import MAX_COOLDOWN
from ragwright.deadline import current_deadline
from ragwright.errors import CapacityCoolingDown, EmbeddingProviderError, FailureCategory
from ragwright.protocols import CapacityPool, Embedder
from ragwright.types import EmbeddingProfile

EventSink = Callable[[str], None]


def _ignore(_event: str) -> None:
    return None


class EmbeddingCapacityGate:
    """An :class:`Embedder` whose every call holds a lease of ``pool`` while it runs.

    Capabilities (``profile``, ``counts_tokens``, ``in_flight``) are the inner
    embedder's; token counting is local and takes no lease. Events: ``gate:full`` and
    ``gate:cooling`` before each wait, ``gate:cool-down`` when a 429 starts a cooldown.
    """

    def __init__(
        self,
        inner: Embedder,
        pool: CapacityPool,
        *,
        cooldown: float = 5.0,
        max_cooldown: float = MAX_COOLDOWN,
        poll: float = 0.02,
        sleep: Callable[[float], None] = time.sleep,
        events: EventSink | None = None,
    ) -> None:
        if not 0 < cooldown <= max_cooldown:
            raise ValueError(
                f"cooldown must be above 0 and at most max_cooldown ({max_cooldown}), "
                f"got {cooldown}"
            )
        if poll <= 0:
            raise ValueError(f"poll must be positive, got {poll}")
        self.inner = inner
        self.profile: EmbeddingProfile = inner.profile
        self.counts_tokens: bool = inner.counts_tokens
        self.in_flight: int = getattr(inner, "in_flight", 1)
        self.pool = pool
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.poll = poll
        self._sleep = sleep
        self._events = events or _ignore

    def _lease(self) -> object:
        deadline = current_deadline()
        while True:
            try:
                lease = self.pool.try_acquire()
            except CapacityCoolingDown as cooling:
                wait, why = cooling.remaining, "cooling"
            else:
                if lease is not None:
                    return lease
                wait, why = self.poll, "full"
            if deadline is not None and wait >= deadline.remaining():
                raise EmbeddingProviderError(
                    self.profile.provider,
                    FailureCategory.DEADLINE_EXHAUSTED,
                    f"a {wait:.3f}s wait for embedding capacity ({why}) does not fit the "
                    "remaining budget",
                )
            self._events(f"gate:{why}")
            self._sleep(wait)

    def _call(self, call: Callable[[], list[list[float]]]) -> list[list[float]]:
        lease = self._lease()
        try:
            return call()
        except EmbeddingProviderError as error:
            if error.category is FailureCategory.THROTTLED:
                wanted = self.cooldown if error.retry_after is None else error.retry_after
                seconds = min(wanted, self.max_cooldown)
                if seconds > 0:
                    self.pool.cool_down(seconds)
                    self._events("gate:cool-down")
            raise
        finally:
            self.pool.release(lease)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._call(lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._call(lambda: [self.inner.embed_query(text)])[0]
