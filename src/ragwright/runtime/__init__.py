"""The composition root: settings → adapters → :class:`Application`.

The one place that picks and imports adapters. Entry points call
:func:`build_application` and nothing else from here, and ``Application.close()`` when
they are done with it. Each choice of a kind (embedding provider, index backend,
reranker, chat provider, store engine) is a registry of factories by kind
(:mod:`ragwright.runtime.registry`):

- ``embedding`` — the embedder (bundled, or remote behind retry and a capacity gate);
- ``index`` — index backends, the BM25 encoder, rerankers and the retriever;
- ``chat`` — chat providers and their profiles; ``chat_pipeline`` — the pipeline over
  them; ``sessions`` — the chat sessions a runtime opened;
- ``shared`` — the response cache and capacity pools shared through Redis;
- ``stores`` — the key, job and draft stores and the ingest queue;
- ``components`` — :class:`RuntimeComponents`, which opens them lazily and closes them.
"""

from ragwright.runtime.chat import (
    CHAT_PROVIDERS,
    answer_schema_style,
    background_model,
    chat_profiles,
    model_cache,
    open_chat_provider,
    open_chat_providers,
    stop_background_model,
)
from ragwright.runtime.chat_pipeline import build_chat_pipeline, configure_telemetry
from ragwright.runtime.components import RuntimeComponents, build_application, code_revision
from ragwright.runtime.embedding import (
    BUNDLED_EMBEDDERS,
    EMBEDDING_POOL,
    REMOTE_EMBEDDERS,
    embedding_profile,
    open_embedder,
    open_embedding_pool,
)
from ragwright.runtime.index import (
    INDEX_BACKENDS,
    RERANKERS,
    lexical_profile,
    open_index,
    open_reranker,
    open_retriever,
    open_sparse_encoder,
)
from ragwright.runtime.shared import REDIS_RETRY_INTERVAL, SharedState, open_shared_state
from ragwright.runtime.stores import DRAFT_STORES, JOB_STORES, KEY_STORES

__all__ = [
    "BUNDLED_EMBEDDERS",
    "CHAT_PROVIDERS",
    "DRAFT_STORES",
    "EMBEDDING_POOL",
    "INDEX_BACKENDS",
    "JOB_STORES",
    "KEY_STORES",
    "REDIS_RETRY_INTERVAL",
    "REMOTE_EMBEDDERS",
    "RERANKERS",
    "RuntimeComponents",
    "SharedState",
    "answer_schema_style",
    "background_model",
    "build_application",
    "build_chat_pipeline",
    "chat_profiles",
    "code_revision",
    "configure_telemetry",
    "embedding_profile",
    "lexical_profile",
    "model_cache",
    "open_chat_provider",
    "open_chat_providers",
    "open_embedder",
    "open_embedding_pool",
    "open_index",
    "open_reranker",
    "open_retriever",
    "open_shared_state",
    "open_sparse_encoder",
    "stop_background_model",
]
