"""Components for application tests: the real composition root with two substitutions.

The hashing embedder stands in for the bundled model (fast, deterministic ranking) and a
scripted chat model for the provider; the index, BM25, token counting, assembly, answer
contract and evaluation are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragwright.application import Application, ChatSession, Workload
from ragwright.chat.contract import ChatModel
from ragwright.protocols import Embedder, TokenCounter
from ragwright.runtime import RuntimeComponents, build_chat_pipeline, open_shared_state
from ragwright.settings import Settings, load_settings
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.testing.scripted import Reply, ScriptedChatModel
from ragwright.types import EmbeddingProfile


def answered(
    *labels: str, text: str = "Drain only while the shutdown deadline allows it."
) -> Reply:
    """A valid answer citing ``labels``."""
    return Reply(json.dumps({"status": "answered", "answer": text, "sourceIds": list(labels)}))


def quoted(*sentence_ids: str) -> Reply:
    """A valid quoted answer selecting ``sentence_ids`` (none: insufficient)."""
    status = "answered" if sentence_ids else "insufficient"
    return Reply(json.dumps({"status": status, "sentenceIds": list(sentence_ids)}))


class FakeComponents(RuntimeComponents):
    """Runtime components with the hashing embedder and a scripted provider. Each chat
    session gets the capacity pools of its workload, as the real ones do (so
    ``Application.capacity()`` shows which pool a call took)."""

    def __init__(self, settings: Settings, model: ChatModel | None = None) -> None:
        super().__init__(settings)
        self.model = model or ScriptedChatModel([answered("S1")] * 40)
        self.sessions = 0
        self.workloads: list[Workload] = []
        self._hashing = HashingEmbedder()

    def embedding_profile(self) -> EmbeddingProfile:
        return HASHING_PROFILE

    def embedder(self) -> Embedder:
        return self._hashing

    def chat(self, counter: TokenCounter, workload: Workload = "interactive") -> ChatSession:
        self.sessions += 1
        self.workloads.append(workload)
        # The pools build_chat_pipeline would open itself (the workload's own), kept so
        # the session reports them.
        shared = open_shared_state(self.settings, [self.model.name], workload=workload)
        pipeline = build_chat_pipeline(self.settings, [self.model], counter=counter, shared=shared)
        return ChatSession(pipeline, _nothing, capacity=shared.describe)


async def _nothing() -> None:
    return None


def fake_application(
    home: Path, model: ChatModel | None = None, **settings: object
) -> tuple[Application, FakeComponents]:
    # The scripted replies follow the generated contract; the local provider's automatic
    # style would be quoted.
    settings.setdefault("answer_style", "generated")
    components = FakeComponents(load_settings(home=home, **settings), model)
    return Application(components), components
