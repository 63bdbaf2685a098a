from __future__ import annotations

import uuid
from pathlib import Path

from ragwright.adapters.qdrant import QdrantIndex
from ragwright.core.contracts import contract_for
from ragwright.testing.conformance import VERSION, VectorIndexConformance
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import CollectionContract, IndexPoint, SparseVector


class TestQdrantLocalConformance(VectorIndexConformance):
    """qdrant-client's local mode on disk: same behaviour, contract in collection metadata."""

    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> QdrantIndex:
        return QdrantIndex(
            str(location), "support-documents", contract, add_chunking_version=add_chunking_version
        )


def test_read_part_and_rebuild_touch_only_their_own_collection(tmp_path: Path) -> None:
    contract = contract_for(HASHING_PROFILE, VERSION)
    point = IndexPoint(
        uuid.UUID(int=5), [0.5] * contract.dimensions, {"a": "b"}, SparseVector((1,), (2.0,))
    )
    for name in ("kept", "rebuilt"):
        with QdrantIndex(str(tmp_path), name, contract) as index:
            index.upsert([point])
    with QdrantIndex(str(tmp_path), "rebuilt", contract, rebuild=True) as index:
        assert index.count() == 0
        assert index.committed_points is None
    with QdrantIndex(str(tmp_path), "kept", contract) as index:
        assert index.read_part([point.point_id], "payload") == {point.point_id: {"a": "b"}}
        assert (
            len(index.read_part([point.point_id], "dense")[point.point_id]) == contract.dimensions
        )
        assert index.read_part([point.point_id], "sparse") == {point.point_id: point.sparse}
