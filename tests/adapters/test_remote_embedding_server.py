"""The OpenAI-compatible embedder over real HTTP against the scripted embeddings server
(``tests/scripted_openai.py``): batches really in flight together, 429 + Retry-After
cooling down a pool other processes share (real Redis), transient failures retried
under the deadline, and the deadline running out."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from ragwright.adapters.embedders.remote import OpenAIEmbedder
from ragwright.adapters.redis import RedisCapacityPool, connect
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import ArtifactMismatch, EmbeddingProviderError, FailureCategory
from ragwright.protocols import CapacityPool, Embedder
from ragwright.retry import RetryingEmbedder, RetryPolicy
from ragwright.runtime import open_embedder, open_embedding_pool
from ragwright.settings import Settings
from ragwright.testing import HASHING_PROFILE
from tests.cli import ragwright
from tests.closing import close_opened_embedders  # noqa: F401 (autouse)
from tests.closing import opened as opened_embedder
from tests.conftest import SAMPLES
from tests.scripted_openai import EmbeddingServer, scripted_embeddings

REDIS_URL = os.environ.get("RAGWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
PROFILE = dataclasses.replace(
    HASHING_PROFILE, profile_id="scripted-v1", provider="openai", model="scripted-embed"
)
BATCHES = [[f"batch {b} text {i}" for i in range(4)] for b in range(8)]


def gated(
    server: EmbeddingServer,
    pool: CapacityPool,
    *,
    attempts: int = 3,
    budget: float = 10.0,
    in_flight: int = 4,
    events: list[str] | None = None,
) -> RetryingEmbedder:
    """What ``runtime.open_embedder`` builds: retry → capacity gate → provider."""
    provider = OpenAIEmbedder(PROFILE, api_key="k", base_url=server.base_url, in_flight=in_flight)
    opened_embedder(provider)
    sink = events.append if events is not None else None
    return RetryingEmbedder(
        EmbeddingCapacityGate(provider, pool, events=sink),
        policy=RetryPolicy(attempts, base_delay=0.01),
        call_budget=budget,
        events=sink,
    )


def embed_concurrently(embedder: Embedder, workers: int) -> list[list[list[float]]]:
    """What ingestion does with ``in_flight``: that many ``embed_documents`` outstanding."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(embedder.embed_documents, BATCHES))


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = connect(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}; `make test` starts it")
    yield client
    client.close()


def test_in_flight_batches_reach_the_server_together() -> None:
    with scripted_embeddings(delay=0.3) as server:
        embedder = gated(server, LocalCapacityPool(4), in_flight=4)
        results = embed_concurrently(embedder, workers=embedder.in_flight)
    assert server.max_concurrent == 4
    assert [len(r) for r in results] == [4] * 8
    assert len(server.requests) == 8


def test_the_pool_caps_requests_in_flight_below_the_callers_threads() -> None:
    with scripted_embeddings(delay=0.2) as server:
        embedder = gated(server, LocalCapacityPool(2))
        embed_concurrently(embedder, workers=8)
    assert server.max_concurrent == 2
    assert len(server.requests) == 8


def test_a_429_cools_down_the_pool_every_process_shares(redis_client: redis.Redis) -> None:
    name = f"test-embedding-{uuid.uuid4().hex}"
    other_client = connect(REDIS_URL)  # another process's connection to the same pool
    try:
        with scripted_embeddings(failures=[(429, {"Retry-After": "1"})]) as server:
            first = gated(server, RedisCapacityPool(redis_client, name, limit=2), attempts=1)
            with pytest.raises(EmbeddingProviderError) as caught:
                first.embed_documents(["a"])
            assert caught.value.category is FailureCategory.THROTTLED
            other_pool = RedisCapacityPool(other_client, name, limit=2)
            assert 0.5 < other_pool.cooldown_remaining() <= 1.0
            events: list[str] = []
            second = gated(server, other_pool, events=events)
            assert len(second.embed_documents(["b"])) == 1
        # The other process waited the cooldown out instead of sending into it.
        assert "gate:cooling" in events
        assert len(server.requests) == 2
    finally:
        other_client.close()


def test_throttled_then_retried_within_the_deadline_in_process() -> None:
    events: list[str] = []
    with scripted_embeddings(failures=[(429, {"Retry-After": "0.3"})]) as server:
        pool = LocalCapacityPool(2)
        embedder = gated(server, pool, attempts=2, events=events)
        assert len(embedder.embed_documents(["a", "b"])) == 2
    assert events[:2] == ["gate:cool-down", "retry:wait"]
    assert len(server.requests) == 2


def test_transient_failures_are_retried_under_the_deadline() -> None:
    with scripted_embeddings(failures=[(503, {}), (502, {})]) as server:
        embedder = gated(server, LocalCapacityPool(2), attempts=3)
        assert len(embedder.embed_documents(["a"])) == 1
    assert len(server.requests) == 3


def test_a_retry_after_beyond_the_deadline_ends_the_call_as_deadline_exhausted() -> None:
    events: list[str] = []
    with scripted_embeddings(failures=[(429, {"Retry-After": "5"})]) as server:
        embedder = gated(server, LocalCapacityPool(2), attempts=3, budget=1.0, events=events)
        with pytest.raises(EmbeddingProviderError) as caught:
            embedder.embed_documents(["a"])
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    # Ended at once: no 5 s sleep into a certain failure, no second attempt.
    assert events == ["gate:cool-down", "retry:no-budget"]
    assert len(server.requests) == 1


def test_waiting_for_a_full_shared_pool_spends_the_deadline(redis_client: redis.Redis) -> None:
    pool = RedisCapacityPool(redis_client, f"test-embedding-{uuid.uuid4().hex}", limit=1)
    held = pool.try_acquire()  # another worker holds the only lease
    try:
        with scripted_embeddings() as server:
            embedder = gated(server, pool, budget=0.5)
            with pytest.raises(EmbeddingProviderError) as caught:
                embedder.embed_documents(["a"])
        assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
        assert server.requests == []
    finally:
        pool.release(held)


def test_over_long_input_is_refused_not_truncated_and_not_retried() -> None:
    with scripted_embeddings() as server:
        embedder = gated(server, LocalCapacityPool(2))
        with pytest.raises(EmbeddingProviderError) as caught:
            embedder.embed_documents(["word " * 600])
    assert caught.value.category is FailureCategory.INVALID_INPUT
    assert len(server.requests) == 1


def test_a_model_the_server_does_not_list_is_refused_at_start() -> None:
    with scripted_embeddings(model="another-embed") as server:
        with pytest.raises(ArtifactMismatch) as caught:
            OpenAIEmbedder(PROFILE, api_key="k", base_url=server.base_url, verify_listed_model=True)
        assert (caught.value.expected, caught.value.actual) == ("scripted-embed", "another-embed")
        OpenAIEmbedder(
            dataclasses.replace(PROFILE, model="another-embed"),
            api_key="k",
            base_url=server.base_url,
            verify_listed_model=True,
        ).close()


def remote_settings(server: EmbeddingServer, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "embedding_provider": "openai",
        "embedding_profile_id": "scripted-v1",
        "embedding_model": "scripted-embed",
        "embedding_digest": "sha256:" + "0" * 64,
        "embedding_dimensions": 64,
        "openai_base_url": server.base_url,
        "openai_api_key": "k",
    }
    return Settings(**{**values, **overrides})  # type: ignore[arg-type]


def test_open_embedder_keeps_the_setting_in_flight_through_the_gate() -> None:
    with scripted_embeddings(delay=0.2) as server:
        embedder = open_embedder(remote_settings(server, embedding_in_flight=3))
        assert embedder.in_flight == 3  # type: ignore[attr-defined]
        embed_concurrently(embedder, workers=8)
    assert server.max_concurrent == 3


def test_the_embedding_pool_is_shared_through_redis_when_configured() -> None:
    with scripted_embeddings() as server:
        shared = open_embedding_pool(
            remote_settings(server, embedding_in_flight=5, redis_url=REDIS_URL)
        )
        local = open_embedding_pool(remote_settings(server, embedding_in_flight=5))
    assert (shared.describe()["backend"], shared.limit) == ("redis", 5)
    assert (local.describe()["backend"], local.limit) == ("local", 5)


@pytest.mark.slow
def test_cli_ingest_keeps_the_setting_in_flight_at_the_server(tmp_path: Path) -> None:
    """``ragwright ingest`` (a subprocess) against the scripted server: the pipeline's
    concurrent path, the gate and the adapter together hold 3 requests open at once."""
    with scripted_embeddings(delay=0.3) as server:
        env = server.env(RAGWRIGHT_EMBEDDING_IN_FLIGHT="3", RAGWRIGHT_BATCH_SIZE="4")
        report = json.loads(
            ragwright("ingest", str(SAMPLES), "--json", home=tmp_path, check=True, **env).stdout
        )
    assert report["embedded"] == report["chunks"] == report["verified"] > 12
    assert len(server.requests) == -(-report["chunks"] // 4)
    assert server.max_concurrent == 3
