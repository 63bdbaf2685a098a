"""run_in_thread: a cancelled caller is cancelled only once its thread has returned."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragwright.deadline import Deadline, current_deadline, deadline_scope
from ragwright.threads import run_in_thread


def test_a_cancelled_caller_waits_for_its_thread_then_is_cancelled() -> None:
    entered, release = threading.Event(), threading.Event()
    events: list[str] = []

    def work() -> str:
        entered.set()
        release.wait(10)
        events.append("thread returned")
        return "result"

    async def caller() -> None:
        try:
            await run_in_thread(work)
        finally:
            events.append("caller's finally")

    async def scenario() -> None:
        task = asyncio.create_task(caller())
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        task.cancel()  # a second cancellation is held as well
        await asyncio.sleep(0.05)
        assert not task.done()  # still waiting for the thread
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert events == ["thread returned", "caller's finally"]


def test_the_thread_sees_the_callers_deadline_and_returns_its_result() -> None:
    async def scenario() -> tuple[float | None, int]:
        with deadline_scope(Deadline.after(30)):
            seen = await run_in_thread(_remaining)
        return seen, await run_in_thread(sum, [1, 2, 3])

    seen, total = asyncio.run(scenario())
    assert seen is not None and 0 < seen <= 30
    assert total == 6


def _remaining() -> float | None:
    deadline = current_deadline()
    return None if deadline is None else deadline.remaining()


def test_an_exception_in_the_thread_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("from the thread")

    with pytest.raises(ValueError, match="from the thread"):
        asyncio.run(run_in_thread(fail))
