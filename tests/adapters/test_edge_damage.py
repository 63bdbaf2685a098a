"""A damaged embedded index is refused on open, naming the damaged part, never read as
empty or unchanged; ``rebuild`` removes only the collection's own files."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import qdrant_edge as qe

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import IndexDamaged
from ragwright.testing.fakes import HASHING_PROFILE
from tests.pipeline.indexes import POLICY, end_wal_with_an_empty_write, hashing_index

CONTRACT = contract_for(HASHING_PROFILE, POLICY.version)


def segment(path: Path) -> Path:
    (found,) = (path / "shard" / "segments").iterdir()
    return found


def truncate(relative: str) -> Callable[[Path], None]:
    def corrupt(path: Path) -> None:
        target = segment(path) / relative
        assert target.is_file(), f"qdrant-edge no longer stores {relative}"
        target.write_bytes(b"")

    return corrupt


def empty_id_tracker(path: Path) -> None:
    end_wal_with_an_empty_write(path)  # else the WAL's last record rebuilds it
    truncate("mutable_id_tracker.mappings")(path)


def garble(name: str) -> Callable[[Path], None]:
    def corrupt(path: Path) -> None:
        (path / name).write_text('{"dimensions": 3', "utf-8")

    return corrupt


def remove(name: str) -> Callable[[Path], None]:
    def corrupt(path: Path) -> None:
        (path / name).unlink()

    return corrupt


def rewrite_manifest(**fields: object) -> Callable[[Path], None]:
    def corrupt(path: Path) -> None:
        manifest = json.loads((path / "manifest.json").read_text("utf-8"))
        (path / "manifest.json").write_text(json.dumps({**manifest, **fields}), "utf-8")

    return corrupt


CORRUPTIONS = [
    ("id-tracker", empty_id_tracker, "id tracker"),
    ("dense-vectors", truncate("vector_storage-dense/vectors/chunk_0.mmap"), "dense vectors"),
    ("payload-storage", truncate("payload_storage/page_0.dat"), "payload storage"),
    ("sparse-vectors", truncate("vector_storage-bm25/store/page_0.dat"), "shard"),
    ("contract", garble("contract.json"), "contract.json"),
    ("manifest", garble("manifest.json"), "manifest.json"),
    ("manifest-missing", remove("manifest.json"), "manifest.json"),
    ("manifest-state", rewrite_manifest(state="banana"), "manifest.json"),
    ("manifest-points-text", rewrite_manifest(points="21"), "manifest.json"),
    ("manifest-points-negative", rewrite_manifest(points=-1), "manifest.json"),
    ("manifest-sample", rewrite_manifest(sample="all"), "manifest.json"),
]


@pytest.fixture
def committed(tmp_path: Path) -> Path:
    path = tmp_path / "index"
    hashing_index(path).close()
    return path


@pytest.mark.parametrize(
    ("corrupt", "part"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS]
)
def test_damaged_index_is_refused_naming_the_part(
    committed: Path, corrupt: Callable[[Path], None], part: str
) -> None:
    corrupt(committed)
    with pytest.raises(IndexDamaged) as caught:
        EdgeIndex(committed, CONTRACT, create=False)
    assert caught.value.part == part
    assert "\n" not in str(caught.value)
    assert "ragwright ingest SOURCES --rebuild" in str(caught.value)


def test_clean_close_commits_the_point_count(committed: Path) -> None:
    with EdgeIndex(committed, CONTRACT) as index:
        assert index.committed_points == index.count() == 21


def test_count_below_the_commit_is_refused_unless_a_writer_died_mid_session(
    committed: Path,
) -> None:
    with EdgeIndex(committed, CONTRACT) as index:
        victim = next(iter(index.scroll())).point_id
    # Behind ragwright's back: the engine loses a point the manifest counts.
    shard = qe.EdgeShard.load(str(committed / "shard"))
    shard.update(qe.UpdateOperation.delete_points([victim]))
    shard.close()
    with pytest.raises(IndexDamaged, match="20 points readable, 21 committed"):
        EdgeIndex(committed, CONTRACT)
    # A writer killed mid-session leaves "writing": the WAL, not the manifest, is right.
    (committed / "manifest.json").write_text(json.dumps({"state": "writing"}), "utf-8")
    with EdgeIndex(committed, CONTRACT) as index:
        assert index.committed_points is None
        index.delete([next(iter(index.scroll())).point_id])
    with EdgeIndex(committed, CONTRACT) as index:
        assert index.committed_points == index.count() == 19


def test_count_above_the_commit_is_refused(committed: Path) -> None:
    # Behind ragwright's back: the engine holds a point the manifest does not count.
    with EdgeIndex(committed, CONTRACT) as index:
        (point,) = index.retrieve([next(iter(index.scroll())).point_id], with_vectors=True)
    shard = qe.EdgeShard.load(str(committed / "shard"))
    extra = qe.Point(uuid.uuid4(), {CONTRACT.vector_name: list(point.vector)}, {"text": "x"})
    shard.update(qe.UpdateOperation.upsert_points([extra]))
    shard.close()
    with pytest.raises(IndexDamaged, match="22 points readable, 21 committed"):
        EdgeIndex(committed, CONTRACT)


def test_a_new_index_records_an_empty_commit_so_a_missing_manifest_is_damage(
    tmp_path: Path,
) -> None:
    EdgeIndex(tmp_path / "new", CONTRACT).close()  # created, nothing written
    with EdgeIndex(tmp_path / "new", CONTRACT, create=False) as index:
        assert index.committed_points == index.count() == 0
    (tmp_path / "new" / "manifest.json").unlink()
    with pytest.raises(IndexDamaged, match=r"manifest.json: missing\); recover with"):
        EdgeIndex(tmp_path / "new", CONTRACT, create=False)


def test_unverified_open_reads_the_parts_that_still_read(committed: Path) -> None:
    truncate("vector_storage-dense/vectors/chunk_0.mmap")(committed)
    with EdgeIndex(committed, CONTRACT, verify=False) as index:
        ids = [p.point_id for p in index.scroll(payload_fields=())]
        assert len(index.read_part(ids, "payload")) == 21
        assert len(index.read_part(ids, "sparse")) == 21
        with pytest.raises(IndexDamaged) as caught:
            index.read_part(ids, "dense")
    assert caught.value.part == "dense vectors"


def test_rebuild_removes_only_the_collections_own_files(committed: Path) -> None:
    truncate("payload_storage/page_0.dat")(committed)
    (committed / "notes.txt").write_text("kept", "utf-8")
    sibling = committed.parent / "other-collection"
    sibling.mkdir()
    (sibling / "contract.json").write_text("{}", "utf-8")
    with EdgeIndex(committed, CONTRACT, rebuild=True) as index:
        assert index.count() == 0
    assert (committed / "notes.txt").read_text("utf-8") == "kept"
    assert (sibling / "contract.json").read_text("utf-8") == "{}"
    EdgeIndex(committed, CONTRACT, create=False).close()
