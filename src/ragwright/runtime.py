"""The composition root: settings → adapters → :class:`Application`.

The one place that picks and imports adapters. Entry points call
:func:`build_application` and nothing else from here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ragwright import __version__
from ragwright.adapters.datasets import load_beir_cases, load_cases
from ragwright.adapters.drafts import PostgresDraftStore, SqliteDraftStore
from ragwright.adapters.edge import EdgeIndex
from ragwright.adapters.embedders.e5 import E5_SMALL_PROFILE, E5Embedder
from ragwright.adapters.embedders.onnx import MINILM_PROFILE, OnnxEmbedder
from ragwright.adapters.held import HeldIndex
from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.redis import (
    RedisCacheStore,
    RedisCapacityPool,
    RedisOutage,
    ResilientCacheStore,
    ResilientCapacityPool,
    connect,
)
from ragwright.adapters.sources import SourceDefaults, SourceStream
from ragwright.adapters.tokenizer import O200kCounter
from ragwright.application import (
    Application,
    ChatSession,
    LoadedSources,
    SkippedFile,
    Workload,
)
from ragwright.application.drafts import DraftStore
from ragwright.application.ingest_queue import IngestQueue
from ragwright.application.jobs import JobStore
from ragwright.application.keys import KeyStore
from ragwright.chat.budget import AttemptLimit, Budgeted
from ragwright.chat.builder import ChatPipelineBuilder
from ragwright.chat.cache import MemoryCacheStore, ResponseCache
from ragwright.chat.capacity import CapacityGate, LocalCapacityPool
from ragwright.chat.contract import ChatModel, ModelProfile
from ragwright.chat.failover import Failover
from ragwright.chat.guard import MessageGuard
from ragwright.chat.probes import Probe
from ragwright.chat.retry import Retry
from ragwright.chat.telemetry import Layer, Telemetry, TelemetryExport, export_telemetry
from ragwright.core.answers import SchemaStyle
from ragwright.core.contracts import contract_for
from ragwright.core.lexical import LexicalProfile
from ragwright.embedding_gate import EmbeddingCapacityGate
from ragwright.errors import ConfigError, IndexNotFound, RagwrightError
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import (
    CacheStore,
    CapacityPool,
    Embedder,
    Reranker,
    SparseEncoder,
    TokenCounter,
    VectorIndex,
)
from ragwright.retry import RetryingEmbedder, RetryingReranker, RetryPolicy
from ragwright.settings import Settings, load_settings
from ragwright.types import EmbeddingProfile, EvalCase, IndexState

if TYPE_CHECKING:
    from ragwright.adapters.chatmodels.resident import ResidentModel

logger = logging.getLogger(__name__)

REDIS_RETRY_INTERVAL = 30.0
"""Seconds a process skips Redis after it failed before trying it again."""


def embedding_profile(settings: Settings) -> EmbeddingProfile:
    """The profile the settings describe (a bundled one for ``onnx`` and ``e5``)."""
    if settings.embedding.provider == "onnx":
        return MINILM_PROFILE
    if settings.embedding.provider == "e5":
        return E5_SMALL_PROFILE
    missing = [
        name
        for name in ("profile_id", "model", "digest", "dimensions")
        if getattr(settings.embedding, name) is None
    ]
    if missing:
        raise ConfigError(
            f"RAGWRIGHT_EMBEDDING_{missing[0].upper()}",
            f"required when RAGWRIGHT_EMBEDDING_PROVIDER={settings.embedding.provider}",
        )
    return EmbeddingProfile(
        profile_id=str(settings.embedding.profile_id),
        provider=settings.embedding.provider,
        model=str(settings.embedding.model),
        artifact_digest=str(settings.embedding.digest),
        dimensions=int(settings.embedding.dimensions or 0),
        distance="cosine",
        document_format=settings.embedding.document_format,
        query_format=settings.embedding.query_format,
        max_input_tokens=settings.embedding.max_input_tokens,
    )


def open_embedder(settings: Settings, *, pool: CapacityPool | None = None) -> Embedder:
    """Create the configured embedder (verifies model artifacts or identity first).

    A remote one is, outer → inner: retry → capacity gate (a lease of ``pool``, by
    default :func:`open_embedding_pool`'s, per attempt) → provider, with
    ``embedding_in_flight`` batches in flight.
    """
    if settings.embedding.provider == "onnx":
        return OnnxEmbedder(batch_size=32, threads=settings.embedding.threads)
    if settings.embedding.provider == "e5":
        return E5Embedder(threads=settings.embedding.threads)
    return RetryingEmbedder(
        EmbeddingCapacityGate(
            _open_remote_embedder(settings),
            pool or open_embedding_pool(settings),
            cooldown=settings.chat.throttle_cooldown,
        ),
        policy=RetryPolicy(settings.remote.call_attempts),
        call_budget=settings.remote.call_budget,
    )


EMBEDDING_POOL = "embedding"
"""The shared pool's name (its Redis keys are ``ragwright:capacity:embedding*``)."""


def open_embedding_pool(
    settings: Settings, *, retry_interval: float = REDIS_RETRY_INTERVAL
) -> CapacityPool:
    """The remote embedder's capacity pool: ``embedding_in_flight`` leases, shared by
    every process through Redis with ``RAGWRIGHT_REDIS_URL``, else in-process.

    As for the chat pools, Redis is optional even when configured: while it does not
    answer the pool runs in-process (one warning says so) and Redis is tried again
    after ``retry_interval`` seconds. A lease outlives a dead holder by at most the
    remote call budget.
    """
    limit = settings.embedding.in_flight
    if not settings.storage.redis_url:
        return LocalCapacityPool(limit)
    client = connect(settings.storage.redis_url)
    outage = RedisOutage(
        _without_credentials(settings.storage.redis_url), retry_interval=retry_interval, log=logger
    )
    outage.check(client)
    shared = RedisCapacityPool(
        client, EMBEDDING_POOL, limit=limit, lease_ttl=settings.remote.call_budget + 10.0
    )
    return ResilientCapacityPool(shared, outage, fallback=LocalCapacityPool(limit))


def _open_remote_embedder(settings: Settings) -> Embedder:
    from ragwright.adapters.embedders.remote import OllamaEmbedder, OpenAIEmbedder

    profile = embedding_profile(settings)
    in_flight = settings.embedding.in_flight
    if settings.embedding.provider == "ollama":
        return OllamaEmbedder(profile, base_url=settings.embedding.ollama_url, in_flight=in_flight)
    key = (
        settings.embedding.openai_api_key.get_secret_value()
        if settings.embedding.openai_api_key
        else None
    )
    if settings.embedding.provider == "azure-openai":
        if not settings.embedding.azure_deployment:
            raise ConfigError("RAGWRIGHT_AZURE_DEPLOYMENT", "required for azure-openai")
        return OpenAIEmbedder(
            profile,
            api_key=key,
            base_url=settings.embedding.openai_base_url,
            azure_deployment=settings.embedding.azure_deployment,
            azure_api_version=settings.embedding.azure_api_version,
            in_flight=in_flight,
        )
    return OpenAIEmbedder(
        profile,
        api_key=key,
        base_url=settings.embedding.openai_base_url,
        in_flight=in_flight,
        verify_listed_model=settings.embedding.verify_model,
    )


def open_sparse_encoder(settings: Settings) -> Bm25Encoder:
    """The BM25 encoder for the configured lexical profile."""
    return Bm25Encoder(lexical_profile(settings))


def lexical_profile(settings: Settings) -> LexicalProfile:
    """BM25 parameters from the settings (part of the collection contract)."""
    return LexicalProfile(k1=settings.index.bm25_k1, b=settings.index.bm25_b)


def open_index(
    settings: Settings,
    profile: EmbeddingProfile,
    *,
    add_chunking_version: bool = False,
    write: bool = True,
    any_chunking_version: bool = False,
    chunking_version: str | None = None,
    rebuild: bool = False,
    verify: bool = True,
) -> VectorIndex:
    """Open the configured collection, checking its contract and its integrity.

    ``write=False`` never creates anything (a missing index is :class:`IndexNotFound`);
    ``any_chunking_version`` accepts whatever chunking versions the collection holds
    (``status`` inspects them all); ``rebuild`` empties the collection first;
    ``verify=False`` skips the open-time integrity check (``verify`` reads every point).
    """
    version = chunking_version or settings.chunking_policy().version
    contract = contract_for(profile, version, lexical_profile(settings))
    if any_chunking_version:
        contract = dataclasses.replace(contract, chunking_versions=())
    if settings.index.backend == "edge":
        return EdgeIndex(
            settings.index_path,
            contract,
            add_chunking_version=add_chunking_version,
            create=write,
            rebuild=rebuild,
            verify=verify,
        )
    if not settings.index.qdrant_location:
        raise ConfigError("RAGWRIGHT_QDRANT_LOCATION", "required when RAGWRIGHT_BACKEND=qdrant")
    from ragwright.adapters.qdrant import QdrantIndex  # the client loads only when used

    return QdrantIndex(
        settings.index.qdrant_location,
        settings.index.collection,
        contract,
        api_key=settings.index.qdrant_api_key.get_secret_value()
        if settings.index.qdrant_api_key
        else None,
        add_chunking_version=add_chunking_version,
        create=write,
        rebuild=rebuild,
        verify=verify,
    )


def open_retriever(
    settings: Settings,
    index: VectorIndex,
    *,
    embedder: Embedder | None = None,
    candidates: int | None = None,
) -> Retriever:
    """A retriever over ``index`` with the configured embedder, BM25 and reranker."""
    embedder = embedder or open_embedder(settings)
    from ragwright.adapters.rerankers import BiEncoderReranker, HttpReranker

    reranker: Reranker | None = None
    if settings.retrieval.reranker == "bi-encoder":
        reranker = BiEncoderReranker(embedder)
    elif settings.retrieval.reranker == "http":
        if not settings.retrieval.reranker_url:
            raise ConfigError("RAGWRIGHT_RERANKER_URL", "required when RAGWRIGHT_RERANKER=http")
        reranker = RetryingReranker(
            HttpReranker(settings.retrieval.reranker_url, model=settings.retrieval.reranker_model),
            policy=RetryPolicy(settings.remote.call_attempts),
            call_budget=settings.remote.call_budget,
        )
    return Retriever(
        index,
        embedder,
        open_sparse_encoder(settings),
        reranker=reranker,
        rrf_k=settings.retrieval.rrf_k,
        rrf_weights=settings.retrieval.rrf_weights,
        candidates=candidates or settings.retrieval.hybrid_candidates,
    )


def open_chat_provider(settings: Settings) -> tuple[ChatModel, Callable[[], Awaitable[None]]]:
    """The configured primary provider and its async ``close`` (await it in the loop
    that used it).

    The local model starts on its first call, so a question that ends without eligible
    evidence never starts it.
    """
    key = settings.chat.api_key.get_secret_value() if settings.chat.api_key else None
    return _open_provider(
        settings,
        settings.chat.provider,
        settings.chat.model,
        settings.chat.base_url,
        key,
        name=settings.chat.provider,
        setting="RAGWRIGHT_CHAT",
    )


def open_chat_providers(
    settings: Settings,
) -> tuple[list[ChatModel], Callable[[], Awaitable[None]]]:
    """The primary and every ``chat_fallbacks`` entry, in order, named as
    :func:`chat_profiles` names them, with one async ``close`` for all.

    Raises:
        ConfigError: a fallback lacks its model or endpoint, names an unset API key
            variable, or shares its name with the primary.
    """
    primary, close_primary = open_chat_provider(settings)
    providers, closers = [primary], [close_primary]
    for index, fallback in enumerate(settings.chat.fallbacks):
        setting = f"RAGWRIGHT_CHAT_FALLBACKS[{index}]"
        if fallback.label == primary.name:
            raise ConfigError(f"{setting}.name", f"{fallback.label!r} is the primary's name")
        key = None
        if fallback.api_key_env:
            key = os.environ.get(fallback.api_key_env)
            if not key:
                raise ConfigError(
                    f"{setting}.api_key_env", f"the variable {fallback.api_key_env} is unset"
                )
        provider, close = _open_provider(
            settings,
            fallback.provider,
            fallback.model,
            fallback.base_url,
            key,
            name=fallback.label,
            setting=setting,
        )
        providers.append(provider)
        closers.append(close)

    async def close_all() -> None:
        for close in closers:
            await close()

    return providers, close_all


def _open_provider(
    settings: Settings,
    kind: str,
    model: str,
    base_url: str | None,
    key: str | None,
    *,
    name: str,
    setting: str,
) -> tuple[ChatModel, Callable[[], Awaitable[None]]]:
    # Provider SDKs load only when a provider is opened (the CLI starts faster).
    from ragwright.adapters.chatmodels.local import OnDemandLocalModel
    from ragwright.adapters.chatmodels.ollama import OllamaChatModel
    from ragwright.adapters.chatmodels.openai_compatible import OpenAIChatModel

    # ``setting`` prefixes the names in errors: RAGWRIGHT_CHAT_MODEL or ..._FALLBACKS[0].model
    nested = setting != "RAGWRIGHT_CHAT"

    def field(part: str) -> str:
        return f"{setting}.{part}" if nested else f"{setting}_{part.upper()}"

    if kind == "local":
        if settings.chat.keep_warm > 0:
            from ragwright.adapters.chatmodels.resident import BackgroundLocalModel

            warm = BackgroundLocalModel(
                model_cache(settings), idle_timeout=settings.chat.keep_warm, name=name
            )
            return warm, warm.close
        local = OnDemandLocalModel(model_cache(settings), name=name)
        return local, local.close
    if not model:
        raise ConfigError(field("model"), f"required for {kind}")
    if kind == "ollama":
        ollama = OllamaChatModel(model, base_url=base_url or "http://127.0.0.1:11434", name=name)
        return ollama, ollama.close
    if kind == "azure-openai":
        if not base_url:
            raise ConfigError(field("base_url"), "the Azure OpenAI resource endpoint is required")
        azure = OpenAIChatModel(model, api_key=key or "unused", azure_endpoint=base_url, name=name)
        return azure, azure.close
    openai = OpenAIChatModel(model, api_key=key or "unused", base_url=base_url, name=name)
    return openai, openai.close


def model_cache(settings: Settings) -> Path:
    """Where the local model's verified file (and its background process's record) live."""
    return settings.storage.home / "models"


def background_model(settings: Settings) -> ResidentModel | None:
    """The local model's background process for this home, if one runs."""
    from ragwright.adapters.chatmodels.resident import read_resident

    return read_resident(model_cache(settings))


def stop_background_model(settings: Settings) -> ResidentModel | None:
    """End this home's background model; the one stopped, or None if none ran."""
    from ragwright.adapters.chatmodels.resident import stop_resident

    return stop_resident(model_cache(settings))


def chat_profiles(settings: Settings) -> tuple[ModelProfile, ...]:
    """The primary's profile, then one per ``chat_fallbacks`` entry, in order.

    Pass them to :func:`build_chat_pipeline` (``profiles``) and to ``answer_question``
    (the primary as ``budget=Budget.for_profile(profiles[0])`` and
    ``schema_style=profiles[0].schema_style``; the rest as ``fallbacks``).
    """
    from ragwright.adapters.chatmodels.local import MODEL_ID as _LOCAL_MODEL

    primary = ModelProfile(
        name=settings.chat.provider,
        system=settings.chat.provider,
        model=_LOCAL_MODEL if settings.chat.provider == "local" else settings.chat.model,
        context_window=settings.chat.context_window,
        output_limit=settings.chat.output_limit,
        schema_style=answer_schema_style(settings),
    )
    return (
        primary,
        *(
            ModelProfile(
                name=f.label,
                system=f.provider,
                model=_LOCAL_MODEL if f.provider == "local" else f.model,
                context_window=f.context_window,
                output_limit=f.output_limit,
                schema_style=_schema_style(f.schema_style, f.provider),
                token_ratio=f.token_ratio,
            )
            for f in settings.chat.fallbacks
        ),
    )


def answer_schema_style(settings: Settings) -> SchemaStyle:
    """The answer schema style for the primary provider (``chat_schema_style``)."""
    return _schema_style(settings.chat.schema_style, settings.chat.provider)


def _schema_style(configured: str, kind: str) -> SchemaStyle:
    if configured in ("object", "variants"):
        return configured  # type: ignore[return-value]
    return "variants" if kind in ("local", "ollama") else "object"


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


@dataclasses.dataclass(frozen=True)
class SharedState:
    """The response cache's store and one capacity pool per chat provider (by name).

    Each provider has a pool of its own (``chat`` for the primary, ``chat:<name>`` for
    each alternate, ``RAGWRIGHT_CHAT_CAPACITY`` leases each), so a throttled primary
    cools down its own pool and failover can still reach an alternate. ``describe()``
    on a pool gives its state for status and readiness views.
    """

    store: CacheStore
    pools: Mapping[str, CapacityPool]
    workload: Workload = "interactive"

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each provider's pool as ``describe()`` reports it, by ``workload/provider``."""
        return {
            f"{self.workload}/{name}": dict(pool.describe()) for name, pool in self.pools.items()
        }


def open_shared_state(
    settings: Settings,
    names: Sequence[str],
    *,
    retry_interval: float = REDIS_RETRY_INTERVAL,
    workload: Workload = "interactive",
) -> SharedState:
    """Redis-backed cache and pools with ``RAGWRIGHT_REDIS_URL``, else in-process.

    ``workload`` picks the capacity pools: interactive answers use ``chat`` (and
    ``chat:<name>`` per alternate) of ``RAGWRIGHT_CHAT_CAPACITY`` leases; answer jobs use
    ``batch`` (``batch:<name>``) of ``RAGWRIGHT_BATCH_CAPACITY``, so a backlog of jobs
    never takes the leases interactive answers need.

    Redis is optional even when configured: whenever it does not answer — at start or
    mid-run — the answer is still produced with the shared cache skipped (a miss) and an
    in-process capacity gate, one warning says so, and Redis is tried again after
    ``retry_interval`` seconds, so a long-running process uses it again once it is back.
    Meanwhile processes share neither capacity nor cached answers.
    """
    if not names:
        raise ValueError("names must list at least the primary provider")
    prefix, limit = (
        ("chat", settings.chat.capacity)
        if workload == "interactive"
        else ("batch", settings.jobs.capacity)
    )
    if not settings.storage.redis_url:
        return SharedState(
            store=MemoryCacheStore(max_entries=settings.chat.cache_max_entries),
            pools={name: LocalCapacityPool(limit) for name in names},
            workload=workload,
        )
    client = connect(settings.storage.redis_url)
    outage = RedisOutage(
        _without_credentials(settings.storage.redis_url), retry_interval=retry_interval, log=logger
    )
    outage.check(client)
    pools: dict[str, CapacityPool] = {}
    for index, name in enumerate(names):
        pool = RedisCapacityPool(client, prefix if index == 0 else f"{prefix}:{name}", limit=limit)
        pools[name] = ResilientCapacityPool(pool, outage, fallback=LocalCapacityPool(limit))
    return SharedState(
        store=ResilientCacheStore(RedisCacheStore(client), outage), pools=pools, workload=workload
    )


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}:{parts.port}" if parts.port else f"{parts.scheme}://{host}"


def _ignore(_event: str) -> None:
    return None


class RuntimeComponents:
    """The adapters :class:`Settings` select, built lazily and at most once each.

    Inside :meth:`hold_index` (embedded backend) :meth:`open_index` hands out views of
    one index the process keeps open (:mod:`ragwright.adapters.held`) instead of
    opening it per use.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._embedder: Embedder | None = None
        self._counter: O200kCounter | None = None
        self._keys: KeyStore | None = None
        self._keys_lock = threading.Lock()
        self._jobs: JobStore | None = None
        self._jobs_lock = threading.Lock()
        self._drafts: DraftStore | None = None
        self._drafts_lock = threading.Lock()
        self._held: HeldIndex | None = None

    @contextmanager
    def hold_index(self) -> Iterator[None]:
        """Keep one embedded index open for every request made inside (a service's
        lifetime); it opens on first use and closes, committed, on exit.

        The server backend passes through unchanged: several processes may write to a
        server collection, so each use opens its own client as before. Nested use
        holds the index once.
        """
        if self.settings.index.backend != "edge" or self._held is not None:
            yield
            return
        held = HeldIndex("edge", str(self.settings.index_path), self._open_shared)
        self._held = held
        try:
            yield
        finally:
            self._held = None
            held.close()

    def index_state(self) -> IndexState:
        """The index as a readiness check sees it; never raises for an index that
        cannot be opened (the reason is in the result).

        Held: the shared index (opened now if it was not). Otherwise the index is
        opened, counted and closed again.
        """
        if self._held is not None:
            return self._held.state()
        backend, location = self.settings.index.backend, self._index_location()
        try:
            index = self.open_index(
                self.settings.chunking_policy().version, write=False, any_chunking_version=True
            )
        except (RagwrightError, OSError) as error:
            return IndexState(
                backend,
                location,
                held=False,
                opened=False,
                reason=" ".join(str(error).split()),
                error=type(error).__name__,
            )
        try:
            with index.reading():
                points, committed = index.count(), index.committed_points
        finally:
            index.close()
        return IndexState(
            backend, location, held=False, opened=True, points=points, committed_points=committed
        )

    def _index_location(self) -> str:
        if self.settings.index.backend == "edge":
            return str(self.settings.index_path)
        location = self.settings.index.qdrant_location or ""
        if location.startswith(("http://", "https://")):
            location = _without_credentials(location)
        return f"{location} collection {self.settings.index.collection}"

    def _open_shared(self, create_version: str | None) -> EdgeIndex:
        """The held embedded index: an existing one under any chunking version (requests
        check theirs), a new one with ``create_version``, none when that is ``None``."""
        path = self.settings.index_path
        profile, lexical = self.embedding_profile(), lexical_profile(self.settings)
        if (path / "contract.json").is_file():
            contract = dataclasses.replace(contract_for(profile, "", lexical), chunking_versions=())
        elif create_version is None:
            raise IndexNotFound(str(path))
        else:
            contract = contract_for(profile, create_version, lexical)
        return EdgeIndex(path, contract, create=True, verify=True)

    def embedding_profile(self) -> EmbeddingProfile:
        return embedding_profile(self.settings)

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = open_embedder(self.settings)
        return self._embedder

    def sparse_encoder(self) -> SparseEncoder:
        return open_sparse_encoder(self.settings)

    def open_index(
        self,
        chunking_version: str,
        *,
        write: bool,
        add_chunking_version: bool = False,
        any_chunking_version: bool = False,
        rebuild: bool = False,
        verify: bool = True,
    ) -> VectorIndex:
        held = self._held
        if held is not None:
            # Verified once when the held index opened; a request only checks its version.
            return held.view(
                chunking_version,
                write=write,
                add_chunking_version=add_chunking_version,
                any_chunking_version=any_chunking_version,
                rebuild=rebuild,
            )
        return open_index(
            self.settings,
            self.embedding_profile(),
            write=write,
            add_chunking_version=add_chunking_version,
            any_chunking_version=any_chunking_version,
            chunking_version=chunking_version,
            rebuild=rebuild,
            verify=verify,
        )

    def retriever(self, index: VectorIndex, *, candidates: int | None = None) -> Retriever:
        return open_retriever(self.settings, index, embedder=self.embedder(), candidates=candidates)

    def token_counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = O200kCounter(self.settings.storage.home / "tokenizers")
        return self._counter

    def chat_profiles(self) -> tuple[ModelProfile, ...]:
        return chat_profiles(self.settings)

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        providers, close_providers = open_chat_providers(self.settings)
        telemetry = configure_telemetry(self.settings)
        shared = open_shared_state(self.settings, [p.name for p in providers], workload=workload)
        pipeline = build_chat_pipeline(
            self.settings,
            providers,
            counter=counter,
            profiles=self.chat_profiles(),
            telemetry=telemetry,
            shared=shared,
        )

        async def close() -> None:
            await close_providers()
            if telemetry is not None:
                telemetry.shutdown()

        return ChatSession(pipeline, close, capacity=shared.describe)

    def load_sources(
        self,
        paths: Sequence[Path],
        *,
        document_type: str | None,
        publication_state: str | None,
        skip_invalid: bool = False,
        tenant: str | None = None,
    ) -> LoadedSources:
        stream = self.stream_sources(
            paths,
            document_type=document_type,
            publication_state=publication_state,
            skip_invalid=skip_invalid,
            tenant=tenant,
        )
        documents = tuple(stream)
        return LoadedSources(
            documents,
            tuple(SkippedFile(*skipped) for skipped in stream.skipped),
            stream.invalid,
            stream.origins,
            stream.origins_left_out,
        )

    def stream_sources(
        self,
        paths: Sequence[Path],
        *,
        document_type: str | None,
        publication_state: str | None,
        skip_invalid: bool = False,
        tenant: str | None = None,
    ) -> SourceStream:
        return SourceStream(
            paths,
            self._source_defaults(document_type, publication_state, tenant),
            skip_invalid=skip_invalid,
        )

    def _source_defaults(
        self, document_type: str | None, publication_state: str | None, tenant: str | None
    ) -> SourceDefaults:
        return SourceDefaults(
            document_type=document_type,
            publication_state=publication_state,
            tenant=tenant,
            document_types=self.settings.index.document_types,
        )

    def load_cases(self, path: Path, *, beir: bool, split: str) -> list[EvalCase]:
        return load_beir_cases(path, split) if beir else load_cases(path)

    def code_revision(self) -> str:
        return code_revision()

    def key_store(self) -> KeyStore:
        # A service's first requests may arrive together on several threads: one store.
        with self._keys_lock:
            if self._keys is None:
                url = self.settings.storage.database_url
                self._keys = (
                    PostgresKeyStore(url.get_secret_value())
                    if url is not None
                    else SqliteKeyStore(self.settings.key_store_path)
                )
            return self._keys

    def job_store(self) -> JobStore:
        # Every worker thread and request shares one store (one connection pool).
        with self._jobs_lock:
            if self._jobs is None:
                url = self.settings.storage.database_url
                self._jobs = (
                    PostgresJobStore(url.get_secret_value())
                    if url is not None
                    else SqliteJobStore(self.settings.storage.home / "jobs.sqlite3")
                )
            return self._jobs

    def ingest_queue(self) -> IngestQueue:
        url = self.settings.storage.database_url
        if url is None:
            raise ConfigError(
                "RAGWRIGHT_DATABASE_URL",
                "required for queued ingestion: the coordinator and every worker share "
                "the queue of work items in PostgreSQL",
            )
        from ragwright.adapters.ingest_queue import PgQueuerIngestQueue  # loads pgqueuer

        return PgQueuerIngestQueue(url.get_secret_value(), lease=self.settings.ingest.lease)

    def draft_store(self) -> DraftStore:
        with self._drafts_lock:
            if self._drafts is None:
                url = self.settings.storage.database_url
                self._drafts = (
                    PostgresDraftStore(url.get_secret_value())
                    if url is not None
                    else SqliteDraftStore(self.settings.storage.home / "drafts.sqlite3")
                )
            return self._drafts


def build_application(settings: Settings | None = None) -> Application:
    """The application over the adapters the settings (default: environment) select."""
    return Application(RuntimeComponents(settings or load_settings()))


def code_revision() -> str:
    """The git commit of this checkout when there is one, else the package version."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return f"ragwright {__version__}"
    return done.stdout.strip() or f"ragwright {__version__}"
