"""The OpenAI-compatible embedder against a real llama.cpp server (``tests/llama_embeddings.py``).

The server runs the project's shipped chat GGUF (Qwen2.5-Coder-0.5B-Instruct, mean
pooled): the only GGUF the project ships. These tests exercise the remote path — real
HTTP, the profile contract, refusals, several batches in flight — not retrieval quality;
that model is not a retrieval-quality embedder.

Digest of a remotely served GGUF: the server reports none, so the profile records the
file's SHA-256 (``sha256:<hex>``, what ``sha256sum`` prints) as its ``artifact_digest``.
ragwright cannot read the server's file; the digest binds the index instead: an index
built under one digest refuses a profile naming another (``ContractMismatch`` on
``embedding_profile_digest``;
``test_cli_ingest_through_the_llama_server_then_a_digest_mismatch_is_refused``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ragwright.adapters.chatmodels.local import GGUF_SHA256, assemble_model
from ragwright.adapters.embedders.remote import OpenAIEmbedder
from ragwright.chat.capacity import LocalCapacityPool
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import (
    ArtifactMismatch,
    DimensionMismatch,
    EmbeddingProviderError,
    FailureCategory,
)
from ragwright.retry import RetryingEmbedder, RetryPolicy
from ragwright.testing import HASHING_PROFILE
from tests.cli import ragwright
from tests.closing import close_opened_embedders  # noqa: F401 (autouse)
from tests.closing import opened as opened_embedder
from tests.conftest import SAMPLES
from tests.llama_embeddings import (
    DIMENSIONS,
    MODEL_ALIAS,
    LlamaEmbeddingServer,
    llama_embedding_server,
)

DIGEST = f"sha256:{GGUF_SHA256}"
PROFILE = dataclasses.replace(
    HASHING_PROFILE,
    profile_id="qwen-meanpool-test-v1",
    provider="openai",
    model=MODEL_ALIAS,
    artifact_digest=DIGEST,
    dimensions=DIMENSIONS,
    document_format="{title}\n\n{text}",
    max_input_tokens=512,
)
TEXTS = [
    "Drain the worker queue before shutting a worker down.",
    "Refunds are issued within 14 days of a request.",
    "Rotate the TLS certificate before it expires.",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaEmbeddingServer]:
    model = assemble_model(tmp_path_factory.mktemp("models"))
    with llama_embedding_server(model, parallel=2) as running:
        yield running


def embedder(server: LlamaEmbeddingServer, **options: object) -> OpenAIEmbedder:
    profile = dataclasses.replace(PROFILE, **options)  # type: ignore[arg-type]
    opened = OpenAIEmbedder(
        profile, api_key="unused", base_url=server.base_url, verify_listed_model=True, in_flight=2
    )
    return opened_embedder(opened)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


def test_the_server_returns_one_vector_of_the_profile_size_per_text(
    server: LlamaEmbeddingServer,
) -> None:
    vectors = embedder(server).embed_documents(TEXTS)
    assert [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert all(math.isclose(math.hypot(*v), 1.0, rel_tol=1e-3) for v in vectors)
    assert cosine(vectors[0], vectors[1]) < 0.999  # different texts, different vectors


def test_a_profile_with_other_dimensions_is_refused(server: LlamaEmbeddingServer) -> None:
    with pytest.raises(DimensionMismatch) as caught:
        embedder(server, dimensions=384).embed_documents(TEXTS[:1])
    assert (caught.value.expected, caught.value.actual) == (384, DIMENSIONS)


def test_a_profile_naming_another_model_is_refused_at_start(server: LlamaEmbeddingServer) -> None:
    with pytest.raises(ArtifactMismatch) as caught:
        embedder(server, model="nomic-embed-text-v1.5")
    assert (caught.value.expected, caught.value.actual) == ("nomic-embed-text-v1.5", MODEL_ALIAS)


def test_over_long_input_is_refused_not_truncated(server: LlamaEmbeddingServer) -> None:
    events: list[str] = []
    gated = RetryingEmbedder(
        EmbeddingCapacityGate(embedder(server), LocalCapacityPool(2)),
        policy=RetryPolicy(3),
        call_budget=60.0,
        events=events.append,
    )
    too_long = "word " * (server.slot_tokens + 50)
    with pytest.raises(EmbeddingProviderError) as caught:
        gated.embed_documents([TEXTS[0], too_long])
    assert caught.value.category is FailureCategory.INVALID_INPUT
    assert events == []  # refused once, not retried


def test_batches_in_flight_together_get_their_own_vectors(server: LlamaEmbeddingServer) -> None:
    remote = embedder(server)
    batches = [[text] for text in TEXTS] * 2
    serial = [remote.embed_documents(batch) for batch in batches[:3]]
    with ThreadPoolExecutor(max_workers=remote.in_flight) as pool:
        together = list(pool.map(remote.embed_documents, batches))
    for got, expected in zip(together, serial * 2, strict=True):
        assert cosine(got[0], expected[0]) > 0.999


def test_texts_of_different_lengths_in_one_request_get_the_vectors_they_get_alone(
    server: LlamaEmbeddingServer,
) -> None:
    # One request's inputs are decoded together; each must be pooled over all its tokens.
    remote = embedder(server)
    texts = [TEXTS[1], " ".join([TEXTS[0]] * 6)]  # about 12 and 70 tokens
    alone = [remote.embed_documents([text])[0] for text in texts]
    together = remote.embed_documents(texts)
    for got, expected in zip(together, alone, strict=True):
        assert cosine(got, expected) > 0.999


def remote_env(server: LlamaEmbeddingServer, digest: str = DIGEST) -> dict[str, str]:
    return {
        "RAGWRIGHT_EMBEDDING_PROVIDER": "openai",
        "RAGWRIGHT_EMBEDDING_PROFILE_ID": PROFILE.profile_id,
        "RAGWRIGHT_EMBEDDING_MODEL": MODEL_ALIAS,
        "RAGWRIGHT_EMBEDDING_DIGEST": digest,
        "RAGWRIGHT_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
        "RAGWRIGHT_EMBEDDING_DOCUMENT_FORMAT": "{title}\n\n{text}",
        "RAGWRIGHT_EMBEDDING_MAX_INPUT_TOKENS": str(server.slot_tokens),
        "RAGWRIGHT_EMBEDDING_VERIFY_MODEL": "true",
        "RAGWRIGHT_EMBEDDING_IN_FLIGHT": "2",
        "RAGWRIGHT_OPENAI_BASE_URL": server.base_url,
        "RAGWRIGHT_OPENAI_API_KEY": "unused",
    }


def test_cli_ingest_through_the_llama_server_then_a_digest_mismatch_is_refused(
    server: LlamaEmbeddingServer, tmp_path: Path
) -> None:
    env = remote_env(server)
    report = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path, check=True, **env).stdout
    )
    assert report["embedded"] == report["chunks"] == report["verified"] > 0
    found = json.loads(
        ragwright(
            "search", "how do I drain a worker queue", "--json", home=tmp_path, check=True, **env
        ).stdout
    )
    assert found  # the query went through the same server and found points
    other = remote_env(server, digest="sha256:" + "0" * 64)
    refused = ragwright("ingest", str(SAMPLES), "--json", home=tmp_path, **other)
    assert refused.returncode != 0
    assert "mismatch on embedding_profile_digest" in refused.stderr
