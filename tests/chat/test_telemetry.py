from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragwright.chat.contract import (
    ChatMessage,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    Deadline,
    Usage,
)
from ragwright.chat.retry import Retry
from ragwright.chat.telemetry import Telemetry
from ragwright.errors import ChatError
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel, Stream

SECRET = "Customer 4711 asks about invoice INV-99 at 12 Elm Street"
REQUEST = ChatRequest(
    (ChatMessage("system", "Answer from evidence only."), ChatMessage("user", SECRET)),
    ChatOptions(max_output_tokens=200, json_schema={"type": "object"}),
)


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def wrap(self, inner, layer):  # type: ignore[no-untyped-def]
        return Telemetry(
            inner,
            layer=layer,
            provider="openai",
            model="qwen2.5-coder-0.5b",
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
        )

    def metric_names(self) -> set[str]:
        data = self.reader.get_metrics_data()
        return {
            m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield Otel()


class WithUsage(ScriptedChatModel):
    async def complete(self, request, deadline):  # type: ignore[no-untyped-def]
        r = await super().complete(request, deadline)
        return ChatResponse(r.text, "stop", "qwen2.5-coder:0.5b-q4", Usage(120, 30))


def test_call_and_attempt_spans_follow_the_genai_conventions(otel: Otel) -> None:
    provider = WithUsage([Fail(), Reply(SECRET)])
    attempt = otel.wrap(provider, "attempt")
    call = otel.wrap(Retry(attempt, sleep=lambda _s: asyncio.sleep(0)), "call")
    asyncio.run(call.complete(REQUEST, Deadline.after(5)))
    spans = otel.spans.get_finished_spans()
    layers = [s.attributes["ragwright.chat.layer"] for s in spans]
    assert layers == ["attempt", "attempt", "call"]
    failed, ok, logical = spans
    assert failed.attributes["error.type"] == "transient" and not failed.status.is_ok
    assert ok.name == "chat qwen2.5-coder-0.5b"
    assert ok.attributes["gen_ai.operation.name"] == "chat"
    assert ok.attributes["gen_ai.request.max_tokens"] == 200
    assert ok.attributes["gen_ai.response.model"] == "qwen2.5-coder:0.5b-q4"
    assert ok.attributes["gen_ai.usage.input_tokens"] == 120
    assert tuple(ok.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert logical.status.is_ok
    assert {
        "gen_ai.client.operation.duration",
        "ragwright.chat.call.duration",
        "gen_ai.client.token.usage",
    } <= otel.metric_names()


def test_unknown_usage_is_absent_not_zero(otel: Otel) -> None:
    asyncio.run(
        otel.wrap(ScriptedChatModel([Reply()]), "attempt").complete(REQUEST, Deadline.after(5))
    )
    (span,) = otel.spans.get_finished_spans()
    assert "gen_ai.usage.input_tokens" not in span.attributes


def test_no_content_is_recorded_even_when_the_environment_asks(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    model = otel.wrap(
        ScriptedChatModel([Reply(SECRET), Fail(), Stream((SECRET,), None)]), "attempt"
    )
    asyncio.run(model.complete(REQUEST, Deadline.after(5)))
    with pytest.raises(ChatError):
        asyncio.run(model.complete(REQUEST, Deadline.after(5)))

    async def drain() -> None:
        async for _ in model.stream(REQUEST, Deadline.after(5)):
            pass

    asyncio.run(drain())
    dumped = " ".join(s.to_json() for s in otel.spans.get_finished_spans())
    for fragment in ("4711", "INV-99", "Elm Street", "Answer from evidence", "Draft reply"):
        assert fragment not in dumped
    assert all(not s.events for s in otel.spans.get_finished_spans())
