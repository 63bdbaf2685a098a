"""Server-side sessions and uploaded file names, without a browser."""

from __future__ import annotations

import pytest

from ragwright.web.sessions import SessionStore, tokens_match
from ragwright.web.uploads import safe_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_unused_for_longer_than_its_idle_time_is_gone() -> None:
    clock = Clock()
    store = SessionStore(idle_seconds=60, clock=clock)
    session = store.create("key-1")
    clock.now += 59
    assert store.get(session.session_id) is session  # use restarts the idle time
    clock.now += 59
    assert store.get(session.session_id) is session
    clock.now += 61
    assert store.get(session.session_id) is None
    assert len(store) == 0


def test_the_oldest_sessions_go_first_past_the_bound() -> None:
    store = SessionStore(max_sessions=2, clock=Clock())
    first, second = store.create("a"), store.create("b")
    store.get(first.session_id)  # used: now the newest
    third = store.create("c")
    assert store.get(second.session_id) is None
    assert store.get(first.session_id) is first
    assert store.get(third.session_id) is third


def test_sessions_have_distinct_random_ids_and_tokens_that_only_match_themselves() -> None:
    store = SessionStore()
    one, two = store.create("a"), store.create("a")
    assert len({one.session_id, two.session_id, one.csrf_token, two.csrf_token}) == 4
    assert len(one.session_id) >= 43  # 256 bits, URL-safe
    assert one.csrf_matches(one.csrf_token)
    assert not one.csrf_matches(two.csrf_token)
    assert not one.csrf_matches(None)
    assert not tokens_match(None, None)
    assert not tokens_match("", "")
    assert tokens_match("t", "t")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("runbook.md", "runbook.md"),
        ("../../etc/passwd.md", "passwd.md"),
        ("C:\\\\Users\\\\me\\\\notes.md", "notes.md"),
        (".hidden.md", "hidden.md"),
        ("a b;c.md", "a_b_c.md"),
        ("", "upload"),
        (None, "upload"),
        ("...", "upload"),
    ],
)
def test_an_uploaded_files_name_is_a_plain_base_name(given: str | None, expected: str) -> None:
    assert safe_name(given) == expected
