"""Settings: environment (``RAGWRIGHT_*``), then an optional ``ragwright.toml``, then defaults.

The TOML file is ``./ragwright.toml`` or the path in ``RAGWRIGHT_CONFIG``. Everything is
validated at start-up; an invalid value raises :class:`ConfigError` naming the setting
as the user would spell it (``RAGWRIGHT_MAX_WORDS``).

Settings come in groups (``settings.chat.model``, ``settings.index.max_words``); users
name them flat (``RAGWRIGHT_CHAT_MODEL``, ``chat_model`` in TOML), and so may callers
(``Settings(chat_model=...)``): :mod:`ragwright.settings.flat` holds the one table.
``docs/configuration.md`` is generated from the groups (``python -m ragwright.settings.doc``).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast

from pydantic import Field, ValidationError, create_model, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ragwright.errors import ConfigError
from ragwright.settings.answering import (
    AnswersSettings,
    ChatSettings,
    JobsSettings,
    ServiceSettings,
    TelemetrySettings,
)
from ragwright.settings.evidence import (
    ConversionSettings,
    EmbeddingSettings,
    IndexSettings,
    IngestSettings,
    RemoteSettings,
    RetrievalSettings,
    StorageSettings,
)
from ragwright.settings.fallback import ChatFallback, ChatProviderKind
from ragwright.settings.flat import FLAT, env_name, nest, user_name
from ragwright.types import ChunkingPolicy

__all__ = [
    "CHUNKING_SETTINGS",
    "NOT_SETTINGS",
    "ChatFallback",
    "ChatProviderKind",
    "Settings",
    "load_settings",
]


# The settings that make the chunking policy (and so its chunking version).
CHUNKING_SETTINGS: tuple[str, ...] = ("chunking", "max_words", "max_tokens", "overlap")


class Settings(BaseSettings):
    """Every setting ragwright reads, in groups. Flat names are accepted as keywords."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    storage: StorageSettings = Field(default_factory=StorageSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    conversion: ConversionSettings = Field(default_factory=ConversionSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    remote: RemoteSettings = Field(default_factory=RemoteSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    answers: AnswersSettings = Field(default_factory=AnswersSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    def __init__(self, **values: Any) -> None:
        super().__init__(**nest(values))

    @model_validator(mode="after")
    def _window_holds_output(self) -> Settings:
        if self.chat.context_window <= self.chat.output_limit:
            raise ValueError(
                f"chat_context_window ({self.chat.context_window}) must exceed "
                f"chat_output_limit ({self.chat.output_limit})"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        environment = EnvSettingsSource(
            _flat_model(), env_prefix="RAGWRIGHT_", case_sensitive=False
        )
        return (
            init_settings,
            _NestedSource(settings_cls, environment),
            _NestedSource(settings_cls, _toml_values),
        )

    def chunking_policy(self) -> ChunkingPolicy:
        """The chunking policy these settings select."""
        return ChunkingPolicy(
            kind=self.index.chunking,
            max_words=self.index.max_words,
            overlap=self.index.overlap,
            max_tokens=self.index.max_tokens,
        )

    @property
    def chunking_configured(self) -> bool:
        """Whether a chunking setting (``chunking``, ``max_words``, ``max_tokens``,
        ``overlap``) was given (environment, ``ragwright.toml`` or a keyword) rather than
        left to its default: queries then read the version it produces, whatever the
        index holds."""
        return bool(self.index.model_fields_set & set(CHUNKING_SETTINGS))

    def with_overrides(self, **overrides: object) -> Settings:
        """These settings with ``overrides`` (flat names) applied and validated like every
        setting (an invalid value raises :class:`ConfigError` naming it). What was left
        to its default stays so (:attr:`chunking_configured` still tells)."""
        return _validated(lambda: Settings(**{**self.model_dump(exclude_unset=True), **overrides}))

    @property
    def index_path(self) -> Path:
        """Directory of the embedded index for this collection."""
        return self.storage.home / "index" / self.index.collection

    @property
    def key_store_path(self) -> Path:
        """The API key store: ``keys_path``, else ``keys.sqlite3`` in the home."""
        return self.storage.keys_path or self.storage.home / "keys.sqlite3"


class _NestedSource(PydanticBaseSettingsSource):
    """A source read under the flat names and handed on in groups (so sources merge
    field by field, the higher one winning)."""

    def __init__(
        self, settings_cls: type[BaseSettings], read: Callable[[], Mapping[str, Any]]
    ) -> None:
        super().__init__(settings_cls)
        self._read = read

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return nest(self._read())


@cache
def _flat_model() -> type[BaseSettings]:
    """A model with one field per flat name, for reading (and JSON-decoding) the
    environment exactly as a flat model would."""
    groups = Settings.model_fields
    fields: dict[str, Any] = {}
    for flat, (group, name) in FLAT.items():
        info = cast(type[BaseSettings], groups[group].annotation).model_fields[name]
        fields[flat] = (info.annotation, info)
    return cast(type[BaseSettings], create_model("FlatSettings", __base__=BaseSettings, **fields))


def _toml_values() -> dict[str, Any]:
    path = Path(_toml_path())
    if not path.is_file():
        return {}
    with path.open("rb") as file:
        return tomllib.load(file)


# Variables of the RAGWRIGHT_ prefix that are not settings: where the settings file is, a
# client's key for `ingest --server`, and the tests' own servers.
NOT_SETTINGS = frozenset({"RAGWRIGHT_CONFIG", "RAGWRIGHT_API_KEY"})
_TEST_PREFIX = "RAGWRIGHT_TEST_"


def load_settings(**overrides: object) -> Settings:
    """Validated settings; raises :class:`ConfigError` naming the first bad setting, or
    the first ``RAGWRIGHT_*`` environment variable that is not a setting (a misspelt
    setting would otherwise be ignored without a word). ``overrides`` take flat names."""
    config = os.environ.get("RAGWRIGHT_CONFIG")
    if config and not Path(config).is_file():
        raise ConfigError("RAGWRIGHT_CONFIG", f"no such file: {config}")
    _check_environment_names(os.environ)
    return _validated(lambda: Settings(**overrides))


def _check_environment_names(environment: Mapping[str, str]) -> None:
    known = {env_name(flat) for flat in FLAT} | NOT_SETTINGS
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
        # A setting is named as the user spells it; a nested one (a fallback's field) by
        # its path: ..._FALLBACKS[1].model. It may come from the environment or
        # ragwright.toml: name both.
        name, key = user_name(loc) if loc else ("settings", "")
        where = f"{name} or {key} in {_toml_path()}" if loc else name
        raise ConfigError(name, f"{first['msg']} (set as {where})") from error
    except ValueError as error:  # malformed TOML
        raise ConfigError("ragwright.toml", str(error)) from error
