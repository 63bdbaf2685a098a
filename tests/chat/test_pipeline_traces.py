"""The seed article's event traces, reproduced with the scripted provider."""

from __future__ import annotations

import asyncio
import time

import pytest

from ragwright.chat.builder import ChatPipelineBuilder
from ragwright.chat.contract import ChatMessage, ChatModel, ChatRequest, Deadline
from ragwright.chat.probes import Probe
from ragwright.chat.retry import Retry
from ragwright.errors import ChatError, FailureCategory
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel, Step, Stream

REQUEST = ChatRequest(
    (
        ChatMessage("system", "Draft a support reply for human review. Do not send it."),
        ChatMessage("user", "Where can I find the public product manual?"),
    )
)


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def pipeline(script: list[Step], layers: str, events: list[str], **retry: object) -> ChatModel:
    provider = ScriptedChatModel(script, events=events.append)
    builder = ChatPipelineBuilder(provider)
    for layer in layers.split(">"):
        if layer == "call":
            builder.use(lambda inner: Probe(inner, name="call", events=events.append))
        elif layer == "attempt":
            builder.use(lambda inner: Probe(inner, name="attempt", events=events.append))
        elif layer == "retry":
            options = {"sleep": no_wait, "jitter": lambda: 1.0, **retry}
            builder.use(lambda inner, o=options: Retry(inner, events=events.append, **o))  # type: ignore[arg-type, misc]
    return builder.build()


def run(model: ChatModel, seconds: float = 2.0) -> object:
    async def go() -> object:
        return await model.complete(REQUEST, Deadline.after(seconds))

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("layers", "script", "expected", "fails"),
    [
        (
            "call>retry",
            [Fail(), Reply()],
            ["call:begin", "provider:1", "retry:wait", "provider:2", "call:ok"],
            False,
        ),
        (
            "retry>attempt",
            [Fail(), Reply()],
            [
                "attempt:begin",
                "provider:1",
                "attempt:fail",
                "retry:wait",
                "attempt:begin",
                "provider:2",
                "attempt:ok",
            ],
            False,
        ),
        (
            "call>retry",
            [Fail(), Fail()],
            ["call:begin", "provider:1", "retry:wait", "provider:2", "call:fail"],
            True,
        ),
        (
            "retry>attempt",
            [Fail(), Fail()],
            [
                "attempt:begin",
                "provider:1",
                "attempt:fail",
                "retry:wait",
                "attempt:begin",
                "provider:2",
                "attempt:fail",
            ],
            True,
        ),
        (
            "call>retry>attempt",
            [Fail(FailureCategory.INVALID_CONFIGURATION)],
            ["call:begin", "attempt:begin", "provider:1", "attempt:fail", "call:fail"],
            True,
        ),
        (
            "call>retry>attempt",
            [Fail(FailureCategory.REFUSAL)],
            ["call:begin", "attempt:begin", "provider:1", "attempt:fail", "call:fail"],
            True,
        ),
    ],
)
def test_probe_outside_vs_inside_the_retry(
    layers: str, script: list[Step], expected: list[str], fails: bool
) -> None:
    events: list[str] = []
    model = pipeline(script, layers, events)
    if fails:
        with pytest.raises(ChatError):
            run(model)
    else:
        run(model)
    assert events == expected


def test_throttling_waits_for_retry_after_when_it_fits() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    events: list[str] = []
    model = pipeline(
        [Fail(FailureCategory.THROTTLED, retry_after=0.3), Reply()], "retry", events, sleep=record
    )
    run(model, seconds=2.0)
    assert waits == [0.3]


def test_a_wait_longer_than_the_remaining_budget_is_not_started() -> None:
    events: list[str] = []
    model = pipeline(
        [Fail(FailureCategory.THROTTLED, retry_after=5.0), Reply()], "retry>attempt", events
    )
    with pytest.raises(ChatError) as caught:
        run(model, seconds=1.0)
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert events == ["attempt:begin", "provider:1", "attempt:fail", "retry:no-budget"]


def test_the_deadline_expires_during_the_second_attempt_without_extra_budget() -> None:
    events: list[str] = []
    model = pipeline(
        [Fail(), Hang()], "call>retry>attempt", events, sleep=asyncio.sleep, base_delay=0.05
    )
    started = time.monotonic()
    with pytest.raises(ChatError) as caught:
        run(model, seconds=0.4)
    elapsed = time.monotonic() - started
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert events == [
        "call:begin",
        "attempt:begin",
        "provider:1",
        "attempt:fail",
        "retry:wait",
        "attempt:begin",
        "provider:2",
        "attempt:cancel",
        "call:fail",
    ]
    # The second attempt was stopped by the *same* deadline, not a fresh one.
    assert elapsed < 0.4 + 0.3


def test_caller_cancellation_propagates_without_retry() -> None:
    events: list[str] = []
    model = pipeline([Hang(), Reply()], "call>retry>attempt", events)

    async def go() -> None:
        task = asyncio.create_task(model.complete(REQUEST, Deadline.after(5)))
        await asyncio.sleep(0.05)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    assert events == ["call:begin", "attempt:begin", "provider:1", "attempt:cancel", "call:cancel"]


def test_a_partial_stream_fails_once_with_one_provider_call() -> None:
    events: list[str] = []
    model = pipeline([Stream(("You can find",), Fail())], "call>retry>attempt", events)
    received: list[str] = []

    async def go() -> None:
        async for update in model.stream(REQUEST, Deadline.after(2)):
            received.append(update.text)
            events.append("consumer:partial")

    with pytest.raises(ChatError) as caught:
        asyncio.run(go())
    assert caught.value.category is FailureCategory.INTERRUPTED
    assert not caught.value.category.retryable
    assert received == ["You can find"]
    assert events == [
        "call:stream-begin",
        "attempt:stream-begin",
        "provider:stream:1",
        "consumer:partial",
        "attempt:stream-end",
        "call:stream-end",
    ]


def test_every_attempt_sees_the_callers_unchanged_request() -> None:
    provider = ScriptedChatModel([Fail(), Reply()])
    model = Retry(provider, sleep=no_wait)
    asyncio.run(model.complete(REQUEST, Deadline.after(2)))
    assert provider.requests == [REQUEST, REQUEST]
    assert all(r is REQUEST for r in provider.requests)  # frozen: nothing could alter it


def test_builder_order_is_outer_to_inner() -> None:
    events: list[str] = []
    model = pipeline([Reply()], "call>attempt", events)
    run(model)
    assert events == ["call:begin", "attempt:begin", "provider:1", "attempt:ok", "call:ok"]


def test_a_stream_failing_before_any_output_keeps_its_category() -> None:
    events: list[str] = []
    model = pipeline([Stream((), Fail(FailureCategory.THROTTLED))], "call>retry>attempt", events)

    async def go() -> None:
        async for _ in model.stream(REQUEST, Deadline.after(2)):
            pass

    with pytest.raises(ChatError) as caught:
        asyncio.run(go())
    assert caught.value.category is FailureCategory.THROTTLED
    assert events.count("provider:stream:1") == 1 and "provider:stream:2" not in events
