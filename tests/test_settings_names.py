"""Every setting name users had before the settings came in groups still reaches its
field: as an environment variable, as a ``ragwright.toml`` key and as a keyword.

``SAMPLES`` pins the variables of docs/configuration.md as it was when the groups came
(issue 21): a rename, a dropped name or a name mapped to the wrong field fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from ragwright.settings import ChatFallback, Settings, load_settings
from ragwright.settings.flat import FLAT, env_name
from tests.conftest import REPO

_FALLBACK = ChatFallback(provider="ollama", model="m")

# variable: (group.field it reaches, a valid value other than the default, as the
# environment spells it, and the value the field then holds)
SAMPLES: dict[str, tuple[str, str, Any]] = {
    "RAGWRIGHT_HOME": ("storage.home", "/tmp/rw-home", Path("/tmp/rw-home")),
    "RAGWRIGHT_KEYS_PATH": ("storage.keys_path", "/tmp/rw-keys.db", Path("/tmp/rw-keys.db")),
    "RAGWRIGHT_DATABASE_URL": ("storage.database_url", "postgresql://u@h/d", "postgresql://u@h/d"),
    "RAGWRIGHT_REDIS_URL": ("storage.redis_url", "redis://h:1/2", "redis://h:1/2"),
    "RAGWRIGHT_BACKEND": ("index.backend", "qdrant", "qdrant"),
    "RAGWRIGHT_QDRANT_LOCATION": ("index.qdrant_location", ":memory:", ":memory:"),
    "RAGWRIGHT_QDRANT_API_KEY": ("index.qdrant_api_key", "qk", "qk"),
    "RAGWRIGHT_COLLECTION": ("index.collection", "team-docs", "team-docs"),
    "RAGWRIGHT_CHUNKING": ("index.chunking", "sentence-blocks", "sentence-blocks"),
    "RAGWRIGHT_MAX_WORDS": ("index.max_words", "60", 60),
    "RAGWRIGHT_MAX_TOKENS": ("index.max_tokens", "200", 200),
    "RAGWRIGHT_OVERLAP": ("index.overlap", "false", False),
    "RAGWRIGHT_BM25_K1": ("index.bm25_k1", "1.2", 1.2),
    "RAGWRIGHT_BM25_B": ("index.bm25_b", "0.75", 0.75),
    "RAGWRIGHT_DOCUMENT_TYPES": ("index.document_types", '["faq"]', ("faq",)),
    "RAGWRIGHT_BATCH_SIZE": ("ingest.batch_size", "16", 16),
    "RAGWRIGHT_INGEST_LEASE": ("ingest.lease", "45", 45.0),
    "RAGWRIGHT_INGEST_DEADLINE": ("ingest.deadline", "600", 600.0),
    "RAGWRIGHT_CONVERT_MAX_BYTES": ("conversion.max_bytes", "1000", 1000),
    "RAGWRIGHT_CONVERT_MAX_INFLATED": ("conversion.max_inflated", "2000", 2000),
    "RAGWRIGHT_CONVERT_MAX_PAGES": ("conversion.max_pages", "10", 10),
    "RAGWRIGHT_CONVERT_MAX_CHARS": ("conversion.max_chars", "500", 500),
    "RAGWRIGHT_CONVERT_TIMEOUT": ("conversion.timeout", "2.5", 2.5),
    "RAGWRIGHT_CONVERT_MAX_MEMORY": ("conversion.max_memory", "3000000", 3000000),
    "RAGWRIGHT_CONVERT_WORKERS": ("conversion.workers", "2", 2),
    "RAGWRIGHT_EMBEDDING_PROVIDER": ("embedding.provider", "ollama", "ollama"),
    "RAGWRIGHT_EMBEDDING_PROFILE_ID": ("embedding.profile_id", "p1", "p1"),
    "RAGWRIGHT_EMBEDDING_MODEL": ("embedding.model", "nomic", "nomic"),
    "RAGWRIGHT_EMBEDDING_DIGEST": ("embedding.digest", "sha256:ab", "sha256:ab"),
    "RAGWRIGHT_EMBEDDING_DIMENSIONS": ("embedding.dimensions", "384", 384),
    "RAGWRIGHT_EMBEDDING_DOCUMENT_FORMAT": ("embedding.document_format", "d: {text}", "d: {text}"),
    "RAGWRIGHT_EMBEDDING_QUERY_FORMAT": ("embedding.query_format", "q: {query}", "q: {query}"),
    "RAGWRIGHT_EMBEDDING_MAX_INPUT_TOKENS": ("embedding.max_input_tokens", "512", 512),
    "RAGWRIGHT_EMBEDDING_THREADS": ("embedding.threads", "3", 3),
    "RAGWRIGHT_EMBEDDING_IN_FLIGHT": ("embedding.in_flight", "8", 8),
    "RAGWRIGHT_EMBEDDING_VERIFY_MODEL": ("embedding.verify_model", "true", True),
    "RAGWRIGHT_OLLAMA_URL": ("embedding.ollama_url", "http://o:1", "http://o:1"),
    "RAGWRIGHT_OPENAI_BASE_URL": ("embedding.openai_base_url", "http://x:2", "http://x:2"),
    "RAGWRIGHT_OPENAI_API_KEY": ("embedding.openai_api_key", "sk", "sk"),
    "RAGWRIGHT_AZURE_DEPLOYMENT": ("embedding.azure_deployment", "dep", "dep"),
    "RAGWRIGHT_AZURE_API_VERSION": ("embedding.azure_api_version", "2025-01-01", "2025-01-01"),
    "RAGWRIGHT_REMOTE_CALL_ATTEMPTS": ("remote.call_attempts", "5", 5),
    "RAGWRIGHT_REMOTE_CALL_BUDGET": ("remote.call_budget", "30", 30.0),
    "RAGWRIGHT_RRF_K": ("retrieval.rrf_k", "10", 10),
    "RAGWRIGHT_RRF_WEIGHTS": ("retrieval.rrf_weights", "[0.5, 2.0]", (0.5, 2.0)),
    "RAGWRIGHT_HYBRID_CANDIDATES": ("retrieval.hybrid_candidates", "50", 50),
    "RAGWRIGHT_THRESHOLD_DENSE": ("retrieval.threshold_dense", "0.3", 0.3),
    "RAGWRIGHT_THRESHOLD_SPARSE": ("retrieval.threshold_sparse", "1.5", 1.5),
    "RAGWRIGHT_THRESHOLD_FUSION": ("retrieval.threshold_fusion", "0.01", 0.01),
    "RAGWRIGHT_THRESHOLD_RERANK": ("retrieval.threshold_rerank", "0.2", 0.2),
    "RAGWRIGHT_RERANKER": ("retrieval.reranker", "http", "http"),
    "RAGWRIGHT_RERANKER_URL": ("retrieval.reranker_url", "http://r:3", "http://r:3"),
    "RAGWRIGHT_RERANKER_MODEL": ("retrieval.reranker_model", "bge", "bge"),
    "RAGWRIGHT_CHAT_PROVIDER": ("chat.provider", "ollama", "ollama"),
    "RAGWRIGHT_CHAT_MODEL": ("chat.model", "qwen", "qwen"),
    "RAGWRIGHT_CHAT_BASE_URL": ("chat.base_url", "http://c:4", "http://c:4"),
    "RAGWRIGHT_CHAT_API_KEY": ("chat.api_key", "ck", "ck"),
    "RAGWRIGHT_CHAT_MAX_MESSAGES": ("chat.max_messages", "16", 16),
    "RAGWRIGHT_CHAT_MAX_INPUT_TOKENS": ("chat.max_input_tokens", "3000", 3000),
    "RAGWRIGHT_CHAT_MAX_ATTEMPTS": ("chat.max_attempts", "4", 4),
    "RAGWRIGHT_CHAT_RETRIES": ("chat.retries", "3", 3),
    "RAGWRIGHT_CHAT_CAPACITY": ("chat.capacity", "5", 5),
    "RAGWRIGHT_CHAT_THROTTLE_COOLDOWN": ("chat.throttle_cooldown", "7.5", 7.5),
    "RAGWRIGHT_CHAT_CACHE_TTL": ("chat.cache_ttl", "60", 60.0),
    "RAGWRIGHT_CHAT_CACHE_MAX_ENTRIES": ("chat.cache_max_entries", "10", 10),
    "RAGWRIGHT_CHAT_TEMPERATURE": ("chat.temperature", "0.4", 0.4),
    "RAGWRIGHT_CHAT_KEEP_WARM": ("chat.keep_warm", "0", 0.0),
    "RAGWRIGHT_COMMAND_KEEP_WARM": ("chat.command_keep_warm", "30", 30.0),
    "RAGWRIGHT_CHAT_THREADS": ("chat.threads", "3", 3),
    "RAGWRIGHT_CHAT_SCHEMA_STYLE": ("chat.schema_style", "object", "object"),
    "RAGWRIGHT_CHAT_CONTEXT_WINDOW": ("chat.context_window", "8192", 8192),
    "RAGWRIGHT_CHAT_OUTPUT_LIMIT": ("chat.output_limit", "256", 256),
    "RAGWRIGHT_CHAT_FALLBACKS": (
        "chat.fallbacks",
        '[{"provider": "ollama", "model": "m"}]',
        (_FALLBACK,),
    ),
    "RAGWRIGHT_ANSWER_DEADLINE": ("answers.deadline", "30", 30.0),
    "RAGWRIGHT_ANSWER_STYLE": ("answers.style", "evidence", "evidence"),
    "RAGWRIGHT_ANSWERABILITY_THRESHOLD": ("answers.answerability_threshold", "0.5", 0.5),
    "RAGWRIGHT_ANSWER_SUPPORT_CHECK": ("answers.support_check", "false", False),
    "RAGWRIGHT_TEMPLATES": ("answers.templates", "/tmp/t.yaml", Path("/tmp/t.yaml")),
    "RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE": (
        "answers.evidence_only_on_model_failure",
        "false",
        False,
    ),
    "RAGWRIGHT_DRAFT_MAX_AGE": ("answers.draft_max_age", "0", 0.0),
    "RAGWRIGHT_SERVE_CONCURRENCY": ("service.concurrency", "3", 3),
    "RAGWRIGHT_SERVE_TENANT_CONCURRENCY": ("service.tenant_concurrency", "2", 2),
    "RAGWRIGHT_SERVE_MAX_BODY": ("service.max_body", "1000", 1000),
    "RAGWRIGHT_SERVE_MAX_INGEST_BODY": ("service.max_ingest_body", "2000", 2000),
    "RAGWRIGHT_SERVE_AUTH_FAILURES": ("service.auth_failures", "3", 3),
    "RAGWRIGHT_SERVE_AUTH_BACKOFF": ("service.auth_backoff", "0.5", 0.5),
    "RAGWRIGHT_SERVE_AUTH_WINDOW": ("service.auth_window", "60", 60.0),
    "RAGWRIGHT_SERVE_SIGN_INS_PER_KEY": ("service.sign_ins_per_key", "5", 5),
    "RAGWRIGHT_SERVE_SESSIONS_PER_KEY": ("service.sessions_per_key", "4", 4),
    "RAGWRIGHT_JOB_WORKERS": ("jobs.workers", "0", 0),
    "RAGWRIGHT_BATCH_CAPACITY": ("jobs.capacity", "4", 4),
    "RAGWRIGHT_BATCH_TENANT_CAPACITY": ("jobs.tenant_capacity", "1", 1),
    "RAGWRIGHT_JOB_TTL": ("jobs.ttl", "60", 60.0),
    "RAGWRIGHT_JOB_RETENTION": ("jobs.retention", "120", 120.0),
    "RAGWRIGHT_JOB_LEASE": ("jobs.lease", "2.5", 2.5),
    "RAGWRIGHT_JOB_DEADLINE": ("jobs.deadline", "90", 90.0),
    "RAGWRIGHT_TELEMETRY_EXPORTER": ("telemetry.exporter", "console", "console"),
    "RAGWRIGHT_TELEMETRY_ENDPOINT": ("telemetry.endpoint", "http://t:5", "http://t:5"),
    "RAGWRIGHT_TELEMETRY_SERVICE_NAME": ("telemetry.service_name", "rw-test", "rw-test"),
    "RAGWRIGHT_TELEMETRY_CAPTURE_CONTENT": ("telemetry.capture_content", "true", True),
}
NAMES = sorted(SAMPLES)


def documented_variables() -> set[str]:
    """The variables in the tables of docs/configuration.md, as it is committed."""
    text = (REPO / "docs" / "configuration.md").read_text()
    return set(re.findall(r"^\| `(RAGWRIGHT_[A-Z0-9_]+)` \|", text, re.M))


def reached(settings: Settings, path: str) -> Any:
    group, field = path.split(".")
    value = getattr(getattr(settings, group), field)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def toml_value(env_value: str, expected: Any) -> str:
    """The sample as a TOML value (JSON lists of numbers and strings are TOML too)."""
    if isinstance(expected, bool):
        return env_value
    if isinstance(expected, (int, float)) or env_value.startswith("["):
        return env_value.replace('{"provider": "ollama", "model": "m"}', TOML_FALLBACK)
    return json.dumps(env_value)


TOML_FALLBACK = '{provider = "ollama", model = "m"}'


def test_the_documented_variables_are_the_pinned_ones() -> None:
    assert documented_variables() == set(SAMPLES)


def test_the_flat_table_holds_every_pinned_name_and_every_field() -> None:
    assert {env_name(flat) for flat in FLAT} == set(SAMPLES)
    fields = {
        f"{group}.{field}"
        for group, info in Settings.model_fields.items()
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        for field in info.annotation.model_fields
    }
    assert fields == {path for path, _, _ in SAMPLES.values()}


@pytest.mark.parametrize("variable", NAMES)
def test_each_variable_reaches_its_field_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    path, raw, expected = SAMPLES[variable]
    assert reached(load_settings(), path) != expected  # the sample is not the default
    monkeypatch.setenv(variable, raw)
    assert reached(load_settings(), path) == expected


@pytest.mark.parametrize("variable", NAMES)
def test_each_toml_key_reaches_its_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    path, raw, expected = SAMPLES[variable]
    monkeypatch.delenv(variable, raising=False)  # the suite's own (conftest) would win
    key = variable.removeprefix("RAGWRIGHT_").lower()
    (tmp_path / "ragwright.toml").write_text(f"{key} = {toml_value(raw, expected)}\n")
    assert reached(load_settings(), path) == expected


@pytest.mark.parametrize("variable", NAMES)
def test_each_flat_keyword_reaches_its_field(variable: str) -> None:
    path, _, expected = SAMPLES[variable]
    key = variable.removeprefix("RAGWRIGHT_").lower()
    assert reached(Settings(**{key: expected}), path) == expected
    assert reached(load_settings().with_overrides(**{key: expected}), path) == expected


def test_a_flat_keyword_wins_over_the_same_field_in_its_group() -> None:
    settings = Settings(chat={"model": "grouped", "retries": 4}, chat_model="flat")
    assert (settings.chat.model, settings.chat.retries) == ("flat", 4)


def test_the_environment_wins_over_toml_field_by_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ragwright.toml").write_text('chat_model = "from-toml"\nchat_retries = 4\n')
    monkeypatch.setenv("RAGWRIGHT_CHAT_MODEL", "from-env")
    chat = load_settings().chat
    assert (chat.model, chat.retries) == ("from-env", 4)


def test_a_bad_grouped_value_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragwright.errors import ConfigError

    monkeypatch.setenv("RAGWRIGHT_JOB_LEASE", "0")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == "RAGWRIGHT_JOB_LEASE"
    assert "job_lease in ragwright.toml" in str(caught.value)
