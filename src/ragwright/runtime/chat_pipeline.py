"""The default chat pipeline over the configured providers, and its telemetry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragwright.chat.budget import AttemptLimit, Budgeted
from ragwright.chat.builder import ChatPipelineBuilder
from ragwright.chat.cache import ResponseCache
from ragwright.chat.capacity import CapacityGate
from ragwright.chat.contract import ChatModel, ModelProfile
from ragwright.chat.failover import Failover
from ragwright.chat.guard import MessageGuard
from ragwright.chat.probes import Probe
from ragwright.chat.retry import Retry
from ragwright.chat.telemetry import Layer, Telemetry, TelemetryExport, export_telemetry
from ragwright.protocols import TokenCounter
from ragwright.runtime.shared import SharedState, open_shared_state
from ragwright.settings import Settings


def configure_telemetry(settings: Settings) -> TelemetryExport | None:
    """Exporting providers per ``telemetry_*`` settings, or ``None`` (``none``).

    Pass the result to :func:`build_chat_pipeline` (``telemetry=``) and call its
    ``shutdown()`` before exiting so buffered spans are sent.
    """
    if settings.telemetry.exporter == "none":
        return None
    return export_telemetry(
        settings.telemetry.exporter,
        endpoint=settings.telemetry.endpoint,
        service_name=settings.telemetry.service_name,
        capture_content=settings.telemetry.capture_content,
    )


def build_chat_pipeline(
    settings: Settings,
    providers: Sequence[ChatModel],
    *,
    counter: TokenCounter,
    events: Callable[[str], None] | None = None,
    profiles: Sequence[ModelProfile] | None = None,
    telemetry: TelemetryExport | None = None,
    shared: SharedState | None = None,
) -> ChatModel:
    """The default pipeline over ``providers`` (the first is the primary), outer → inner:

    guard → call telemetry/probe → cache → retry → failover → (per provider: attempt
    budget → capacity gate → attempt telemetry/probe → provider).

    ``profiles`` (from :func:`chat_profiles`, one per provider, same names) let failover
    re-prepare a request for each alternate and let telemetry name the model that
    answered; without them each provider is described by its name only. ``telemetry``
    (from :func:`configure_telemetry`) sends spans and metrics to its exporter.
    ``shared`` (from :func:`open_shared_state`) is the cache store and capacity pools;
    pass it to keep a handle on the pools (the service reports them), else the
    pipeline opens its own.
    """
    sink = events or _ignore
    described = (
        tuple(profiles)
        if profiles is not None
        else tuple(
            ModelProfile(
                name=p.name, system=p.name, model=(settings.chat.model if i == 0 else "") or p.name
            )
            for i, p in enumerate(providers)
        )
    )
    shared = shared or open_shared_state(settings, [p.name for p in providers])

    def traced(
        inner: ChatModel, layer: Layer, profile: ModelProfile, profiles: Sequence[ModelProfile]
    ) -> ChatModel:
        return Telemetry(
            inner,
            layer=layer,
            provider=profile.system,
            model=profile.model,
            profiles=profiles,
            capture_content=telemetry.capture_content if telemetry else False,
            tracer_provider=telemetry.tracer_provider if telemetry else None,
            meter_provider=telemetry.meter_provider if telemetry else None,
        )

    def leg(provider: ChatModel, profile: ModelProfile) -> ChatModel:
        return (
            ChatPipelineBuilder(provider)
            .use(AttemptLimit)
            .use(
                lambda inner: CapacityGate(
                    inner,
                    shared.pools[provider.name],
                    cooldown=settings.chat.throttle_cooldown,
                    # A model server goes on with a call its caller left: keep its lease.
                    drain=getattr(provider, "outlives_cancellation", False),
                )
            )
            .use(lambda inner: Probe(inner, name="attempt", events=sink))
            .use(lambda inner: traced(inner, "attempt", profile, ()))
            .build()
        )

    legs = [leg(p, profile) for p, profile in zip(providers, described, strict=True)]
    core: ChatModel = legs[0] if len(legs) == 1 else Failover(legs, profiles=described, events=sink)
    primary = described[0]
    return (
        ChatPipelineBuilder(core)
        .use(
            lambda inner: MessageGuard(
                inner,
                max_messages=settings.chat.max_messages,
                max_input_tokens=settings.chat.max_input_tokens,
                counter=counter,
            )
        )
        .use(lambda inner: Budgeted(inner, attempts=settings.chat.max_attempts))
        .use(lambda inner: traced(inner, "call", primary, described))
        .use(lambda inner: Probe(inner, name="call", events=sink))
        .use(
            lambda inner: ResponseCache(
                inner, shared.store, ttl=settings.chat.cache_ttl, events=sink
            )
        )
        .use(lambda inner: Retry(inner, max_attempts=settings.chat.retries, events=sink))
        .build()
    )


def _ignore(_event: str) -> None:
    return None
