"""Settings: environment (``RAGWRIGHT_*``), then an optional ``ragwright.toml``, then defaults.

The TOML file is ``./ragwright.toml`` or the path in ``RAGWRIGHT_CONFIG``. Everything is
validated at start-up; an invalid value raises :class:`ConfigError` naming the setting
as the user would spell it (``RAGWRIGHT_MAX_WORDS``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ragwright.errors import ConfigError
from ragwright.types import DEFAULT_DOCUMENT_TYPES, ChunkingPolicy


class Settings(BaseSettings):
    """Every setting ragwright reads. Field docs double as ``docs/configuration.md``."""

    model_config = SettingsConfigDict(env_prefix="RAGWRIGHT_", extra="forbid", frozen=True)

    home: Path = Field(Path(".ragwright"), description="Where indexes and run data live.")
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
    chat_provider: Literal["local", "openai", "azure-openai", "ollama"] = Field(
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
    chat_capacity: int = Field(2, gt=0, description="Concurrent model attempts in the pool.")
    chat_cache_ttl: float = Field(300.0, gt=0)
    chat_temperature: float | None = Field(
        0.0,
        ge=0.0,
        le=2.0,
        description="Sampling temperature for answers; 0 is greedy and repeatable. "
        "'provider' leaves it unset (for models that reject the option).",
    )
    chat_schema_style: Literal["auto", "object", "variants"] = Field(
        "auto",
        description="Answer schema sent to the model: 'variants' (anyOf, for grammar "
        "engines: llama.cpp, Ollama, vLLM), 'object' (hosted strict modes); auto picks "
        "variants for local and ollama, object for openai and azure-openai.",
    )
    redis_url: str | None = Field(
        None,
        description="Shared cache and capacity pool across processes (e.g. redis://127.0.0.1:6379/0).",
    )
    embedding_provider: Literal["onnx", "ollama", "openai", "azure-openai"] = "onnx"
    embedding_profile_id: str | None = None
    embedding_model: str | None = None
    embedding_digest: str | None = None
    embedding_dimensions: int | None = Field(None, gt=0)
    embedding_document_format: str = "{text}"
    embedding_query_format: str = "{query}"
    embedding_max_input_tokens: int = Field(8192, gt=0)
    embedding_threads: int | None = Field(None, gt=0)
    ollama_url: str = "http://127.0.0.1:11434"
    openai_base_url: str = "https://api.openai.com"
    openai_api_key: SecretStr | None = None
    azure_deployment: str | None = None
    azure_api_version: str = "2024-10-21"

    @field_validator("chat_temperature", mode="before")
    @classmethod
    def _provider_temperature(cls, value: object) -> object:
        return None if value in ("provider", "") else value

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

    @property
    def index_path(self) -> Path:
        """Directory of the embedded index for this collection."""
        return self.home / "index" / self.collection


def load_settings(**overrides: object) -> Settings:
    """Validated settings; raises :class:`ConfigError` naming the first bad setting."""
    config = os.environ.get("RAGWRIGHT_CONFIG")
    if config and not Path(config).is_file():
        raise ConfigError("RAGWRIGHT_CONFIG", f"no such file: {config}")
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        first = error.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "settings"
        raise ConfigError(f"RAGWRIGHT_{name.upper()}", first["msg"]) from error
    except ValueError as error:  # malformed TOML
        raise ConfigError("ragwright.toml", str(error)) from error
