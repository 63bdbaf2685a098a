from __future__ import annotations

import asyncio

import pytest

from ragwright.chat.budget import AttemptLimit, Budgeted
from ragwright.chat.contract import ChatMessage, ChatRequest, Deadline
from ragwright.chat.failover import Failover, FailoverPolicy
from ragwright.chat.retry import Retry
from ragwright.errors import ChatError, FailureCategory
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel, Step, Stream

REQUEST = ChatRequest((ChatMessage("user", "Where is the manual?"),))


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def providers(
    primary: list[Step], alternate: list[Step]
) -> tuple[ScriptedChatModel, ScriptedChatModel]:
    return ScriptedChatModel(primary, name="primary"), ScriptedChatModel(
        alternate, name="alternate"
    )


def test_switches_on_transient_failure_and_says_so() -> None:
    events: list[str] = []
    primary, alternate = providers([Fail()], [Reply("From the alternate.")])
    response = asyncio.run(
        Failover([primary, alternate], events=events.append).complete(REQUEST, Deadline.after(5))
    )
    assert (response.text, response.provider, response.fallback) == (
        "From the alternate.",
        "alternate",
        True,
    )
    assert events == ["failover:switch:alternate"]
    ok = asyncio.run(Failover(list(providers([Reply()], []))).complete(REQUEST, Deadline.after(5)))
    assert (ok.provider, ok.fallback) == ("primary", False)


@pytest.mark.parametrize(
    "category",
    [
        FailureCategory.INVALID_CONFIGURATION,
        FailureCategory.REFUSAL,
        FailureCategory.UNSUPPORTED_OPTION,
        FailureCategory.INVALID_OUTPUT,
        FailureCategory.DEADLINE_EXHAUSTED,
        FailureCategory.CANCELLED,
    ],
)
def test_never_switches_for_categories_outside_the_policy(category: FailureCategory) -> None:
    primary, alternate = providers([Fail(category)], [Reply()])
    with pytest.raises(ChatError) as caught:
        asyncio.run(Failover([primary, alternate]).complete(REQUEST, Deadline.after(5)))
    assert caught.value.category is category and alternate.calls == 0


def test_never_switches_on_caller_cancellation() -> None:
    primary, alternate = providers([Hang()], [Reply()])

    async def go() -> None:
        task = asyncio.create_task(
            Failover([primary, alternate]).complete(REQUEST, Deadline.after(5))
        )
        await asyncio.sleep(0.02)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    assert alternate.calls == 0


def test_no_switch_without_enough_budget_left() -> None:
    primary, alternate = providers([Fail()], [Reply()])
    failover = Failover([primary, alternate], policy=FailoverPolicy(min_remaining=10.0))
    with pytest.raises(ChatError):
        asyncio.run(failover.complete(REQUEST, Deadline.after(5)))
    assert alternate.calls == 0


def collect(model: Failover) -> list[str]:
    async def go() -> list[str]:
        return [u.text async for u in model.stream(REQUEST, Deadline.after(5))]

    return asyncio.run(go())


def test_a_stream_switches_only_before_any_output() -> None:
    primary, alternate = providers([Stream((), Fail())], [Stream(("Hello",), None)])
    assert collect(Failover([primary, alternate])) == ["Hello"]
    primary, alternate = providers([Stream(("You can find",), Fail())], [Stream(("Hello",), None)])
    with pytest.raises(ChatError):
        collect(Failover([primary, alternate]))
    assert (primary.calls, alternate.calls) == (1, 0)


def test_one_budget_bounds_first_tries_retries_and_alternates() -> None:
    primary, alternate = providers([Fail(), Fail()], [Fail(), Reply()])

    def leg(provider: ScriptedChatModel) -> Retry:
        return Retry(AttemptLimit(provider), max_attempts=2, sleep=no_wait)

    pipeline = Budgeted(Failover([leg(primary), leg(alternate)]), attempts=3)
    with pytest.raises(ChatError) as caught:
        asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert (primary.calls, alternate.calls) == (2, 1)  # 3 attempts in all, never a 4th
    # A fresh operation gets a fresh budget.
    primary2, alternate2 = providers([Reply()], [])
    fresh = Budgeted(Failover([leg(primary2), leg(alternate2)]), attempts=3)
    assert asyncio.run(fresh.complete(REQUEST, Deadline.after(5))).provider == "primary"
