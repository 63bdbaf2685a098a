"""OpenTelemetry spans and metrics for chat calls, following the GenAI conventions.

One middleware, two placements: ``layer="call"`` outside the cache and retry (one span
per logical operation, metric ``ragwright.chat.call.duration``) and ``layer="attempt"``
just above a provider (one span per attempt, the conventional
``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``). Spans carry the
operation, provider, requested and reported model, token limits, finish reason, usage
when reported, the failure category as ``error.type``, and whether a fallback answered.

Message content is never recorded: no prompt, no completion, no system instructions.
There is deliberately no switch for it here — in particular the GenAI instrumentation
environment variables (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``) have no
effect on this middleware — because prompts carry customer evidence.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

from ragwright import __version__
from ragwright.chat.contract import ChatModel, ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ChatError

Layer = Literal["call", "attempt"]
_SCOPE = "ragwright.chat"


class Telemetry:
    """Wraps a chat model with spans and duration/token metrics."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        layer: Layer,
        provider: str,
        model: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.layer = layer
        self.provider = provider
        self.model = model
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

    def _attributes(self, request: ChatRequest) -> dict[str, str | int | float | bool]:
        attributes: dict[str, str | int | float | bool] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
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

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        attributes = self._attributes(request)
        started = time.perf_counter()
        with self._span(attributes) as span:
            try:
                response = await self.inner.complete(request, deadline)
            except BaseException as error:
                self._failed(span, error, attributes, started)
                raise
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

    def _span(self, attributes: dict[str, str | int | float | bool]) -> Any:
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
        attributes: dict[str, str | int | float | bool],
        started: float,
    ) -> None:
        # The category, never the message: messages can quote provider output.
        kind = error.category.value if isinstance(error, ChatError) else type(error).__name__
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, kind))
        self._duration.record(time.perf_counter() - started, {**attributes, "error.type": kind})
