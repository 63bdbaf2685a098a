"""``QdrantIndex``: a collection on a Qdrant server or cluster, through qdrant-client.

``location`` is a server URL (``http://host:6333``), or for tests and small setups a
directory path or ``:memory:`` (qdrant-client's pure-Python local mode). The contract is
stored as collection metadata. In local mode payload indexes do not exist (the client
warns that they have no effect), so they are created only on a server, where an existing
index of the wrong type is a contract mismatch.

Writes pass ``wait=True``. Between two separate requests a server gives no atomicity;
ingestion orders its operations so a concurrent reader sees at most a momentary gap in a
document being replaced, never a mix of two revisions (docs/ingestion.md).

Integrity on open is a sample read back (dense vectors of the contract's size and
finite, sparse vectors readable), not a count against a manifest: several writers may
share a server collection with no lock between them, so a count one of them recorded
at its close would be stale by the next's, and the server keeps its own WAL and
reports its storage faults itself. ``committed_points`` is therefore ``None``;
``ragwright verify`` still reads every point. ``rebuild=True`` deletes this collection
(and no other) before opening.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException

from ragwright.core.contracts import (
    contract_from_metadata,
    contract_to_metadata,
    reconcile_contract,
)
from ragwright.core.points import INTEGER_INDEX_FIELDS, KEYWORD_INDEX_FIELDS
from ragwright.errors import ContractMismatch, IndexDamaged, IndexNotFound, IndexUnavailable
from ragwright.protocols import IndexPart
from ragwright.types import (
    CollectionContract,
    IndexPoint,
    LexicalStats,
    PointFilter,
    SparseVector,
    StoredPoint,
)

_DISTANCES = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
}
_SCROLL_PAGE = 1024
_SAMPLE_SIZE = 8


class QdrantIndex:
    """A collection named ``collection`` at ``location`` (created on first open)."""

    def __init__(
        self,
        location: str,
        collection: str,
        contract: CollectionContract,
        *,
        api_key: str | None = None,
        add_chunking_version: bool = False,
        create: bool = True,
        rebuild: bool = False,
        verify: bool = True,
    ) -> None:
        self.local = not location.startswith(("http://", "https://"))
        if location == ":memory:":
            self._client = QdrantClient(location=":memory:")
        elif self.local:
            self._client = QdrantClient(path=location)
        else:
            # The client's version check runs in a thread of its own and warns on stderr
            # whenever it ends before the process does: a server that is down then gave
            # three lines instead of the one fault line (seen in CI), a race, not a
            # check. The collection contract is checked on every open instead.
            self._client = QdrantClient(url=location, api_key=api_key, check_compatibility=False)
        self.collection = collection
        self.location = location
        self.committed_points: int | None = None
        try:
            if not create and not self._client.collection_exists(collection):
                raise IndexNotFound(f"{location} collection {collection}")
            if rebuild and self._client.collection_exists(collection):
                self._client.delete_collection(collection)
            self.contract = self._open(contract, add_chunking_version)
            if verify:
                self._verify_sample()
        except ResponseHandlingException as error:
            # The index is required: a server that does not answer ends the command.
            self._client.close()
            raise IndexUnavailable(location, str(error)) from error
        except BaseException:
            self._client.close()
            raise

    def _open(self, expected: CollectionContract, add_chunking_version: bool) -> CollectionContract:
        if not self._client.collection_exists(self.collection):
            self._client.create_collection(
                self.collection,
                vectors_config={
                    expected.vector_name: models.VectorParams(
                        size=expected.dimensions, distance=_DISTANCES[expected.distance]
                    )
                },
                sparse_vectors_config={
                    expected.sparse_vector_name: models.SparseVectorParams(
                        modifier=models.Modifier.IDF
                    )
                },
                metadata=contract_to_metadata(expected),
            )
            contract = expected
        else:
            info = self._client.get_collection(self.collection)
            stored = contract_from_metadata(info.config.metadata or {})
            contract = reconcile_contract(
                expected,
                stored,
                add_chunking_version=add_chunking_version,
                empty=not info.points_count,
            )
            vectors = info.config.params.vectors
            params = vectors.get(contract.vector_name) if isinstance(vectors, dict) else None
            if params is None:
                raise ContractMismatch("vector_name", contract.vector_name, vectors)
            if params.size != contract.dimensions:
                raise ContractMismatch("dimensions", contract.dimensions, params.size)
            if params.distance != _DISTANCES[contract.distance]:
                raise ContractMismatch("distance", contract.distance, str(params.distance))
            sparse = (info.config.params.sparse_vectors or {}).get(contract.sparse_vector_name)
            if sparse is None or sparse.modifier != models.Modifier.IDF:
                raise ContractMismatch(
                    "sparse_vectors", {contract.sparse_vector_name: "idf"}, str(sparse)
                )
            if contract != stored:
                self._client.update_collection(
                    self.collection, metadata=contract_to_metadata(contract)
                )
        if not self.local:
            self._ensure_payload_indexes()
        return contract

    def _verify_sample(self) -> None:
        records, _ = self._client.scroll(
            self.collection, limit=_SAMPLE_SIZE, with_payload=False, with_vectors=False
        )
        sample = [uuid.UUID(str(r.id)) for r in records]
        for point_id, vector in self.read_part(sample, "dense").items():
            if len(vector) != self.contract.dimensions or not all(map(math.isfinite, vector)):
                raise IndexDamaged(
                    f"{self.location} collection {self.collection}",
                    "dense vectors",
                    f"point {point_id} has {len(vector)} values or a non-finite one",
                )
        self.read_part(sample, "sparse")

    def read_part(self, ids: Sequence[uuid.UUID], part: IndexPart) -> dict[uuid.UUID, Any]:
        if not ids:
            return {}
        name = self.contract.vector_name if part == "dense" else self.contract.sparse_vector_name
        records = self._client.retrieve(
            self.collection,
            ids=[str(i) for i in ids],
            with_payload=part == "payload",
            with_vectors=False if part == "payload" else [name],
        )
        found: dict[uuid.UUID, Any] = {}
        for record in records:
            point_id = uuid.UUID(str(record.id))
            if part == "payload":
                found[point_id] = record.payload or {}
                continue
            vector = record.vector.get(name) if isinstance(record.vector, dict) else None
            if vector is None:
                continue
            if isinstance(vector, models.SparseVector):
                found[point_id] = SparseVector(tuple(vector.indices), tuple(vector.values))
            else:
                found[point_id] = list(vector)
        return found

    def _ensure_payload_indexes(self) -> None:
        schema = self._client.get_collection(self.collection).payload_schema
        wanted = [(field, models.PayloadSchemaType.KEYWORD) for field in KEYWORD_INDEX_FIELDS] + [
            (field, models.PayloadSchemaType.INTEGER) for field in INTEGER_INDEX_FIELDS
        ]
        for field, kind in wanted:
            info = schema.get(field)
            if info is None:
                self._client.create_payload_index(self.collection, field, kind, wait=True)
            elif info.data_type != kind:
                raise ContractMismatch(f"payload_index.{field}", kind.value, str(info.data_type))

    def payload_index_types(self) -> dict[str, str]:
        """Field name → index type, as the server reports it (empty in local mode)."""
        schema = self._client.get_collection(self.collection).payload_schema
        return {name: str(info.data_type.value).lower() for name, info in schema.items()}

    # A server splits one request's points across the collection's shards (and local
    # mode persists point by point): no promise that a crash leaves all or none.
    atomic_upsert = False

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        self._client.upsert(
            self.collection,
            points=[
                models.PointStruct(
                    id=str(p.point_id), vector=self._vectors(p), payload=dict(p.payload)
                )
                for p in points
            ],
            wait=True,
        )

    def _vectors(self, point: IndexPoint) -> dict[str, Any]:
        vectors: dict[str, Any] = {self.contract.vector_name: list(point.vector)}
        if point.sparse is not None and point.sparse.indices:
            vectors[self.contract.sparse_vector_name] = models.SparseVector(
                indices=list(point.sparse.indices), values=list(point.sparse.values)
            )
        return vectors

    def update_sparse(self, vectors: Sequence[tuple[uuid.UUID, SparseVector]]) -> None:
        if not vectors:
            return
        name = self.contract.sparse_vector_name
        self._client.update_vectors(
            self.collection,
            points=[
                models.PointVectors(
                    id=str(pid),
                    vector={
                        name: models.SparseVector(indices=list(v.indices), values=list(v.values))
                    },
                )
                for pid, v in vectors
            ],
            wait=True,
        )

    def record_lexical_stats(self, stats: LexicalStats) -> None:
        contract = dataclasses.replace(self.contract, lexical_stats=stats)
        self._client.update_collection(self.collection, metadata=contract_to_metadata(contract))
        self.contract = contract

    def retrieve(
        self,
        ids: Sequence[uuid.UUID],
        *,
        with_vectors: bool = False,
        payload_fields: Sequence[str] | None = None,
    ) -> list[StoredPoint]:
        if not ids:
            return []
        records = self._client.retrieve(
            self.collection,
            ids=[str(i) for i in ids],
            with_payload=True if payload_fields is None else (list(payload_fields) or False),
            with_vectors=with_vectors,
        )
        return [self._stored(r.id, r.payload, None, r.vector) for r in records]

    def scroll(
        self,
        point_filter: PointFilter | None = None,
        *,
        payload_fields: Sequence[str] | None = None,
    ) -> Iterator[StoredPoint]:
        offset: Any = None
        while True:
            records, offset = self._client.scroll(
                self.collection,
                scroll_filter=_client_filter(point_filter),
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=True if payload_fields is None else (list(payload_fields) or False),
                with_vectors=False,
            )
            for record in records:
                yield self._stored(record.id, record.payload, None, None)
            if offset is None:
                return

    def set_payload(self, ids: Sequence[uuid.UUID], payload: Mapping[str, Any]) -> None:
        if ids:
            self._client.set_payload(
                self.collection, payload=dict(payload), points=[str(i) for i in ids], wait=True
            )

    def delete_payload_keys(self, ids: Sequence[uuid.UUID], keys: Sequence[str]) -> None:
        if ids and keys:
            self._client.delete_payload(
                self.collection, keys=list(keys), points=[str(i) for i in ids], wait=True
            )

    def delete(self, ids: Sequence[uuid.UUID]) -> None:
        if ids:
            self._client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=[str(i) for i in ids]),
                wait=True,
            )

    def count(self, point_filter: PointFilter | None = None) -> int:
        return self._client.count(
            self.collection, count_filter=_client_filter(point_filter), exact=True
        ).count

    def prefetch_payloads(self) -> int:
        # The server (or the client's local mode) holds its storage: nothing to read ahead here.
        return 0

    def facet(
        self,
        field: str,
        point_filter: PointFilter | None = None,
        *,
        exact: bool = True,
        limit: int | None = None,
    ) -> dict[str | int, int]:
        # Every value: a field has at most as many values as matching points.
        limit = max(1, self.count(point_filter)) if limit is None else limit
        response = self._client.facet(
            self.collection,
            key=field,
            facet_filter=_client_filter(point_filter),
            limit=limit,
            exact=exact,
        )
        return {hit.value: hit.count for hit in response.hits if not isinstance(hit.value, bool)}

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        return self._nearest(list(vector), self.contract.vector_name, point_filter, limit)

    def search_sparse(
        self, vector: SparseVector, point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        if not vector.indices:
            return []
        sparse = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        return self._nearest(sparse, self.contract.sparse_vector_name, point_filter, limit)

    def _nearest(
        self, vector: Any, using: str, point_filter: PointFilter, limit: int
    ) -> list[StoredPoint]:
        response = self._client.query_points(
            self.collection,
            query=vector,
            using=using,
            query_filter=_client_filter(point_filter),
            limit=limit,
            with_payload=True,
        )
        return [self._stored(p.id, p.payload, p.score, None) for p in response.points]

    def reading(self) -> AbstractContextManager[object]:
        """Nothing to hold: a server applies other processes' writes between any two
        requests, and this client takes no lock of its own."""
        return nullcontext()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> QdrantIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stored(self, point_id: Any, payload: Any, score: float | None, vector: Any) -> StoredPoint:
        dense = vector.get(self.contract.vector_name) if isinstance(vector, dict) else vector
        return StoredPoint(
            point_id=uuid.UUID(str(point_id)),
            payload=payload or {},
            score=score,
            vector=list(dense) if dense is not None else None,
        )


def _client_filter(point_filter: PointFilter | None) -> models.Filter | None:
    if point_filter is None or not (
        point_filter.must or point_filter.must_not or point_filter.empty
    ):
        return None

    def condition(key: str, values: tuple[str, ...]) -> models.FieldCondition:
        match: models.MatchValue | models.MatchAny = (
            models.MatchValue(value=values[0])
            if len(values) == 1
            else models.MatchAny(any=list(values))
        )
        return models.FieldCondition(key=key, match=match)

    must: list[Any] = [condition(m.key, m.values) for m in point_filter.must]
    must += [
        models.IsEmptyCondition(is_empty=models.PayloadField(key=key)) for key in point_filter.empty
    ]
    return models.Filter(
        must=must or None,
        must_not=[condition(m.key, m.values) for m in point_filter.must_not] or None,
    )
