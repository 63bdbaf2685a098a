"""Failed bearer keys throttled per client address (429 with ``Retry-After``, the keys
then unchecked, bodies unread) while other addresses go on, and the throttles' own
rules: a doubling wait up to the window, forgetting after a quiet window, a bounded
memory, sign-ins per name in a sliding window (issue 46, item 7)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from ragwright.service import throttling
from ragwright.service.state import ServiceState
from ragwright.service.throttling import FailureBackoff, SlidingLimit, retry_after
from tests.service.conftest import Service, bearer
from tests.service.test_body_limits import CHUNK, RecordingClient

WRONG = bearer("rwk_nope_wrong")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_after_n_wrong_keys_on_v1_an_address_gets_429_while_another_gets_401(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False, serve_auth_failures=3)
    secret = service.key("alice", scopes=("search",))
    guesser = TestClient(service.app, client=("10.0.0.1", 1))
    neighbour = TestClient(service.app, client=("10.0.0.2", 1))
    for _ in range(3):
        assert guesser.get("/v1/status", headers=WRONG).status_code == 401
    refused = guesser.get("/v1/status", headers=WRONG)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    problem = refused.json()
    assert (problem["type"], problem["retry_after"]) == ("/problems/authentication-throttled", 1)
    # Unchecked while it waits, the right key too; a request without a key is no guess.
    assert guesser.get("/v1/status", headers=bearer(secret)).status_code == 429
    assert guesser.get("/v1/status").status_code == 401
    assert neighbour.get("/v1/status", headers=WRONG).status_code == 401
    # Past authentication: the status of an index nothing was ingested into yet.
    answered = neighbour.get("/v1/status", headers=bearer(secret))
    assert answered.json()["type"] == "/problems/retrieval-unavailable"


def test_a_waiting_addresss_body_is_refused_429_without_being_read(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False, serve_auth_failures=2)
    secret = service.key("alice")
    for _ in range(2):
        sent = RecordingClient(service.app).request("/v1/answers", [CHUNK] * 100, WRONG)
        assert (sent.status, sent.read) == (401, 0)
    for headers in (WRONG, bearer(secret)):
        sent = RecordingClient(service.app).request("/v1/answers", [CHUNK] * 100, headers)
        assert (sent.status, sent.read) == (429, 0)
        assert sent.problem()["type"] == "/problems/authentication-throttled"


def test_a_wrong_key_counts_once_per_request(make_service: Callable[..., Service]) -> None:
    """The gate (a body's route) and the route's caller (a read) check one request's
    key once between them."""
    service = make_service(ingest=False, serve_auth_failures=3)
    state = service.app.state.ragwright
    assert isinstance(state, ServiceState)
    client = TestClient(service.app, client=("10.0.0.1", 1))
    assert client.post("/v1/search", json={"query": "drain"}, headers=WRONG).status_code == 401
    assert client.get("/v1/status", headers=WRONG).status_code == 401
    assert state.failures.wait("10.0.0.1") == 0  # two failures counted, not four
    assert client.get("/v1/status", headers=WRONG).status_code == 401
    assert state.failures.wait("10.0.0.1") > 0  # the third starts the wait


def test_the_wait_doubles_per_failure_past_the_allowance_up_to_the_window() -> None:
    clock = Clock()
    backoff = FailureBackoff(allowed=3, first_wait=0.5, window=10, clock=clock)
    waits = []
    for _ in range(9):
        backoff.failed("a")
        waits.append(backoff.wait("a"))
        clock.now += waits[-1]
    assert waits == [0, 0, 0.5, 1, 2, 4, 8, 10, 10]
    assert backoff.wait("b") == 0


def test_an_address_quiet_for_a_window_after_its_wait_is_forgotten() -> None:
    clock = Clock()
    backoff = FailureBackoff(allowed=1, first_wait=4, window=10, clock=clock)
    backoff.failed("a")
    backoff.failed("b")
    clock.now += 4 + 10  # the wait, then a window of quiet: not yet forgotten
    backoff.failed("b")  # b's wait doubles: it was not forgotten
    assert backoff.wait("b") == 8
    clock.now += 0.5
    backoff.failed("c")  # a failure anywhere forgets the quiet ones
    assert len(backoff) == 2
    backoff.failed("a")  # a starts again: its first wait
    assert backoff.wait("a") == 4


def test_the_addresses_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throttling, "MAX_ADDRESSES", 3)
    backoff = FailureBackoff(allowed=1, first_wait=1, window=10, clock=Clock())
    for address in "abcd":
        backoff.failed(address)
    assert len(backoff) == 3
    assert backoff.wait("a") == 0  # the longest quiet went first
    assert backoff.wait("d") == 1


def test_a_sliding_limit_allows_n_per_window_per_name() -> None:
    clock = Clock()
    limit = SlidingLimit(allowed=2, window=60, clock=clock)
    assert limit.take("k") == 0
    clock.now += 10
    assert limit.take("k") == 0
    clock.now += 5
    assert limit.take("k") == 45  # until the first of the two is a minute old
    assert limit.take("other") == 0
    clock.now += 45
    assert limit.take("k") == 0
    assert limit.take("k") == 10  # the refused one was not counted: the second's turn


@pytest.mark.parametrize(("seconds", "header"), [(0.01, "1"), (1.0, "1"), (1.2, "2"), (60, "60")])
def test_retry_after_is_whole_seconds_rounded_up(seconds: float, header: str) -> None:
    assert retry_after(seconds) == header
