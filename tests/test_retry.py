"""The shared retry policy, and embedding/rerank calls retried under the request's deadline."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from ragwright.adapters.embedders.remote import OpenAIEmbedder
from ragwright.adapters.rerankers import HttpReranker
from ragwright.deadline import Deadline, current_deadline, deadline_bound, deadline_scope
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import (
    ChatError,
    EmbeddingError,
    EmbeddingProviderError,
    FailureCategory,
    ProviderError,
    RerankError,
)
from ragwright.retry import RetryingEmbedder, RetryingReranker, RetryPolicy
from ragwright.runtime import embedding_profile, open_embedder, open_index, open_retriever
from ragwright.settings import Settings
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder

F = FailureCategory


class Clock:
    """A manual monotonic clock; ``sleep`` advances it and records each wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def deadline(self, seconds: float) -> Deadline:
        return Deadline.after(seconds, clock=self)


class FlakyEmbedder:
    """Fails with ``failures`` (one per call, in order), then embeds; records each call."""

    def __init__(self, *failures: EmbeddingProviderError) -> None:
        self.failures = list(failures)
        self.inner = HashingEmbedder()
        self.profile = dataclasses.replace(HASHING_PROFILE, provider="flaky")
        self.counts_tokens = True
        self.attempts: list[Deadline | None] = []

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.attempts.append(current_deadline())
        if self.failures:
            raise self.failures.pop(0)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class FlakyReranker:
    """Fails with ``failures`` (one per call), then scores by text length."""

    def __init__(self, *failures: RerankError) -> None:
        self.failures = list(failures)
        self.attempts = 0

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return [float(len(t)) for t in texts]


def fail(category: FailureCategory = F.TRANSIENT, retry_after: float | None = None):  # type: ignore[no-untyped-def]
    return EmbeddingProviderError("flaky", category, "scripted", retry_after=retry_after)


def wrap(
    inner: FlakyEmbedder, clock: Clock, *, attempts: int = 3, budget: float = 10.0
) -> tuple[RetryingEmbedder, list[str]]:
    events: list[str] = []
    policy = RetryPolicy(attempts, base_delay=0.1, max_delay=1.0, jitter=lambda: 0.5)
    wrapped = RetryingEmbedder(
        inner, policy=policy, call_budget=budget, sleep=clock.sleep, events=events.append
    )
    return wrapped, events


def test_transient_failures_are_retried_with_full_jitter_backoff_then_succeed() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(), fail(F.TIMEOUT))
    embedder, events = wrap(inner, clock)
    with deadline_scope(clock.deadline(5.0)):
        vectors = embedder.embed_documents(["drain queued work"])
    assert vectors == HashingEmbedder().embed_documents(["drain queued work"])
    assert len(inner.attempts) == 3
    # jitter 0.5 of min(max_delay, base_delay * 2 ** (attempt - 1)): 0.5 * 0.1, 0.5 * 0.2
    assert clock.waits == pytest.approx([0.05, 0.1])
    assert events == ["retry:wait", "retry:wait"]


def test_the_backoff_ceiling_is_max_delay() -> None:
    policy = RetryPolicy(10, base_delay=0.1, max_delay=0.3, jitter=lambda: 1.0)
    assert [policy.backoff(n, fail()) for n in range(1, 5)] == pytest.approx([0.1, 0.2, 0.3, 0.3])


def test_retry_after_is_honoured() -> None:
    clock = Clock()
    embedder, _ = wrap(FlakyEmbedder(fail(F.THROTTLED, retry_after=0.7)), clock)
    with deadline_scope(clock.deadline(5.0)):
        embedder.embed_query("q")
    assert clock.waits == [0.7]


def test_attempts_are_capped_and_the_last_error_propagates() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(), fail(), fail(F.THROTTLED), fail())
    embedder, _ = wrap(inner, clock, attempts=3)
    with pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_query("q")
    assert caught.value.category is F.THROTTLED
    assert len(inner.attempts) == 3 and len(clock.waits) == 2


@pytest.mark.parametrize(
    "category", [F.INVALID_INPUT, F.INVALID_CONFIGURATION, F.INVALID_OUTPUT, F.DEADLINE_EXHAUSTED]
)
def test_a_final_category_is_not_retried(category: FailureCategory) -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(category))
    embedder, events = wrap(inner, clock)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed_query("q")
    assert isinstance(caught.value, ProviderError) and caught.value.category is category
    assert len(inner.attempts) == 1 and clock.waits == [] and events == []


def test_no_retry_when_the_deadline_cannot_fit_the_wait() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(F.THROTTLED, retry_after=2.0))
    embedder, events = wrap(inner, clock)
    with deadline_scope(clock.deadline(1.0)), pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_query("q")
    assert caught.value.category is F.DEADLINE_EXHAUSTED
    assert isinstance(caught.value.__cause__, EmbeddingProviderError)
    assert caught.value.__cause__.category is F.THROTTLED
    assert len(inner.attempts) == 1 and clock.waits == [] and events == ["retry:no-budget"]


def test_waits_spend_the_one_deadline() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(F.THROTTLED, retry_after=0.6), fail(F.THROTTLED, retry_after=0.6))
    embedder, events = wrap(inner, clock, attempts=5)
    with deadline_scope(clock.deadline(1.0)), pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_query("q")
    # 0.6 fits into 1.0; after it only 0.4 is left, so the second 0.6 wait is not started.
    assert caught.value.category is F.DEADLINE_EXHAUSTED
    assert clock.waits == [0.6] and len(inner.attempts) == 2
    assert events == ["retry:wait", "retry:no-budget"]


def test_an_expired_deadline_makes_no_attempt() -> None:
    clock = Clock()
    inner = FlakyEmbedder()
    embedder, _ = wrap(inner, clock)
    with deadline_scope(clock.deadline(0.0)), pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_query("q")
    assert caught.value.category is F.DEADLINE_EXHAUSTED and inner.attempts == []


def test_the_callers_deadline_reaches_the_inner_embedder() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail())
    embedder, _ = wrap(inner, clock)
    with deadline_scope(clock.deadline(3.0)) as deadline:
        embedder.embed_query("q")
    assert inner.attempts == [deadline, deadline]  # the same budget for both attempts


def test_without_a_deadline_each_call_gets_the_call_budget() -> None:
    inner = FlakyEmbedder()
    embedder, _ = wrap(inner, Clock(), budget=7.0)
    embedder.embed_query("a")
    embedder.embed_query("b")
    first, second = inner.attempts
    assert first is not None and second is not None and first is not second
    assert 6.0 < first.remaining() <= 7.0
    assert current_deadline() is None  # the fallback budget does not leak out


def test_a_bound_cuts_the_call_budget_so_no_wait_outlives_it() -> None:
    clock = Clock()
    inner = FlakyEmbedder(fail(retry_after=0.6), fail(retry_after=0.6))
    embedder, events = wrap(inner, clock, attempts=5, budget=60.0)
    with deadline_bound(clock.deadline(1.0)), pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed_query("q")
    # 0.6 fits into the bound's 1.0; the second 0.6 does not fit the 0.4 left, although
    # the call's own 60 s budget would have held both.
    assert caught.value.category is F.DEADLINE_EXHAUSTED
    assert clock.waits == [0.6] and len(inner.attempts) == 2
    assert events == ["retry:wait", "retry:no-budget"]


def test_under_a_later_bound_each_call_keeps_its_own_budget() -> None:
    inner = FlakyEmbedder()
    embedder, _ = wrap(inner, Clock(), budget=7.0)
    with deadline_bound(Deadline.after(3600.0)):
        embedder.embed_query("a")
    (attempt,) = inner.attempts
    assert attempt is not None and 6.0 < attempt.remaining() <= 7.0


def test_the_wrapper_keeps_the_inner_capabilities() -> None:
    inner = FlakyEmbedder()
    embedder, _ = wrap(inner, Clock())
    assert embedder.profile is inner.profile and embedder.counts_tokens
    assert embedder.count_tokens(["two words"]) == [2]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"base_delay": -1.0}, "base_delay"),
        ({"max_delay": -1.0}, "max_delay"),
    ],
)
def test_policy_rejects_bad_bounds(options: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**options)  # type: ignore[arg-type]


def test_reranker_calls_are_retried_under_the_deadline() -> None:
    clock = Clock()
    inner = FlakyReranker(RerankError("rerank", F.TRANSIENT), RerankError("rerank", F.TIMEOUT))
    events: list[str] = []
    reranker = RetryingReranker(
        inner,
        policy=RetryPolicy(3, base_delay=0.1, jitter=lambda: 1.0),
        call_budget=5.0,
        sleep=clock.sleep,
        events=events.append,
    )
    assert reranker.rerank("q", ["a", "bbb"]) == [1.0, 3.0]
    assert inner.attempts == 3 and clock.waits == pytest.approx([0.1, 0.2])


def test_reranker_gives_up_as_a_rerank_error_when_the_wait_does_not_fit() -> None:
    clock = Clock()
    inner = FlakyReranker(RerankError("rerank", F.THROTTLED, retry_after=9.0))
    reranker = RetryingReranker(inner, policy=RetryPolicy(3), call_budget=5.0, sleep=clock.sleep)
    with deadline_scope(clock.deadline(1.0)), pytest.raises(RerankError) as caught:
        reranker.rerank("q", ["a"])
    assert caught.value.category is F.DEADLINE_EXHAUSTED and inner.attempts == 1
    assert clock.waits == []  # the 9 s wait was never started


# --- through the real adapters over a fake transport -----------------------------------


def test_http_reranker_retries_a_503_and_each_request_gets_the_remaining_deadline() -> None:
    clock = Clock()
    timeouts: list[float] = []
    answers = [
        httpx.Response(503),
        httpx.Response(200, json={"results": [{"index": 0, "relevance_score": 0.9}]}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        return answers.pop(0)

    reranker = RetryingReranker(
        HttpReranker("http://rerank.test", transport=httpx.MockTransport(handler)),
        policy=RetryPolicy(3, base_delay=0.5, jitter=lambda: 1.0),
        call_budget=5.0,
        sleep=clock.sleep,
    )
    with deadline_scope(clock.deadline(4.0)):
        assert reranker.rerank("q", ["a"]) == [0.9]
    assert clock.waits == [0.5]
    assert timeouts == pytest.approx([4.0, 3.5])  # the wait was spent from the same budget


def test_openai_embedder_through_the_sdk_retries_a_429_once() -> None:
    clock = Clock()
    bodies: list[dict[str, object]] = []
    answers = [
        httpx.Response(429, headers={"retry-after-ms": "300"}, json={"error": {}}),
        httpx.Response(200, json={"data": [{"index": 0, "embedding": [1, 0, 0]}], "model": "m"}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return answers.pop(0)

    profile = dataclasses.replace(HASHING_PROFILE, provider="openai", model="m", dimensions=3)
    inner = OpenAIEmbedder(
        profile, api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    # The budget runs on the real clock and the first call imports the SDK (1.4 s quiet,
    # over 5 s on a loaded machine: the wait then no longer fitted): it is not what is
    # tested here, so it is ample.
    embedder = RetryingEmbedder(inner, policy=RetryPolicy(3), call_budget=120.0, sleep=clock.sleep)
    assert embedder.embed_query("q") == [1.0, 0.0, 0.0]
    assert len(bodies) == 2 and clock.waits == [0.3]


# --- wiring -------------------------------------------------------------------------------


def remote_settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        "embedding_provider": "openai",
        "embedding_profile_id": "oai-v1",
        "embedding_model": "text-embedding-3-small",
        "embedding_digest": "none",
        "embedding_dimensions": 3,
        "openai_api_key": "k",
        "remote_call_attempts": 4,
        "remote_call_budget": 9.0,
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


def test_remote_embedders_are_opened_with_the_configured_retry() -> None:
    embedder = open_embedder(remote_settings())
    assert isinstance(embedder, RetryingEmbedder)
    # retry → capacity gate → provider: each attempt takes a lease, a retry wait holds none
    assert isinstance(embedder.inner, EmbeddingCapacityGate)
    assert isinstance(embedder.inner.inner, OpenAIEmbedder)
    assert embedder.policy.max_attempts == 4 and embedder.call_budget == 9.0


def test_the_http_reranker_is_opened_with_the_configured_retry(tmp_path: Path) -> None:
    settings = remote_settings(reranker="http", reranker_url="http://rerank.test", home=tmp_path)
    index = open_index(settings, embedding_profile(settings))
    try:
        reranker = open_retriever(settings, index).reranker
    finally:
        index.close()
    assert isinstance(reranker, RetryingReranker) and isinstance(reranker.inner, HttpReranker)
    assert reranker.policy.max_attempts == 4 and reranker.call_budget == 9.0


def test_chat_errors_share_the_provider_base() -> None:
    assert issubclass(ChatError, ProviderError)
    assert issubclass(EmbeddingProviderError, ProviderError)
    assert issubclass(EmbeddingProviderError, EmbeddingError)
    assert issubclass(RerankError, ProviderError)
