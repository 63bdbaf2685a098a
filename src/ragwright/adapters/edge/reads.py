"""The reads of an open embedded index: points by id, part by part (what verification
reads back), scrolls, counts, facets and the dense and BM25 nearest neighbours, each
engine call under the index's mutex (:meth:`EdgeReads.reading` holds it across several).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ragwright.adapters.edge.engine import edge_filter, stored_point
from ragwright.adapters.edge.files import one_line
from ragwright.adapters.edge.prefetch import prefetch_mapped
from ragwright.errors import IndexDamaged
from ragwright.protocols import IndexPart
from ragwright.types import CollectionContract, PointFilter, SparseVector, StoredPoint

_SCROLL_PAGE = 2048
# Points read back on every open: enough to touch each storage file, cheap at any size.
_SAMPLE_SIZE = 8
_PART_NAMES: dict[IndexPart, str] = {
    "payload": "payload storage",
    "dense": "dense vectors",
    "sparse": "sparse vectors",
}


class EdgeReads:
    """What an open shard answers. :class:`~ragwright.adapters.edge.index.EdgeIndex`
    opens it and sets the state below."""

    path: Path
    contract: CollectionContract
    _shard: qe.EdgeShard
    # Serialises this process's writes against its own reads; see docs/ingestion.md.
    _mutex: threading.RLock

    def reading(self) -> AbstractContextManager[object]:
        """Reads made inside see no write of this process between them: the writes of
        an ingestion running in another thread wait (each engine call is already
        serialised by the same lock), so a query's dense and BM25 legs see one state."""
        return self._mutex

    def read_part(self, ids: Sequence[uuid.UUID], part: IndexPart) -> dict[uuid.UUID, Any]:
        if not ids:
            return {}
        name = self.contract.vector_name if part == "dense" else self.contract.sparse_vector_name
        try:
            with self._mutex:
                if part == "payload":
                    records = self._shard.retrieve(list(ids), True, False)
                else:
                    records = self._shard.retrieve(list(ids), False, [name])
        except Exception as error:  # qdrant-edge reports storage faults as plain Exception
            raise IndexDamaged(str(self.path), _PART_NAMES[part], one_line(error)) from error
        found: dict[uuid.UUID, Any] = {}
        for record in records:
            point_id = record.id if isinstance(record.id, uuid.UUID) else uuid.UUID(str(record.id))
            if part == "payload":
                found[point_id] = record.payload or {}
                continue
            vector: Any = record.vector.get(name) if isinstance(record.vector, dict) else None
            if vector is None:
                continue
            found[point_id] = (
                list(vector)
                if part == "dense"
                else SparseVector(tuple(vector.indices), tuple(vector.values))
            )
        return found

    def payload_index_types(self) -> dict[str, str]:
        """Field name → index type, as the engine reports it."""
        return {
            name: str(info.data_type).rsplit(".", 1)[-1].lower()
            for name, info in self._shard.info().payload_schema.items()
        }

    def retrieve(
        self,
        ids: Sequence[uuid.UUID],
        *,
        with_vectors: bool = False,
        payload_fields: Sequence[str] | None = None,
    ) -> list[StoredPoint]:
        if not ids:
            return []
        with_payload = True if payload_fields is None else (list(payload_fields) or False)
        with self._mutex:
            records = self._shard.retrieve(list(ids), with_payload, with_vectors)
        return [
            stored_point(r.id, r.payload, None, r.vector, self.contract.vector_name)
            for r in records
        ]

    def scroll(
        self,
        point_filter: PointFilter | None = None,
        *,
        payload_fields: Sequence[str] | None = None,
    ) -> Iterator[StoredPoint]:
        offset: Any = None
        with_payload: bool | list[str] = (
            True if payload_fields is None else (list(payload_fields) or False)
        )
        while True:
            try:
                with self._mutex:
                    records, offset = self._shard.scroll(
                        qe.ScrollRequest(
                            offset=offset,
                            limit=_SCROLL_PAGE,
                            filter=edge_filter(point_filter),
                            with_payload=with_payload,
                            with_vector=False,
                        )
                    )
            except Exception as error:  # qdrant-edge reports storage faults as plain Exception
                part = "payload storage" if with_payload else "id tracker"
                raise IndexDamaged(str(self.path), part, one_line(error)) from error
            for record in records:
                yield stored_point(record.id, record.payload, None, None, "")
            if offset is None:
                return

    def prefetch_payloads(self) -> int:
        # Under the mutex: this process's writes (which may make the engine swap
        # segments and their mappings) wait until the advice is given.
        with self._mutex:
            return prefetch_mapped(self.path / "shard")

    def count(self, point_filter: PointFilter | None = None) -> int:
        with self._mutex:
            return self._shard.count(qe.CountRequest(exact=True, filter=edge_filter(point_filter)))

    def facet(
        self,
        field: str,
        point_filter: PointFilter | None = None,
        *,
        exact: bool = True,
        limit: int | None = None,
    ) -> dict[str | int, int]:
        with self._mutex:
            # Every value: a field has at most as many values as matching points.
            limit = max(1, self.count(point_filter)) if limit is None else limit
            response = self._shard.facet(
                qe.FacetRequest(
                    key=field, limit=limit, exact=exact, filter=edge_filter(point_filter)
                )
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
        sparse = qe.SparseVector(list(vector.indices), list(vector.values))
        return self._nearest(sparse, self.contract.sparse_vector_name, point_filter, limit)

    def _nearest(
        self, vector: Any, using: str, point_filter: PointFilter, limit: int
    ) -> list[StoredPoint]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector, using=using),
            filter=edge_filter(point_filter),
            with_payload=True,
            with_vector=False,
        )
        with self._mutex:
            results = self._shard.query(request)
        return [stored_point(r.id, r.payload, r.score, None, "") for r in results]

    def _first_points(self) -> list[StoredPoint]:
        points: list[StoredPoint] = []
        for point in self.scroll(payload_fields=()):
            points.append(point)
            if len(points) == _SAMPLE_SIZE:
                break
        return points
