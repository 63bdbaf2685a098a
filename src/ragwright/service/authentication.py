"""Who is calling: an ``Authorization: Bearer <key>`` header turned into an API key, or
the problem a caller gets instead (401 without a valid key, 503 while the key store is
down, 429 while the client's address waits after too many wrong keys:
:mod:`ragwright.service.throttling`). The body gate (:mod:`ragwright.service.limits`)
calls it before any body is read; the routes' dependency reuses what it found."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.types import Scope

from ragwright.application import Application
from ragwright.application.keys import ApiKey
from ragwright.errors import StorageError
from ragwright.service.problems import Problem
from ragwright.service.state import ServiceState
from ragwright.service.throttling import FailureBackoff, authentication_throttled, client_address

REALM = 'Bearer realm="ragwright"'
# Where the body gate leaves the caller's key in the request's scope state.
KEY_STATE = "ragwright_key"


def bearer_token(authorization: str | None) -> str | None:
    """The token of a ``Bearer`` Authorization header, else ``None`` (no header, another
    scheme, or no token: all answered alike)."""
    scheme, token = get_authorization_scheme_param(authorization)
    if not authorization or scheme.lower() != "bearer" or not token:
        return None
    return token


async def authenticated(
    application: Application, token: str | None, *, address: str, failures: FailureBackoff
) -> ApiKey:
    """The active key ``token`` is the secret of, sent from ``address``; a wrong one
    counts in ``failures``, and while ``address`` waits its tokens are not checked.

    Raises:
        Problem: 401 ``unauthenticated`` (no token), 429 ``authentication-throttled``
            (``address`` failed too often: it waits, ``Retry-After``), 401
            ``invalid-key`` (unknown or revoked), 503 ``keys-unavailable`` (the key store
            cannot be read).
    """
    if token is None:
        raise Problem(
            401,
            "unauthenticated",
            "Authentication required",
            "send an API key as 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": REALM},
        )
    wait = failures.wait(address)
    if wait > 0:
        raise authentication_throttled(wait)
    try:
        # Off the event loop: with keys in PostgreSQL a call may wait for the server
        # (connect_timeout) while every other request must go on.
        key = await asyncio.to_thread(application.authenticate, token)
    except StorageError as error:
        # The key store is down (a PostgreSQL restart): no caller can be checked now,
        # which is the service's condition, not a bug or the caller's fault.
        raise Problem(
            503,
            "keys-unavailable",
            "Callers cannot be authenticated now",
            f"the API key store is unavailable ({type(error).__name__}); nothing was done: retry",
        ) from error
    if key is None:
        failures.failed(address)
        raise Problem(
            401,
            "invalid-key",
            "Invalid API key",
            "the API key is unknown or revoked",
            headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
        )
    return key


def gated_key(state: dict[str, Any] | None) -> ApiKey | None:
    """The key the body gate authenticated for this request, if it did."""
    key = (state or {}).get(KEY_STATE)
    return key if isinstance(key, ApiKey) else None


async def bearer_caller(state: ServiceState, scope: Scope) -> None:
    """The body gate's check for ``/v1/``: the request's bearer key, from its headers
    alone, left in the scope's state for the route (:func:`gated_key`).

    Raises:
        Problem: as :func:`authenticated`.
    """
    token = bearer_token(Headers(scope=scope).get("authorization"))
    key = await authenticated(
        state.application, token, address=client_address(scope), failures=state.failures
    )
    scope.setdefault("state", {})[KEY_STATE] = key
