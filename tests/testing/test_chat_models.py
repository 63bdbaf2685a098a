"""The ChatModel suite on the scripted fake and on the Ollama and OpenAI-compatible
adapters against fake servers behind httpx transports."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import httpx

from ragwright.adapters.chatmodels.ollama import OllamaChatModel
from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel
from ragwright.errors import FailureCategory
from ragwright.protocols import ChatModel
from ragwright.testing import (
    ChatModelConformance,
    Fail,
    Reply,
    ScriptedChatModel,
    Stream,
)

Handler = Callable[[httpx.Request], httpx.Response]


class TestScriptedChatModel(ChatModelConformance):
    def answering(self, text: str) -> ChatModel:
        return ScriptedChatModel([Reply(text)])

    def streaming(self, pieces: Sequence[str]) -> ChatModel:
        return ScriptedChatModel([Stream(tuple(pieces), None)])

    def failing(self) -> ChatModel:
        return ScriptedChatModel([Fail(FailureCategory.TRANSIENT)])


def unavailable(_request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, json={"error": "overloaded"})


class TestOllamaChatModel(ChatModelConformance):
    def model(self, handler: Handler) -> OllamaChatModel:
        return OllamaChatModel("qwen2.5:0.5b", transport=httpx.MockTransport(handler))

    def answering(self, text: str) -> ChatModel:
        body = {
            "model": "qwen2.5:0.5b",
            "message": {"role": "assistant", "content": text},
            "done_reason": "stop",
            "prompt_eval_count": 9,
            "eval_count": 4,
        }
        return self.model(lambda _request: httpx.Response(200, json=body))

    def streaming(self, pieces: Sequence[str]) -> ChatModel:
        lines = [{"message": {"content": p}, "done": False} for p in pieces]
        lines.append({"message": {"content": ""}, "done": True, "done_reason": "stop"})
        ndjson = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return self.model(lambda _request: httpx.Response(200, content=ndjson))

    def failing(self) -> ChatModel:
        return self.model(unavailable)

    async def close(self, model: ChatModel) -> None:
        assert isinstance(model, OllamaChatModel)
        await model.close()


class TestOpenAIChatModel(ChatModelConformance):
    def model(self, handler: Handler) -> OpenAIChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        return OpenAIChatModel("served-model", base_url="http://chat.test/v1", http_client=client)

    def answering(self, text: str) -> ChatModel:
        body = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "served-model-7",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
        return self.model(lambda _request: httpx.Response(200, json=body))

    def streaming(self, pieces: Sequence[str]) -> ChatModel:
        def chunk(content: str | None, finish: str | None) -> str:
            delta = {"content": content} if content is not None else {}
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            body = {"id": "c1", "object": "chat.completion.chunk", "created": 0}
            return "data: " + json.dumps({**body, "model": "m", "choices": [choice]}) + "\n\n"

        events = [chunk(p, None) for p in pieces] + [chunk(None, "stop"), "data: [DONE]\n\n"]
        sse = "".join(events).encode()
        headers = {"content-type": "text/event-stream"}
        return self.model(lambda _request: httpx.Response(200, headers=headers, content=sse))

    def failing(self) -> ChatModel:
        return self.model(unavailable)

    async def close(self, model: ChatModel) -> None:
        assert isinstance(model, OpenAIChatModel)
        await model.close()
