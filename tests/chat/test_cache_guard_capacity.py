from __future__ import annotations

import asyncio

import pytest

from ragwright.chat.cache import MemoryCacheStore, ResponseCache
from ragwright.chat.capacity import CapacityGate, LocalCapacityPool
from ragwright.chat.contract import ChatMessage, ChatRequest, ChatResponse, Deadline
from ragwright.chat.guard import MessageGuard
from ragwright.chat.probes import Probe
from ragwright.errors import ChatError, FailureCategory
from ragwright.testing.fakes import WordCounter
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel, Stream

SCOPED = ChatRequest(
    (ChatMessage("user", "Where can I find the public product manual?"),),
    scope="tenant:public",
    prompt_version="support-reply-v1",
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ask(model, request: ChatRequest = SCOPED, seconds: float = 5) -> ChatResponse:  # type: ignore[no-untyped-def]
    return asyncio.run(model.complete(request, Deadline.after(seconds)))


def test_probe_outside_the_cache_sees_hits_inside_it_does_not() -> None:
    # Arrangement A: call probe -> cache -> provider
    events: list[str] = []
    provider = ScriptedChatModel([Reply()], events=events.append)
    a = Probe(
        ResponseCache(provider, MemoryCacheStore(), ttl=60, events=events.append),
        name="call",
        events=events.append,
    )
    ask(a)
    ask(a)
    assert events == [
        "call:begin",
        "cache:miss",
        "provider:1",
        "cache:store",
        "call:ok",
        "call:begin",
        "cache:hit",
        "call:ok",
    ]
    # Arrangement B: cache -> attempt probe -> provider
    events.clear()
    provider = ScriptedChatModel([Reply()], events=events.append)
    b = ResponseCache(
        Probe(provider, name="attempt", events=events.append),
        MemoryCacheStore(),
        ttl=60,
        events=events.append,
    )
    ask(b)
    ask(b)
    assert events == [
        "cache:miss",
        "attempt:begin",
        "provider:1",
        "attempt:ok",
        "cache:store",
        "cache:hit",
    ]


def test_a_hit_returns_a_fresh_equal_response() -> None:
    cache = ResponseCache(
        ScriptedChatModel([Reply("Manual: docs page.")]), MemoryCacheStore(), ttl=60
    )
    first, second = ask(cache), ask(cache)
    assert first == second and first is not second


def test_an_exhausted_deadline_is_never_answered_from_the_cache() -> None:
    cache = ResponseCache(ScriptedChatModel([Reply()]), MemoryCacheStore(), ttl=60)
    ask(cache)
    with pytest.raises(ChatError) as caught:
        asyncio.run(cache.complete(SCOPED, Deadline(expires_at=0.0)))
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED


def test_a_request_without_scope_is_not_cacheable() -> None:
    events: list[str] = []
    provider = ScriptedChatModel([Reply(), Reply()], events=events.append)
    cache = ResponseCache(provider, MemoryCacheStore(), ttl=60, events=events.append)
    unscoped = ChatRequest(SCOPED.messages)
    ask(cache, unscoped)
    ask(cache, unscoped)
    assert events == ["cache:bypass", "provider:1", "cache:bypass", "provider:2"]


def test_scope_and_prompt_version_are_part_of_the_key() -> None:
    provider = ScriptedChatModel([Reply("a"), Reply("b"), Reply("c")])
    cache = ResponseCache(provider, MemoryCacheStore(), ttl=60)
    ask(cache)
    other_tenant = ChatRequest(
        SCOPED.messages, scope="tenant:acme", prompt_version="support-reply-v1"
    )
    new_prompt = ChatRequest(
        SCOPED.messages, scope="tenant:public", prompt_version="support-reply-v2"
    )
    assert ask(cache, other_tenant).text == "b"
    assert ask(cache, new_prompt).text == "c"
    assert provider.calls == 3


def test_only_completed_validated_responses_are_stored_and_entries_expire() -> None:
    class Truncated(ScriptedChatModel):
        async def complete(self, request, deadline):  # type: ignore[no-untyped-def]
            response = await super().complete(request, deadline)
            return ChatResponse(response.text, "length", response.model)

    provider = Truncated([Reply(), Reply()])
    cache = ResponseCache(provider, MemoryCacheStore(), ttl=60)
    ask(cache)
    ask(cache)
    assert provider.calls == 2  # a cut-off answer is never cached
    rejecting = ResponseCache(
        ScriptedChatModel([Reply(), Reply()]), MemoryCacheStore(), ttl=60, accept=lambda r: False
    )
    ask(rejecting)
    ask(rejecting)
    assert rejecting.inner.calls == 2  # type: ignore[attr-defined]
    clock = Clock()
    timed = ResponseCache(ScriptedChatModel([Reply(), Reply()]), MemoryCacheStore(clock), ttl=60)
    ask(timed)
    clock.now = 61
    ask(timed)
    assert timed.inner.calls == 2  # type: ignore[attr-defined]


def test_failures_are_not_cached() -> None:
    provider = ScriptedChatModel([Fail(FailureCategory.INVALID_CONFIGURATION), Reply()])
    cache = ResponseCache(provider, MemoryCacheStore(), ttl=60)
    with pytest.raises(ChatError):
        ask(cache)
    assert ask(cache).text == "Draft reply."


@pytest.mark.parametrize("shape", ["complete", "stream"])
def test_guard_rejects_before_the_provider_is_called(shape: str) -> None:
    provider = ScriptedChatModel([Reply(), Stream(("x",), None)])
    guard = MessageGuard(provider, max_messages=2, max_input_tokens=5, counter=WordCounter())
    too_long = ChatRequest((ChatMessage("user", "one two three four five six"),))
    too_many = ChatRequest(tuple(ChatMessage("user", "hi") for _ in range(3)))

    async def go(request: ChatRequest) -> None:
        if shape == "complete":
            await guard.complete(request, Deadline.after(1))
        else:
            async for _ in guard.stream(request, Deadline.after(1)):
                pass

    for request, fragment in ((too_long, "input tokens"), (too_many, "messages")):
        with pytest.raises(ChatError) as caught:
            asyncio.run(go(request))
        assert caught.value.category is FailureCategory.INVALID_INPUT
        assert fragment in str(caught.value)
    assert provider.calls == 0


def test_capacity_gate_refuses_at_once_and_releases_on_failure_and_cancel() -> None:
    pool = LocalCapacityPool(1)
    provider = ScriptedChatModel([Hang(), Fail(), Reply()])
    gate = CapacityGate(provider, pool)

    async def go() -> None:
        slow = asyncio.create_task(gate.complete(SCOPED, Deadline.after(5)))
        await asyncio.sleep(0.02)
        assert pool.in_use == 1
        with pytest.raises(ChatError) as caught:
            await gate.complete(SCOPED, Deadline.after(5))
        assert caught.value.category is FailureCategory.CAPACITY
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert pool.in_use == 0
        with pytest.raises(ChatError):
            await gate.complete(SCOPED, Deadline.after(5))  # transient failure
        assert pool.in_use == 0
        assert (await gate.complete(SCOPED, Deadline.after(5))).text == "Draft reply."

    asyncio.run(go())
    assert provider.calls == 3  # the refused attempt never reached the provider


def test_a_stream_holds_its_lease_until_consumed_or_abandoned() -> None:
    pool = LocalCapacityPool(1)
    gate = CapacityGate(
        ScriptedChatModel([Stream(("a", "b"), None), Stream(("c", "d"), None)]), pool
    )

    async def go() -> None:
        stream = gate.stream(SCOPED, Deadline.after(5))
        assert (await anext(stream)).text == "a"
        assert pool.in_use == 1  # still streaming
        async for _ in stream:
            pass
        assert pool.in_use == 0  # fully consumed
        abandoned = gate.stream(SCOPED, Deadline.after(5))
        await anext(abandoned)
        assert pool.in_use == 1
        await abandoned.aclose()  # the caller walked away
        assert pool.in_use == 0

    asyncio.run(go())
