from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.rerankers import HttpReranker
from ragwright.core.documents import validate_document
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.fusion import rrf
from ragwright.errors import ContractMismatch, PayloadError
from ragwright.pipeline.retrieve import Retriever, Thresholds
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, FieldMatch, PointFilter, SourceDocument, SourceSection
from tests.pipeline.indexes import hashing_index

POLICY = ChunkingPolicy()
PUBLISHED_RUNBOOKS = Eligibility(chunking_version=POLICY.version)
QUESTION = "Should I drain all queued work during shutdown?"


@pytest.fixture
def samples(tmp_path: Path) -> Iterator[EdgeIndex]:
    index = hashing_index(tmp_path / "samples")
    yield index
    index.close()


def retriever(index: EdgeIndex, **kwargs: Any) -> Retriever:
    return Retriever(index, HashingEmbedder(), Bm25Encoder(), **kwargs)


def note(document_id: str, text: str, **meta: Any) -> SourceDocument:
    fields: dict[str, Any] = {
        "document_id": document_id,
        "title": "T",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [SourceSection("s", "Notes", (text,))],
    }
    fields.update(meta)
    return validate_document(**fields)


@pytest.mark.parametrize(
    ("types", "states", "ids", "expected"),
    [
        (("runbook",), ("published",), (), {"worker-shutdown"}),
        (("runbook",), ("draft",), (), {"worker-shutdown-draft"}),
        (("note",), ("published",), (), {"queue-capacity-note"}),
        (("runbook",), ("published",), ("worker-shutdown-draft",), set()),
    ],
)
@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_the_seeds_eligibility_table(
    samples: EdgeIndex,
    types: tuple[str, ...],
    states: tuple[str, ...],
    ids: tuple[str, ...],
    expected: set[str],
    mode: str,
) -> None:
    eligibility = Eligibility(POLICY.version, types, states, ids)
    result = retriever(samples).search(
        "drain queued jobs within the shutdown deadline",
        eligibility,
        CallerScope(),
        k=3,
        mode=mode,  # type: ignore[arg-type]
    )
    top = {h.payload.document_id for h in result.hits[:1]}
    assert top == expected
    assert result.no_eligible_evidence == (not expected)
    for hit in result.hits:
        assert hit.payload.document_type in types and hit.payload.publication_state in states


def test_filter_applies_inside_the_query_not_after(tmp_path: Path) -> None:
    """Twenty drafts match the question better than the one published runbook."""
    drafts = [note(f"draft-{i}", QUESTION, publication_state="draft") for i in range(20)]
    published = note("published", "Rotate the certificate before it expires.")
    with hashing_index(tmp_path / "i", [*drafts, published]) as index:
        for mode in ("dense", "sparse", "hybrid"):
            result = retriever(index).search(
                QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=1, mode=mode
            )  # type: ignore[arg-type]
            if mode == "sparse":
                assert result.no_eligible_evidence  # no shared term with the published text
            else:
                assert [h.payload.document_id for h in result.hits] == ["published"]


def test_tenant_scope_isolates_documents(tmp_path: Path) -> None:
    docs = [
        note("acme-doc", QUESTION, tenant="acme"),
        note("globex-doc", QUESTION, tenant="globex"),
        note("shared-doc", QUESTION),
    ]
    with hashing_index(tmp_path / "i", docs) as index:

        def ids(scope: CallerScope) -> set[str]:
            return {
                h.payload.document_id
                for h in retriever(index).search(QUESTION, PUBLISHED_RUNBOOKS, scope, k=10).hits
            }

        assert ids(CallerScope(tenant="acme")) == {"acme-doc"}
        assert ids(CallerScope()) == {"shared-doc"}
        assert ids(CallerScope(tenant="acme", allowed_documents=("globex-doc",))) == set()
        assert ids(CallerScope(allowed_documents=())) == set()


def test_a_payload_violating_the_contract_fails_closed(samples: EdgeIndex) -> None:
    # The seeds' warning: a keyword filter also matches an element of an array.
    hits = retriever(samples).search(QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=1).hits
    samples.set_payload([hits[0].payload.point_id], {"publication_state": ["published", "draft"]})
    with pytest.raises(PayloadError) as caught:
        retriever(samples).search(QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=5)
    assert caught.value.field == "publication_state"


def test_staged_points_are_invisible(samples: EdgeIndex) -> None:
    live = samples.count(PointFilter(must=(FieldMatch("document_id", ("worker-shutdown",)),)))
    ids = [
        p.point_id
        for p in samples.scroll(
            PointFilter(must=(FieldMatch("document_id", ("worker-shutdown",)),))
        )
    ]
    samples.set_payload(ids, {"index_state": "staged"})
    result = retriever(samples).search(QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=5)
    assert live == 3
    assert "worker-shutdown" not in {h.payload.document_id for h in result.hits}


def test_hybrid_is_rrf_of_the_two_legs(samples: EdgeIndex) -> None:
    r = retriever(samples, candidates=50)
    everything = Eligibility(POLICY.version, ("runbook", "note"), ("published", "draft"))
    vectors = r.embed(QUESTION)
    dense = r.search(vectors, everything, CallerScope(), k=50, mode="dense").hits
    sparse = r.search(vectors, everything, CallerScope(), k=50, mode="sparse").hits
    hybrid = r.search(vectors, everything, CallerScope(), k=5, mode="hybrid").hits
    expected = rrf([[h.identity for h in dense], [h.identity for h in sparse]], k=60)
    assert [h.identity for h in hybrid] == [i for i, _ in expected[:5]]
    assert [h.score for h in hybrid] == pytest.approx([s for _, s in expected[:5]])


def test_identical_scores_break_ties_by_identity(samples: EdgeIndex) -> None:
    both = Eligibility(POLICY.version, ("runbook",), ("published", "draft"))
    hits = retriever(samples).search(QUESTION, both, CallerScope(), k=6, mode="dense").hits
    # The draft is a copy of the runbook: equal scores, ordered by document id.
    pairs = {}
    for hit in hits:
        pairs.setdefault(hit.payload.chunk_id, []).append(hit.payload.document_id)
    for documents in pairs.values():
        assert documents == sorted(documents)


class RecordingReranker:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def rerank(self, question: str, texts: Sequence[str]) -> list[float]:
        self.seen.extend(texts)
        return [float(len(t)) for t in texts]  # longest text first


def test_reranker_reorders_only_eligible_hits(samples: EdgeIndex) -> None:
    reranker = RecordingReranker()
    result = retriever(samples, reranker=reranker).search(
        QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=3
    )
    eligible = {
        p.payload["text"]
        for p in samples.scroll()
        if p.payload["publication_state"] == "published" and p.payload["document_type"] == "runbook"
    }
    assert set(reranker.seen) <= eligible
    lengths = [len(h.payload.text) for h in result.hits]
    assert lengths == sorted(lengths, reverse=True)
    assert all(h.rerank_score is not None for h in result.hits)


def test_thresholds_apply_per_stage(samples: EdgeIndex) -> None:
    r = retriever(samples)
    strict = r.search(
        QUESTION,
        PUBLISHED_RUNBOOKS,
        CallerScope(),
        k=5,
        mode="dense",
        thresholds=Thresholds(dense=0.999),
    )
    assert strict.no_eligible_evidence
    loose = r.search(
        QUESTION,
        PUBLISHED_RUNBOOKS,
        CallerScope(),
        k=5,
        mode="dense",
        thresholds=Thresholds(dense=-1.0),
    )
    assert loose.hits
    fused = r.search(
        QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=5, thresholds=Thresholds(fusion=1.0)
    )
    assert fused.no_eligible_evidence


def test_a_query_with_another_profile_is_refused(samples: EdgeIndex) -> None:
    other = dataclasses.replace(HASHING_PROFILE, profile_id="other-v1")
    with pytest.raises(ContractMismatch) as caught:
        Retriever(samples, HashingEmbedder(profile=other), Bm25Encoder())
    assert caught.value.field == "embedding_profile_id"


def test_timings_are_reported_per_stage(samples: EdgeIndex) -> None:
    result = retriever(samples).search(QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=3)
    assert set(result.timings_ms) >= {"embed", "search", "validate", "fuse"}


class _RerankHandler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _RerankHandler.requests.append({"path": self.path, **body})
        results = [
            {"index": i, "relevance_score": -len(d)} for i, d in enumerate(body["documents"])
        ]
        payload = json.dumps({"results": list(reversed(results))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def rerank_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _RerankHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_reranker_against_a_local_server(rerank_server: str, samples: EdgeIndex) -> None:
    reranker = HttpReranker(rerank_server, model="bge-reranker")
    assert reranker.rerank("q", ["aaa", "a", "aa"]) == [-3.0, -1.0, -2.0]
    request = _RerankHandler.requests[-1]
    assert request == {
        "path": "/rerank",
        "query": "q",
        "documents": ["aaa", "a", "aa"],
        "top_n": 3,
        "model": "bge-reranker",
    }
    result = retriever(samples, reranker=reranker).search(
        QUESTION, PUBLISHED_RUNBOOKS, CallerScope(), k=3
    )
    lengths = [len(h.payload.text) for h in result.hits]
    assert lengths == sorted(lengths)
    reranker.close()


def test_bi_encoder_reranker_scores_by_cosine_of_question_and_text() -> None:
    from ragwright.adapters.rerankers import BiEncoderReranker

    embedder = HashingEmbedder()
    texts = ["drain the queue before shutdown", "refunds take ten days", "queue"]
    scores = BiEncoderReranker(embedder).rerank("drain queue shutdown", texts)
    query = embedder.embed_query("drain queue shutdown")
    expected = [
        sum(a * b for a, b in zip(query, embedder.embed_query(t), strict=True)) for t in texts
    ]
    assert scores == pytest.approx(expected, abs=1e-6)
    assert scores[0] > scores[1]
