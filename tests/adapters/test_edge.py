from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import qdrant_edge as qe

from ragwright.adapters.edge import engine
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import ContractMismatch, IndexBusy
from ragwright.testing.conformance import VERSION, VectorIndexConformance
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import CollectionContract, FieldMatch, IndexPoint, PointFilter, SparseVector
from tests.processes import CHILD_TIMEOUT


class TestEdgeConformance(VectorIndexConformance):
    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> EdgeIndex:
        return EdgeIndex(location, contract, add_chunking_version=add_chunking_version)


def test_payload_indexes_exist_before_the_first_write(tmp_path: Path) -> None:
    with EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, VERSION)) as index:
        assert index.count() == 0
        types = index.payload_index_types()
    for field in (
        "document_id",
        "chunking_version",
        "document_type",
        "publication_state",
        "tenant",
        "index_state",
    ):
        assert types[field] == "keyword"
    assert types["lexical_terms"] == "integer"  # the BM25 statistics are a facet of it


def test_existing_index_of_wrong_type_is_a_contract_mismatch(tmp_path: Path) -> None:
    EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, VERSION)).close()
    shard = qe.EdgeShard.load(str(tmp_path / "shard"))
    shard.update(qe.UpdateOperation.delete_field_index("tenant"))
    shard.update(qe.UpdateOperation.create_field_index("tenant", qe.PayloadSchemaType.Integer))
    shard.close()
    with pytest.raises(ContractMismatch) as caught:
        EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, VERSION))
    assert caught.value.field == "payload_index.tenant"


def test_second_process_gets_index_busy(tmp_path: Path) -> None:
    contract = contract_for(HASHING_PROFILE, VERSION)
    with EdgeIndex(tmp_path, contract):
        code = (
            "import sys; from pathlib import Path\n"
            "from ragwright.adapters.edge.index import EdgeIndex\n"
            "from ragwright.core.contracts import contract_for\n"
            "from ragwright.errors import IndexBusy\n"
            "from ragwright.testing.fakes import HASHING_PROFILE\n"
            "try:\n"
            f"    EdgeIndex(Path({str(tmp_path)!r}), contract_for(HASHING_PROFILE, {VERSION!r}))\n"
            "except IndexBusy as e:\n"
            "    print('busy', e.path); sys.exit(0)\n"
            "sys.exit(3)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            timeout=CHILD_TIMEOUT,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("busy")
    # Released on close: this process can open it again.
    EdgeIndex(tmp_path, contract).close()


def test_same_process_second_open_is_busy_too(tmp_path: Path) -> None:
    contract = contract_for(HASHING_PROFILE, VERSION)
    with EdgeIndex(tmp_path, contract), pytest.raises(IndexBusy):
        EdgeIndex(tmp_path, contract)


def test_commit_records_a_clean_manifest_and_keeps_the_index_open(tmp_path: Path) -> None:
    contract = contract_for(HASHING_PROFILE, VERSION)
    with EdgeIndex(tmp_path, contract) as index:
        index.upsert([IndexPoint(uuid.UUID(int=1), [1.0] + [0.0] * 63, {"document_id": "a"})])
        # While a write session is open nothing committed describes the index.
        assert index.committed_points is None
        assert json.loads((tmp_path / "manifest.json").read_text("utf-8")) == {"state": "writing"}
        index.commit()
        manifest = json.loads((tmp_path / "manifest.json").read_text("utf-8"))
        assert (manifest["state"], manifest["points"]) == ("clean", 1)
        assert index.committed_points == 1
        index.commit()  # nothing written since: nothing to do
        assert index.count() == 1  # still open
        index.upsert([IndexPoint(uuid.UUID(int=2), [0.0, 1.0] + [0.0] * 62, {"document_id": "b"})])
    with EdgeIndex(tmp_path, contract, create=False) as index:
        assert index.committed_points == index.count() == 2


def test_add_chunking_version_updates_the_contract_file(tmp_path: Path) -> None:
    with EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, VERSION)) as index:
        index.add_chunking_version("sentence-blocks-120w-overlap1-v1")
        index.add_chunking_version(VERSION)  # already there: unchanged
        assert index.contract.chunking_versions == (VERSION, "sentence-blocks-120w-overlap1-v1")
    stored = json.loads((tmp_path / "contract.json").read_text("utf-8"))
    assert stored["chunking_versions"] == [VERSION, "sentence-blocks-120w-overlap1-v1"]
    # A later open without consent accepts it: it is part of the contract now.
    EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, "sentence-blocks-120w-overlap1-v1")).close()


def _sealing_points(count: int) -> list[IndexPoint]:
    return [
        IndexPoint(
            uuid.UUID(int=n + 1),
            [random.Random(n * 1000 + d).uniform(-1, 1) for d in range(HASHING_PROFILE.dimensions)],
            {
                "document_id": f"doc-{n // 4}",
                "chunking_version": VERSION,
                "index_state": "live",
                "lexical_terms": n % 5,
                "text": f"chunk {n}",
            },
            SparseVector((n % 13, 20 + n % 7), (1.0, 0.5)),
        )
        for n in range(count)
    ]


def test_a_full_appendable_segment_is_sealed_and_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sealing is what bounds the embedded index's memory (docs/ingestion.md, "Memory"):
    # writes past the threshold move into immutable, memory-mapped segments, and every
    # read answers as before.
    monkeypatch.setattr(engine, "MAX_SEGMENT_POINTS", 200)
    contract = contract_for(HASHING_PROFILE, VERSION)
    points = _sealing_points(900)
    query = list(points[5].vector)
    monkeypatch.setattr(engine, "SEAL_POINTS", 10**9)
    with EdgeIndex(tmp_path / "plain", contract) as plain:  # never sealed
        plain.upsert(points)
        expected = [p.point_id for p in plain.search(query, PointFilter(), limit=20)]
        expected_terms = plain.facet("lexical_terms")
        assert plain.seals == 0
    monkeypatch.setattr(engine, "SEAL_POINTS", 100)
    with EdgeIndex(tmp_path / "sealed", contract) as sealed:
        for start in range(0, len(points), 50):
            sealed.upsert(points[start : start + 50])
        assert sealed.seals >= 3
        assert sealed._shard.info().segments_count > 1
        assert sealed.count() == 900
        assert [p.point_id for p in sealed.search(query, PointFilter(), limit=20)] == expected
        assert sealed.facet("lexical_terms") == expected_terms
        sealed.set_payload([points[0].point_id], {"index_state": "staged"})
        assert sealed.count(PointFilter(must=(FieldMatch("index_state", ("staged",)),))) == 1
    with EdgeIndex(tmp_path / "sealed", contract) as reopened:
        assert reopened.count() == 900
        assert [p.point_id for p in reopened.search(query, PointFilter(), limit=20)] == expected


def test_a_shard_made_before_sealing_is_opened_with_the_cold_sealing_layout(
    tmp_path: Path,
) -> None:
    contract = contract_for(HASHING_PROFILE, VERSION)
    EdgeIndex(tmp_path, contract).close()
    config_path = tmp_path / "shard" / "edge_config.json"
    old = json.loads(config_path.read_text("utf-8"))
    old.pop("optimizers")
    old.pop("hnsw_config")
    config_path.write_text(json.dumps(old), "utf-8")
    with EdgeIndex(tmp_path, contract) as index:
        index.upsert(_sealing_points(3))
    config = json.loads(config_path.read_text("utf-8"))
    assert config["hnsw_config"]["m"] == 0  # sealed segments keep exact search
    assert config["optimizers"]["indexing_threshold"] > 0
    assert config["vectors"][contract.vector_name]["memory"] == "cold"
    assert config["payload_memory"] == "cold"
