"""Settings: environment (``RAGWRIGHT_*``), then an optional ``ragwright.toml``, then defaults.

The TOML file is ``./ragwright.toml`` or the path in ``RAGWRIGHT_CONFIG``. Everything is
validated at start-up; an invalid value raises :class:`ConfigError` naming the setting
as the user would spell it (``RAGWRIGHT_MAX_WORDS``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ragwright.errors import ConfigError
from ragwright.types import DEFAULT_DOCUMENT_TYPES, ChunkingPolicy

ChatProviderKind = Literal["local", "openai", "azure-openai", "ollama"]


class ChatFallback(BaseModel):
    """One alternate chat provider, tried in list order when the primary fails in a
    switchable category. Each names its own limits: the request is re-prepared for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ChatProviderKind
    model: str = Field("", description="Model or Azure deployment name (remote providers).")
    name: str | None = Field(
        None,
        min_length=1,
        description="Label in results and telemetry; defaults to provider:model.",
    )
    base_url: str | None = None
    api_key_env: str | None = Field(
        None,
        min_length=1,
        description="Environment variable holding its API key (keys stay out of files).",
    )
    context_window: int = Field(4096, gt=0)
    output_limit: int = Field(512, gt=0)
    schema_style: Literal["auto", "object", "variants"] = "auto"
    token_ratio: float = Field(1.0, gt=0, le=4)

    @model_validator(mode="after")
    def _window_holds_output(self) -> ChatFallback:
        if self.context_window <= self.output_limit:
            raise ValueError(
                f"context_window ({self.context_window}) must exceed output_limit "
                f"({self.output_limit})"
            )
        return self

    @property
    def label(self) -> str:
        """The provider name this alternate answers under."""
        return self.name or (f"{self.provider}:{self.model}" if self.model else self.provider)


class Settings(BaseSettings):
    """Every setting ragwright reads. Field docs double as ``docs/configuration.md``."""

    model_config = SettingsConfigDict(env_prefix="RAGWRIGHT_", extra="forbid", frozen=True)

    home: Path = Field(Path(".ragwright"), description="Where indexes and run data live.")
    keys_path: Path | None = Field(
        None,
        description="The API key store (SQLite file; default $RAGWRIGHT_HOME/keys.sqlite3): "
        "set it to keep keys apart from replaceable index data, or shared by services "
        "whose homes differ.",
    )
    backend: Literal["edge", "qdrant"] = Field(
        "edge",
        description="edge: Qdrant's engine in-process; qdrant: a server, cluster or local path.",
    )
    qdrant_location: str | None = Field(
        None, description="Server URL, directory, or :memory: (backend=qdrant)."
    )
    qdrant_api_key: SecretStr | None = None
    collection: str = Field("support-documents", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    chunking: Literal["section-paragraphs", "sentence-blocks"] = "section-paragraphs"
    max_words: int = Field(80, gt=0, le=2000)
    max_tokens: int | None = Field(
        None, gt=0, description="Token ceiling per embedding input (sentence-blocks splits to fit)."
    )
    overlap: bool = True
    batch_size: int = Field(64, gt=0, le=4096)
    bm25_k1: float = Field(0.9, ge=0)
    bm25_b: float = Field(0.4, ge=0, le=1)
    document_types: tuple[str, ...] = Field(DEFAULT_DOCUMENT_TYPES, min_length=1)
    rrf_k: int = Field(60, ge=0, description="Reciprocal rank fusion constant.")
    rrf_weights: tuple[float, float] = Field(
        (1.0, 1.0), description="Weights of the dense and BM25 rankings in RRF."
    )
    hybrid_candidates: int = Field(100, gt=0, description="Candidates per leg before fusion.")
    threshold_dense: float | None = Field(
        None, description="Minimum dense (cosine) score for search and ask; see eval calibrate."
    )
    threshold_sparse: float | None = Field(
        None, description="Minimum BM25 score for search and ask; see eval calibrate."
    )
    threshold_fusion: float | None = Field(None, description="Minimum RRF score.")
    threshold_rerank: float | None = Field(None, description="Minimum rerank score.")
    reranker: Literal["none", "bi-encoder", "http"] = "none"
    reranker_url: str | None = None
    reranker_model: str = ""
    remote_call_attempts: int = Field(
        3, gt=0, description="Attempts per remote embedding or rerank call (retries included)."
    )
    remote_call_budget: float = Field(
        120.0,
        gt=0,
        description="Seconds per remote embedding or rerank call, retries and waits "
        "included, when the request sets no deadline.",
    )
    chat_provider: ChatProviderKind = Field(
        "local", description="local: the bundled Qwen2.5-Coder-0.5B on llama.cpp."
    )
    chat_model: str = Field("", description="Model or Azure deployment name (remote providers).")
    chat_base_url: str | None = Field(None, description="OpenAI-compatible or Ollama base URL.")
    chat_api_key: SecretStr | None = None
    chat_max_messages: int = Field(32, gt=0)
    chat_max_input_tokens: int = Field(6000, gt=0, description="o200k_base tokens per request.")
    chat_max_attempts: int = Field(
        3, gt=0, description="Provider attempts per operation, all layers."
    )
    chat_retries: int = Field(2, gt=0, description="Attempts per provider inside the retry layer.")
    chat_capacity: int = Field(
        2, gt=0, description="Concurrent model attempts per provider, shared through Redis."
    )
    chat_throttle_cooldown: float = Field(
        5.0,
        gt=0,
        le=60,
        description="Seconds a provider's capacity pool refuses every attempt after a 429 "
        "that gave no Retry-After (a given one is used, capped at 60).",
    )
    chat_cache_ttl: float = Field(300.0, gt=0)
    chat_cache_max_entries: int = Field(
        1024, gt=0, description="In-process response cache: entries kept (least recently used go)."
    )
    chat_temperature: float | None = Field(
        0.0,
        ge=0.0,
        le=2.0,
        description="Sampling temperature for answers; 0 is greedy and repeatable. "
        "'provider' leaves it unset (for models that reject the option).",
    )
    chat_keep_warm: float = Field(
        600.0,
        ge=0,
        description="Seconds the local model's background process stays after its last "
        "use by a command (ask, eval), so the next command skips the model's start; 0 runs "
        "the model inside each command. serve and worker keep their own model.",
    )
    chat_schema_style: Literal["auto", "object", "variants"] = Field(
        "auto",
        description="Answer schema sent to the model: 'variants' (anyOf, for grammar "
        "engines: llama.cpp, Ollama, vLLM), 'object' (hosted strict modes); auto picks "
        "variants for local and ollama, object for openai and azure-openai.",
    )
    answer_deadline: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Seconds one answer may take end to end (retrieval, every model attempt "
        "and wait); a request may set its own (ask --deadline).",
    )
    answer_style: Literal["auto", "quoted", "generated", "evidence"] = Field(
        "auto",
        description="How answers are made: 'quoted' (the model selects evidence sentences, "
        "returned verbatim), 'generated' (free text with citations, support-checked), "
        "'evidence' (no model: the most relevant sentences, labelled as not an answer); "
        "auto picks quoted for the local model and generated for hosted ones.",
    )
    answerability_threshold: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="Least similarity between the question and its best evidence sentence "
        "for a model call; below it the answer is 'insufficient'. Unset: the persisted "
        "calibration's value (eval calibrate --write), else no threshold.",
    )
    templates: Path | None = Field(
        None,
        description="Approved templates (YAML/JSON): reviewed text per question class, "
        "offered (labelled approved_template) when the model is unavailable.",
    )
    evidence_only_on_model_failure: bool = Field(
        True,
        description="When the model is unavailable and no template applies, return the "
        "cited evidence without an answer (true) or the unavailable mode (false).",
    )
    draft_max_age: float = Field(
        86400.0,
        ge=0,
        description="Seconds a stored earlier answer to the same question may be shown "
        "(labelled previous_draft, with its age) while the model is unavailable, if its "
        "inputs still match; 0 stores and shows no drafts.",
    )
    serve_concurrency: int = Field(
        8,
        gt=0,
        description="Interactive requests (answers, searches) in progress at once per "
        "service process; excess gets 503 at once, before any work (no queue).",
    )
    serve_tenant_concurrency: int | None = Field(
        None,
        gt=0,
        description="Interactive requests in progress at once per tenant in one process; "
        "excess gets 429 at once. Unset: only the process limit applies.",
    )
    serve_max_body: int = Field(
        4 * 1024 * 1024,
        gt=0,
        description="Largest request body, in bytes, the service reads for an answer, "
        "search or answer job (4 MiB holds the longest valid history); a larger one gets "
        "413 before it is read past the limit.",
    )
    serve_max_ingest_body: int = Field(
        64 * 1024 * 1024,
        gt=0,
        description="Largest request body, in bytes, of POST /v1/ingestions; a larger one "
        "gets 413 before it is read past the limit.",
    )
    answer_support_check: bool = Field(
        True,
        description="Check every answer against its cited evidence; an unsupported one "
        "is withheld with status 'unsupported' (ask --no-check-support turns it off).",
    )
    chat_context_window: int = Field(
        4096, gt=0, description="Primary model's context window, o200k_base tokens."
    )
    chat_output_limit: int = Field(
        512, gt=0, description="Output tokens reserved for the primary model's answer."
    )
    chat_fallbacks: tuple[ChatFallback, ...] = Field(
        (),
        description="Ordered alternate chat providers (JSON list in the environment, "
        "[[chat_fallbacks]] tables in TOML).",
    )
    telemetry_exporter: Literal["none", "console", "otlp"] = Field(
        "none", description="Export chat spans and metrics: OTLP over HTTP or the console."
    )
    telemetry_endpoint: str | None = Field(
        None, description="OTLP/HTTP collector base URL (default: OTEL_EXPORTER_OTLP_*)."
    )
    telemetry_service_name: str = Field("ragwright", min_length=1)
    telemetry_capture_content: bool = Field(
        False,
        description="Record prompts, instructions and completions on spans (customer data).",
    )
    database_url: SecretStr | None = Field(
        None,
        description="PostgreSQL URL (postgresql://user@host/db) for the state replicas "
        "share: answer jobs, previous drafts and API keys. Unset: SQLite files under "
        "RAGWRIGHT_HOME (one machine).",
    )
    job_workers: int = Field(
        2,
        ge=0,
        description="Answer jobs this process runs at once (ragwright serve and ragwright "
        "worker); 0: it accepts jobs but runs none.",
    )
    batch_capacity: int = Field(
        2,
        gt=0,
        description="Answer jobs running at once across every worker of every replica, "
        "and the batch model-capacity pool's size (separate from interactive answers).",
    )
    batch_tenant_capacity: int | None = Field(
        None, gt=0, description="Answer jobs running at once per tenant; unset: no own limit."
    )
    job_ttl: float = Field(
        3600.0, gt=0, description="Seconds an answer job may wait and run before it expires."
    )
    job_retention: float = Field(
        604800.0,
        gt=0,
        description="Seconds a finished answer job (its result, failure, and the "
        "Idempotency-Key it holds) is kept after it finished; then the workers' sweep "
        "deletes it and the key may name a new job.",
    )
    job_lease: float = Field(
        30.0,
        gt=0,
        description="Seconds a worker's claim on a job lasts unless renewed; a dead "
        "worker's job is claimed again after it.",
    )
    ingest_lease: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds an ingestion worker's hold on a work item lasts without a "
        "heartbeat (ingest --queue); a dead worker's item is taken again after it.",
    )
    ingest_deadline: float | None = Field(
        None,
        gt=0,
        description="Seconds an ingestion run may take (ingest; ingest-worker: each work "
        "item, also within its run's): no embedding attempt, retry or backoff outlives "
        "it. Unset: no run deadline (each remote call still has its own budget).",
    )
    job_deadline: float = Field(
        300.0, gt=0, le=3600, description="Seconds one attempt at a job's answer may take."
    )
    redis_url: str | None = Field(
        None,
        description="Shared cache and capacity pool across processes (e.g. redis://127.0.0.1:6379/0).",
    )
    embedding_provider: Literal["onnx", "e5", "ollama", "openai", "azure-openai"] = "onnx"
    embedding_profile_id: str | None = None
    embedding_model: str | None = None
    embedding_digest: str | None = None
    embedding_dimensions: int | None = Field(None, gt=0)
    embedding_document_format: str = "{text}"
    embedding_query_format: str = "{query}"
    embedding_max_input_tokens: int = Field(8192, gt=0)
    embedding_threads: int | None = Field(None, gt=0)
    embedding_in_flight: int = Field(
        4,
        gt=0,
        description="Remote embedding batches in flight at once (shared through Redis "
        "across processes); the bundled ONNX model always runs one.",
    )
    embedding_verify_model: bool = Field(
        False,
        description="openai: require the model among the server's /v1/models ids at start.",
    )
    ollama_url: str = "http://127.0.0.1:11434"
    openai_base_url: str = "https://api.openai.com"
    openai_api_key: SecretStr | None = None
    azure_deployment: str | None = None
    azure_api_version: str = "2024-10-21"

    @field_validator("chat_temperature", mode="before")
    @classmethod
    def _provider_temperature(cls, value: object) -> object:
        return None if value in ("provider", "") else value

    @model_validator(mode="after")
    def _window_holds_output(self) -> Settings:
        if self.chat_context_window <= self.chat_output_limit:
            raise ValueError(
                f"chat_context_window ({self.chat_context_window}) must exceed "
                f"chat_output_limit ({self.chat_output_limit})"
            )
        return self

    @field_validator("chat_fallbacks")
    @classmethod
    def _distinct_fallbacks(cls, value: tuple[ChatFallback, ...]) -> tuple[ChatFallback, ...]:
        labels = [f.label for f in value]
        for index, label in enumerate(labels):
            if label in labels[:index]:
                raise ValueError(f"[{index}].name: {label!r} is used twice; give each a name")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = Path(os.environ.get("RAGWRIGHT_CONFIG", "ragwright.toml"))
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_path),
        )

    def chunking_policy(self) -> ChunkingPolicy:
        """The chunking policy these settings select."""
        return ChunkingPolicy(
            kind=self.chunking,
            max_words=self.max_words,
            overlap=self.overlap,
            max_tokens=self.max_tokens,
        )

    def with_overrides(self, **overrides: object) -> Settings:
        """These settings with ``overrides`` applied and validated like every setting
        (an invalid value raises :class:`ConfigError` naming it)."""
        return _validated(lambda: Settings(**{**self.model_dump(), **overrides}))

    @property
    def index_path(self) -> Path:
        """Directory of the embedded index for this collection."""
        return self.home / "index" / self.collection

    @property
    def key_store_path(self) -> Path:
        """The API key store: ``keys_path``, else ``keys.sqlite3`` in the home."""
        return self.keys_path or self.home / "keys.sqlite3"


# Variables of the RAGWRIGHT_ prefix that are not settings: where the settings file is, a
# client's key for `ingest --server`, and the tests' own servers.
NOT_SETTINGS = frozenset({"RAGWRIGHT_CONFIG", "RAGWRIGHT_API_KEY"})
_TEST_PREFIX = "RAGWRIGHT_TEST_"


def load_settings(**overrides: object) -> Settings:
    """Validated settings; raises :class:`ConfigError` naming the first bad setting, or
    the first ``RAGWRIGHT_*`` environment variable that is not a setting (a misspelt
    setting would otherwise be ignored without a word)."""
    config = os.environ.get("RAGWRIGHT_CONFIG")
    if config and not Path(config).is_file():
        raise ConfigError("RAGWRIGHT_CONFIG", f"no such file: {config}")
    _check_environment_names(os.environ)
    return _validated(lambda: Settings(**overrides))  # type: ignore[arg-type]


def _check_environment_names(environment: Mapping[str, str]) -> None:
    known = {f"RAGWRIGHT_{name.upper()}" for name in Settings.model_fields} | NOT_SETTINGS
    for name in sorted(environment):
        if not name.startswith("RAGWRIGHT_") or name in known or name.startswith(_TEST_PREFIX):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(
            name, f"not a setting{hint} (unset it; docs/configuration.md lists every setting)"
        )


def _toml_path() -> str:
    return os.environ.get("RAGWRIGHT_CONFIG", "ragwright.toml")


def _validated(build: Callable[[], Settings]) -> Settings:
    try:
        return build()
    except ValidationError as error:
        first = error.errors()[0]
        loc = first["loc"]
        name = f"RAGWRIGHT_{str(loc[0]).upper()}" if loc else "settings"
        # A nested setting (a fallback's field) is named by its path: ..._FALLBACKS[1].model
        name += "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
        # The same setting may come from the environment or ragwright.toml: name both.
        where = f"{name} or {loc[0]} in {_toml_path()}" if loc else name
        raise ConfigError(name, f"{first['msg']} (set as {where})") from error
    except ValueError as error:  # malformed TOML
        raise ConfigError("ragwright.toml", str(error)) from error
