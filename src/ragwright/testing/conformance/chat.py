"""The suite every :class:`~ragwright.protocols.ChatModel` provider adapter must pass.

Implement three factories, each returning a model that serves exactly one call:
:meth:`answering` (a buffered answer), :meth:`streaming` (the given pieces in order) and
:meth:`failing` (the provider is briefly unavailable, e.g. HTTP 503). Override
:meth:`close` when a model holds connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import pytest

from ragwright.chat.contract import ChatMessage, ChatRequest, ChatResponse, Deadline
from ragwright.errors import ChatError, FailureCategory
from ragwright.protocols import ChatModel

ANSWER = "The manual is on the docs page."
PIECES = ("The manual ", "is on ", "the docs page.")
REQUEST = ChatRequest(
    (ChatMessage("system", "Be brief."), ChatMessage("user", "Where is the manual?"))
)
T = TypeVar("T")


class ChatModelConformance:
    """Inherit and implement :meth:`answering`, :meth:`streaming` and :meth:`failing`."""

    def answering(self, text: str) -> ChatModel:
        """A model whose next buffered call answers ``text`` and stops normally."""
        raise NotImplementedError

    def streaming(self, pieces: Sequence[str]) -> ChatModel:
        """A model whose next streamed call yields ``pieces`` and ends normally."""
        raise NotImplementedError

    def failing(self) -> ChatModel:
        """A model whose next call meets a transient provider failure."""
        raise NotImplementedError

    async def close(self, model: ChatModel) -> None:
        """Release what ``model`` holds (nothing by default)."""

    def _run(self, model: ChatModel, call: Callable[[ChatModel], Awaitable[T]]) -> T:
        async def go() -> T:
            try:
                return await call(model)
            finally:
                await self.close(model)

        return asyncio.run(go())

    def test_has_a_name(self) -> None:
        model = self.answering(ANSWER)
        self._run(model, lambda m: m.complete(REQUEST, Deadline.after(10)))
        assert isinstance(model.name, str) and model.name.strip()

    def test_a_buffered_call_returns_the_whole_answer(self) -> None:
        model = self.answering(ANSWER)
        response = self._run(model, lambda m: m.complete(REQUEST, Deadline.after(10)))
        assert isinstance(response, ChatResponse)
        assert (response.text, response.finish_reason) == (ANSWER, "stop")
        assert response.model.strip()
        assert response.provider == model.name and response.fallback is False

    def test_usage_is_unknown_or_counted(self) -> None:
        model = self.answering(ANSWER)
        usage = self._run(model, lambda m: m.complete(REQUEST, Deadline.after(10))).usage
        assert usage is None or (usage.input_tokens >= 0 and usage.output_tokens >= 0)

    def test_a_stream_yields_the_pieces_in_order(self) -> None:
        async def collect(model: ChatModel) -> list[str]:
            return [u.text async for u in model.stream(REQUEST, Deadline.after(10))]

        assert self._run(self.streaming(PIECES), collect) == list(PIECES)

    def test_a_transient_failure_is_a_classified_chat_error(self) -> None:
        model = self.failing()
        with pytest.raises(ChatError) as caught:
            self._run(model, lambda m: m.complete(REQUEST, Deadline.after(10)))
        assert caught.value.category is FailureCategory.TRANSIENT
        assert caught.value.provider == model.name
