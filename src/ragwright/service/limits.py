"""The body gate: a request with a body has its caller checked, then its body read
within its route's limit, before any route (or the framework's body parsing) sees it.

Every route that takes a ``POST``, ``PUT``, ``PATCH`` or ``DELETE`` declares a
:class:`BodyLimit` in the gate's table (``create_app`` builds it; a test walks the
router and fails on a route without one):

- **The caller first.** ``admit(scope)`` checks what the headers alone can tell: the
  bearer key on ``/v1/`` (401, 429 or 503 otherwise), a session this process holds for
  the page's signed-in routes (401 ``signed-out``); forms anyone may send (sign-in,
  sign-out) have only their small limit. A refused caller's body is never read, so an
  anonymous caller cannot make the process hold anything.
- **A limit per route.** A ``Content-Length`` over the limit is refused at once; a body
  without one (chunked) is read until it passes the limit, then refused. Both are
  ``413 body-too-large`` problem details naming the limit; what was read is dropped.
- **No limit, no body.** A request no declared route matches (404 or 405 to come) is
  handed to the app with an empty body, and what the client sends after it is dropped
  unbuffered: only a ``/v1/`` path keeps the service's default (the key checked, then
  ``RAGWRIGHT_SERVE_MAX_BODY``), as its callers expect.

The body the gate read is handed to the route as it arrived, and the client's
disconnect after it still reaches the route (which cancels its work on it).
docs/service.md, "Request bodies".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragwright.service.problems import Problem

GATED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Admit = Callable[[Scope], Awaitable[None]]


async def anyone(scope: Scope) -> None:
    """No caller check: the route's limit alone (a form anyone may send)."""


@dataclass(frozen=True, slots=True)
class BodyLimit:
    """A route's body: at most ``size`` bytes (``named``: the setting or constant that
    sets it, quoted in the 413), read only once ``admit(scope)`` has returned (it raises
    a :class:`Problem` to refuse the caller)."""

    size: int
    named: str
    admit: Admit = anyone


def too_large(limit: BodyLimit) -> Problem:
    """413: the body passes the route's limit (nothing of it was used)."""
    return Problem(
        413,
        "body-too-large",
        "The request body is too large",
        f"body: larger than this route's limit of {limit.size} bytes ({limit.named}); "
        "nothing was done",
        limit=limit.size,
        errors=[{"field": "body", "rule": f"at most {limit.size} bytes"}],
    )


class BodyGate:
    """ASGI middleware: the caller checked, then the body read, by ``routes[(method,
    path template)]``; a request matching none by the first of ``prefixes`` its path
    starts with, else with no body at all."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Mapping[tuple[str, str], BodyLimit],
        prefixes: Mapping[str, BodyLimit],
    ) -> None:
        self.app = app
        self.routes = dict(routes)
        self.prefixes = dict(prefixes)
        self._patterns: list[tuple[str, re.Pattern[str], BodyLimit]] = [
            (method, compile_path(path)[0], limit) for (method, path), limit in routes.items()
        ]

    def limit_of(self, method: str, path: str) -> BodyLimit | None:
        """The limit of the route ``method`` and ``path`` reach, else of their prefix."""
        for declared, pattern, limit in self._patterns:
            if declared == method and pattern.match(path):
                return limit
        return next((v for k, v in self.prefixes.items() if path.startswith(k)), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in GATED_METHODS:
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope["method"], scope["path"])
        if limit is None:
            await self.app(scope, replay(b"", dropping(receive)), send)
            return
        try:
            await limit.admit(scope)
        except Problem as problem:
            await problem.response(scope["path"])(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit.size:
            await too_large(limit).response(scope["path"])(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body ended: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit.size:
                await too_large(limit).response(scope["path"])(scope, receive, send)
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


def dropping(receive: Receive) -> Receive:
    """A ``receive`` that skips the client's body (holding none of it) and gives what
    comes after: its disconnect."""

    async def receiving() -> Message:
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message

    return receiving
