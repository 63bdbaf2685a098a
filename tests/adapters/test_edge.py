from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import qdrant_edge as qe

from ragwright.adapters.edge import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import ContractMismatch, IndexBusy
from ragwright.testing.conformance import VERSION, VectorIndexConformance
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import CollectionContract


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
