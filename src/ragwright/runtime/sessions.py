"""Chat sessions the runtime opened, so :meth:`RuntimeComponents.close` can release the
ones their holders left open (a command that failed half-way, a lifespan cut short)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence

from ragwright.application import ChatSession, Workload
from ragwright.chat.contract import ChatModel, ModelProfile
from ragwright.chat.telemetry import TelemetryExport
from ragwright.protocols import TokenCounter
from ragwright.runtime.chat import open_chat_providers
from ragwright.runtime.chat_pipeline import build_chat_pipeline, configure_telemetry
from ragwright.runtime.shared import SharedState, open_shared_state
from ragwright.settings import Settings

logger = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class OpenChat:
    """What one chat session holds: its providers (HTTP clients, perhaps the in-process
    local model server), its telemetry exporter and its Redis client."""

    providers: Sequence[ChatModel]
    close_providers: Callable[[], Awaitable[None]]
    telemetry: TelemetryExport | None
    shared: SharedState

    async def close(self) -> None:
        """Close the providers in the loop that used them, then the rest."""
        try:
            await self.close_providers()
        finally:
            if self.telemetry is not None:
                self.telemetry.shutdown()
            self.shared.close()

    def release(self) -> None:
        """Close from outside any loop that used the session: its clients' close runs in
        a loop of its own (connections of an ended loop died with it), then each
        provider that can ``stop`` synchronously (the in-process local model server)
        is stopped. A background model process is left running, as designed."""
        try:
            _run_to_end(self.close)
        except Exception:  # whatever is left is stopped below
            logger.debug("closing a chat session left open failed", exc_info=True)
        for provider in self.providers:
            stop = getattr(provider, "stop", None)
            if callable(stop):
                stop()


def _run_to_end(close: Callable[[], Awaitable[None]]) -> None:
    async def closing() -> None:
        await close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(closing())
        return
    # Inside a running loop (a lifespan): a thread of our own may run another loop.
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(closing())
        except BaseException as error:  # re-raised in the caller's thread
            failures.append(error)

    worker = threading.Thread(target=run, name="ragwright-close")
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


class ChatOpener:
    """Opens chat sessions over the configured providers and keeps the open ones."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._open: set[OpenChat] = set()
        self._lock = threading.Lock()

    def open(
        self, counter: TokenCounter, profiles: Sequence[ModelProfile], workload: Workload
    ) -> ChatSession:
        providers, close_providers = open_chat_providers(self.settings)
        telemetry = configure_telemetry(self.settings)
        names = [p.name for p in providers]
        shared = open_shared_state(self.settings, names, workload=workload)
        held = OpenChat(providers, close_providers, telemetry, shared)
        with self._lock:
            self._open.add(held)
        pipeline = build_chat_pipeline(
            self.settings,
            providers,
            counter=counter,
            profiles=profiles,
            telemetry=telemetry,
            shared=shared,
        )

        async def close() -> None:
            with self._lock:
                self._open.discard(held)
            await held.close()

        return ChatSession(pipeline, close, capacity=shared.describe)

    def release(self) -> None:
        """Release every session still open (see :meth:`OpenChat.release`)."""
        with self._lock:
            left, self._open = list(self._open), set()
        for held in left:
            held.release()
