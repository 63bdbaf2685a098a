"""Server-side sessions (bounded per key and in idle time) and uploaded file names,
without a browser."""

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
    store = SessionStore(max_per_key=10, idle_seconds=60, clock=clock)
    session = store.create("key-1")
    clock.now += 59
    assert store.get(session.session_id) is session  # use restarts the idle time
    clock.now += 59
    assert store.get(session.session_id) is session
    clock.now += 61
    assert store.get(session.session_id) is None
    assert len(store) == 0


def test_past_its_bound_a_key_loses_its_own_least_recently_used_session_only() -> None:
    store = SessionStore(max_per_key=2, clock=Clock())
    other = store.create("b")
    first, second = store.create("a"), store.create("a")
    store.get(first.session_id)  # used: now a's newest
    third = store.create("a")
    assert store.get(second.session_id) is None
    assert store.get(first.session_id) is first
    assert store.get(third.session_id) is third
    assert store.get(other.session_id) is other


def test_ten_thousand_and_one_sessions_of_one_key_leave_another_keys_session() -> None:
    """The break of issue 46 (item 7): the 10,001st sign-in of one key ended every other
    session, the oldest first, whoever's it was."""
    store = SessionStore(max_per_key=1000, clock=Clock())
    other = store.create("b")
    for _ in range(10_001):
        newest = store.create("a")
    assert store.get(other.session_id) is other
    assert store.get(newest.session_id) is newest
    assert len(store) == 1000 + 1


def test_idle_sessions_of_every_key_end_when_a_session_is_made() -> None:
    clock = Clock()
    store = SessionStore(max_per_key=10, idle_seconds=60, clock=clock)
    for key_id in ("a", "b", "c"):
        store.create(key_id)
    clock.now += 61
    fresh = store.create("d")
    assert len(store) == 1  # nothing waits for a read to be forgotten
    assert store.get(fresh.session_id) is fresh


def test_sessions_have_distinct_random_ids_and_tokens_that_only_match_themselves() -> None:
    store = SessionStore(max_per_key=10)
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
