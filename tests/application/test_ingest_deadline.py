"""The run's deadline (``RAGWRIGHT_INGEST_DEADLINE``): an ingestion whose embedding provider
keeps failing transiently stops when the run's deadline leaves no room for the next retry,
not after every attempt its calls may make. The provider is the scripted OpenAI-compatible
embeddings server (``tests/scripted_openai.py``) behind the embedder ``open_embedder``
builds (retry, capacity gate, provider)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragwright.application import IngestRequest
from ragwright.errors import EmbeddingProviderError, FailureCategory
from ragwright.runtime import build_application
from ragwright.settings import load_settings
from tests.conftest import SAMPLES
from tests.scripted_openai import EmbeddingServer, scripted_embeddings

ATTEMPTS = 12
# Every request fails as transient, asking for a 0.5 s wait before the next attempt.
FAILING = [(503, {"Retry-After": "0.5"})] * 100


def ingest_samples(home: Path, server: EmbeddingServer, **settings: object) -> None:
    app = build_application(
        load_settings(
            home=home,
            embedding_provider="openai",
            embedding_profile_id="scripted-v1",
            embedding_model="scripted-embed",
            embedding_digest="sha256:" + "0" * 64,
            embedding_dimensions=64,
            openai_base_url=server.base_url,
            openai_api_key="k",
            remote_call_attempts=ATTEMPTS,
            remote_call_budget=60.0,
            embedding_in_flight=1,
            **settings,
        )
    )
    app.ingest(IngestRequest(sources=(SAMPLES,)))


def test_transient_failures_stop_the_run_at_its_deadline(tmp_path: Path) -> None:
    with (
        scripted_embeddings(failures=FAILING) as server,
        pytest.raises(EmbeddingProviderError) as caught,
    ):
        ingest_samples(tmp_path / "bounded", server, ingest_deadline=4.0)
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    # An attempt every 0.5 s once the run reaches its first call (reading, opening and
    # validating come first); then a wait does not fit what is left of the run's 4 s,
    # although the call's own 60 s budget and its 12 attempts would allow more.
    assert 1 <= len(server.requests) <= 8


def test_without_a_run_deadline_the_same_failures_spend_every_attempt(tmp_path: Path) -> None:
    with (
        scripted_embeddings(failures=FAILING) as server,
        pytest.raises(EmbeddingProviderError) as caught,
    ):
        ingest_samples(tmp_path / "unbounded", server)
    assert caught.value.category is FailureCategory.TRANSIENT
    assert len(server.requests) == ATTEMPTS
