"""What every settings group shares: frozen, no unknown keys, fields declared by :func:`setting`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Group(BaseModel):
    """One group of settings (``Settings.chat``, ``Settings.index``, ...).

    A field's description is its line in ``docs/configuration.md`` (Markdown); the
    environment variable and TOML key that reach it are listed in
    :data:`ragwright.settings.flat.FLAT`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


def setting(default: Any, meaning: str, *, shown: str | None = None, **constraints: Any) -> Any:
    """A settings field: its ``default``, its ``meaning`` for the documentation, and its
    pydantic ``constraints`` (``gt``, ``le``, ``pattern``...). ``shown`` is the default as
    the documentation states it when the value alone would mislead (``cores``)."""
    extra: dict[str, Any] | None = {"shown": shown} if shown is not None else None
    return Field(default, description=meaning, json_schema_extra=extra, **constraints)
