"""The chat retry layer: the failure category decides, the shared deadline bounds it."""

from __future__ import annotations

import asyncio

import pytest

from ragwright.chat.contract import ChatMessage, ChatRequest, ChatResponse, Deadline
from ragwright.chat.retry import Retry
from ragwright.errors import ChatError, FailureCategory
from ragwright.retry import RetryPolicy
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel, Step

REQUEST = ChatRequest((ChatMessage("user", "Where can I find the public product manual?"),))
F = FailureCategory


class Run:
    """A scripted provider under ``Retry``; records events and the waits it asked for."""

    def __init__(self, script: list[Step]) -> None:
        self.events: list[str] = []
        self.waits: list[float] = []
        self.provider = ScriptedChatModel(script, events=self.events.append)
        self.model = Retry(
            self.provider, events=self.events.append, sleep=self._sleep, jitter=lambda: 1.0
        )

    async def _sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def complete(self, deadline: Deadline) -> ChatResponse:
        return asyncio.run(self.model.complete(REQUEST, deadline))


@pytest.mark.parametrize("category", [F.TIMEOUT, F.TRANSIENT, F.THROTTLED])
def test_a_retryable_category_is_retried_within_the_deadline(category: FailureCategory) -> None:
    run = Run([Fail(category), Reply()])
    assert run.complete(Deadline.after(5.0)).text == "Draft reply."
    assert run.events == ["provider:1", "retry:wait", "provider:2"]
    assert run.waits == [0.05]


def test_a_deadline_exhausted_failure_is_not_retried() -> None:
    run = Run([Fail(F.DEADLINE_EXHAUSTED), Reply()])
    with pytest.raises(ChatError) as caught:
        run.complete(Deadline.after(5.0))
    assert caught.value.category is F.DEADLINE_EXHAUSTED
    assert run.events == ["provider:1"] and run.waits == []


def test_a_timeout_is_not_retried_once_the_deadline_cannot_fit_the_wait() -> None:
    run = Run([Fail(F.TIMEOUT), Reply()])
    # 0.02 s left: less than the 0.05 s backoff, so no wait is started.
    with pytest.raises(ChatError) as caught:
        run.complete(Deadline(1.0, clock=lambda: 0.98))
    assert caught.value.category is F.DEADLINE_EXHAUSTED
    assert isinstance(caught.value.__cause__, ChatError)
    assert caught.value.__cause__.category is F.TIMEOUT
    assert run.events == ["provider:1", "retry:no-budget"] and run.waits == []


def test_the_chat_layer_uses_the_shared_policy() -> None:
    model = Retry(ScriptedChatModel([]), max_attempts=4, base_delay=0.2, max_delay=1.0)
    assert model.policy == RetryPolicy(4, base_delay=0.2, max_delay=1.0)
    with pytest.raises(ValueError, match="max_attempts"):
        Retry(ScriptedChatModel([]), max_attempts=0)
