"""The body gate: a request with a body is authenticated, then its body read within its
route's limit, before any route (or the framework's body parsing) sees it.

- **Authentication first.** A ``POST``, ``PUT``, ``PATCH`` or ``DELETE`` under ``/v1/``
  without a valid key is answered 401 (503 while the key store is down) from its headers
  alone: its body is never read, so an anonymous caller cannot make the process hold
  anything.
- **A limit per route.** ``POST /v1/ingestions`` may send up to
  ``RAGWRIGHT_SERVE_MAX_INGEST_BODY`` bytes, every other route
  ``RAGWRIGHT_SERVE_MAX_BODY``. A ``Content-Length`` over the limit is refused at once;
  a body without one (chunked) is read until it passes the limit, then refused. Both are
  ``413 body-too-large`` problem details naming the limit; what was read is dropped.

The body the gate read is handed to the route as it arrived, and the client's
disconnect after it still reaches the route (which cancels its work on it).
docs/service.md, "Request bodies".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragwright.application.keys import ApiKey
from ragwright.service.authentication import KEY_STATE, bearer_token
from ragwright.service.problems import Problem

GATED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
GATED_PREFIX = "/v1/"


def too_large(limit: int, setting: str) -> Problem:
    """413: the body passes the route's limit (nothing of it was used)."""
    return Problem(
        413,
        "body-too-large",
        "The request body is too large",
        f"body: larger than this route's limit of {limit} bytes ({setting}); nothing was done",
        limit=limit,
        errors=[{"field": "body", "rule": f"at most {limit} bytes"}],
    )


class BodyGate:
    """ASGI middleware: authenticate (``authenticate(token)`` returns the key or raises
    a :class:`Problem`), then read the body within ``limits[path]`` (else ``default``;
    each a ``(bytes, setting name)`` pair)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticate: Callable[[str | None], Awaitable[ApiKey]],
        default: tuple[int, str],
        limits: Mapping[str, tuple[int, str]],
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.default = default
        self.limits = dict(limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in GATED_METHODS
            or not scope["path"].startswith(GATED_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            key = await self.authenticate(bearer_token(headers.get("authorization")))
        except Problem as problem:
            await problem.response(scope["path"])(scope, receive, send)
            return
        scope.setdefault("state", {})[KEY_STATE] = key
        limit, setting = self.limits.get(scope["path"], self.default)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await too_large(limit, setting).response(scope["path"])(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body ended: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await too_large(limit, setting).response(scope["path"])(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replay(b"".join(chunks), receive), send)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the client sends next (its
    disconnect)."""
    given = False

    async def receiving() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receiving
