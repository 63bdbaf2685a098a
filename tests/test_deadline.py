"""The current deadline: set per request, restored on exit, separate per thread; and the
bound an operation of many calls sets, which cuts each call's own budget."""

from __future__ import annotations

import threading

from ragwright.chat import contract
from ragwright.deadline import (
    Deadline,
    bounded,
    current_bound,
    current_deadline,
    deadline_bound,
    deadline_scope,
)


def test_scopes_nest_and_restore() -> None:
    outer, inner = Deadline.after(10), Deadline.after(1)
    assert current_deadline() is None
    with deadline_scope(outer):
        with deadline_scope(inner):
            assert current_deadline() is inner
        assert current_deadline() is outer
    assert current_deadline() is None


def test_another_thread_does_not_see_this_requests_deadline() -> None:
    seen: list[Deadline | None] = []
    with deadline_scope(Deadline.after(10)):
        worker = threading.Thread(target=lambda: seen.append(current_deadline()))
        worker.start()
        worker.join()
    assert seen == [None]


def test_remaining_never_goes_negative_and_the_chat_contract_re_exports_it() -> None:
    deadline = Deadline(5.0, clock=lambda: 7.0)
    assert deadline.remaining() == 0.0 and deadline.expired
    assert contract.Deadline is Deadline


def test_a_bound_cuts_later_deadlines_and_nested_bounds_keep_the_earliest() -> None:
    early, late, call = Deadline.after(5), Deadline.after(50), Deadline.after(20)
    assert bounded(call) is call and current_bound() is None
    with deadline_bound(late):
        assert bounded(call) is call  # a call's own budget ends first
        with deadline_bound(early):
            assert current_bound() is early and bounded(call) is early
            with deadline_bound(late), deadline_bound(None):
                assert current_bound() is early  # an inner bound never extends it
        assert current_bound() is late
    assert current_bound() is None and current_deadline() is None
