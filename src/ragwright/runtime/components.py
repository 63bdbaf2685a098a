"""The runtime: the adapters one :class:`Settings` selects, opened lazily, and closed."""

from __future__ import annotations

import functools
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ragwright import __version__
from ragwright.adapters.datasets import load_beir_cases, load_cases
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.held import HeldIndex
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
from ragwright.chat.contract import ModelProfile
from ragwright.errors import RagwrightError
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import Embedder, Reranker, SparseEncoder, TokenCounter, VectorIndex
from ragwright.runtime.chat import chat_profiles
from ragwright.runtime.embedding import embedding_profile, open_embedder
from ragwright.runtime.index import (
    INDEX_BACKENDS,
    open_held_edge,
    open_index,
    open_reranker,
    open_retriever,
    open_sparse_encoder,
)
from ragwright.runtime.kept import kept
from ragwright.runtime.registry import Closers
from ragwright.runtime.sessions import ChatOpener
from ragwright.runtime.stores import (
    DRAFT_STORES,
    JOB_STORES,
    KEY_STORES,
    LazyStore,
    open_ingest_queue,
)
from ragwright.settings import Settings, load_settings
from ragwright.types import EmbeddingProfile, EvalCase, IndexState

if TYPE_CHECKING:
    from ragwright.adapters.sources import SourceStream


class RuntimeComponents:
    """The adapters :class:`Settings` select, built lazily and at most once each, and
    released by :meth:`close`.

    Inside :meth:`hold_index` (embedded backend) :meth:`open_index` hands out views of
    one index the process keeps open (:mod:`ragwright.adapters.held`) instead of
    opening it per use.
    """

    _keys = LazyStore(KEY_STORES)
    _jobs = LazyStore(JOB_STORES)
    _drafts = LazyStore(DRAFT_STORES)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._closers = Closers()  # what the lazily opened parts registered to release
        self._embedder: Embedder | None = None
        self._reranker: tuple[Reranker | None] | None = None
        self._counter: O200kCounter | None = None
        self._chats = ChatOpener(settings)
        self._held: HeldIndex | None = None

    def close(self) -> None:
        """Release every pool, connection and server this runtime opened: the stores'
        SQLite files and PostgreSQL pools, the held index, Redis and HTTP clients, and
        chat sessions left open (an in-process local model server stops; a background
        model process keeps running for the next command, as designed).

        Safe to call twice; a later use opens what it needs afresh.
        """
        steps = Closers()  # run newest first: sessions, index, stores, clients
        steps.add(self._closers.close)
        steps.add(self._forget_opened)
        for store in (RuntimeComponents._keys, RuntimeComponents._jobs, RuntimeComponents._drafts):
            steps.add(functools.partial(store.close, self))
        steps.add(self._release_held)
        steps.add(self._chats.release)
        steps.close()

    def _forget_opened(self) -> None:
        with self._lock:
            self._embedder, self._reranker, self._counter = None, None, None

    def _release_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()

    @contextmanager
    def hold_index(self) -> Iterator[None]:
        """Keep one embedded index open for every request made inside (a service's
        lifetime); it opens on first use and closes, committed, on exit.

        The server backend passes through unchanged: several processes may write to a
        server collection, so each use opens its own client as before. Nested use
        holds the index once.
        """
        backend = self.settings.index.backend
        if not INDEX_BACKENDS[backend].held or self._held is not None:
            yield
            return
        held = HeldIndex(backend, str(self.settings.index_path), self._open_shared)
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
        backend = self.settings.index.backend
        location = INDEX_BACKENDS[backend].location(self.settings)
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

    def _open_shared(self, create_version: str | None) -> EdgeIndex:
        return open_held_edge(self.settings, self.embedding_profile(), create_version)

    def embedding_profile(self) -> EmbeddingProfile:
        return embedding_profile(self.settings)

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = open_embedder(self.settings, closers=self._closers)
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
        embedder = self.embedder()
        return open_retriever(
            self.settings,
            index,
            embedder=embedder,
            candidates=candidates,
            reranker=self._configured_reranker(embedder),
        )

    def _configured_reranker(self, embedder: Embedder) -> Reranker | None:
        # One reranker (one HTTP client) for every request, closed with the runtime.
        with self._lock:
            if self._reranker is None:
                self._reranker = (open_reranker(self.settings, embedder, closers=self._closers),)
            return self._reranker[0]

    def token_counter(self) -> TokenCounter:
        with self._lock:
            if self._counter is None:
                tables = self.settings.storage.home / "tokenizers"
                self._counter = kept(("o200k", str(tables)), lambda: O200kCounter(tables))
            return self._counter

    def chat_profiles(self) -> tuple[ModelProfile, ...]:
        return chat_profiles(self.settings)

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        return self._chats.open(counter, self.chat_profiles(), workload)

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
        # Imported here: the converters (BeautifulSoup, python-docx, pypdfium2, markdown-it)
        # are 0.3 s of a command's start, and only reading sources needs them.
        from ragwright.adapters.formats.limits import ConversionLimits
        from ragwright.adapters.sources import SourceDefaults, SourceStream

        conversion = self.settings.conversion
        limits = ConversionLimits(
            max_bytes=conversion.max_bytes,
            max_inflated_bytes=conversion.max_inflated,
            max_pages=conversion.max_pages,
            max_characters=conversion.max_chars,
            seconds=conversion.timeout,
            memory_bytes=conversion.max_memory,
            workers=conversion.workers,
        )
        defaults = SourceDefaults(
            document_type=document_type,
            publication_state=publication_state,
            tenant=tenant,
            document_types=self.settings.index.document_types,
        )
        return SourceStream(paths, defaults, skip_invalid=skip_invalid, limits=limits)

    def load_cases(self, path: Path, *, beir: bool, split: str) -> list[EvalCase]:
        return load_beir_cases(path, split) if beir else load_cases(path)

    def code_revision(self) -> str:
        return code_revision()

    def key_store(self) -> KeyStore:
        return self._keys

    def job_store(self) -> JobStore:
        # Every worker thread and request shares one store (one connection pool).
        return self._jobs

    def draft_store(self) -> DraftStore:
        return self._drafts

    def ingest_queue(self) -> IngestQueue:
        return open_ingest_queue(self.settings)


def build_application(settings: Settings | None = None) -> Application:
    """The application over the adapters the settings (default: environment) select;
    ``Application.close()`` releases what they opened."""
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
