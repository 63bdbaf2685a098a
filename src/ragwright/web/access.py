"""Who is asking on the page: the request's session and the key it signed in with, read
again from the key store on every request (and, for a request with a body, the session
alone checked before its body is read), and the page's refusals (signed out, no CSRF
token, a scope the key lacks, the key store unavailable). The sessions themselves live
on the service's shared state (:attr:`~ragwright.service.state.ServiceState.sessions`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from starlette.types import Scope

from ragwright.application import Application
from ragwright.application.keys import ApiKey
from ragwright.errors import StorageError
from ragwright.service.dependencies import State
from ragwright.service.problems import Problem
from ragwright.web.sessions import CSRF_HEADER, SESSION_COOKIE, Session, SessionStore


def session_store(state: State) -> SessionStore:
    """This process's page sessions (one store per app)."""
    return state.sessions


Sessions = Annotated[SessionStore, Depends(session_store)]


async def signed_in(
    request: Request, application: Application, store: SessionStore
) -> tuple[Session, ApiKey] | None:
    """The request's session and its key as the store holds it now; a session whose
    key is gone or revoked is ended here."""
    session = store.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return None
    try:
        key = await asyncio.to_thread(application.key, session.key_id)
    except StorageError as error:
        raise keys_unavailable(error) from error
    if key is None or not key.active:
        store.delete(session.session_id)
        return None
    return session, key


async def required(
    request: Request, application: Application, store: SessionStore
) -> tuple[Session, ApiKey]:
    """As :func:`signed_in`, or 401 ``signed-out``. Called in the route's body, not as a
    dependency: a request with a body was checked for a session by the body gate before
    it was read (:func:`session_caller`), and this re-reads the session's key."""
    who = await signed_in(request, application, store)
    if who is None:
        raise signed_out()
    return who


async def session_caller(store: SessionStore, scope: Scope) -> None:
    """The body gate's check for the page's signed-in routes: a session ``store`` holds
    for the request's cookie, from its headers alone (its key is re-read by the route).

    Raises:
        Problem: 401 ``signed-out``, before any of the body is read.
    """
    if store.get(Request(scope).cookies.get(SESSION_COOKIE)) is None:
        raise signed_out()


def signed_out() -> Problem:
    return Problem(401, "signed-out", "Signed out", "sign in again with your API key")


def csrf_refused() -> Problem:
    return Problem(
        403,
        "csrf",
        "Refused: no valid CSRF token",
        f"a state-changing request from the page needs its session's token "
        f"(the form's 'csrf' field or the {CSRF_HEADER} header); reload the page",
    )


def missing_scope(scope: str) -> Problem:
    return Problem(
        403,
        "insufficient-scope",
        "Not allowed",
        f"this API key lacks the {scope!r} scope",
        required_scope=scope,
    )


def keys_unavailable(error: Exception) -> Problem:
    return Problem(
        503,
        "keys-unavailable",
        "Callers cannot be authenticated now",
        f"the API key store is unavailable ({type(error).__name__}); nothing was done: retry",
    )
