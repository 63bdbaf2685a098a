"""Chat-model provider adapters: OpenAI-compatible, Ollama, and the bundled local model."""

from __future__ import annotations

import json

from ragwright.errors import ChatError, FailureCategory


def require_json(provider: str, text: str, finish_reason: str | None) -> None:
    """Schema-constrained output must parse; a cut at the token limit is named as such."""
    try:
        json.loads(text)
    except ValueError as error:
        reason = (
            "response cut at the output token limit before the JSON closed"
            if finish_reason == "length"
            else "response is not JSON"
        )
        raise ChatError(provider, FailureCategory.INVALID_OUTPUT, reason) from error
