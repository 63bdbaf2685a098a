"""OpenTelemetry spans and metrics for chat calls, following the GenAI conventions.

One middleware, two placements: ``layer="call"`` outside the cache and retry (one span
per logical operation, metric ``ragwright.chat.call.duration``) and ``layer="attempt"``
just above a provider (one span per attempt, the conventional
``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``). Spans are named
``chat {model}`` and carry the operation, provider (``gen_ai.provider.name`` and the
older ``gen_ai.system``), requested and reported model, token limits, finish reason,
usage when reported, the failure category as ``error.type``, and whether a fallback
answered. A span whose response came from an alternate is renamed after the model that
*answered* and its request attributes name that model and provider: an alternate's
traffic never hides under the primary's name.

Message content is not recorded by default: no prompt, no completion, no system
instructions, because prompts carry customer evidence. Only ``capture_content=True``
(``RAGWRIGHT_TELEMETRY_CAPTURE_CONTENT``) adds ``gen_ai.system_instructions``,
``gen_ai.input.messages`` and ``gen_ai.output.messages``; the GenAI instrumentation
environment variables (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``) have no
effect here. :func:`export_telemetry` builds SDK providers with an OTLP/HTTP or console
exporter for the composition root to pass in.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

from ragwright import __version__
from ragwright.chat.contract import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    Deadline,
    ModelProfile,
)
from ragwright.errors import ChatError

Layer = Literal["call", "attempt"]
Exporter = Literal["console", "otlp"]
_SCOPE = "ragwright.chat"
Attributes = dict[str, str | int | float | bool]


class Telemetry:
    """Wraps a chat model with spans and duration/token metrics.

    ``provider`` and ``model`` describe the request as sent; ``profiles`` (by provider
    name) let the span name the model that answered when a response says another
    provider did (a fallback). ``capture_content`` records message content.
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        layer: Layer,
        provider: str,
        model: str,
        profiles: Sequence[ModelProfile] = (),
        capture_content: bool = False,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.layer = layer
        self.provider = provider
        self.model = model
        self.capture_content = capture_content
        self._profiles: Mapping[str, ModelProfile] = {p.name: p for p in profiles}
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
        duration_name = (
            "gen_ai.client.operation.duration"
            if layer == "attempt"
            else "ragwright.chat.call.duration"
        )
        self._duration = meter.create_histogram(
            duration_name, unit="s", description=f"chat {layer} duration"
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="tokens reported by the provider",
        )

    def _attributes(self, request: ChatRequest) -> Attributes:
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.system": self.provider,
            "gen_ai.request.model": self.model,
            "ragwright.chat.layer": self.layer,
            "ragwright.chat.messages": len(request.messages),
        }
        if request.options.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.options.max_output_tokens
        if request.options.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.options.temperature
        if request.options.json_schema is not None:
            attributes["gen_ai.output.type"] = "json"
        return attributes

    def _answered_by(self, span: Span, response: ChatResponse, attributes: Attributes) -> None:
        """Name the span and its request attributes after the model that answered."""
        profile = self._profiles.get(response.provider)
        if profile is None or profile.model == attributes["gen_ai.request.model"]:
            return
        attributes.update(
            {
                "gen_ai.request.model": profile.model,
                "gen_ai.provider.name": profile.system,
                "gen_ai.system": profile.system,
            }
        )
        span.update_name(f"chat {profile.model}")
        span.set_attributes(attributes)

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        attributes = self._attributes(request)
        started = time.perf_counter()
        with self._span(attributes) as span:
            if self.capture_content:
                _record_input(span, request.messages)
            try:
                response = await self.inner.complete(request, deadline)
            except BaseException as error:
                self._failed(span, error, attributes, started)
                raise
            self._answered_by(span, response, attributes)
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.output.messages",
                    _messages_json([ChatMessage("assistant", response.text)]),
                )
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            span.set_attribute("ragwright.chat.fallback", response.fallback)
            if response.provider:
                span.set_attribute("ragwright.chat.answered_by", response.provider)
            if response.usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
                for kind, count in (
                    ("input", response.usage.input_tokens),
                    ("output", response.usage.output_tokens),
                ):
                    self._tokens.record(count, {**attributes, "gen_ai.token.type": kind})
            self._duration.record(time.perf_counter() - started, attributes)
            return response

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        attributes = {**self._attributes(request), "ragwright.chat.streaming": True}
        started = time.perf_counter()
        with self._span(attributes) as span:
            if self.capture_content:
                _record_input(span, request.messages)
            updates = 0
            try:
                async for update in self.inner.stream(request, deadline):
                    updates += 1
                    yield update
            except BaseException as error:
                span.set_attribute("ragwright.chat.stream_updates", updates)
                self._failed(span, error, attributes, started)
                raise
            span.set_attribute("ragwright.chat.stream_updates", updates)
            self._duration.record(time.perf_counter() - started, attributes)

    def _span(self, attributes: Attributes) -> Any:
        # Exceptions are recorded by ``_failed`` as a category only, never as a message.
        return self._tracer.start_as_current_span(
            f"chat {self.model}",
            kind=trace.SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )

    def _failed(
        self,
        span: Span,
        error: BaseException,
        attributes: Attributes,
        started: float,
    ) -> None:
        # The category, never the message: messages can quote provider output.
        kind = error.category.value if isinstance(error, ChatError) else type(error).__name__
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, kind))
        self._duration.record(time.perf_counter() - started, {**attributes, "error.type": kind})


def _messages_json(messages: Sequence[ChatMessage]) -> str:
    """Messages in the GenAI conventions' shape: role plus text parts."""
    return json.dumps(
        [{"role": m.role, "parts": [{"type": "text", "content": m.content}]} for m in messages],
        ensure_ascii=False,
    )


def _record_input(span: Span, messages: Sequence[ChatMessage]) -> None:
    system = [{"type": "text", "content": m.content} for m in messages if m.role == "system"]
    if system:
        span.set_attribute("gen_ai.system_instructions", json.dumps(system, ensure_ascii=False))
    span.set_attribute(
        "gen_ai.input.messages", _messages_json([m for m in messages if m.role != "system"])
    )


@dataclass(frozen=True, slots=True)
class TelemetryExport:
    """SDK providers that export spans and metrics; pass them to :class:`Telemetry`.

    Call :meth:`shutdown` before the process exits: it flushes what is still buffered.
    """

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    capture_content: bool = False

    def shutdown(self) -> None:
        """Flush and stop both providers."""
        for provider in (self.tracer_provider, self.meter_provider):
            shutdown = getattr(provider, "shutdown", None)
            if shutdown is not None:
                shutdown()


def export_telemetry(
    exporter: Exporter,
    *,
    endpoint: str | None = None,
    service_name: str = "ragwright",
    capture_content: bool = False,
) -> TelemetryExport:
    """Providers exporting through OTLP over HTTP (``endpoint``: the collector's base URL,
    e.g. ``http://127.0.0.1:4318``; ``None`` follows the ``OTEL_EXPORTER_OTLP_*``
    variables) or to the console (standard error, so standard output stays the
    command's). Nothing is installed globally.
    """
    # The SDK (~50 ms) and the OTLP exporter (~600 ms, protobuf) load only when export
    # is asked for, so a plain run does not pay for them.
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    spans: SpanExporter
    measurements: MetricExporter
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        base = endpoint.rstrip("/") if endpoint else None
        spans = OTLPSpanExporter(endpoint=f"{base}/v1/traces" if base else None)
        measurements = OTLPMetricExporter(endpoint=f"{base}/v1/metrics" if base else None)
    elif exporter == "console":
        spans = ConsoleSpanExporter(out=sys.stderr)
        measurements = ConsoleMetricExporter(out=sys.stderr)
    else:
        raise ValueError(f"unknown telemetry exporter {exporter!r}; expected console or otlp")
    resource = Resource.create({"service.name": service_name, "service.version": __version__})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(measurements)]
    )
    return TelemetryExport(tracer_provider, meter_provider, capture_content)
