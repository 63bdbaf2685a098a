from __future__ import annotations

import asyncio
import http.server
import threading
from typing import ClassVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragwright.chat.contract import ChatMessage, ChatModel, ChatRequest, Deadline, ModelProfile
from ragwright.chat.telemetry import TelemetryExport
from ragwright.errors import ChatError, ConfigError, FailureCategory
from ragwright.runtime import (
    build_chat_pipeline,
    chat_profiles,
    configure_telemetry,
    open_chat_providers,
    open_shared_state,
)
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


def test_a_throttled_primary_cools_its_own_pool_and_failover_still_reaches_the_alternate() -> None:
    primary = ScriptedChatModel([Fail(FailureCategory.THROTTLED, retry_after=30)], name="primary")
    alternate = ScriptedChatModel([Reply("alt"), Reply("alt again")], name="alternate")
    settings = load_settings()
    shared = open_shared_state(settings, ["primary", "alternate"])
    pipeline = build_chat_pipeline(
        settings, [primary, alternate], counter=WordCounter(), shared=shared
    )
    unscoped = ChatRequest(REQUEST.messages)
    assert asyncio.run(pipeline.complete(unscoped, Deadline.after(5))).text == "alt"
    assert 29 < shared.pools["primary"].cooldown_remaining() <= 30
    assert shared.pools["alternate"].cooldown_remaining() == 0.0
    # The next operation is refused at the primary's gate without a provider call.
    assert asyncio.run(pipeline.complete(unscoped, Deadline.after(5))).text == "alt again"
    assert primary.calls == 1 and alternate.calls == 2


def test_the_throttle_cooldown_setting_reaches_the_gate() -> None:
    provider = ScriptedChatModel([Fail(FailureCategory.THROTTLED)] * 2, name="primary")
    settings = load_settings(chat_throttle_cooldown=7, chat_retries=1)
    shared = open_shared_state(settings, ["primary"])
    pipeline = build_chat_pipeline(settings, [provider], counter=WordCounter(), shared=shared)
    with pytest.raises(ChatError) as caught:
        asyncio.run(pipeline.complete(REQUEST, Deadline.after(5)))
    assert caught.value.category is FailureCategory.THROTTLED
    assert 6.5 < shared.pools["primary"].cooldown_remaining() <= 7


PROFILES = (
    ModelProfile("primary", "local", "big-model"),
    ModelProfile("alternate", "openai", "small-model"),
)
SECRET = "Customer 4711 asks about invoice INV-99"
SECRET_REQUEST = ChatRequest(
    (ChatMessage("system", "Answer from evidence only."), ChatMessage("user", SECRET)),
    scope="tenant:public",
)


def in_memory(capture_content: bool = False) -> tuple[TelemetryExport, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return TelemetryExport(tracer_provider, meters, capture_content), spans


def fallback_pipeline(export: TelemetryExport) -> ChatModel:
    primary = ScriptedChatModel([Fail()], name="primary")
    alternate = ScriptedChatModel([Reply("Thirty seconds.")], name="alternate", model="small-v2")
    return build_chat_pipeline(
        load_settings(),
        [primary, alternate],
        counter=WordCounter(),
        profiles=PROFILES,
        telemetry=export,
    )


def test_spans_are_named_after_the_model_that_answered_without_content() -> None:
    export, spans = in_memory()
    asyncio.run(fallback_pipeline(export).complete(SECRET_REQUEST, Deadline.after(5)))
    failed, answered, call = spans.get_finished_spans()
    assert failed.name == "chat big-model" and failed.attributes["error.type"] == "transient"
    assert answered.name == "chat small-model"
    assert answered.attributes["gen_ai.provider.name"] == "openai"
    assert call.attributes["ragwright.chat.layer"] == "call"
    assert call.name == "chat small-model"
    assert call.attributes["gen_ai.request.model"] == "small-model"
    assert call.attributes["gen_ai.system"] == "openai"
    assert call.attributes["gen_ai.response.model"] == "small-v2"
    assert call.attributes["ragwright.chat.fallback"] is True
    dumped = " ".join(s.to_json() for s in spans.get_finished_spans())
    for fragment in ("4711", "INV-99", "Answer from evidence", "Thirty seconds"):
        assert fragment not in dumped


def test_content_is_captured_only_when_asked() -> None:
    export, spans = in_memory(capture_content=True)
    asyncio.run(fallback_pipeline(export).complete(SECRET_REQUEST, Deadline.after(5)))
    call = spans.get_finished_spans()[-1]
    assert SECRET in str(call.attributes["gen_ai.input.messages"])
    assert "Answer from evidence" in str(call.attributes["gen_ai.system_instructions"])
    assert "Thirty seconds" in str(call.attributes["gen_ai.output.messages"])


class Collector(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        return None


def test_otlp_export_sends_the_spans_to_the_configured_collector() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        settings = load_settings(telemetry_exporter="otlp", telemetry_endpoint=endpoint)
        export = configure_telemetry(settings)
        assert export is not None
        asyncio.run(fallback_pipeline(export).complete(SECRET_REQUEST, Deadline.after(5)))
        export.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    traces = b"".join(body for path, body in Collector.received if path == "/v1/traces")
    assert b"chat small-model" in traces and b"4711" not in traces
    assert any(path == "/v1/metrics" for path, _ in Collector.received)


def test_console_export_writes_spans_to_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert configure_telemetry(load_settings()) is None  # off by default
    export = configure_telemetry(load_settings(telemetry_exporter="console"))
    assert export is not None and not export.capture_content
    asyncio.run(fallback_pipeline(export).complete(SECRET_REQUEST, Deadline.after(5)))
    export.shutdown()
    captured = capsys.readouterr()
    assert '"name": "chat small-model"' in captured.err and captured.out == ""


def test_profiles_and_providers_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALT_KEY", "sk-test")
    settings = load_settings(
        chat_provider="ollama",
        chat_model="qwen2.5:7b",
        chat_context_window=8192,
        chat_fallbacks=[
            {
                "provider": "openai",
                "model": "gpt-small",
                "api_key_env": "ALT_KEY",
                "context_window": 2048,
                "output_limit": 256,
            },
            {"provider": "ollama", "model": "qwen2.5:0.5b", "name": "tiny"},
        ],
    )
    profiles = chat_profiles(settings)
    assert [(p.name, p.system, p.model, p.context_window, p.schema_style) for p in profiles] == [
        ("ollama", "ollama", "qwen2.5:7b", 8192, "variants"),
        ("openai:gpt-small", "openai", "gpt-small", 2048, "object"),
        ("tiny", "ollama", "qwen2.5:0.5b", 4096, "variants"),
    ]
    providers, close = open_chat_providers(settings)
    asyncio.run(close())
    assert [p.name for p in providers] == [p.name for p in profiles]


def test_a_fallback_whose_key_variable_is_unset_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ALT_KEY", raising=False)
    settings = load_settings(
        chat_fallbacks=[{"provider": "openai", "model": "m", "api_key_env": "ALT_KEY"}]
    )
    with pytest.raises(ConfigError) as caught:
        open_chat_providers(settings)
    assert caught.value.setting == "RAGWRIGHT_CHAT_FALLBACKS[0].api_key_env"
