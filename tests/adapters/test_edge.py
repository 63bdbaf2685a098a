from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import qdrant_edge as qe

from ragwright.adapters.edge import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import ContractMismatch, IndexBusy
from ragwright.testing.conformance import VERSION, VectorIndexConformance
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import CollectionContract, IndexPoint


class TestEdgeConformance(VectorIndexConformance):
    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> EdgeIndex:
        return EdgeIndex(location, contract, add_chunking_version=add_chunking_version)


def test_keyword_payload_indexes_exist_before_the_first_write(tmp_path: Path) -> None:
    with EdgeIndex(tmp_path, contract_for(HASHING_PROFILE, VERSION)) as index:
        assert index.count() == 0
        types = index.payload_index_types()
    for field in (
        "document_id",
        "chunking_version",
        "document_type",
        "publication_state",
        "tenant",
    ):
        assert types[field] == "keyword"


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
            "from ragwright.adapters.edge import EdgeIndex\n"
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
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
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
