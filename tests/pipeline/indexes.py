"""An embedded index filled with the hashing embedder, shared by the pipeline tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.sources import load_sources
from ragwright.core.contracts import contract_for
from ragwright.pipeline.ingest import ingest
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, SourceDocument
from tests.conftest import SAMPLES

POLICY = ChunkingPolicy()


def hashing_index(path: Path, documents: Sequence[SourceDocument] | None = None) -> EdgeIndex:
    """An open index at ``path`` holding ``documents`` (default: the sample corpus)."""
    index = EdgeIndex(path, contract_for(HASHING_PROFILE, POLICY.version))
    ingest(
        load_sources([SAMPLES]) if documents is None else documents,
        policy=POLICY,
        embedder=HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
    )
    return index
