"""The flat names of settings, and the one table that maps them into groups.

Every setting has a flat name: its environment variable is ``RAGWRIGHT_`` and the name in
upper case, its key in ``ragwright.toml`` is the name itself, and ``Settings(name=...)``,
``load_settings(name=...)`` and ``Settings.with_overrides(name=...)`` take it as a keyword.
Code reads the nested field (``settings.chat.model`` for ``chat_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

_TABLE = {
    "home": ("storage", "home"),
    "keys_path": ("storage", "keys_path"),
    "database_url": ("storage", "database_url"),
    "redis_url": ("storage", "redis_url"),
    "backend": ("index", "backend"),
    "qdrant_location": ("index", "qdrant_location"),
    "qdrant_api_key": ("index", "qdrant_api_key"),
    "collection": ("index", "collection"),
    "chunking": ("index", "chunking"),
    "max_words": ("index", "max_words"),
    "max_tokens": ("index", "max_tokens"),
    "overlap": ("index", "overlap"),
    "bm25_k1": ("index", "bm25_k1"),
    "bm25_b": ("index", "bm25_b"),
    "document_types": ("index", "document_types"),
    "batch_size": ("ingest", "batch_size"),
    "ingest_lease": ("ingest", "lease"),
    "ingest_deadline": ("ingest", "deadline"),
    "convert_max_bytes": ("conversion", "max_bytes"),
    "convert_max_inflated": ("conversion", "max_inflated"),
    "convert_max_pages": ("conversion", "max_pages"),
    "convert_max_chars": ("conversion", "max_chars"),
    "convert_timeout": ("conversion", "timeout"),
    "convert_max_memory": ("conversion", "max_memory"),
    "convert_workers": ("conversion", "workers"),
    "embedding_provider": ("embedding", "provider"),
    "embedding_profile_id": ("embedding", "profile_id"),
    "embedding_model": ("embedding", "model"),
    "embedding_digest": ("embedding", "digest"),
    "embedding_dimensions": ("embedding", "dimensions"),
    "embedding_document_format": ("embedding", "document_format"),
    "embedding_query_format": ("embedding", "query_format"),
    "embedding_max_input_tokens": ("embedding", "max_input_tokens"),
    "embedding_threads": ("embedding", "threads"),
    "embedding_in_flight": ("embedding", "in_flight"),
    "embedding_verify_model": ("embedding", "verify_model"),
    "ollama_url": ("embedding", "ollama_url"),
    "openai_base_url": ("embedding", "openai_base_url"),
    "openai_api_key": ("embedding", "openai_api_key"),
    "azure_deployment": ("embedding", "azure_deployment"),
    "azure_api_version": ("embedding", "azure_api_version"),
    "remote_call_attempts": ("remote", "call_attempts"),
    "remote_call_budget": ("remote", "call_budget"),
    "rrf_k": ("retrieval", "rrf_k"),
    "rrf_weights": ("retrieval", "rrf_weights"),
    "hybrid_candidates": ("retrieval", "hybrid_candidates"),
    "threshold_dense": ("retrieval", "threshold_dense"),
    "threshold_sparse": ("retrieval", "threshold_sparse"),
    "threshold_fusion": ("retrieval", "threshold_fusion"),
    "threshold_rerank": ("retrieval", "threshold_rerank"),
    "reranker": ("retrieval", "reranker"),
    "reranker_url": ("retrieval", "reranker_url"),
    "reranker_model": ("retrieval", "reranker_model"),
    "chat_provider": ("chat", "provider"),
    "chat_model": ("chat", "model"),
    "chat_base_url": ("chat", "base_url"),
    "chat_api_key": ("chat", "api_key"),
    "chat_max_messages": ("chat", "max_messages"),
    "chat_max_input_tokens": ("chat", "max_input_tokens"),
    "chat_max_attempts": ("chat", "max_attempts"),
    "chat_retries": ("chat", "retries"),
    "chat_capacity": ("chat", "capacity"),
    "chat_throttle_cooldown": ("chat", "throttle_cooldown"),
    "chat_cache_ttl": ("chat", "cache_ttl"),
    "chat_cache_max_entries": ("chat", "cache_max_entries"),
    "chat_temperature": ("chat", "temperature"),
    "chat_keep_warm": ("chat", "keep_warm"),
    "command_keep_warm": ("chat", "command_keep_warm"),
    "chat_threads": ("chat", "threads"),
    "chat_schema_style": ("chat", "schema_style"),
    "chat_context_window": ("chat", "context_window"),
    "chat_output_limit": ("chat", "output_limit"),
    "chat_fallbacks": ("chat", "fallbacks"),
    "answer_deadline": ("answers", "deadline"),
    "answer_style": ("answers", "style"),
    "answerability_threshold": ("answers", "answerability_threshold"),
    "answer_support_check": ("answers", "support_check"),
    "templates": ("answers", "templates"),
    "evidence_only_on_model_failure": ("answers", "evidence_only_on_model_failure"),
    "draft_max_age": ("answers", "draft_max_age"),
    "serve_concurrency": ("service", "concurrency"),
    "serve_tenant_concurrency": ("service", "tenant_concurrency"),
    "serve_max_body": ("service", "max_body"),
    "serve_max_ingest_body": ("service", "max_ingest_body"),
    "serve_auth_failures": ("service", "auth_failures"),
    "serve_auth_backoff": ("service", "auth_backoff"),
    "serve_auth_window": ("service", "auth_window"),
    "serve_sign_ins_per_key": ("service", "sign_ins_per_key"),
    "serve_sessions_per_key": ("service", "sessions_per_key"),
    "job_workers": ("jobs", "workers"),
    "batch_capacity": ("jobs", "capacity"),
    "batch_tenant_capacity": ("jobs", "tenant_capacity"),
    "job_ttl": ("jobs", "ttl"),
    "job_retention": ("jobs", "retention"),
    "job_lease": ("jobs", "lease"),
    "job_deadline": ("jobs", "deadline"),
    "telemetry_exporter": ("telemetry", "exporter"),
    "telemetry_endpoint": ("telemetry", "endpoint"),
    "telemetry_service_name": ("telemetry", "service_name"),
    "telemetry_capture_content": ("telemetry", "capture_content"),
}

FLAT: Mapping[str, tuple[str, str]] = MappingProxyType(_TABLE)
"""Flat name → (group, field), in the order of the documentation."""

NESTED: Mapping[tuple[str, str], str] = MappingProxyType({v: k for k, v in _TABLE.items()})
"""(group, field) → flat name."""

GROUPS: tuple[str, ...] = tuple(dict.fromkeys(group for group, _ in _TABLE.values()))
"""The group names, in the order of the documentation."""


def env_name(flat: str) -> str:
    """The environment variable of a flat name."""
    return f"RAGWRIGHT_{flat.upper()}"


def nest(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every flat key moved into its group; other keys (groups, unknown
    names, left for validation to refuse) are kept. A flat key wins over the same field
    given inside its group."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        if key not in FLAT:
            nested[key] = dict(value) if isinstance(value, Mapping) else value
    for key, value in values.items():
        if key in FLAT:
            group, field = FLAT[key]
            current = nested.get(group)
            if isinstance(current, BaseModel):
                current = current.model_dump()
            nested[group] = {**(current if isinstance(current, dict) else {}), field: value}
    return nested


def user_name(loc: tuple[int | str, ...]) -> tuple[str, str]:
    """A validation error's location as the user spells it: the environment variable with
    any path inside it (``RAGWRIGHT_CHAT_FALLBACKS[1].model``), and the TOML key."""
    if len(loc) >= 2 and (loc[0], loc[1]) in NESTED:
        flat, rest = NESTED[(str(loc[0]), str(loc[1]))], loc[2:]
    else:
        flat, rest = str(loc[0]), loc[1:]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest)
    return env_name(flat) + path, flat
