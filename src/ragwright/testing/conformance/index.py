"""The conformance suite every ``VectorIndex`` backend must pass.

Subclass :class:`VectorIndexConformance` in a test module and implement ``open_index``;
pytest collects the inherited tests. The suite checks behaviour the ingestion pipeline
and retrieval rely on: writes are visible when they return, filters apply inside the
search, payload survives exactly, the contract is enforced on reopen, sparse vectors can
be replaced alone, and the BM25 statistics are kept without ever failing the contract.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.core.contracts import contract_for
from ragwright.errors import ContractMismatch
from ragwright.protocols import VectorIndex
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import (
    CollectionContract,
    FieldMatch,
    IndexPoint,
    LexicalStats,
    PointFilter,
    SparseVector,
)

VERSION = "section-paragraphs-80w-overlap1-v1"


def _vector(seed: int, dims: int = 64) -> list[float]:
    raw = [((seed * 31 + i * 17) % 13) - 6.0 for i in range(dims)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


def _point(seed: int, **payload: Any) -> IndexPoint:
    base = {"document_id": f"doc-{seed % 3}", "chunking_version": VERSION, "index_state": "live"}
    return IndexPoint(uuid.UUID(int=seed + 1), _vector(seed), {**base, **payload})


class VectorIndexConformance:
    """Inherit and implement :meth:`open_index`; every test gets a fresh location."""

    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> VectorIndex:
        raise NotImplementedError

    @pytest.fixture
    def location(self, tmp_path: Path) -> Path:
        return tmp_path / "index"

    @pytest.fixture
    def index(self, location: Path) -> Iterator[VectorIndex]:
        index = self.open_index(location, contract_for(HASHING_PROFILE, VERSION))
        yield index
        index.close()

    def test_upsert_is_visible_and_payload_round_trips(self, index: VectorIndex) -> None:
        nested = {"section_index": 2, "paragraphs": [0, 1]}
        index.upsert([_point(1, text='Zwölf Boxkämpfer "jagen" Viktor', positions=nested)])
        (stored,) = index.retrieve([uuid.UUID(int=2)])
        assert stored.payload["text"] == 'Zwölf Boxkämpfer "jagen" Viktor'
        assert stored.payload["positions"] == nested

    def test_reads_inside_reading_work_and_see_earlier_writes(self, index: VectorIndex) -> None:
        # Retrieval runs both legs of a query inside ``reading()``; it must not block
        # this process's own reads (a reentrant lock on the embedded index, nothing on
        # a server).
        index.upsert([_point(1), _point(2)])
        with index.reading():
            assert index.count() == 2
            assert len(index.search(_vector(1), PointFilter(), limit=2)) == 2
        index.upsert([_point(3)])
        assert index.count() == 3

    def test_retrieve_skips_missing_ids(self, index: VectorIndex) -> None:
        index.upsert([_point(1)])
        found = index.retrieve([uuid.UUID(int=2), uuid.UUID(int=999)])
        assert [p.point_id for p in found] == [uuid.UUID(int=2)]

    def test_retrieve_returns_only_the_payload_fields_asked_for(self, index: VectorIndex) -> None:
        index.upsert(
            [_point(i, text=t, document_type="runbook") for i, t in ((1, "body"), (2, "other"))]
        )
        ids = [uuid.UUID(int=2), uuid.UUID(int=3)]
        some = index.retrieve(ids, payload_fields=("text", "document_type"))
        assert {p.point_id: p.payload for p in some} == {
            uuid.UUID(int=2): {"text": "body", "document_type": "runbook"},
            uuid.UUID(int=3): {"text": "other", "document_type": "runbook"},
        }
        assert [p.payload for p in index.retrieve(ids, payload_fields=())] == [{}, {}]
        (whole, _) = index.retrieve(ids)
        assert {"text", "document_type", "document_id", "index_state"} <= set(whole.payload)

    def test_upsert_replaces_whole_point(self, index: VectorIndex) -> None:
        index.upsert([_point(1, extra="old")])
        index.upsert([_point(1)])
        (stored,) = index.retrieve([uuid.UUID(int=2)])
        assert "extra" not in stored.payload

    def test_search_applies_filter_inside_the_query(self, index: VectorIndex) -> None:
        # 30 points; the single eligible one is the least similar to the query.
        query = _vector(5)
        points = [_point(i, publication_state="draft") for i in range(30)]
        far = min(
            range(30), key=lambda i: sum(a * b for a, b in zip(_vector(i), query, strict=True))
        )
        points[far] = _point(far, publication_state="published")
        index.upsert(points)
        flt = PointFilter(must=(FieldMatch("publication_state", ("published",)),))
        results = index.search(query, flt, limit=3)
        assert [r.point_id for r in results] == [uuid.UUID(int=far + 1)]
        assert results[0].score is not None

    def test_search_orders_by_similarity(self, index: VectorIndex) -> None:
        index.upsert([_point(i) for i in range(10)])
        results = index.search(_vector(4), PointFilter(), limit=3)
        assert results[0].point_id == uuid.UUID(int=5)
        scores = [r.score or 0.0 for r in results]
        assert scores == sorted(scores, reverse=True)

    def test_match_any_and_must_not(self, index: VectorIndex) -> None:
        index.upsert([_point(i, document_type=t) for i, t in enumerate(["runbook", "note", "faq"])])
        assert (
            index.count(PointFilter(must=(FieldMatch("document_type", ("runbook", "note")),))) == 2
        )
        assert index.count(PointFilter(must_not=(FieldMatch("document_type", ("faq",)),))) == 2

    def test_scroll_returns_every_point_with_selected_fields(self, index: VectorIndex) -> None:
        index.upsert([_point(i, text=f"t{i}") for i in range(2500)])
        seen = list(index.scroll(payload_fields=["document_id"]))
        assert len(seen) == 2500
        assert len({p.point_id for p in seen}) == 2500
        assert set(seen[0].payload) == {"document_id"}

    def test_set_payload_merges_and_delete_payload_keys_removes(self, index: VectorIndex) -> None:
        index.upsert([_point(1, tenant="acme", text="kept")])
        index.set_payload([uuid.UUID(int=2)], {"index_state": "staged"})
        index.delete_payload_keys([uuid.UUID(int=2)], ["tenant"])
        (stored,) = index.retrieve([uuid.UUID(int=2)])
        assert stored.payload["index_state"] == "staged"
        assert stored.payload["text"] == "kept"
        assert "tenant" not in stored.payload

    def test_delete_removes_points(self, index: VectorIndex) -> None:
        index.upsert([_point(i) for i in range(3)])
        index.delete([uuid.UUID(int=1), uuid.UUID(int=3)])
        assert index.count() == 1

    def test_reopen_with_other_profile_is_a_contract_mismatch(self, location: Path) -> None:
        index = self.open_index(location, contract_for(HASHING_PROFILE, VERSION))
        index.upsert([_point(1)])
        index.close()
        other = CollectionContract("dense", 64, "cosine", "other-profile", "sha256:0", (VERSION,))
        with pytest.raises(ContractMismatch) as caught:
            self.open_index(location, other)
        assert caught.value.field == "embedding_profile_id"

    def test_reopen_with_other_dimensions_is_a_contract_mismatch(self, location: Path) -> None:
        self.open_index(location, contract_for(HASHING_PROFILE, VERSION)).close()
        wide = CollectionContract(
            "dense",
            128,
            "cosine",
            HASHING_PROFILE.profile_id,
            HASHING_PROFILE.artifact_digest,
            (VERSION,),
        )
        with pytest.raises(ContractMismatch) as caught:
            self.open_index(location, wide)
        assert caught.value.field == "dimensions"

    def test_an_empty_collection_is_bound_to_no_chunking_version(self, location: Path) -> None:
        """A first run that failed before writing leaves a collection with no point: the
        next run's version replaces the one it was made with, without consent."""
        self.open_index(location, contract_for(HASHING_PROFILE, VERSION)).close()
        other = contract_for(HASHING_PROFILE, "sentence-blocks-80w-overlap1-v1")
        index = self.open_index(location, other)
        assert index.contract.chunking_versions == ("sentence-blocks-80w-overlap1-v1",)
        index.close()
        reopened = self.open_index(location, other)
        assert reopened.contract.chunking_versions == ("sentence-blocks-80w-overlap1-v1",)
        reopened.close()

    def test_new_chunking_version_needs_explicit_consent(self, location: Path) -> None:
        holding = self.open_index(location, contract_for(HASHING_PROFILE, VERSION))
        holding.upsert([_point(1)])
        holding.close()
        other = contract_for(HASHING_PROFILE, "section-paragraphs-40w-overlap0-v1")
        with pytest.raises(ContractMismatch) as caught:
            self.open_index(location, other)
        assert caught.value.field == "chunking_versions"
        index = self.open_index(location, other, add_chunking_version=True)
        assert index.contract.chunking_versions == (VERSION, "section-paragraphs-40w-overlap0-v1")
        index.close()
        reopened = self.open_index(location, contract_for(HASHING_PROFILE, VERSION))
        assert "section-paragraphs-40w-overlap0-v1" in reopened.contract.chunking_versions
        reopened.close()

    def test_sparse_search_scores_with_idf_inside_the_filter(self, index: VectorIndex) -> None:
        common, rare = SparseVector((1,), (1.0,)), SparseVector((1, 2), (1.0, 1.0))
        index.upsert(
            [
                IndexPoint(uuid.UUID(int=1), _vector(1), {"k": "common", "s": "a"}, common),
                IndexPoint(uuid.UUID(int=2), _vector(2), {"k": "rare", "s": "a"}, rare),
                IndexPoint(uuid.UUID(int=3), _vector(3), {"k": "rare-b", "s": "b"}, rare),
            ]
        )
        flt = PointFilter(must=(FieldMatch("s", ("a",)),))
        hits = index.search_sparse(SparseVector((1, 2), (1.0, 1.0)), flt, limit=5)
        assert [h.payload["k"] for h in hits] == ["rare", "common"]
        # Term 2 is in 2 of 3 points, term 1 in all 3: idf(2) > idf(1) > 0.
        assert hits[0].score is not None and hits[1].score is not None
        assert hits[0].score > 2 * hits[1].score > 0
        assert index.search_sparse(SparseVector((), ()), flt, limit=5) == []

    def test_empty_condition_matches_points_without_the_field(self, index: VectorIndex) -> None:
        index.upsert([_point(1, tenant="acme"), _point(2)])
        found = index.retrieve([uuid.UUID(int=3)])
        assert found and "tenant" not in found[0].payload
        assert index.count(PointFilter(empty=("tenant",))) == 1
        assert index.count(PointFilter(must=(FieldMatch("tenant", ("acme",)),))) == 1

    def test_facet_counts_every_value_of_an_indexed_field_inside_the_filter(
        self, index: VectorIndex
    ) -> None:
        # _point(seed) belongs to doc-{seed % 3}; lexical_terms is integer-indexed.
        index.upsert([_point(n, lexical_terms=n % 2 + 7) for n in range(1, 8)])
        index.upsert([_point(9, tenant="acme", lexical_terms=True)])  # not a count
        assert index.facet("document_id") == {"doc-0": 3, "doc-1": 3, "doc-2": 2}
        assert index.facet("lexical_terms") == {7: 3, 8: 4}
        assert index.facet("document_id", PointFilter(empty=("tenant",))) == {
            "doc-0": 2,
            "doc-1": 3,
            "doc-2": 2,
        }
        only = PointFilter(must=(FieldMatch("document_id", ("doc-2",)),))
        assert index.facet("lexical_terms", only) == {7: 1, 8: 1}
        assert index.facet("document_id", PointFilter(must=(FieldMatch("tenant", ("x",)),))) == {}
        # A hint: approximate counts, at most ``limit`` values, only values that exist.
        hint = index.facet("document_id", exact=False, limit=2)
        assert len(hint) <= 2 and set(hint) <= {"doc-0", "doc-1", "doc-2"}
        assert len(index.facet("document_id", limit=1)) == 1

    def test_prefetch_is_a_hint_that_changes_no_read(self, index: VectorIndex) -> None:
        index.upsert([_point(n) for n in range(1, 6)])
        before = {p.point_id: p.payload for p in index.scroll()}
        assert index.prefetch_payloads() >= 0
        assert {p.point_id: p.payload for p in index.scroll()} == before

    def test_update_sparse_replaces_only_the_sparse_vector(self, index: VectorIndex) -> None:
        first, second = uuid.UUID(int=1), uuid.UUID(int=2)
        index.upsert(
            [
                IndexPoint(first, _vector(1), {"k": "first"}, SparseVector((1,), (1.0,))),
                IndexPoint(second, _vector(2), {"k": "second"}, SparseVector((1, 2), (1.0, 1.0))),
            ]
        )
        dense_before = index.search(_vector(1), PointFilter(), limit=1)
        index.update_sparse([(first, SparseVector((3,), (2.0,)))])
        assert [
            h.payload["k"]
            for h in index.search_sparse(SparseVector((1,), (1.0,)), PointFilter(), limit=5)
        ] == ["second"]
        (hit,) = index.search_sparse(SparseVector((3,), (1.0,)), PointFilter(), limit=5)
        assert hit.point_id == first and hit.payload == {"k": "first"}
        assert index.search(_vector(1), PointFilter(), limit=1) == dense_before
        index.update_sparse([])

    def test_lexical_stats_are_kept_and_never_fail_the_contract(self, location: Path) -> None:
        contract = contract_for(HASHING_PROFILE, VERSION)
        index = self.open_index(location, contract)
        assert index.contract.lexical_stats is None
        index.record_lexical_stats(LexicalStats(chunks=3, terms=31, avgdl=10.0))
        assert index.contract.lexical_stats == LexicalStats(3, 31, 10.0)
        index.close()
        # The configured contract knows no statistics: reopening must not reject them.
        reopened = self.open_index(location, contract)
        assert reopened.contract.lexical_stats == LexicalStats(3, 31, 10.0)
        reopened.record_lexical_stats(LexicalStats(chunks=4, terms=60, avgdl=15.0))
        reopened.close()
        again = self.open_index(location, contract, add_chunking_version=True)
        assert again.contract.lexical_stats == LexicalStats(4, 60, 15.0)
        again.close()
