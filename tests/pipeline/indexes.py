"""An embedded index filled with the hashing embedder, shared by the pipeline tests."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe

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


def end_wal_with_an_empty_write(index_path: Path) -> None:
    """Make the last record of the closed index's WAL a write that touches no point.

    The engine applies its last WAL record again whenever it opens a shard. After an
    ingestion of new documents in one slice, that record is the one upsert of every
    point (docs/ingestion.md, "New documents written live"), and it rebuilds an emptied
    id tracker: a test that damages one first ends the WAL with this.
    """
    shard = qe.EdgeShard.load(str(index_path / "shard"))
    shard.update(qe.UpdateOperation.delete_points([uuid.UUID(int=0)]))
    shard.close()
