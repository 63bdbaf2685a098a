from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragwright.adapters.embedders.e5 import E5_SMALL_PROFILE, E5Embedder, bundled_e5_files
from ragwright.core.points import format_document_input, format_query_input
from ragwright.errors import ArtifactMismatch

QUESTION = "How do I stop a background worker during shutdown?"
PASSAGE = "When the host shuts down, stop the worker and drain its queue."


@pytest.fixture(scope="module")
def embedder() -> E5Embedder:
    return E5Embedder(batch_size=2)


def test_the_profile_formats_carry_the_e5_prefixes() -> None:
    assert format_query_input(E5_SMALL_PROFILE, "q") == "query: q"
    assert format_document_input(E5_SMALL_PROFILE, "T", "x") == "passage: T\n\nx"


def test_a_query_input_is_embedded_as_a_query_not_as_a_passage(embedder: E5Embedder) -> None:
    as_query, as_passage = embedder.embed_documents([f"query: {QUESTION}", f"passage: {QUESTION}"])
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    alone = embedder.embed_query(f"query: {QUESTION}")
    assert np.allclose(as_query, alone, atol=1e-5)


def test_an_unprefixed_input_reads_as_a_passage(embedder: E5Embedder) -> None:
    bare, prefixed = embedder.embed_documents([PASSAGE, f"passage: {PASSAGE}"])
    assert np.allclose(bare, prefixed, atol=1e-6)
    assert embedder.count_tokens([PASSAGE]) == embedder.count_tokens([f"passage: {PASSAGE}"])


def test_a_question_is_closer_to_its_answer_than_to_an_unrelated_passage(
    embedder: E5Embedder,
) -> None:
    query = embedder.embed_query(f"query: {QUESTION}")
    near, far = embedder.embed_documents(
        [f"passage: {PASSAGE}", "passage: Refunds are paid back to the original payment method."]
    )
    assert np.dot(query, near) > np.dot(query, far) + 0.05


def test_a_changed_model_file_is_refused(tmp_path: Path) -> None:
    model, _engine = bundled_e5_files()
    altered = tmp_path / model.name
    shutil.copyfile(model, altered)
    with altered.open("r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ArtifactMismatch):
        E5Embedder(model_path=altered)


def test_a_changed_engine_is_refused(tmp_path: Path) -> None:
    _model, engine = bundled_e5_files()
    altered = tmp_path / engine.name
    altered.write_bytes(engine.read_bytes() + b"\0")
    with pytest.raises(ArtifactMismatch):
        E5Embedder(engine_path=altered)


def test_loading_the_engine_leaves_the_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    E5Embedder(threads=1)
    assert "OMP_NUM_THREADS" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "active"
