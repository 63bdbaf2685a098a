"""``Application.verify`` reads every point back; ``IngestRequest.rebuild`` recreates the
index from the sources, and never from sources that did not load cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest
import qdrant_edge as qe

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.application import IngestRequest, VerifyRequest
from ragwright.core.contracts import contract_for
from ragwright.errors import IndexDamaged, SourceError
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import ChunkingPolicy
from tests.application.components import fake_application
from tests.conftest import SAMPLES
from tests.pipeline.indexes import end_wal_with_an_empty_write

CONTRACT = contract_for(HASHING_PROFILE, ChunkingPolicy().version)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    fake_application(home)[0].ingest(IngestRequest(sources=(SAMPLES,)))
    return home


def index_path(home: Path) -> Path:
    return home / "index" / "support-documents"


def test_verify_of_a_sound_index_reads_every_point_back(home: Path) -> None:
    result = fake_application(home)[0].verify(VerifyRequest())
    assert (result.committed_points, result.points, result.checked) == (21, 21, 21)
    assert result.to_dict() == {
        "collection": "support-documents",
        "committed_points": 21,
        "points": 21,
        "checked": 21,
        "damaged": False,
        "problems": [],
    }


def test_verify_lists_a_payload_that_breaks_a_rule_and_a_missing_sparse_vector(
    home: Path,
) -> None:
    with EdgeIndex(index_path(home), CONTRACT) as index:
        blank, unsparse = [p.point_id for p in index.scroll()][:2]
        index.set_payload([blank], {"title": " "})
    shard = qe.EdgeShard.load(str(index_path(home) / "shard"))
    shard.update(qe.UpdateOperation.delete_vectors([unsparse], ["bm25"]))
    shard.close()
    result = fake_application(home)[0].verify()
    assert result.damaged
    assert result.checked == 19
    assert [(p.point_id, p.part) for p in result.problems] == [
        (str(blank), "payload"),
        (str(unsparse), "sparse vectors"),
    ]
    assert "title" in result.problems[0].detail


def test_verify_lists_every_unreadable_point_and_the_lost_count(home: Path) -> None:
    end_wal_with_an_empty_write(index_path(home))  # else the WAL's last record rebuilds
    (segment,) = (index_path(home) / "shard" / "segments").iterdir()
    (segment / "vector_storage-dense" / "vectors" / "chunk_0.mmap").write_bytes(b"")
    result = fake_application(home)[0].verify()
    assert result.checked == 0
    assert len(result.problems) == 21
    assert {p.part for p in result.problems} == {"dense vectors"}
    (segment / "mutable_id_tracker.mappings").write_bytes(b"")
    result = fake_application(home)[0].verify()
    assert [(p.point_id, p.part) for p in result.problems] == [(None, "id tracker")]
    assert (result.committed_points, result.points) == (21, 0)


def test_rebuild_recreates_a_damaged_index_from_the_sources(home: Path) -> None:
    (segment,) = (index_path(home) / "shard" / "segments").iterdir()
    (segment / "payload_storage" / "page_0.dat").write_bytes(b"")
    app = fake_application(home)[0]
    with pytest.raises(IndexDamaged):
        app.ingest(IngestRequest(sources=(SAMPLES,)))
    result = app.ingest(IngestRequest(sources=(SAMPLES,), rebuild=True))
    assert (result.embedded, result.unchanged, result.verified) == (21, 0, 21)
    assert not app.verify().damaged


def test_rebuild_from_sources_without_documents_is_refused_and_changes_nothing(
    home: Path, tmp_path: Path
) -> None:
    # A BEIR corpus whose only document is invalid: a rebuild never runs on bad input.
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "471", "title": "Empty", "text": ""}\n')
    app = fake_application(home)[0]
    request = IngestRequest(
        sources=(corpus,),
        document_type="note",
        publication_state="published",
        skip_invalid=True,
        rebuild=True,
    )
    with pytest.raises(SourceError, match="--rebuild refused: 1 invalid documents"):
        app.ingest(request)
    assert app.verify().checked == 21
