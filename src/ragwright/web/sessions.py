"""Signed-in sessions of the page: a random id in a cookie, the key's id on the server.

The cookie holds only a random session id (``HttpOnly``, ``SameSite=Strict``, ``Secure``
when the request came over TLS, path ``/``); the server maps it to the API key's *id*,
never its secret, and the page re-reads that key from the key store on every request, so
a revoked key signs its sessions out at once. Each session has its own CSRF token, sent
in every form and in the ``X-CSRF-Token`` header of the page's fetch calls, and compared
in constant time.

Sessions live in this process's memory: a restart signs everyone out, and replicas
behind a load balancer need sticky sessions (docs/web.md). Each key has at most
``max_per_key`` (``RAGWRIGHT_SERVE_SESSIONS_PER_KEY``): past it that key's least
recently used session ends, never another key's, so signing in again and again with one
key signs out only its own browsers. Each session ends after :data:`IDLE_SECONDS` unused.
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
    """Sessions by id, bounded per key and in idle time (thread-safe)."""

    def __init__(
        self,
        *,
        max_per_key: int,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Least recently used first, overall and per key.
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._by_key: dict[str, OrderedDict[str, None]] = {}
        self._lock = threading.Lock()
        self._max_per_key = max_per_key
        self._idle = idle_seconds
        self._clock = clock

    def create(self, key_id: str) -> Session:
        """A new session for ``key_id``; past ``max_per_key``, that key's least recently
        used sessions end (and every session idle too long, of any key)."""
        now = self._clock()
        session = Session(Session.new_token(), key_id, Session.new_token(), now)
        with self._lock:
            self._forget_idle(now)
            self._sessions[session.session_id] = session
            own = self._by_key.setdefault(key_id, OrderedDict())
            own[session.session_id] = None
            while len(own) > self._max_per_key:
                oldest, _ = own.popitem(last=False)
                del self._sessions[oldest]
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
                self._remove(session)
                return None
            session.last_used = now
            self._sessions.move_to_end(session_id)
            self._by_key[session.key_id].move_to_end(session_id)
            return session

    def delete(self, session_id: str | None) -> None:
        with self._lock:
            session = self._sessions.get(session_id or "")
            if session is not None:
                self._remove(session)

    def __len__(self) -> int:
        return len(self._sessions)

    def _remove(self, session: Session) -> None:
        del self._sessions[session.session_id]
        own = self._by_key[session.key_id]
        del own[session.session_id]
        if not own:
            del self._by_key[session.key_id]

    def _forget_idle(self, now: float) -> None:
        """End the sessions unused for longer than the idle time (least recently used
        first, so the loop stops at the first one still live)."""
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_used <= self._idle:
                break
            self._remove(oldest)


def tokens_match(expected: str | None, given: str | None) -> bool:
    """Both present and equal, compared in constant time."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected), str(given))
