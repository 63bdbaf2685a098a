"""Signed-in sessions of the page: a random id in a cookie, the key's id on the server.

The cookie holds only a random session id (``HttpOnly``, ``SameSite=Strict``, ``Secure``
when the request came over TLS, path ``/``); the server maps it to the API key's *id*,
never its secret, and the page re-reads that key from the key store on every request, so
a revoked key signs its sessions out at once. Each session has its own CSRF token, sent
in every form and in the ``X-CSRF-Token`` header of the page's fetch calls, and compared
in constant time.

Sessions live in this process's memory: a restart signs everyone out, and replicas
behind a load balancer need sticky sessions (docs/web.md). At most :data:`MAX_SESSIONS`
are kept (the oldest go first) and each ends after :data:`IDLE_SECONDS` unused.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

SESSION_COOKIE = "ragwright_session"
SIGN_IN_COOKIE = "ragwright_sign_in"
CSRF_HEADER = "X-CSRF-Token"
MAX_SESSIONS = 10_000
IDLE_SECONDS = 8 * 3600.0


@dataclass
class Session:
    """One signed-in browser: the key it signed in with (by id) and its CSRF token."""

    session_id: str
    key_id: str
    csrf_token: str
    last_used: float

    @staticmethod
    def new_token() -> str:
        """A random token (256 bits, URL-safe)."""
        return secrets.token_urlsafe(32)

    def csrf_matches(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token, self.csrf_token)


class SessionStore:
    """Sessions by id, bounded in number and idle time (thread-safe)."""

    def __init__(
        self,
        *,
        max_sessions: int = MAX_SESSIONS,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_sessions
        self._idle = idle_seconds
        self._clock = clock

    def create(self, key_id: str) -> Session:
        session = Session(Session.new_token(), key_id, Session.new_token(), self._clock())
        with self._lock:
            self._sessions[session.session_id] = session
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (its idle time restarts), else ``None``."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_used > self._idle:
                del self._sessions[session_id]
                return None
            session.last_used = now
            self._sessions.move_to_end(session_id)
            return session

    def delete(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def __len__(self) -> int:
        return len(self._sessions)


def tokens_match(expected: str | None, given: str | None) -> bool:
    """Both present and equal, compared in constant time."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected), str(given))
