"""The project's sample corpus indexed with the real embedder, for benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import OnnxEmbedder
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import load_sources
from ragwright.core.contracts import contract_for
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.retrieve import Retriever
from ragwright.types import ChunkingPolicy

ROOT = Path(__file__).resolve().parents[1]
POLICY = ChunkingPolicy()


@contextmanager
def sample_retriever(home: Path) -> Iterator[Retriever]:
    """Ingest ``samples/corpus`` into an embedded index under ``home``; yield a retriever."""
    embedder = OnnxEmbedder()
    with EdgeIndex(home / "index", contract_for(embedder.profile, POLICY.version)) as index:
        ingest(
            load_sources([ROOT / "samples" / "corpus"]),
            policy=POLICY,
            embedder=embedder,
            sparse_encoder=Bm25Encoder(),
            index=index,
        )
        yield Retriever(index, embedder, Bm25Encoder())
