"""llama.cpp's OpenAI-compatible server (the ``xllamacpp`` wheel) serving ``/v1/embeddings``.

The only GGUF the project ships is its chat model, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M),
so that is what it serves, mean-pooled over the last hidden layer and L2-normalised
(896 dimensions). It exercises the remote-embedding path against a real server — HTTP,
batching, concurrency, errors, the profile contract — and is NOT a retrieval-quality
embedder: nothing here measures or claims retrieval quality.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MODEL_ALIAS = "qwen2.5-coder-0.5b-q4km-meanpool"
DIMENSIONS = 896


@dataclass(frozen=True)
class LlamaEmbeddingServer:
    base_url: str  # the server root; the OpenAI embedder appends /v1
    slot_tokens: int  # the longest input one request may carry (a longer one: HTTP 400)


@contextmanager
def llama_embedding_server(
    model_path: Path, *, parallel: int = 2, slot_tokens: int = 512, threads: int = 1
) -> Iterator[LlamaEmbeddingServer]:
    """A running server with ``parallel`` slots of ``slot_tokens`` context each.

    The physical batch is the whole context (``parallel * slot_tokens``), larger than a
    slot, so an input longer than its slot is refused with HTTP 400
    (``exceed_context_size_error``); llama.cpp answers an input longer than the physical
    batch itself with HTTP 500. Either way it never truncates. One thread per server:
    on a shared 2-core machine more threads spin against each other.
    """
    import xllamacpp  # the native library loads only when a server starts

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.model_alias = {MODEL_ALIAS}
    params.embedding = True
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.n_parallel = parallel
    params.n_ctx = parallel * slot_tokens
    params.n_batch = params.n_ubatch = parallel * slot_tokens
    # One KV stream shared by the slots. With a stream per slot (kv_unified off, the
    # default once n_parallel is set), llama.cpp splits co-batched sequences into
    # micro-batches of equal token counts, so the longer of two inputs decoded together
    # spills into a second micro-batch and its mean is pooled over part of its tokens
    # (cosine 0.81-0.97 against the same text alone). Unified, each slot keeps
    # ``slot_tokens`` of context and over-long input is still refused with HTTP 400.
    params.kv_unified = True
    params.kv_unified_per_slot = slot_tokens
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.port = 0
    params.warmup = False
    params.verbosity = -1
    server = xllamacpp.Server(params)
    try:
        yield LlamaEmbeddingServer(str(server.listening_address).rstrip("/"), slot_tokens)
    finally:
        del server  # dropping the native object stops the server
