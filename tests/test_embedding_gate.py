"""The embedding capacity gate on a fake clock: waits spend the deadline, 429s cool down."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from ragwright.chat.capacity import LocalCapacityPool
from ragwright.deadline import Deadline, deadline_scope
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import EmbeddingProviderError, FailureCategory
from ragwright.retry import RetryingEmbedder, RetryPolicy
from ragwright.testing import HASHING_PROFILE, HashingEmbedder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@dataclasses.dataclass
class Throttled:
    """An embedder that answers 429 with ``retry_after`` until ``times`` run out."""

    retry_after: float | None
    times: int = 1
    calls: int = 0
    profile = HASHING_PROFILE
    counts_tokens = True
    in_flight = 3

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [1 for _ in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.times:
            raise EmbeddingProviderError(
                "fake", FailureCategory.THROTTLED, "HTTP 429", retry_after=self.retry_after
            )
        return HashingEmbedder().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_a_full_pool_is_waited_for_then_the_call_runs() -> None:
    clock = Clock()
    pool = LocalCapacityPool(1, clock=clock)
    held = pool.try_acquire()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        pool.release(held)  # the other holder finishes during the first wait

    events: list[str] = []
    gate = EmbeddingCapacityGate(
        HashingEmbedder(), pool, poll=0.05, sleep=sleep, events=events.append
    )
    with deadline_scope(Deadline.after(1.0, clock)):
        assert len(gate.embed_documents(["a b"])) == 1
    assert events == ["gate:full"]
    assert clock.slept == [0.05]
    assert pool.in_use == 0  # the call's own lease went back


def test_a_cooling_pool_is_slept_out_within_the_deadline() -> None:
    clock = Clock()
    pool = LocalCapacityPool(2, clock=clock)
    pool.cool_down(1.5)
    inner = HashingEmbedder()
    gate = EmbeddingCapacityGate(inner, pool, sleep=clock.sleep)
    with deadline_scope(Deadline.after(2.0, clock)):
        gate.embed_documents(["a"])
    assert clock.slept == [pytest.approx(1.5)]
    assert inner.embedded_texts == ["a"]


def test_a_cooldown_longer_than_the_deadline_ends_the_call_before_any_request() -> None:
    clock = Clock()
    pool = LocalCapacityPool(2, clock=clock)
    pool.cool_down(5.0)
    inner = HashingEmbedder()
    gate = EmbeddingCapacityGate(inner, pool, sleep=clock.sleep)
    with (
        deadline_scope(Deadline.after(2.0, clock)),
        pytest.raises(EmbeddingProviderError) as caught,
    ):
        gate.embed_documents(["a"])
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert inner.calls == [] and clock.slept == []


@pytest.mark.parametrize(("retry_after", "cooldown"), [(2.0, 2.0), (None, 3.0), (600.0, 60.0)])
def test_a_throttled_attempt_cools_the_pool_down(
    retry_after: float | None, cooldown: float
) -> None:
    clock = Clock()
    pool = LocalCapacityPool(2, clock=clock)
    gate = EmbeddingCapacityGate(Throttled(retry_after), pool, cooldown=3.0, sleep=clock.sleep)
    with pytest.raises(EmbeddingProviderError):
        gate.embed_documents(["a"])
    assert pool.cooldown_remaining() == pytest.approx(cooldown)
    assert pool.in_use == 0


def test_retry_waits_out_the_429_and_the_gate_passes_in_flight_through() -> None:
    clock = Clock()
    pool = LocalCapacityPool(3, clock=clock)
    inner = Throttled(retry_after=1.0)
    embedder = RetryingEmbedder(
        EmbeddingCapacityGate(inner, pool, sleep=clock.sleep),
        policy=RetryPolicy(max_attempts=2),
        call_budget=5.0,
        sleep=clock.sleep,
    )
    with deadline_scope(Deadline.after(5.0, clock)):
        assert len(embedder.embed_documents(["a"])) == 1
    assert inner.calls == 2
    assert clock.slept == [1.0]  # the retry's wait covered the cooldown; no second wait
    assert embedder.in_flight == 3
