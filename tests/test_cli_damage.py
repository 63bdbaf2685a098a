"""Each damage found in the field, through the real command: refused in one line with
exit 1 (never read as empty or unchanged), listed by ``verify``, cured by ``--rebuild``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import copy_home, ragwright
from tests.conftest import SAMPLES
from tests.pipeline.indexes import end_wal_with_an_empty_write

COLLECTION = Path("index") / "support-documents"


def segment(home: Path) -> Path:
    (found,) = (home / COLLECTION / "shard" / "segments").iterdir()
    return found


def truncate(relative: str) -> Callable[[Path], None]:
    def corrupt(home: Path) -> None:
        (segment(home) / relative).write_bytes(b"")

    return corrupt


def empty_id_tracker(home: Path) -> None:
    end_wal_with_an_empty_write(home / COLLECTION)  # else the WAL's last record rebuilds it
    truncate("mutable_id_tracker.mappings")(home)


def garble_contract(home: Path) -> None:
    (home / COLLECTION / "contract.json").write_text("{garbled", "utf-8")


def remove_manifest(home: Path) -> None:
    (home / COLLECTION / "manifest.json").unlink()


# (name, corruption, part named on open, verify: problems listed or the open refused)
CORRUPTIONS = [
    ("id-tracker", empty_id_tracker, "id tracker", 1),
    ("dense-vectors", truncate("vector_storage-dense/vectors/chunk_0.mmap"), "dense vectors", 21),
    ("payload-storage", truncate("payload_storage/page_0.dat"), "payload storage", 21),
    ("contract", garble_contract, "contract.json", None),
    ("manifest-missing", remove_manifest, "manifest.json", None),
]


@pytest.fixture
def home(tmp_path: Path, sample_home: Path) -> Path:
    return copy_home(sample_home, tmp_path / "home")


def assert_refused(result: object, part: str) -> None:
    assert result.returncode == 1, result.stdout  # type: ignore[attr-defined]
    lines = result.stderr.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, result.stderr  # type: ignore[attr-defined]
    assert f"is damaged ({part}:" in lines[0]
    assert lines[0].endswith("recover with 'ragwright ingest SOURCES --rebuild'")


@pytest.mark.parametrize(
    ("corrupt", "part", "problems"),
    [c[1:] for c in CORRUPTIONS],
    ids=[c[0] for c in CORRUPTIONS],
)
def test_damaged_index_is_refused_listed_and_rebuilt(
    home: Path, corrupt: Callable[[Path], None], part: str, problems: int | None
) -> None:
    corrupt(home)
    assert_refused(ragwright("status", home=home), part)
    assert_refused(ragwright("search", "drain the queue", home=home), part)
    assert_refused(ragwright("ingest", str(SAMPLES), home=home), part)

    verify = ragwright("verify", "--json", home=home)
    if problems is None:  # nothing to read points with: the open itself names the damage
        assert_refused(verify, part)
    else:
        assert verify.returncode == 1
        report = json.loads(verify.stdout)
        assert report["damaged"] is True
        assert report["committed_points"] == 21
        assert len(report["problems"]) == problems
        assert {p["part"] for p in report["problems"]} == {part}

    rebuilt = ragwright("ingest", str(SAMPLES), "--rebuild", "--json", home=home, check=True)
    assert json.loads(rebuilt.stdout)["embedded"] == 21
    report = json.loads(ragwright("verify", "--json", home=home, check=True).stdout)
    assert (report["points"], report["checked"], report["problems"]) == (21, 21, [])
    status = json.loads(ragwright("status", "--json", home=home, check=True).stdout)
    assert len({d["document_id"] for d in status["documents"]}) == 10


def test_verify_of_a_sound_index_exits_zero_and_says_what_it_read(home: Path) -> None:
    result = ragwright("verify", home=home, check=True)
    assert result.stdout.strip() == (
        "collection support-documents: 21 points (21 committed), 21 read back valid, 0 problems"
    )


def test_rebuild_from_an_empty_folder_is_refused_and_keeps_the_index(
    home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = ragwright("ingest", str(empty), "--rebuild", home=home)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {empty}: no document files")
    report = json.loads(ragwright("verify", "--json", home=home, check=True).stdout)
    assert report["checked"] == 21
