"""One place that turns HTTP outcomes into stable failure categories.

Classification uses status codes and transport exception types only, never message
text, so callers can branch on :class:`FailureCategory`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from ragwright.errors import FailureCategory, ProviderError


def classify_status(status: int) -> tuple[FailureCategory, bool]:
    """Category and retryability of a non-success HTTP status."""
    if status == 429:
        return FailureCategory.THROTTLED, True
    if status in (401, 403, 404):
        return FailureCategory.INVALID_CONFIGURATION, False
    if status in (400, 413, 422):
        return FailureCategory.INVALID_INPUT, False
    if status in (408, 504):
        return FailureCategory.TIMEOUT, True
    if status >= 500:
        return FailureCategory.TRANSIENT, True
    return FailureCategory.INVALID_OUTPUT, False


def post_json(
    client: httpx.Client,
    provider: str,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """POST JSON and return the decoded body, or raise a classified ProviderError."""
    try:
        response = client.post(url, json=body, headers=dict(headers or {}))
    except httpx.TimeoutException as error:
        raise ProviderError(
            provider, FailureCategory.TIMEOUT, type(error).__name__, retryable=True
        ) from error
    except httpx.TransportError as error:
        raise ProviderError(
            provider, FailureCategory.TRANSIENT, type(error).__name__, retryable=True
        ) from error
    return decode(provider, response)


def decode(provider: str, response: httpx.Response) -> Any:
    """Decoded JSON of a successful response, else a classified ProviderError."""
    if response.status_code >= 400:
        category, retryable = classify_status(response.status_code)
        raise ProviderError(provider, category, f"HTTP {response.status_code}", retryable=retryable)
    try:
        return response.json()
    except ValueError as error:
        raise ProviderError(
            provider, FailureCategory.INVALID_OUTPUT, "response is not JSON", retryable=False
        ) from error
