"""What the application needs from the composition root (``ragwright.runtime``).

:class:`Components` is what the runtime implements; the façade
(:mod:`ragwright.application.facade`) hands each use case only the few of its methods
that use case calls (typed by the narrow protocols here: :class:`OpenIndex`, ...).

The application never picks or imports an adapter: the composition root builds them from
settings and hands them over through this protocol, so tests can hand over fakes (the
hashing embedder, a scripted chat model) and the use cases stay the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from ragwright.application.drafts import DraftStore
from ragwright.application.ingest_queue import IngestQueue
from ragwright.application.jobs import JobStore
from ragwright.application.keys import KeyStore
from ragwright.application.requests.corpus import SkippedFile
from ragwright.chat.contract import ChatModel, ModelProfile
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import Embedder, SparseEncoder, TokenCounter, VectorIndex
from ragwright.settings import Settings
from ragwright.types import (
    DocumentOrigin,
    EmbeddingProfile,
    EvalCase,
    IndexState,
    SkippedDocument,
    SourceDocument,
)

# Whose answers a chat session serves: people asking (``interactive``) or answer jobs
# (``jobs``); each has capacity pools of its own.
Workload = Literal["interactive", "jobs"]
_Read_co = TypeVar("_Read_co", covariant=True)


@dataclass(frozen=True, slots=True)
class LoadedSources:
    """Documents read from source paths, and the files under them that were not read."""

    documents: tuple[SourceDocument, ...]
    skipped: tuple[SkippedFile, ...] = ()
    invalid: tuple[SkippedDocument, ...] = ()
    origins: tuple[DocumentOrigin, ...] = ()
    origins_left_out: int = 0


class DocumentStream(Protocol):
    """Documents read from source paths one file at a time on each iteration, so a
    corpus of any size can be passed over twice (validate, then write) without being
    held. After a complete pass, ``skipped`` holds the (path, reason, kind) of the files
    that were not read, ``invalid`` the documents left out (``skip_invalid``) and
    ``origins`` where the first documents' metadata came from (``origins_left_out``:
    how many more) and ``documents_read`` how many documents it yielded."""

    skipped: tuple[tuple[str, str, str], ...]
    invalid: tuple[SkippedDocument, ...]
    origins: tuple[DocumentOrigin, ...]
    origins_left_out: int
    documents_read: int | None

    def __iter__(self) -> Iterator[SourceDocument]: ...


@dataclass(frozen=True, slots=True)
class ChatSession:
    """A chat pipeline for one use-case call and the coroutine that releases it."""

    model: ChatModel
    close: Callable[[], Awaitable[None]]
    capacity: Callable[[], dict[str, dict[str, Any]]] = dict


class OpenIndex(Protocol):
    """:meth:`Components.open_index`, the one part most use cases take."""

    def __call__(
        self,
        chunking_version: str,
        *,
        write: bool,
        add_chunking_version: bool = False,
        any_chunking_version: bool = False,
        rebuild: bool = False,
        verify: bool = True,
    ) -> VectorIndex: ...


class MakeRetriever(Protocol):
    """:meth:`Components.retriever`."""

    def __call__(self, index: VectorIndex, *, candidates: int | None = None) -> Retriever: ...


class ReadSources(Protocol[_Read_co]):
    """:meth:`Components.load_sources` (``ReadSources[LoadedSources]``) or
    :meth:`Components.stream_sources` (``ReadSources[DocumentStream]``)."""

    def __call__(
        self,
        paths: Sequence[Path],
        *,
        document_type: str | None,
        publication_state: str | None,
        skip_invalid: bool = False,
        tenant: str | None = None,
    ) -> _Read_co: ...


class Components(Protocol):
    """Adapters built from one :class:`Settings`."""

    settings: Settings

    def embedding_profile(self) -> EmbeddingProfile:
        """The embedding profile the settings describe."""
        ...

    def close(self) -> None:
        """Release every pool, connection and server opened so far (idempotent; a later
        use opens afresh)."""
        ...

    def embedder(self) -> Embedder:
        """The configured embedder (artifacts verified)."""
        ...

    def sparse_encoder(self) -> SparseEncoder:
        """The configured BM25 encoder."""
        ...

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
        """The configured collection, its contract checked for ``chunking_version`` and
        its integrity verified on open (``verify=False``: not checked; ``rebuild``:
        emptied first, so it is recreated from the sources being ingested)."""
        ...

    def hold_index(self) -> AbstractContextManager[None]:
        """Inside, :meth:`open_index` returns views of one index kept open (embedded
        backend; a server backend is opened per use as before)."""
        ...

    def index_state(self) -> IndexState:
        """Whether the index opens, its count, and why not (never raises for that)."""
        ...

    def retriever(self, index: VectorIndex, *, candidates: int | None = None) -> Retriever:
        """A retriever over ``index`` (``candidates`` per leg, default from settings)."""
        ...

    def token_counter(self) -> TokenCounter:
        """The o200k_base counter used for budgets."""
        ...

    def chat_profiles(self) -> tuple[ModelProfile, ...]:
        """The primary model's profile, then each configured fallback's, in order."""
        ...

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        """The configured chat pipeline over the primary and its fallbacks (providers
        start on first use; ``close`` also flushes exported telemetry). ``workload``
        picks its capacity pools: ``jobs`` (answer jobs) never takes the leases
        ``interactive`` answers need."""
        ...

    def load_sources(
        self,
        paths: Sequence[Path],
        *,
        document_type: str | None,
        publication_state: str | None,
        skip_invalid: bool = False,
        tenant: str | None = None,
    ) -> LoadedSources:
        """Validated documents from source files of every supported format
        (``skip_invalid``: leave out files with problems and invalid BEIR documents
        instead of failing, listing them in ``skipped`` and ``invalid``;
        ``tenant``: the tenant of documents whose file names none)."""
        ...

    def stream_sources(
        self,
        paths: Sequence[Path],
        *,
        document_type: str | None,
        publication_state: str | None,
        skip_invalid: bool = False,
        tenant: str | None = None,
    ) -> DocumentStream:
        """The documents :meth:`load_sources` would return, read again on each pass
        (what ingestion iterates, so memory does not grow with the corpus)."""
        ...

    def load_cases(self, path: Path, *, beir: bool, split: str) -> list[EvalCase]:
        """Labelled evaluation cases."""
        ...

    def code_revision(self) -> str:
        """Which code produced a run (recorded in evaluation provenance)."""
        ...

    def key_store(self) -> KeyStore:
        """The API key store the settings name: PostgreSQL when ``database_url`` is set,
        else the SQLite file (built at most once and kept open for the components' life:
        the service authenticates every request against it)."""
        ...

    def draft_store(self) -> DraftStore:
        """The previous-draft store: PostgreSQL when ``database_url`` is set, else a
        SQLite file in the home (built at most once, kept open like the key store)."""
        ...

    def job_store(self) -> JobStore:
        """The durable answer job store the settings name: PostgreSQL when
        ``database_url`` is set (shared by replicas), else SQLite in the home (built at
        most once and kept open for the components' life, like :meth:`key_store`)."""
        ...

    def ingest_queue(self) -> IngestQueue:
        """The shared queue of ingestion work items (PostgreSQL, ``database_url``; a new
        one per call, closed by the caller).

        Raises:
            ConfigError: ``database_url`` is not set (workers on other machines need a
                queue they all reach).
        """
        ...
