"""What a long-running process needs beside the use cases: chat sessions kept open
(and their capacity pools), readiness checks, and the approved templates."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ragwright.application.components import ChatSession, OpenIndex, Workload
from ragwright.application.jobs import JobStore
from ragwright.application.keys import KeyStore
from ragwright.application.templates import load_templates
from ragwright.core.templates import ApprovedTemplate
from ragwright.errors import IndexDamaged, IndexNotFound, StorageError
from ragwright.protocols import Embedder, TokenCounter
from ragwright.settings import Settings
from ragwright.types import IndexState


class KeptChatSessions:
    """The chat sessions kept open for a process (one interactive, one for answer jobs)."""

    def __init__(
        self,
        chat: Callable[[TokenCounter, Workload], ChatSession],
        token_counter: Callable[[], TokenCounter],
    ) -> None:
        self._chat = chat
        self._token_counter = token_counter
        self._kept: dict[Workload, ChatSession] = {}

    def kept(self, workload: Workload = "interactive") -> ChatSession | None:
        """The session kept open for ``workload``, if any."""
        return self._kept.get(workload)

    def open(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        """A new session (the caller closes it unless it is :meth:`kept`)."""
        return self._chat(counter, workload)

    @asynccontextmanager
    async def kept_open(self, workload: Workload = "interactive") -> AsyncIterator[None]:
        """Answers made inside share one chat session — one warm local model instead of a
        start per answer — closed on exit (evaluation runs, benchmarks, a service).
        ``workload="jobs"`` keeps the session answer jobs use (its own capacity pools)."""
        if workload in self._kept:
            yield
            return
        session = self._chat(self._token_counter(), workload)
        self._kept[workload] = session
        try:
            yield
        finally:
            del self._kept[workload]
            await session.close()

    def capacity(self) -> dict[str, dict[str, Any]]:
        """The model-capacity pools of the kept chat sessions (interactive and jobs), by
        pool name (backend, limit, leases in use, cooldown, degradation); empty outside
        ``chat_kept_open``."""
        pools: dict[str, dict[str, Any]] = {}
        for session in (self._kept.get("interactive"), self._kept.get("jobs")):
            if session is not None:
                pools.update(session.capacity())
        return pools

    def model_cooldown(self) -> float | None:
        """Seconds until the kept interactive session's model pools take attempts again,
        when every one of them is cooling down after throttling; ``None`` when one is
        not (or outside ``chat_kept_open``): then nobody knows when capacity frees."""
        session = self._kept.get("interactive")
        if session is None:
            return None
        cooldowns = [p["cooldown_seconds"] for p in session.capacity().values()]
        if not cooldowns or min(cooldowns) <= 0:
            return None
        return float(min(cooldowns))


class Readiness:
    """Startup validation and readiness of a serving process, and its templates."""

    def __init__(
        self,
        settings: Settings,
        *,
        key_store: Callable[[], KeyStore],
        job_store: Callable[[], JobStore],
        embedder: Callable[[], Embedder],
        open_index: OpenIndex,
        index_state: Callable[[], IndexState],
        chunking_version: Callable[[], str],
    ) -> None:
        self.settings = settings
        self._key_store = key_store
        self._job_store = job_store
        self._embedder = embedder
        self._open_index = open_index
        self._index_state = index_state
        self._chunking_version = chunking_version
        self._templates: tuple[ApprovedTemplate, ...] | None = None

    def templates(self) -> tuple[ApprovedTemplate, ...]:
        """The approved templates ``RAGWRIGHT_TEMPLATES`` names (read once, validated)."""
        if self._templates is None:
            self._templates = load_templates(self.settings.answers.templates)
        return self._templates

    def check_serving(self) -> list[str]:
        """Validate what a long-running service depends on before it starts.

        Raises (a broken configuration, reported as one line): the templates file
        (:class:`ConfigError`), the embedding model's artifacts (``ArtifactMismatch``),
        an index built under another contract (:class:`ContractMismatch`: the settings
        describe a different embedding or BM25 profile). Returns the problems the service
        can start with and report through readiness (no index yet, a damaged index).
        The API key and answer-job stores are opened (a ``RAGWRIGHT_DATABASE_URL`` that
        cannot be parsed is a :class:`ConfigError`, a server that does not answer a
        :class:`StorageError`, one line each, never the password).
        """
        self.templates()
        self._key_store()
        self._job_store()
        self._embedder()
        version = self._chunking_version()
        try:
            index = self._open_index(version, write=False, any_chunking_version=True)
        except (IndexNotFound, IndexDamaged, StorageError):
            problem = self.index_problem()
            return [problem] if problem is not None else []
        index.close()
        return []

    def index_problem(self) -> str | None:
        """``None`` when the collection opens for queries, else why not (one line)."""
        state = self._index_state()
        if state.opened:
            return None
        if state.error == "IndexNotFound":
            return "no index yet: ingest documents first (ragwright ingest, POST /v1/ingestions)"
        return f"index: {state.reason}"
