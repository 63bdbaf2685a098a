"""Documents proven unchanged by payload-index counts (pipeline/unchanged.py): what is
proven, and every way the proof must refuse."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.points import CHANGE_KEY, STAGED
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.planning import document_source_digest
from ragwright.pipeline.unchanged import proven_unchanged
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, FieldMatch, PointFilter, SourceDocument
from tests.pipeline.test_ingest import POLICY, P, doc, run


@pytest.fixture
def index(tmp_path: Path) -> Iterator[EdgeIndex]:
    with EdgeIndex(tmp_path / "index", contract_for(HASHING_PROFILE, POLICY.version)) as opened:
        yield opened


def documents() -> list[SourceDocument]:
    return [doc("a"), doc("b"), doc("c", tenant="acme")]


def proven(index: Any, docs: list[SourceDocument]) -> dict[tuple[str | None, str], int]:
    digests = [document_source_digest(d, POLICY, HashingEmbedder(), Bm25Encoder()) for d in docs]
    return proven_unchanged(index, POLICY.version, docs, digests)


def points_of(index: EdgeIndex, document_id: str) -> list[Any]:
    return list(index.scroll(PointFilter(must=(FieldMatch("document_id", (document_id,)),))))


def test_every_stored_document_is_proven_with_its_chunk_count(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    chunks = {d.document_id: len(points_of(index, d.document_id)) for d in docs}
    assert min(chunks.values()) > 1
    assert proven(index, docs) == {
        (None, "a"): chunks["a"],
        (None, "b"): chunks["b"],
        ("acme", "c"): chunks["c"],
    }


def test_a_new_or_edited_document_is_not_proven_and_the_others_are(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    edited = [doc("a", revision="2"), docs[1], docs[2], doc("new")]
    assert set(proven(index, edited)) == {(None, "b"), ("acme", "c")}


def test_a_document_missing_a_point_is_not_proven(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    index.delete([points_of(index, "a")[0].point_id])
    assert set(proven(index, docs)) == {(None, "b"), ("acme", "c")}


def test_a_staged_point_proves_nothing(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    index.set_payload([points_of(index, "b")[0].point_id], {"index_state": STAGED})
    assert proven(index, docs) == {}


def test_another_point_under_a_document_id_proves_nothing(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    # The same id under another tenant: its points are not the document's.
    run(index, [doc("a", tenant="other")])
    assert proven(index, docs) == {}


def test_points_written_before_change_keys_are_scanned(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    index.delete_payload_keys([p.point_id for p in points_of(index, "a")], [CHANGE_KEY])
    assert set(proven(index, docs)) == {(None, "b"), ("acme", "c")}
    # And a re-run still finds "a" unchanged, by the scan.
    report = run(index, docs)
    assert report.embedded == 0 and report.documents_changed == 0


class LyingFacets:
    """An index whose facets (the hint) claim every document whole with ``claim``
    points; the exact counts are the engine's."""

    def __init__(self, inner: EdgeIndex, claim: dict[str, int]) -> None:
        self.inner, self.claim = inner, claim

    def facet(self, field: str, point_filter: Any = None, *, exact: bool = True, **_: Any) -> Any:
        assert field == CHANGE_KEY and not exact
        return self.claim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_wrong_hint_is_caught_by_the_exact_counts(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    hint = index.facet(CHANGE_KEY)
    victim = points_of(index, "a")[0]
    key = victim.payload[CHANGE_KEY]
    index.delete([victim.point_id])
    # The hint still says "a" is whole: the live count says otherwise.
    assert proven(LyingFacets(index, hint), docs) == {}
    assert hint[key] > index.facet(CHANGE_KEY).get(key, 0)


def test_a_rerun_over_an_unchanged_corpus_reads_no_payload(index: EdgeIndex) -> None:
    docs = documents()
    run(index, docs)
    scrolls: list[Any] = []
    original = index.scroll

    def recorded(*args: Any, **kw: Any) -> Any:
        scrolls.append(args)
        return original(*args, **kw)

    index.scroll = recorded  # type: ignore[method-assign]
    report = run(index, docs)
    assert report.unchanged == report.chunks and report.embedded == 0
    assert scrolls == []


def test_a_document_rewritten_after_a_deleted_point_is_proven_again(index: EdgeIndex) -> None:
    docs = documents()
    first = run(index, docs)
    index.delete([points_of(index, "b")[0].point_id])
    again = run(index, docs)
    assert again.embedded == 1 and index.count() == first.chunks
    assert set(proven(index, docs)) == {(None, "a"), (None, "b"), ("acme", "c")}


def test_points_of_another_chunking_version_do_not_stop_the_proof(tmp_path: Path) -> None:
    other = ChunkingPolicy(max_words=30, overlap=False)
    docs = documents()
    with EdgeIndex(tmp_path / "i", contract_for(HASHING_PROFILE, POLICY.version)) as index:
        run(index, docs)
    with EdgeIndex(
        tmp_path / "i", contract_for(HASHING_PROFILE, other.version), add_chunking_version=True
    ) as index:
        encoder, embedder = Bm25Encoder(), HashingEmbedder()
        ingest(docs, policy=other, embedder=embedder, sparse_encoder=encoder, index=index)
        digests = [document_source_digest(d, other, embedder, encoder) for d in docs]
        assert len(proven_unchanged(index, other.version, docs, digests)) == 3
        # Under the first version too: the other version's points are not its own.
        assert len(proven(index, docs)) == 3


class Crash(Exception):
    pass


@pytest.mark.parametrize("phase", ["staged", "obsolete-deleted"])
@pytest.mark.parametrize("edit", ["text", "publication"])
@pytest.mark.parametrize("then", ["reverted", "edited"])
def test_a_switch_cut_short_then_a_rerun_ends_as_a_clean_ingestion(
    tmp_path: Path, phase: str, edit: str, then: str
) -> None:
    original = doc("a", publication_state="draft")
    if edit == "text":
        edited = doc("a", paragraphs=[P[0], "Drain only until the deadline, then cancel.", P[2]])
        edited = dataclasses.replace(edited, publication_state="draft")
    else:
        edited = doc("a", publication_state="published")
    final = original if then == "reverted" else edited

    def crash(document_id: str, reached: str) -> None:
        if reached == phase:
            raise Crash(phase)

    with EdgeIndex(tmp_path / "i", contract_for(HASHING_PROFILE, POLICY.version)) as index:
        run(index, [original, doc("b")])
        with pytest.raises(Crash):
            run(index, [edited, doc("b")], phase_hook=crash)
        run(index, [final, doc("b")])
        got = sorted(
            (p.payload["text"], p.payload["publication_state"], p.payload["index_state"])
            for p in points_of(index, "a")
        )
        assert set(proven(index, [final, doc("b")])) == {(None, "a"), (None, "b")}
    with EdgeIndex(tmp_path / "clean", contract_for(HASHING_PROFILE, POLICY.version)) as clean:
        run(clean, [final, doc("b")])
        want = sorted(
            (p.payload["text"], p.payload["publication_state"], p.payload["index_state"])
            for p in points_of(clean, "a")
        )
    assert got == want
