from __future__ import annotations

from pathlib import Path

from ragwright.adapters.qdrant import QdrantIndex
from ragwright.testing.conformance import VectorIndexConformance
from ragwright.types import CollectionContract


class TestQdrantLocalConformance(VectorIndexConformance):
    """qdrant-client's local mode on disk: same behaviour, contract in collection metadata."""

    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> QdrantIndex:
        return QdrantIndex(
            str(location), "support-documents", contract, add_chunking_version=add_chunking_version
        )
