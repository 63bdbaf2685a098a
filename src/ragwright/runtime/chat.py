"""The chat providers the settings choose (the primary and its fallbacks), their profiles,
and the local model's background process."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ragwright.chat.contract import ChatModel, ModelProfile
from ragwright.core.answers import SchemaStyle
from ragwright.errors import ConfigError
from ragwright.runtime.registry import Registry
from ragwright.settings import Settings

if TYPE_CHECKING:
    from ragwright.adapters.chatmodels.resident import ResidentModel

Close = Callable[[], Awaitable[None]]
"""A provider's async ``close`` (await it in the loop that used the provider)."""


class ProviderSpec(NamedTuple):
    """One configured provider: the primary (``setting`` is ``RAGWRIGHT_CHAT``) or a
    fallback (``RAGWRIGHT_CHAT_FALLBACKS[i]``); errors name its fields under ``setting``."""

    kind: str
    model: str
    base_url: str | None
    key: str | None
    name: str
    setting: str

    def field(self, part: str) -> str:
        """RAGWRIGHT_CHAT_MODEL for the primary, RAGWRIGHT_CHAT_FALLBACKS[0].model else."""
        if self.setting == "RAGWRIGHT_CHAT":
            return f"{self.setting}_{part.upper()}"
        return f"{self.setting}.{part}"

    def required_model(self) -> str:
        if not self.model:
            raise ConfigError(self.field("model"), f"required for {self.kind}")
        return self.model


# Provider SDKs load only when a provider is opened (the CLI starts faster).


def _local(settings: Settings, spec: ProviderSpec) -> tuple[ChatModel, Close]:
    if settings.chat.keep_warm > 0:
        from ragwright.adapters.chatmodels.resident import BackgroundLocalModel

        warm = BackgroundLocalModel(
            model_cache(settings),
            idle_timeout=settings.chat.keep_warm,
            threads=settings.chat.threads,
            name=spec.name,
        )
        return warm, warm.close
    from ragwright.adapters.chatmodels.local import OnDemandLocalModel

    local = OnDemandLocalModel(model_cache(settings), threads=settings.chat.threads, name=spec.name)
    return local, local.close


def _ollama(settings: Settings, spec: ProviderSpec) -> tuple[ChatModel, Close]:
    from ragwright.adapters.chatmodels.ollama import OllamaChatModel

    model = spec.required_model()
    base_url = spec.base_url or "http://127.0.0.1:11434"
    ollama = OllamaChatModel(model, base_url=base_url, name=spec.name)
    return ollama, ollama.close


def _azure_openai(settings: Settings, spec: ProviderSpec) -> tuple[ChatModel, Close]:
    from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel

    model = spec.required_model()
    if not spec.base_url:
        raise ConfigError(spec.field("base_url"), "the Azure OpenAI resource endpoint is required")
    azure = OpenAIChatModel(
        model, api_key=spec.key or "unused", azure_endpoint=spec.base_url, name=spec.name
    )
    return azure, azure.close


def _openai(settings: Settings, spec: ProviderSpec) -> tuple[ChatModel, Close]:
    from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel

    model = spec.required_model()
    openai = OpenAIChatModel(
        model, api_key=spec.key or "unused", base_url=spec.base_url, name=spec.name
    )
    return openai, openai.close


CHAT_PROVIDERS: Registry[Callable[[Settings, ProviderSpec], tuple[ChatModel, Close]]] = Registry(
    "RAGWRIGHT_CHAT_PROVIDER",
    {"local": _local, "ollama": _ollama, "azure-openai": _azure_openai, "openai": _openai},
)
"""Chat providers by kind: each opens one provider and returns it with its ``close``."""

VARIANTS_BY_DEFAULT = frozenset({"local", "ollama"})
"""Kinds whose automatic answer schema style is ``variants`` (anyOf for grammar
engines); the others get ``object``."""


def open_chat_provider(settings: Settings) -> tuple[ChatModel, Close]:
    """The configured primary provider and its async ``close`` (await it in the loop
    that used it).

    The local model starts on its first call, so a question that ends without eligible
    evidence never starts it.
    """
    key = settings.chat.api_key.get_secret_value() if settings.chat.api_key else None
    kind = settings.chat.provider
    spec = ProviderSpec(
        kind, settings.chat.model, settings.chat.base_url, key, kind, "RAGWRIGHT_CHAT"
    )
    return CHAT_PROVIDERS[kind](settings, spec)


def open_chat_providers(settings: Settings) -> tuple[list[ChatModel], Close]:
    """The primary and every ``chat_fallbacks`` entry, in order, named as
    :func:`chat_profiles` names them, with one async ``close`` for all.

    Raises:
        ConfigError: a fallback lacks its model or endpoint, names an unset API key
            variable, or shares its name with the primary.
    """
    primary, close_primary = open_chat_provider(settings)
    providers, closers = [primary], [close_primary]
    for index, fallback in enumerate(settings.chat.fallbacks):
        setting = f"RAGWRIGHT_CHAT_FALLBACKS[{index}]"
        if fallback.label == primary.name:
            raise ConfigError(f"{setting}.name", f"{fallback.label!r} is the primary's name")
        key = None
        if fallback.api_key_env:
            key = os.environ.get(fallback.api_key_env)
            if not key:
                raise ConfigError(
                    f"{setting}.api_key_env", f"the variable {fallback.api_key_env} is unset"
                )
        spec = ProviderSpec(
            fallback.provider, fallback.model, fallback.base_url, key, fallback.label, setting
        )
        provider, close = CHAT_PROVIDERS[spec.kind](settings, spec)
        providers.append(provider)
        closers.append(close)

    async def close_all() -> None:
        for close in closers:
            await close()

    return providers, close_all


def model_cache(settings: Settings) -> Path:
    """Where the local model's verified file (and its background process's record) live."""
    return settings.storage.home / "models"


def background_model(settings: Settings) -> ResidentModel | None:
    """The local model's background process for this home, if one runs."""
    from ragwright.adapters.chatmodels.resident import read_resident

    return read_resident(model_cache(settings))


def stop_background_model(settings: Settings) -> ResidentModel | None:
    """End this home's background model; the one stopped, or None if none ran."""
    from ragwright.adapters.chatmodels.resident import stop_resident

    return stop_resident(model_cache(settings))


def chat_profiles(settings: Settings) -> tuple[ModelProfile, ...]:
    """The primary's profile, then one per ``chat_fallbacks`` entry, in order.

    Pass them to :func:`build_chat_pipeline` (``profiles``) and to ``answer_question``
    (the primary as ``budget=Budget.for_profile(profiles[0])`` and
    ``schema_style=profiles[0].schema_style``; the rest as ``fallbacks``).
    """
    from ragwright.adapters.chatmodels.local import MODEL_ID as _LOCAL_MODEL

    primary = ModelProfile(
        name=settings.chat.provider,
        system=settings.chat.provider,
        model=_LOCAL_MODEL if settings.chat.provider == "local" else settings.chat.model,
        context_window=settings.chat.context_window,
        output_limit=settings.chat.output_limit,
        schema_style=answer_schema_style(settings),
    )
    return (
        primary,
        *(
            ModelProfile(
                name=f.label,
                system=f.provider,
                model=_LOCAL_MODEL if f.provider == "local" else f.model,
                context_window=f.context_window,
                output_limit=f.output_limit,
                schema_style=_schema_style(f.schema_style, f.provider),
                token_ratio=f.token_ratio,
            )
            for f in settings.chat.fallbacks
        ),
    )


def answer_schema_style(settings: Settings) -> SchemaStyle:
    """The answer schema style for the primary provider (``chat_schema_style``)."""
    return _schema_style(settings.chat.schema_style, settings.chat.provider)


def _schema_style(configured: str, kind: str) -> SchemaStyle:
    if configured in ("object", "variants"):
        return configured  # type: ignore[return-value]
    return "variants" if kind in VARIANTS_BY_DEFAULT else "object"
