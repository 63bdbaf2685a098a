"""Signing in through the page's form, without a browser: sessions bounded per key (one
key signing in again and again signs out only its own browsers), wrong keys throttled
per client address with a growing wait, shared with the bearer keys of ``/v1/``, and
sign-ins per key limited (issue 46, item 7)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from ragwright.service.state import ServiceState
from tests.service.conftest import Service, bearer, build_service

ALICE = ("10.0.0.1", 40000)
BOB = ("10.0.0.2", 40000)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_site(tmp_path: Path) -> Callable[..., Service]:
    def make(**settings: object) -> Service:
        return build_service(tmp_path / "home", ingest=False, **settings)

    return make


def browser(service: Service, address: tuple[str, int] = ALICE) -> TestClient:
    """A browser of its own (its own cookies) at ``address``."""
    return TestClient(service.app, client=address, follow_redirects=False)


def state_of(service: Service) -> ServiceState:
    state = service.app.state.ragwright
    assert isinstance(state, ServiceState)
    return state


def sign_in(client: TestClient, secret: str) -> Response:
    """The sign-in form sent back as the page sends it: the key and the form's token."""
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text)
    assert token is not None
    return client.post("/ui/sign-in", data={"key": secret, "csrf": token.group(1)})


def signed_in(client: TestClient) -> bool:
    """Whether ``/`` shows the ask page (not the sign-in form) to this browser."""
    page = client.get("/")
    assert page.status_code == 200
    return 'name="key"' not in page.text


def test_the_10001st_sign_in_of_one_key_leaves_another_keys_session(
    make_site: Callable[..., Service],
) -> None:
    """The break as measured: one key signing in 10,001 times signed every page user
    out. Here key A's first 10,000 sessions are made in the store (as 10,000 sign-ins
    would make them, without 40 s of HTTP) and its 10,001st through the form."""
    service = make_site()
    key_a, key_b = service.key("a"), service.key("b")
    other = browser(service, BOB)
    assert sign_in(other, key_b).status_code == 303
    store = state_of(service).sessions
    key_a_id = next(k.id for k in service.application.list_keys().keys if k.name == "a")
    first = store.create(key_a_id)
    for _ in range(9_999):
        store.create(key_a_id)
    again = browser(service)
    assert sign_in(again, key_a).status_code == 303
    assert signed_in(again)
    assert signed_in(other), "key A's sign-ins signed key B's browser out"
    assert store.get(first.session_id) is None  # key A's own oldest went instead


def test_past_its_bound_a_keys_sign_in_ends_its_own_oldest_browser(
    make_site: Callable[..., Service],
) -> None:
    service = make_site(serve_sessions_per_key=2)
    key_a, key_b = service.key("a"), service.key("b")
    other = browser(service, BOB)
    assert sign_in(other, key_b).status_code == 303
    browsers = [browser(service) for _ in range(3)]
    for each in browsers:
        assert sign_in(each, key_a).status_code == 303
    assert [signed_in(each) for each in browsers] == [False, True, True]
    assert signed_in(other)


def test_after_n_wrong_keys_an_address_gets_429_while_another_gets_401(
    make_site: Callable[..., Service],
) -> None:
    service = make_site(serve_auth_failures=3)
    secret = service.key("a")
    guesser, neighbour = browser(service, ALICE), browser(service, BOB)
    for _ in range(3):
        assert sign_in(guesser, "rwk_nope_wrong").status_code == 401
    refused = sign_in(guesser, "rwk_nope_wrong")
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert "nothing was checked. Try again in 1 s." in refused.text
    # While it waits the address's keys go unchecked, the right one too: no session.
    right = sign_in(guesser, secret)
    assert right.status_code == 429
    assert "ragwright_session" not in right.headers.get("set-cookie", "")
    assert sign_in(neighbour, "rwk_nope_wrong").status_code == 401
    assert sign_in(neighbour, secret).status_code == 303


def test_the_wait_doubles_with_each_failure_after_one_and_is_shared_with_v1(
    make_site: Callable[..., Service],
) -> None:
    service = make_site(serve_auth_failures=2, serve_auth_backoff=1, serve_auth_window=60)
    clock = Clock()
    state_of(service).failures.clock = clock
    guesser = browser(service)
    waits = []
    assert sign_in(guesser, "rwk_nope_wrong").status_code == 401
    for _ in range(7):
        assert sign_in(guesser, "rwk_nope_wrong").status_code == 401
        refused = guesser.get("/v1/status", headers=bearer("rwk_nope_wrong"))  # same count
        assert refused.status_code == 429
        assert sign_in(guesser, "rwk_nope_wrong").status_code == 429
        waits.append(int(refused.headers["Retry-After"]))
        clock.now += waits[-1]  # the wait is over: the next key is checked again
    assert waits == [1, 2, 4, 8, 16, 32, 60]  # doubling, up to the window
    clock.now += 61  # a window of quiet after the wait: forgotten
    assert sign_in(guesser, "rwk_nope_wrong").status_code == 401
    assert sign_in(guesser, "rwk_nope_wrong").status_code == 401
    assert sign_in(guesser, "rwk_nope_wrong").status_code == 429


def test_sign_ins_per_key_are_limited_per_minute(make_site: Callable[..., Service]) -> None:
    service = make_site(serve_sign_ins_per_key=2)
    clock = Clock()
    state_of(service).sign_ins.clock = clock
    key_a, key_b = service.key("a"), service.key("b")
    for _ in range(2):
        assert sign_in(browser(service), key_a).status_code == 303
    clock.now += 20
    refused = sign_in(browser(service), key_a)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "40"
    assert "no session was made. Try again in 40 s." in refused.text
    assert "ragwright_session" not in refused.headers.get("set-cookie", "")
    assert sign_in(browser(service), key_b).status_code == 303  # another key goes on
    clock.now += 40
    assert sign_in(browser(service), key_a).status_code == 303
    # Limited sign-ins are not failures: the address is not made to wait.
    assert state_of(service).failures.wait(ALICE[0]) == 0
