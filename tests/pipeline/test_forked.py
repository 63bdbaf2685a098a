"""The parent's end of a forked child's replies (pipeline/forked.py): replies taken in
order, and a child that is gone, answers out of order, stalls or outlives the run's
deadline is given up on (killed) without the parent ever waiting for long; a child
keeps none of its parent's descriptors but those it is told to."""

from __future__ import annotations

import os
import struct
import time
from typing import Any

import pytest

from ragwright.deadline import Deadline, deadline_bound
from ragwright.pipeline import forked
from ragwright.pipeline.forked import Replies, close_inherited, fork_context


def _reply(writer: Any, replies: list[tuple[Any, ...]], then_sleep: float) -> None:
    try:
        for reply in replies:
            writer.send(reply)
        time.sleep(then_sleep)
    finally:
        os._exit(0)


def child(replies: list[tuple[Any, ...]], then_sleep: float = 0.0) -> tuple[Any, Replies]:
    context = fork_context()
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_reply, args=(writer, replies, then_sleep), daemon=True)
    process.start()
    writer.close()
    return process, Replies(process, reader)


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "POLL_SECONDS", 0.05)


def test_replies_are_taken_in_order() -> None:
    process, replies = child([(1, "a"), (2, "b", "c")], then_sleep=30)
    assert replies.take(1, stall=10) == ("a",)
    assert replies.take(2, stall=10) == ("b", "c")
    replies.close(grace=0)
    assert not process.is_alive()


def test_a_reply_out_of_order_gives_the_child_up() -> None:
    process, replies = child([(2, "skipped one")], then_sleep=30)
    assert replies.take(1, stall=10) is None
    assert replies.gone
    process.join(timeout=10)
    assert not process.is_alive()  # killed, not left to sleep
    assert replies.take(2, stall=10) is None  # nothing more is taken from it


def test_a_child_gone_is_found_without_waiting_for_the_stall_bound() -> None:
    _process, replies = child([])  # exits at once, having said nothing
    started = time.monotonic()
    assert replies.take(1, stall=60) is None
    assert time.monotonic() - started < 30 and replies.gone


def test_a_silent_child_is_killed_after_the_stall_bound() -> None:
    process, replies = child([], then_sleep=60)
    started = time.monotonic()
    assert replies.take(1, stall=0.5) is None
    assert time.monotonic() - started < 30
    process.join(timeout=10)
    assert not process.is_alive()


def test_the_runs_deadline_ends_the_wait() -> None:
    process, replies = child([], then_sleep=60)
    started = time.monotonic()
    with deadline_bound(Deadline.after(0.3)):
        assert replies.take(1, stall=60) is None
    assert time.monotonic() - started < 30  # not the child's 60 s
    process.join(timeout=10)
    assert not process.is_alive()


def _half_a_message(writer: Any) -> None:
    try:
        # A message's length, then only part of it: the pipe reads as ready.
        os.write(writer.fileno(), struct.pack("!i", 1_000_000) + b"x" * 1000)
        time.sleep(60)
    finally:
        os._exit(0)


def test_a_child_stopped_in_the_middle_of_a_message_is_given_up_after_the_stall_bound() -> None:
    context = fork_context()
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_half_a_message, args=(writer,), daemon=True)
    process.start()
    writer.close()
    replies = Replies(process, reader)
    started = time.monotonic()
    assert replies.take(1, stall=0.5) is None
    assert time.monotonic() - started < 30
    replies.close(grace=0)
    assert not process.is_alive()


def _busy_then_reply(writer: Any, seconds: float) -> None:
    try:
        until = time.monotonic() + seconds
        while time.monotonic() < until:  # working (reading a slow file, say)
            pass
        writer.send((1, "done"))
    finally:
        os._exit(0)


def test_a_child_using_cpu_is_not_stalled() -> None:
    context = fork_context()
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_busy_then_reply, args=(writer, 3.0), daemon=True)
    process.start()
    writer.close()
    replies = Replies(process, reader)
    # Silent for longer than the bound, but busy all along.
    assert replies.take(1, stall=1.0) == ("done",)
    replies.close()


def _wait_for_a_busy_child_then_reply(writer: Any, seconds: float) -> None:
    # A source reader waiting for a file's conversion process: idle itself, its child busy.
    try:
        pid = os.fork()
        if pid == 0:
            _spin(seconds)
            os._exit(0)
        os.waitpid(pid, 0)
        writer.send((1, "done"))
    finally:
        os._exit(0)


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_child_waiting_for_its_own_busy_child_is_not_stalled() -> None:
    context = fork_context()
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(
        target=_wait_for_a_busy_child_then_reply, args=(writer, 3.0), daemon=True
    )
    process.start()
    writer.close()
    replies = Replies(process, reader)
    assert replies.take(1, stall=1.0) == ("done",)
    replies.close()


def _report_descriptors(writer: Any, keep: set[int]) -> None:
    try:
        close_inherited(keep | {writer.fileno()})
        writer.send(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
    finally:
        os._exit(0)


def test_a_child_keeps_only_the_descriptors_it_is_told_to(tmp_path: Any) -> None:
    held = os.open(tmp_path / "lock", os.O_CREAT | os.O_RDWR)  # the index's files, say
    try:
        context = fork_context()
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=_report_descriptors, args=(writer, {0, 1, 2}))
        process.start()
        writer.close()
        assert reader.poll(60)
        # Its own three streams and its pipe end; listing the directory opens one more.
        left = reader.recv()
        process.join(timeout=10)
    finally:
        os.close(held)
    assert held not in left
    assert {0, 1, 2} <= set(left) and len(left) <= 5
