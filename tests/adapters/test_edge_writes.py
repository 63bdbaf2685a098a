"""The embedded index's write promises (issue 20): every write checks free disk space
first (the engine's mapped files raise SIGBUS on a full disk), and a replaced JSON file
(contract, manifest) is durable: its directory is fsynced after the rename."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ragwright.adapters.edge import files
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import StorageError
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import LexicalStats, SparseVector
from tests.cli import copy_tree
from tests.pipeline.indexes import POLICY, hashing_index

CONTRACT = contract_for(HASHING_PROFILE, POLICY.version)


class Usage(NamedTuple):
    total: int
    used: int
    free: int


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("edge") / "index"
    hashing_index(path).close()
    return path


@pytest.fixture
def index(committed: Path, tmp_path: Path) -> Any:
    copy = tmp_path / "index"
    copy_tree(committed, copy)
    with EdgeIndex(copy, CONTRACT) as opened:
        yield opened


WRITES: list[tuple[str, Callable[[EdgeIndex, Any], None]]] = [
    ("update_sparse", lambda index, pid: index.update_sparse([(pid, SparseVector((1,), (0.5,)))])),
    ("set_payload", lambda index, pid: index.set_payload([pid], {"index_state": "retired"})),
    ("delete_payload_keys", lambda index, pid: index.delete_payload_keys([pid], ["text"])),
    ("delete", lambda index, pid: index.delete([pid])),
    (
        "record_lexical_stats",
        lambda index, pid: index.record_lexical_stats(LexicalStats(1, 1, 1.0)),
    ),
]


@pytest.mark.parametrize("write", [w[1] for w in WRITES], ids=[w[0] for w in WRITES])
def test_every_write_checks_free_space_first_and_changes_nothing_on_a_full_disk(
    index: EdgeIndex, write: Callable[[EdgeIndex, Any], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    point = next(iter(index.scroll()))
    contract = (index.path / "contract.json").read_text("utf-8")
    manifest = (index.path / "manifest.json").read_text("utf-8")
    # The file system answers "1 MiB free" from now on: below any write's headroom.
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: Usage(2**30, 2**30 - 2**20, 2**20))
    with pytest.raises(StorageError, match="disk nearly full"):
        write(index, point.point_id)
    assert (index.path / "contract.json").read_text("utf-8") == contract
    assert (index.path / "manifest.json").read_text("utf-8") == manifest
    assert json.loads(manifest)["state"] == "clean"  # no write session was begun
    (after,) = index.retrieve([point.point_id])
    assert after.payload == point.payload
    assert index.count() == 21


def test_a_replaced_json_file_is_fsynced_and_so_is_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    files.write_json_atomically(tmp_path / "manifest.json", {"state": "writing"})
    assert synced == ["file", "directory"]  # the bytes, then the rename
    assert json.loads((tmp_path / "manifest.json").read_text("utf-8")) == {"state": "writing"}
    assert not (tmp_path / "manifest.tmp").exists()
