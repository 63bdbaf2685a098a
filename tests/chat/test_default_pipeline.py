from __future__ import annotations

import asyncio

import pytest

from ragwright.chat.contract import ChatMessage, ChatRequest, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.runtime import build_chat_pipeline
from ragwright.settings import load_settings
from ragwright.testing.fakes import WordCounter
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel

REQUEST = ChatRequest(
    (ChatMessage("user", "Where is the manual?"),), scope="tenant:public", prompt_version="v1"
)


def test_default_order_outer_to_inner() -> None:
    events: list[str] = []
    provider = ScriptedChatModel([Fail(), Reply()], events=events.append, name="primary")
    pipeline = build_chat_pipeline(
        load_settings(), [provider], counter=WordCounter(), events=events.append
    )
    response = asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert response.text == "Draft reply."
    assert events == [
        "call:begin",
        "cache:miss",
        "attempt:begin",
        "provider:1",
        "attempt:fail",
        "retry:wait",
        "attempt:begin",
        "provider:2",
        "attempt:ok",
        "cache:store",
        "call:ok",
    ]
    events.clear()
    asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert events == ["call:begin", "cache:hit", "call:ok"]


def test_the_guard_stops_oversized_requests_before_any_layer() -> None:
    events: list[str] = []
    provider = ScriptedChatModel([Reply()], events=events.append)
    settings = load_settings(chat_max_input_tokens=3)
    pipeline = build_chat_pipeline(
        settings, [provider], counter=WordCounter(), events=events.append
    )
    with pytest.raises(ChatError) as caught:
        asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert caught.value.category is FailureCategory.INVALID_INPUT and events == []


def test_alternates_are_used_through_failover_within_one_budget() -> None:
    events: list[str] = []
    primary = ScriptedChatModel([Fail(), Fail()], events=events.append, name="primary")
    alternate = ScriptedChatModel([Reply("alt")], events=events.append, name="alternate")
    settings = load_settings(chat_max_attempts=2)
    pipeline = build_chat_pipeline(
        settings, [primary, alternate], counter=WordCounter(), events=events.append
    )
    response = asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert (response.text, response.provider, response.fallback) == ("alt", "alternate", True)
    assert primary.calls == 1 and alternate.calls == 1
