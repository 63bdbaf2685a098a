"""What an ingestion's cost per chunk depends on (issue 25): the engine writes a slice
of new documents makes, the free-space check's walks of the shard, and the passes an
unchanged re-run makes over its sources. Counts, never timings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge import files
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.pipeline.ingest import ingest
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

POLICY = ChunkingPolicy(max_words=30)


def doc(number: int, revision: str = "a") -> SourceDocument:
    paragraphs = tuple(
        " ".join(f"w{number}x{p}y{i}{revision}" for i in range(12)) for p in range(3)
    )
    return validate_document(
        document_id=f"doc-{number:03d}",
        title=f"Document {number}",
        document_type="runbook",
        publication_state="published",
        sections=[SourceSection("body", "Body", paragraphs)],
    )


class CountingSource:
    """A re-iterable source that counts the documents read from it."""

    def __init__(self, documents: list[SourceDocument]) -> None:
        self.documents = documents
        self.read = 0

    def __iter__(self) -> Iterator[SourceDocument]:
        for document in self.documents:
            self.read += 1
            yield document


@pytest.fixture
def index(tmp_path: Path) -> Iterator[EdgeIndex]:
    with EdgeIndex(tmp_path / "index", contract_for(HASHING_PROFILE, POLICY.version)) as opened:
        yield opened


def run(index: EdgeIndex, documents: Any, **kw: Any) -> Any:
    return ingest(
        documents,
        policy=POLICY,
        embedder=HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
        **kw,
    )


def snapshot(index: EdgeIndex) -> list[tuple[str, str]]:
    return sorted((str(p.point_id), json.dumps(p.payload, sort_keys=True)) for p in index.scroll())


class StagingEdgeIndex(EdgeIndex):
    """The embedded index taken for one whose upserts are not atomic (a server's)."""

    atomic_upsert = False


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every non-empty write of an embedded index from now on: (name, points)."""
    writes: list[tuple[str, int]] = []
    for name in ("upsert", "set_payload", "delete_payload_keys", "delete"):
        original = getattr(EdgeIndex, name)

        def counted(self: EdgeIndex, *args: Any, _name: str = name, _f: Any = original) -> Any:
            if args[0]:
                writes.append((_name, len(args[0])))
            return _f(self, *args)

        monkeypatch.setattr(EdgeIndex, name, counted)
    return writes


def test_a_slice_of_new_documents_is_written_live_by_one_upsert(
    index: EdgeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = count_writes(monkeypatch)
    # Two inputs an embedding call: each document's chunks span several calls.
    report = run(index, [doc(n) for n in range(6)], slice_size=3, batch_size=2)
    assert report.documents_changed == 6 and report.verified == report.chunks
    assert report.chunks == 12  # 3 embedding calls a slice
    # One write per slice, of all its points: no staged copy, no flip.
    assert [name for name, _ in writes] == ["upsert", "upsert"]
    assert sum(points for _, points in writes) == report.chunks
    with StagingEdgeIndex(tmp_path / "staging", index.contract) as staging:
        writes.clear()
        run(staging, [doc(n) for n in range(6)], slice_size=3, batch_size=2)
        # Where an upsert is not atomic: staged a call at a time, one flip per slice.
        names = [name for name, _ in writes]
        assert names.count("set_payload") == 2 and names[-1] == "set_payload"
        assert names.count("upsert") == report.chunks // 2
        assert snapshot(staging) == snapshot(index)
    # An edited document is staged and switched on its own, either way.
    writes.clear()
    edited = [doc(0, revision="b"), *(doc(n) for n in range(1, 6))]
    run(index, edited, slice_size=3)
    assert "delete" in [name for name, _ in writes]
    assert "set_payload" in [name for name, _ in writes]
    with EdgeIndex(tmp_path / "fresh", index.contract) as fresh:
        run(fresh, edited, slice_size=3)
        assert snapshot(fresh) == snapshot(index)


def test_an_unchanged_re_run_reads_its_sources_once(index: EdgeIndex) -> None:
    source = CountingSource([doc(n) for n in range(5)])
    run(index, source)
    assert source.read == 10  # validation, then writing
    source.read = 0
    again = run(index, source)
    assert again.embedded == 0 and again.documents == 5
    assert source.read == 5


def test_the_free_space_check_walks_the_shard_once_per_few_mib_written(
    index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks: list[Path] = []
    original = files.shard_holes

    def counted(shard: Path) -> int | None:
        walks.append(shard)
        return original(shard)

    monkeypatch.setattr(files, "shard_holes", counted)
    run(index, [doc(n) for n in range(40)], slice_size=4)
    writes = 40 // 4 * 2  # at least an upsert and a switch per slice
    assert 1 <= len(walks) < writes / 4
