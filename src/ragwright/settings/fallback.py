"""One alternate chat provider (an entry of ``RAGWRIGHT_CHAT_FALLBACKS``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from ragwright.settings.base import setting

ChatProviderKind = Literal["local", "openai", "azure-openai", "ollama"]


class ChatFallback(BaseModel):
    """One alternate chat provider, tried in list order when the primary fails in a
    switchable category. Each names its own limits: the request is re-prepared for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ChatProviderKind = setting(
        ..., "`local`, `openai`, `azure-openai`, `ollama`", shown="(required)"
    )
    model: str = setting(
        "", "model, or Azure deployment name (required for remote providers)", shown="—"
    )
    name: str | None = setting(
        None,
        "label in results, cache entries and telemetry; must differ from the primary's "
        "(`RAGWRIGHT_CHAT_PROVIDER`) and the other entries'",
        shown="`provider:model`",
        min_length=1,
    )
    base_url: str | None = setting(
        None, "OpenAI-compatible base URL, Azure resource endpoint, or Ollama URL"
    )
    api_key_env: str | None = setting(
        None,
        "name of the environment variable holding its API key (keys never go in the file)",
        min_length=1,
    )
    context_window: int = setting(4096, "its context window", gt=0)
    output_limit: int = setting(
        512, "output tokens reserved for its answer (below the window)", gt=0
    )
    schema_style: Literal["auto", "object", "variants"] = setting(
        "auto", "`object`, `variants`, or auto (variants for local/ollama, object otherwise)"
    )
    token_ratio: float = setting(
        1.0,
        "its tokens per o200k_base token (above 1 for a finer tokenizer, up to 4)",
        shown="`1.0`",
        gt=0,
        le=4,
    )

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
