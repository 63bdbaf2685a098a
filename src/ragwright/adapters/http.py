"""The one classifier from HTTP outcomes to stable failure categories.

Every provider adapter — OpenAI-compatible and Ollama chat, the local model, the remote
embedders and the HTTP reranker — turns a failed call into a :class:`ProviderError`
subclass through this module, so the same status means the same category everywhere:

| outcome | category |
|---|---|
| 408, 504, a client-side timeout (``httpx``/``openai``) | timeout |
| 429 | throttled (``retry-after`` / ``retry-after-ms`` honoured) |
| other 5xx, a connection or protocol failure | transient |
| 401, 403, 404 | invalid configuration |
| 400, 413, 422 | invalid input (chat refines it to unsupported option) |
| anything else | invalid output |

Classification uses status codes and exception types only, never message text. Whether
a category is worth another attempt is :attr:`FailureCategory.retryable`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from ragwright.deadline import current_deadline
from ragwright.errors import FailureCategory, ProviderError

ErrorT = TypeVar("ErrorT", bound=ProviderError)


def classify_status(status: int) -> FailureCategory:
    """The category of a non-success HTTP status."""
    if status in (408, 504):
        return FailureCategory.TIMEOUT
    if status == 429:
        return FailureCategory.THROTTLED
    if status in (401, 403, 404):
        return FailureCategory.INVALID_CONFIGURATION
    if status in (400, 413, 422):
        return FailureCategory.INVALID_INPUT
    if status >= 500:
        return FailureCategory.TRANSIENT
    return FailureCategory.INVALID_OUTPUT


def classify_exception(error: BaseException) -> FailureCategory:
    """The category of an exception raised by ``httpx`` or the ``openai`` SDK."""
    if isinstance(error, httpx.TimeoutException) or _sdk_error(error, "APITimeoutError"):
        return FailureCategory.TIMEOUT
    if _sdk_error(error, "APIStatusError"):
        return classify_status(error.status_code)  # type: ignore[attr-defined]
    if isinstance(error, httpx.HTTPStatusError):
        return classify_status(error.response.status_code)
    if isinstance(error, httpx.TransportError) or _sdk_error(error, "APIConnectionError"):
        return FailureCategory.TRANSIENT
    return FailureCategory.INVALID_OUTPUT


def _sdk_error(error: BaseException, name: str) -> bool:
    """Whether ``error`` is the ``openai`` SDK's exception ``name``. The SDK is looked up,
    not imported: its exceptions exist only once a provider adapter imported it, and
    importing it here would add ~1.4 s to every command (``search`` among them)."""
    sdk = sys.modules.get("openai")
    return sdk is not None and isinstance(error, getattr(sdk, name))


def retry_after(response: httpx.Response | None) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms`` or ``retry-after``)."""
    if response is None:
        return None
    headers: Mapping[str, str] = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                return None
    return None


def status_error(error_type: type[ErrorT], provider: str, response: httpx.Response) -> ErrorT:
    """The classified error for a non-success response."""
    return error_type(
        provider,
        classify_status(response.status_code),
        f"HTTP {response.status_code}",
        retry_after=retry_after(response),
    )


def exception_error(error_type: type[ErrorT], provider: str, error: BaseException) -> ErrorT:
    """The classified error for an ``httpx`` or ``openai`` exception."""
    response = error.response if _sdk_error(error, "APIStatusError") else None  # type: ignore[attr-defined]
    detail = f"HTTP {response.status_code}" if response is not None else type(error).__name__
    return error_type(
        provider, classify_exception(error), detail, retry_after=retry_after(response)
    )


def call_timeout(error_type: type[ProviderError], provider: str, default: float) -> float:
    """Seconds one HTTP call may take: what is left of the current deadline, else ``default``.

    Raises:
        ProviderError: of ``error_type``, ``deadline_exhausted``, when no time is left
            (a request is not started into a certain timeout).
    """
    deadline = current_deadline()
    if deadline is None:
        return default
    if deadline.expired:
        raise error_type(provider, FailureCategory.DEADLINE_EXHAUSTED, "before the request")
    return deadline.remaining()


def post_json(
    client: httpx.Client,
    error_type: type[ProviderError],
    provider: str,
    url: str,
    body: Mapping[str, Any],
    *,
    default_timeout: float,
) -> Any:
    """POST JSON under the current deadline; the decoded body or a classified error."""
    timeout = call_timeout(error_type, provider, default_timeout)
    try:
        response = client.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as error:
        raise exception_error(error_type, provider, error) from error
    return decode(error_type, provider, response)


def decode(error_type: type[ProviderError], provider: str, response: httpx.Response) -> Any:
    """Decoded JSON of a successful response, else a classified error of ``error_type``."""
    if response.status_code >= 400:
        raise status_error(error_type, provider, response)
    try:
        return response.json()
    except ValueError as error:
        raise error_type(
            provider, FailureCategory.INVALID_OUTPUT, "response is not JSON"
        ) from error
