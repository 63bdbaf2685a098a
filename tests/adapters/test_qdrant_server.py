"""``QdrantIndex`` given a URL: the server path, through qdrant-client's REST transport.

No Qdrant server runs here, so the client talks to :mod:`tests.adapters.qdrant_server`,
an in-process REST double on loopback that records each request and answers with
qdrant-client's local engine. The tests assert what reaches the wire: the eligibility
filter inside the search request, the keyword payload indexes before the first write,
``wait=true`` on every write, and the API key header.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models

from ragwright.adapters.qdrant import QdrantIndex
from ragwright.core.contracts import contract_for
from ragwright.core.points import INTEGER_INDEX_FIELDS, KEYWORD_INDEX_FIELDS
from ragwright.errors import ContractMismatch
from ragwright.testing.conformance import VectorIndexConformance
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import (
    CollectionContract,
    FieldMatch,
    IndexPoint,
    PointFilter,
    SparseVector,
)
from tests.adapters.qdrant_server import QdrantRestDouble, serve_qdrant_double

CONTRACT = contract_for(HASHING_PROFILE, "v1")
COLLECTION = "support-documents"


class TestQdrantServerConformance(VectorIndexConformance):
    """The whole index contract over REST: one double per location, kept for reopening."""

    @pytest.fixture(autouse=True)
    def _doubles(self) -> Iterator[None]:
        self.urls: dict[Path, str] = {}
        with ExitStack() as self.stack:
            yield

    def open_index(
        self, location: Path, contract: CollectionContract, *, add_chunking_version: bool = False
    ) -> QdrantIndex:
        if location not in self.urls:
            self.urls[location], _ = self.stack.enter_context(serve_qdrant_double())
        return QdrantIndex(
            self.urls[location], COLLECTION, contract, add_chunking_version=add_chunking_version
        )


@pytest.fixture
def server() -> Iterator[tuple[str, QdrantRestDouble]]:
    with serve_qdrant_double() as running:
        yield running


def point(seed: int, **payload: str) -> IndexPoint:
    vector = [1.0 if i == seed % 64 else 0.01 for i in range(64)]
    return IndexPoint(
        uuid.UUID(int=seed + 1), vector, dict(payload), SparseVector((seed, 99), (1.0, 1.0))
    )


def test_search_sends_the_filter_inside_the_query(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, double = server
    eligible = PointFilter(
        must=(FieldMatch("publication_state", ("published",)),),
        must_not=(FieldMatch("document_id", ("retired", "withdrawn")),),
        empty=("tenant",),
    )
    with QdrantIndex(url, COLLECTION, CONTRACT) as index:
        index.upsert(
            [
                point(1, publication_state="published", document_id="a"),
                point(2, publication_state="draft", document_id="b"),
                point(3, publication_state="published", document_id="retired"),
            ]
        )
        dense = index.search(point(2).vector, eligible, limit=2)
        sparse = index.search_sparse(SparseVector((99,), (1.0,)), eligible, limit=2)
    # The engine filtered before ranking: the nearest point (a draft) never fills the limit.
    assert [p.payload["document_id"] for p in dense] == ["a"]
    assert [p.payload["document_id"] for p in sparse] == ["a"]
    sent = [r.body for r in double.to("POST", "/points/query")]
    assert [(b["using"], b["limit"]) for b in sent] == [("dense", 2), ("bm25", 2)]
    assert sent[0]["query"] == {"nearest": point(2).vector}
    assert sent[1]["query"] == {"nearest": {"indices": [99], "values": [1.0]}}
    for body in sent:
        assert body["filter"]["must"] == [
            {"key": "publication_state", "match": {"value": "published"}},
            {"is_empty": {"key": "tenant"}},
        ]
        assert body["filter"]["must_not"] == [
            {"key": "document_id", "match": {"any": ["retired", "withdrawn"]}}
        ]


INDEXES = {
    **dict.fromkeys(KEYWORD_INDEX_FIELDS, "keyword"),
    **dict.fromkeys(INTEGER_INDEX_FIELDS, "integer"),
}


def test_payload_indexes_exist_before_the_first_write(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, double = server
    with QdrantIndex(url, COLLECTION, CONTRACT) as index:
        index.upsert([point(1, document_id="a")])
        assert index.payload_index_types() == INDEXES
    order = [(r.method, r.path.rsplit("/", 1)[-1]) for r in double.requests]
    created = [r.body for r in double.to("PUT", "/index")]
    assert created == [{"field_name": f, "field_schema": kind} for f, kind in INDEXES.items()]
    assert order.index(("PUT", "points")) > max(
        i for i, step in enumerate(order) if step == ("PUT", "index")
    )
    # Reopening finds them and creates nothing.
    QdrantIndex(url, COLLECTION, CONTRACT).close()
    assert len(double.to("PUT", "/index")) == len(INDEXES)


def test_a_payload_index_of_another_type_is_a_contract_mismatch(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, _ = server
    QdrantIndex(url, COLLECTION, CONTRACT).close()
    client = QdrantClient(url=url)
    try:
        client.create_payload_index(COLLECTION, "tenant", models.PayloadSchemaType.INTEGER)
    finally:
        client.close()
    with pytest.raises(ContractMismatch) as caught:
        QdrantIndex(url, COLLECTION, CONTRACT)
    assert caught.value.field == "payload_index.tenant"


def test_every_write_waits_for_the_server_to_apply_it(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, double = server
    with QdrantIndex(url, COLLECTION, CONTRACT) as index:
        index.upsert([point(1, document_id="a"), point(2, document_id="b")])
        index.set_payload([uuid.UUID(int=2)], {"document_id": "a2", "note": "x"})
        index.delete_payload_keys([uuid.UUID(int=2)], ["note"])
        index.delete([uuid.UUID(int=3)])
        assert {p.payload["document_id"] for p in index.scroll()} == {"a2"}
    writes = {
        (r.method, r.path.split(COLLECTION, 1)[1]): r.query.get("wait")
        for r in double.requests
        if r.method != "GET"
        and not r.path.endswith(("/query", "/scroll", "/count"))
        and r.path != f"/collections/{COLLECTION}"
    }
    assert writes == {
        ("PUT", "/index"): "true",
        ("PUT", "/points"): "true",
        ("POST", "/points/payload"): "true",
        ("POST", "/points/payload/delete"): "true",
        ("POST", "/points/delete"): "true",
    }


def test_the_api_key_travels_in_the_header_of_every_request(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, double = server
    with pytest.warns(UserWarning, match="insecure connection"):
        index = QdrantIndex(url, COLLECTION, CONTRACT, api_key="s3cret")
    with index:
        index.upsert([point(1, document_id="a")])
        index.search(point(1).vector, PointFilter(), limit=1)
    keyed = [r for r in double.requests if r.path != "/"]
    assert keyed and {r.headers.get("api-key") for r in keyed} == {"s3cret"}
    with QdrantIndex(url, COLLECTION, CONTRACT) as anonymous:
        anonymous.count()
    assert "api-key" not in double.requests[-1].headers


def test_rebuild_deletes_and_recreates_only_its_collection(
    server: tuple[str, QdrantRestDouble],
) -> None:
    url, double = server
    with QdrantIndex(url, COLLECTION, CONTRACT) as index:
        index.upsert([point(1, document_id="a")])
    with QdrantIndex(url, "other", CONTRACT) as other:
        other.upsert([point(2, document_id="b")])
    with QdrantIndex(url, COLLECTION, CONTRACT, rebuild=True) as rebuilt:
        assert rebuilt.count() == 0
        assert rebuilt.payload_index_types() == INDEXES
    with QdrantIndex(url, "other", CONTRACT) as other:
        assert other.count() == 1
    assert [r.path for r in double.to("DELETE", "")] == [f"/collections/{COLLECTION}"]
