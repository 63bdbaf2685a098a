"""The retriever's own checks and knobs, each in a test where nothing else decides.

* Payload validation of returned points: the index below hands back a tampered point
  straight from ``search``, so no engine filter or adapter stands between it and the
  retriever's check.
* The sparse (BM25) threshold: only that threshold changes between the searches compared.
* ``rrf_k``: fused scores computed by hand from the two legs' ranks for several ``k``,
  with the retriever built directly and from settings.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.errors import PayloadError
from ragwright.pipeline.retrieve import Hit, Retriever, Thresholds
from ragwright.testing.fakes import HashingEmbedder
from ragwright.types import PointFilter, SparseVector, StoredPoint
from tests.pipeline.indexes import POLICY, hashing_index

QUESTION = "Should I drain all queued work during shutdown?"
SHUTDOWN_RUNBOOK = Eligibility(POLICY.version, document_ids=("worker-shutdown",))
EVERYTHING = Eligibility(POLICY.version, ("runbook", "note"), ("published", "draft"))


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeIndex]:
    index = hashing_index(tmp_path_factory.mktemp("samples"))
    yield index
    index.close()


class TamperingIndex:
    """A real index whose searches return their best point with a rewritten payload.

    What a faulty engine, a foreign writer or a filter the engine ignored would hand
    back; every other call goes to the real index.
    """

    def __init__(
        self, inner: EdgeIndex, leg: str, changes: Mapping[str, Any], drop: Sequence[str] = ()
    ) -> None:
        self.inner = inner
        self.leg = leg
        self.changes = changes
        self.drop = drop
        self.tampered: list[uuid.UUID] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        points = self.inner.search(vector, point_filter, limit=limit)
        return self._tamper(points) if self.leg == "dense" else points

    def search_sparse(
        self, vector: SparseVector, point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        points = self.inner.search_sparse(vector, point_filter, limit=limit)
        return self._tamper(points) if self.leg == "sparse" else points

    def _tamper(self, points: list[StoredPoint]) -> list[StoredPoint]:
        best = points[0]
        payload = {**best.payload, **self.changes}
        for key in self.drop:
            del payload[key]
        self.tampered.append(best.point_id)
        return [dataclasses.replace(best, payload=payload), *points[1:]]


@pytest.mark.parametrize(
    ("field", "changes", "drop"),
    [
        ("publication_state", {"publication_state": ["published", "draft"]}, ()),
        ("publication_state", {"publication_state": "draft"}, ()),
        ("document_type", {"document_type": "note"}, ()),
        ("chunking_version", {"chunking_version": "section-paragraphs-v0"}, ()),
        ("index_state", {"index_state": "staged"}, ()),
        ("tenant", {"tenant": "globex"}, ()),
        ("document_id", {"document_id": "worker-shutdown-draft"}, ()),
        ("document_id", {"document_id": "  "}, ()),
        ("text", {}, ("text",)),
        ("positions.section_index", {"positions": {"section_index": -1, "paragraphs": [0]}}, ()),
    ],
)
@pytest.mark.parametrize(
    ("mode", "leg"),
    [("dense", "dense"), ("sparse", "sparse"), ("hybrid", "dense"), ("hybrid", "sparse")],
)
def test_a_bad_payload_returned_by_the_engine_fails_the_search_naming_the_field(
    samples: EdgeIndex,
    field: str,
    changes: dict[str, Any],
    drop: tuple[str, ...],
    mode: str,
    leg: str,
) -> None:
    index = TamperingIndex(samples, leg, changes, drop)
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())  # type: ignore[arg-type]
    with pytest.raises(PayloadError) as caught:
        retriever.search(QUESTION, SHUTDOWN_RUNBOOK, CallerScope(), k=3, mode=mode)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.point_id == str(index.tampered[0])


def test_an_untampered_search_of_the_same_index_passes(samples: EdgeIndex) -> None:
    # The control for the table above: the same wrapper with nothing changed.
    index = TamperingIndex(samples, "dense", {})
    retriever = Retriever(index, HashingEmbedder(), Bm25Encoder())  # type: ignore[arg-type]
    hits = retriever.search(QUESTION, SHUTDOWN_RUNBOOK, CallerScope(), k=3).hits
    assert hits and {h.payload.document_id for h in hits} == {"worker-shutdown"}


def _search(retriever: Retriever, mode: str, thresholds: Thresholds = Thresholds()) -> list[Hit]:
    vectors = retriever.embed(QUESTION)
    return list(
        retriever.search(
            vectors,
            EVERYTHING,
            CallerScope(),
            k=50,
            mode=mode,  # type: ignore[arg-type]
            thresholds=thresholds,
        ).hits
    )


def test_the_sparse_threshold_alone_decides_which_bm25_hits_remain(samples: EdgeIndex) -> None:
    retriever = Retriever(samples, HashingEmbedder(), Bm25Encoder())
    unfiltered = _search(retriever, "sparse")
    scores = sorted({h.score for h in unfiltered})
    assert len(scores) >= 3
    cut = scores[len(scores) // 2]  # a score some hit has exactly: ">=" keeps it

    kept = _search(retriever, "sparse", Thresholds(sparse=cut))
    assert kept == [h for h in unfiltered if h.score >= cut]
    assert 0 < len(kept) < len(unfiltered)
    assert _search(retriever, "sparse", Thresholds(sparse=scores[-1] + 1e-6)) == []
    # Every other stage's threshold leaves the BM25 leg alone.
    assert _search(retriever, "sparse", Thresholds(dense=1e9, rerank=1e9)) == unfiltered


def test_a_sparse_threshold_above_every_bm25_score_leaves_hybrid_with_the_dense_leg(
    samples: EdgeIndex,
) -> None:
    retriever = Retriever(samples, HashingEmbedder(), Bm25Encoder(), candidates=50)
    dense = _search(retriever, "dense")
    top_sparse = max(h.score for h in _search(retriever, "sparse"))
    both = _search(retriever, "hybrid")
    assert any(h.sparse_score is not None for h in both)

    hybrid = _search(retriever, "hybrid", Thresholds(sparse=top_sparse + 1e-6))
    assert [h.identity for h in hybrid] == [h.identity for h in dense]
    assert [h.score for h in hybrid] == pytest.approx(
        [1 / (60 + r) for r in range(1, 51)][: len(dense)]
    )
    assert all(h.sparse_score is None for h in hybrid)


def _fused_by_hand(dense: Sequence[Hit], sparse: Sequence[Hit], k: int) -> dict[Any, float]:
    fused: dict[Any, float] = {}
    for leg in (dense, sparse):
        for rank, hit in enumerate(leg, start=1):
            fused[hit.identity] = fused.get(hit.identity, 0.0) + 1 / (k + rank)
    return fused


@pytest.mark.parametrize("rrf_k", [0, 1, 10, 60])
def test_rrf_k_sets_the_hybrid_scores(samples: EdgeIndex, rrf_k: int) -> None:
    retriever = Retriever(samples, HashingEmbedder(), Bm25Encoder(), rrf_k=rrf_k, candidates=50)
    expected = _fused_by_hand(_search(retriever, "dense"), _search(retriever, "sparse"), rrf_k)
    hybrid = _search(retriever, "hybrid")
    assert {h.identity: h.score for h in hybrid} == pytest.approx(expected)
    assert [h.identity for h in hybrid] == sorted(expected, key=lambda i: (-expected[i], i))


def test_rrf_k_changes_the_fused_order(samples: EdgeIndex) -> None:
    def order(rrf_k: int) -> list[Any]:
        r = Retriever(samples, HashingEmbedder(), Bm25Encoder(), rrf_k=rrf_k, candidates=50)
        return [h.identity for h in _search(r, "hybrid")]

    assert order(0) != order(60)


@pytest.mark.slow  # the bundled ONNX model embeds the sample corpus
def test_rrf_k_from_settings_reaches_the_retriever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragwright.adapters.sources import load_sources
    from ragwright.pipeline.ingest import ingest
    from ragwright.runtime import embedding_profile, open_index, open_retriever
    from ragwright.settings import load_settings
    from tests.conftest import SAMPLES

    monkeypatch.setenv("RAGWRIGHT_HOME", str(tmp_path))
    settings = load_settings()
    index = open_index(settings, embedding_profile(settings))
    try:
        fused: dict[int, dict[Any, float]] = {}
        for rrf_k in (0, 60):
            monkeypatch.setenv("RAGWRIGHT_RRF_K", str(rrf_k))
            retriever = open_retriever(load_settings(), index)
            if not fused:
                ingest(
                    load_sources([SAMPLES]),
                    policy=settings.chunking_policy(),
                    embedder=retriever.embedder,
                    sparse_encoder=retriever.sparse_encoder,
                    index=index,
                )
            expected = _fused_by_hand(
                _search(retriever, "dense"), _search(retriever, "sparse"), rrf_k
            )
            fused[rrf_k] = {h.identity: h.score for h in _search(retriever, "hybrid")}
            assert fused[rrf_k] == pytest.approx(expected)
    finally:
        index.close()
    assert fused[0] != pytest.approx(fused[60])
