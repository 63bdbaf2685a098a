from __future__ import annotations

import contextvars
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder, bundled_model_files
from ragwright.errors import ArtifactMismatch, InputTooLong
from ragwright.protocols import BULK_EMBEDDING


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder(batch_size=4)


def test_vectors_are_unit_length_with_profile_dimensions(embedder: OnnxEmbedder) -> None:
    vectors = np.array(
        embedder.embed_documents(["Drain the queue before shutdown.", "Rotate certificates."])
    )
    assert vectors.shape == (2, MINILM_PROFILE.dimensions)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_related_texts_are_closer_than_unrelated(embedder: OnnxEmbedder) -> None:
    query, near, far = embedder.embed_documents(
        [
            "How do I stop a background worker during shutdown?",
            "When the host shuts down, stop the worker and drain its queue.",
            "Refunds are paid back to the original payment method.",
        ]
    )
    assert np.dot(query, near) > np.dot(query, far) + 0.2


def test_padding_does_not_change_a_vector(embedder: OnnxEmbedder) -> None:
    short = "Bound the channel."
    alone = np.array(embedder.embed_documents([short])[0])
    long_text = " ".join(["The queue must stay bounded while producers wait for capacity."] * 12)
    batched = np.array(embedder.embed_documents([long_text, short])[1])
    assert np.allclose(alone, batched, atol=1e-5)


def test_order_is_preserved_across_length_sorted_batches(embedder: OnnxEmbedder) -> None:
    texts = [("word " * n).strip() for n in (50, 3, 20, 1, 9, 33, 2)]
    together = np.array(embedder.embed_documents(texts))
    one_by_one = np.array([embedder.embed_documents([t])[0] for t in texts])
    assert np.allclose(together, one_by_one, atol=1e-5)


class _RecordingOnnxEmbedder(OnnxEmbedder):
    """Records the (rows, padded width) of every model run."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.runs: list[tuple[int, int]] = []

    def _run(self, encodings: Sequence[Any], *, bulk: bool) -> list[list[float]]:
        self.runs.append((len(encodings), max(len(e.ids) for e in encodings)))
        return super()._run(encodings, bulk=bulk)


def test_a_model_run_holds_at_most_max_batch_tokens_padded_tokens(
    embedder: OnnxEmbedder,
) -> None:
    # Attention memory grows with rows x width², so long inputs run in fewer rows.
    texts = [("word " * n).strip() for n in (5, 120, 7, 60, 118, 3, 61, 119, 6, 59)]
    budgeted = _RecordingOnnxEmbedder(batch_size=8, max_batch_tokens=256)
    vectors = np.array(budgeted.embed_documents(texts))
    # Widths are words + [CLS] + [SEP], sorted: 5 7 8 9 | 61 62 63 | 120 121 | 122.
    assert budgeted.runs == [(4, 9), (3, 63), (2, 121), (1, 122)]
    assert np.allclose(vectors, np.array(embedder.embed_documents(texts)), atol=1e-5)


def test_input_over_256_tokens_is_rejected_not_truncated(embedder: OnnxEmbedder) -> None:
    text = "token " * 300
    assert embedder.count_tokens([text]) == [302]  # [CLS] + 300 + [SEP]
    with pytest.raises(InputTooLong) as caught:
        embedder.embed_documents(["fine", text])
    assert (caught.value.tokens, caught.value.limit) == (302, 256)


def test_tokenizer_no_longer_truncates_to_128(embedder: OnnxEmbedder) -> None:
    assert embedder.count_tokens(["word " * 200]) == [202]


def test_a_changed_model_file_is_refused(tmp_path: Path) -> None:
    model, tokenizer = bundled_model_files()
    copy = tmp_path / "model.onnx"
    shutil.copyfile(model, copy)
    with copy.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ArtifactMismatch) as caught:
        OnnxEmbedder(model_path=copy, tokenizer_path=tokenizer)
    assert caught.value.path == str(copy)


def test_a_missing_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArtifactMismatch) as caught:
        OnnxEmbedder(tokenizer_path=tmp_path / "tokenizer.json")
    assert caught.value.actual == "missing"


@pytest.mark.shared_data
def test_word_cached_counts_equal_full_encoding_on_real_text(embedder: OnnxEmbedder) -> None:
    import json
    import random

    from tests.conftest import shared_data

    rows = shared_data("scifact", "corpus.jsonl").read_text("utf-8").splitlines()
    texts = [
        f"{r['title']}\n\n{r['text']}" for r in map(json.loads, random.Random(3).sample(rows, 400))
    ]
    texts += [
        p.read_text("utf-8")[:3000]
        for p in sorted(shared_data("runbooks", "openshift", "alerts").rglob("*.md"))[:120]
    ]
    texts += [
        "",
        "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
        "北京 大学 東京",
        "tab\there\u00a0nbsp",
    ]
    full = [len(embedder._tokenizer.encode(t).ids) for t in texts]
    assert embedder.count_tokens(texts) == full


def test_counts_stay_exact_while_other_threads_clear_the_word_cache(
    embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service counts question tokens in worker threads while an ingestion counts
    # chunks: a cache cleared by one thread between another's fill and read must not
    # turn into a KeyError or a wrong count.
    monkeypatch.setattr("ragwright.adapters.embedders.onnx._WORD_CACHE_LIMIT", 3)
    texts = [f"worker{n} drains queue{n} before shutdown{n} of host{n}" for n in range(300)]
    expected = [len(embedder._tokenizer.encode(t).ids) for t in texts]
    failures: list[BaseException] = []
    counted: list[list[int]] = []

    def count() -> None:
        try:
            counted.append([embedder.count_tokens([t])[0] for t in texts])
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=count) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert counted == [expected] * 4


def test_a_process_builds_one_session_per_model_file_and_thread_count(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    # Building the session (graph optimisation) is most of an embedder's opening cost;
    # a second embedder in the same process reuses it and embeds the same.
    again = OnnxEmbedder()
    assert again._session is embedder._session
    assert np.array_equal(
        again.embed_documents(["drain the queue"]), embedder.embed_documents(["drain the queue"])
    )
    assert OnnxEmbedder(threads=1)._session is not embedder._session
    # A model file elsewhere (same bytes, so it verifies) has its own session.
    model, tokenizer = bundled_model_files()
    copy = tmp_path / model.name
    shutil.copyfile(model, copy)
    other = OnnxEmbedder(model_path=copy, tokenizer_path=tokenizer)
    assert other._session is not embedder._session


class _RecordingSession:
    """Stands in for the inference session: records each run's rows x width and the
    run options it was given, and runs the real session."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.runs: list[tuple[int, bool]] = []

    def run(self, outputs: Any, feeds: dict[str, Any], options: Any = None) -> Any:
        shrinks = options is not None and (
            options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        )
        self.runs.append((int(feeds["input_ids"].size), shrinks))
        return self.session.run(outputs, feeds, options)


def test_small_runs_give_their_arena_growth_back_and_full_runs_keep_it() -> None:
    # A process answering questions runs small, varied shapes: without giving back
    # what each grew, its memory crept up over hundreds of answers. A bulk call's runs
    # near the token cap keep the arena for the next one (faster).
    embedder = OnnxEmbedder(batch_size=8, max_batch_tokens=256)
    recording = _RecordingSession(embedder._session)
    embedder._session = recording
    long = ("word " * 125).strip()  # 127 tokens with [CLS] and [SEP]
    # Ingestion's calls (BULK_EMBEDDING set): sorted by length, a run of 2 rows x 127
    # near the cap keeps the arena; the lone row after it (under half) gives back.
    context = contextvars.copy_context()
    context.run(BULK_EMBEDDING.set, True)
    context.run(embedder.embed_documents, ["drain the queue", long, long])
    bulk_runs, recording.runs = recording.runs, []
    assert bulk_runs == [(254, False), (127, True)]
    # The same inputs outside ingestion (a question's evidence sentences, a few of them
    # long): the run near the cap gives its growth back too, as does the query's.
    embedder.embed_documents(["drain the queue", long, long])
    embedder.embed_query("drain the queue")
    assert recording.runs == [(254, True), (127, True), (5, True)]


def test_outside_ingestion_a_run_holds_at_most_the_query_cap() -> None:
    # A question's sentences, some of them long, used to fill a run to the ingestion cap:
    # ~250 MiB of working memory for that run in an answering process.
    embedder = _RecordingOnnxEmbedder(batch_size=8, max_batch_tokens=512, query_batch_tokens=128)
    long = ("word " * 125).strip()  # 127 tokens with [CLS] and [SEP]
    embedder.embed_documents([long] * 4)
    assert embedder.runs == [(1, 127)] * 4
    embedder.runs.clear()
    context = contextvars.copy_context()
    context.run(BULK_EMBEDDING.set, True)
    context.run(embedder.embed_documents, [long] * 4)
    assert embedder.runs == [(4, 127)]
