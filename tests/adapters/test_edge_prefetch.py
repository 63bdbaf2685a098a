"""The embedded index reads its stored payloads ahead when asked (adapters/edge/prefetch.py)."""

from __future__ import annotations

import mmap
import os
import platform
from pathlib import Path

import pytest

from ragwright.adapters.edge import prefetch
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.edge.prefetch import (
    MADV_WILLNEED,
    PAYLOAD_PARTS,
    file_extents,
    mapped_files,
    prefetch_mapped,
)
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.pipeline.ingest import ingest
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, SourceSection

POLICY = ChunkingPolicy()

linux = pytest.mark.skipif(platform.system() != "Linux", reason="madvise and /proc are Linux's")


def _documents(count: int) -> list:
    return [
        validate_document(
            document_id=f"doc-{n:04d}",
            title=f"Document {n}",
            document_type="runbook",
            publication_state="published",
            sections=[
                SourceSection(
                    "body",
                    "Body",
                    tuple(" ".join(f"w{n}p{p}t{i}" for i in range(60)) for p in range(4)),
                )
            ],
        )
        for n in range(count)
    ]


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prefetch") / "index"
    with EdgeIndex(path, contract_for(HASHING_PROFILE, POLICY.version)) as index:
        ingest(
            _documents(400),
            policy=POLICY,
            embedder=HashingEmbedder(),
            sparse_encoder=Bm25Encoder(),
            index=index,
        )
    return path


def _rss_file_bytes() -> int:
    for line in Path("/proc/self/status").read_text("ascii").splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def _payloads(index: EdgeIndex) -> dict:
    return {p.point_id: p.payload for p in index.scroll()}


@linux
def test_prefetch_reads_ahead_without_mapping_and_changes_no_read(stored_index: Path) -> None:
    with EdgeIndex(stored_index, contract_for(HASHING_PROFILE, POLICY.version)) as index:
        before = _rss_file_bytes()
        advised = index.prefetch_payloads()
        grown = _rss_file_bytes() - before
        payloads = _payloads(index)
    assert advised > 64 * 1024
    # Read ahead into the page cache, not mapped: the process's RSS stays where it was
    # (MADV_POPULATE_READ would have grown it by about ``advised``).
    assert grown < advised // 4
    with EdgeIndex(stored_index, contract_for(HASHING_PROFILE, POLICY.version)) as index:
        assert _payloads(index) == payloads


class _RecordingMadvise:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, start: int, length: int, advice: int) -> int:
        self.calls.append((start, length, advice))
        return 0


@linux
def test_the_advice_covers_the_payload_files_data_within_the_budget(
    stored_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _RecordingMadvise()
    monkeypatch.setattr(prefetch, "_madvise", lambda: recorder)
    with EdgeIndex(stored_index, contract_for(HASHING_PROFILE, POLICY.version)):
        mapped = list(mapped_files(stored_index, PAYLOAD_PARTS))
        assert mapped
        assert all(
            any(f"{os.sep}{part}{os.sep}" in path for part in PAYLOAD_PARTS)
            for _, _, _, path in mapped
        )
        # Vectors are not what a change-detection scan reads.
        everything = list(mapped_files(stored_index, ("segments",)))
        assert len(everything) > len(mapped)
        # Each data extent, from the page it starts in to its end within the mapping.
        data = sum(
            min(end, start + (high - offset))
            - (start + (low - offset) // mmap.PAGESIZE * mmap.PAGESIZE)
            for start, end, offset, path in mapped
            for low, high in file_extents(path, offset, offset + end - start)
        )
        advised = prefetch_mapped(stored_index, budget=1 << 40)
    assert recorder.calls and all(advice == MADV_WILLNEED for _, _, advice in recorder.calls)
    assert all(
        any(start <= first and first + length <= end for start, end, _, _ in mapped)
        for first, length, _ in recorder.calls
    )
    assert advised == sum(length for _, length, _ in recorder.calls)
    assert advised == data > 0
    recorder.calls.clear()
    with EdgeIndex(stored_index, contract_for(HASHING_PROFILE, POLICY.version)):
        assert prefetch_mapped(stored_index, budget=0) == 0
        assert 0 < prefetch_mapped(stored_index, budget=3 * mmap.PAGESIZE) <= 3 * mmap.PAGESIZE
    assert sum(length for _, length, _ in recorder.calls) <= 3 * mmap.PAGESIZE


@linux
def test_the_default_budget_is_half_the_memory_room(
    stored_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EdgeIndex(stored_index, contract_for(HASHING_PROFILE, POLICY.version)):
        assert prefetch_mapped(stored_index) > 0
        monkeypatch.setattr(prefetch, "memory_room", lambda: 2 * mmap.PAGESIZE)
        assert 0 < prefetch_mapped(stored_index) <= mmap.PAGESIZE
        monkeypatch.setattr(prefetch, "memory_room", lambda: None)
        assert prefetch_mapped(stored_index) == 0


def test_nothing_mapped_under_a_folder_advises_nothing(tmp_path: Path) -> None:
    assert prefetch_mapped(tmp_path / "no-index") == 0
