"""Throttles on authentication: failed attempts per client address, with an
exponential back-off, and sign-ins per API key in a sliding window.

- :class:`FailureBackoff` counts failed authentications (a wrong or revoked key, by
  bearer on ``/v1/`` or through the page's sign-in form) per client address. The first
  ``allowed`` failures are answered as usual; the one that reaches ``allowed`` starts a
  wait of ``first_wait`` seconds, and each failure after a wait ends doubles the next
  one, up to ``window``. While an address waits, its attempts are refused (``429`` with
  ``Retry-After``) without their key being checked, so a guesser learns nothing and
  costs nothing. An address quiet for ``window`` seconds (after its last failure or the
  end of its wait, whichever is later) is forgotten.
- :class:`SlidingLimit` allows at most ``allowed`` events per name in any ``window``
  seconds (the page's sign-ins per key): one key signing in without pause cannot make
  sessions faster than that.

Both live in this process's memory, like the page's sessions (replicas count apart),
and are bounded: at most :data:`MAX_ADDRESSES` addresses are remembered (past it the
longest-quiet is forgotten first). docs/service.md, "Authentication failures".
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Scope

from ragwright.service.problems import Problem
from ragwright.settings.answering import ServiceSettings

MAX_ADDRESSES = 100_000
# The window of RAGWRIGHT_SERVE_SIGN_INS_PER_KEY.
SIGN_IN_WINDOW = 60.0


@dataclass(slots=True)
class _Failures:
    """One address's record: failures since it was last forgotten, when the last one
    came, and when its wait (if any) ends."""

    count: int
    last: float
    wait_until: float


class FailureBackoff:
    """Failed authentications per client address, and the wait they earn (thread-safe).

    Args:
        allowed: failures an address may make before it must wait.
        first_wait: seconds of the first wait; each later failure doubles it.
        window: seconds of quiet after which an address is forgotten; the longest wait.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        *,
        allowed: int,
        first_wait: float,
        window: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allowed = allowed
        self.first_wait = first_wait
        self.window = window
        self.clock = clock
        self._addresses: OrderedDict[str, _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, address: str) -> float:
        """Seconds ``address`` must still wait before it may try again (0: none)."""
        now = self.clock()
        with self._lock:
            record = self._addresses.get(address)
            return 0.0 if record is None else max(0.0, record.wait_until - now)

    def failed(self, address: str) -> None:
        """Count one failed authentication from ``address``; the ``allowed``-th and every
        later one starts a wait (``first_wait`` doubled per failure past ``allowed``)."""
        now = self.clock()
        with self._lock:
            record = self._addresses.pop(address, None)
            if record is None or now - max(record.last, record.wait_until) > self.window:
                record = _Failures(0, now, now)
            record.count += 1
            record.last = now
            past = record.count - self.allowed
            if past >= 0:
                # Capped before doubling: 2.0**past alone would overflow after ~1,000.
                record.wait_until = now + min(self.window, self.first_wait * 2.0 ** min(past, 64))
            self._addresses[address] = record  # the most recent failure last
            self._forget(now)

    def __len__(self) -> int:
        return len(self._addresses)

    def _forget(self, now: float) -> None:
        """Drop the records quiet for a window (the oldest failures come first), then the
        oldest past :data:`MAX_ADDRESSES`."""
        while self._addresses:
            oldest = next(iter(self._addresses.values()))
            if now - max(oldest.last, oldest.wait_until) <= self.window:
                break
            self._addresses.popitem(last=False)
        while len(self._addresses) > MAX_ADDRESSES:
            self._addresses.popitem(last=False)


class SlidingLimit:
    """At most ``allowed`` events per name in any ``window`` seconds (thread-safe)."""

    def __init__(
        self, *, allowed: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.allowed = allowed
        self.window = window
        self.clock = clock
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, name: str) -> float:
        """Record one event for ``name`` and return 0, or, when ``name`` has had
        ``allowed`` in the last ``window`` seconds, record nothing and return the seconds
        until it may have one again."""
        now = self.clock()
        with self._lock:
            events = self._events.setdefault(name, deque())
            while events and now - events[0] >= self.window:
                events.popleft()
            if len(events) >= self.allowed:
                return events[0] + self.window - now
            events.append(now)
            return 0.0


def client_address(scope: Scope) -> str:
    """The client's address as the server saw it (behind a proxy: as uvicorn took it
    from ``X-Forwarded-For`` of a trusted proxy); ``""`` when the server has none (a
    Unix socket), which all such clients share."""
    client = scope.get("client")
    return str(client[0]) if client else ""


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` value: whole seconds, rounded up (never 0 while waiting)."""
    return str(max(1, math.ceil(seconds)))


def authentication_throttled(seconds: float) -> Problem:
    """429: this address failed to authenticate too often; nothing was checked."""
    after = retry_after(seconds)
    return Problem(
        429,
        "authentication-throttled",
        "Too many failed authentications",
        f"too many failed authentications from this address; nothing was checked: "
        f"retry after {after} s",
        headers={"Retry-After": after},
        retry_after=int(after),
    )


def failure_backoff(service: ServiceSettings) -> FailureBackoff:
    """The failure back-off ``RAGWRIGHT_SERVE_AUTH_*`` set."""
    return FailureBackoff(
        allowed=service.auth_failures, first_wait=service.auth_backoff, window=service.auth_window
    )


def sign_in_limit(service: ServiceSettings) -> SlidingLimit:
    """Sign-ins per key per minute (``RAGWRIGHT_SERVE_SIGN_INS_PER_KEY``)."""
    return SlidingLimit(allowed=service.sign_ins_per_key, window=SIGN_IN_WINDOW)
