"""Held mode: one process keeps the embedded index open and every request shares it.

qdrant-edge lets one process open a shard path, and :class:`~.edge.index.EdgeIndex` takes an
``flock`` so the second opener gets :class:`IndexBusy`. A command that opens the index
per use is fine for the command line, but while ``ragwright ingest`` runs every query of
another process fails. A service (``ragwright serve``) therefore owns the index: it
holds one :class:`HeldIndex` for its lifetime, and each request gets a
:class:`HeldIndexView` of the one shared index instead of opening it.

* **Lazily, under a lock.** The index is opened by the first request that needs it,
  verified once then (count and sample against the manifest); later requests are not
  verified again. A read before the first ingestion is :class:`IndexNotFound`, as today;
  the first write creates the collection and every later request reuses it. An open that
  fails (damaged, another contract, another process holds it) is tried again by the next
  request, and :meth:`HeldIndex.state` reports it as one line instead of raising.
* **Writes commit on the view's close.** Closing a writer's view flushes the shard and
  records the manifest (:meth:`~.edge.index.EdgeIndex.commit`) but keeps the index open, so
  after each ingestion a fresh open (another process, after the service stopped) still
  verifies clean. One writer at a time: a second ingestion of the same process gets
  :class:`IndexBusy` naming it (two would interleave their BM25 statistics and commits).
* **No mix for readers.** Ingestion stages a changed document's new points invisibly
  and switches it with a delete and one payload update, and writes a slice's new
  documents in one upsert; every state between two of its calls shows each document in
  one revision, whole. A query's dense and BM25 legs run inside
  :meth:`~ragwright.protocols.VectorIndex.reading`, the index's own lock, so they see
  one such state (docs/ingestion.md, "Serving while ingesting").
* **A rebuild is refused** while held: it empties the collection that live queries are
  reading. Stop the service and run ``ragwright ingest SOURCES --rebuild``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ragwright.errors import ContractMismatch, IndexBusy, RagwrightError, RequestError
from ragwright.protocols import IndexPart, VectorIndex
from ragwright.types import (
    CollectionContract,
    IndexPoint,
    IndexState,
    LexicalStats,
    PointFilter,
    SparseVector,
    StoredPoint,
)

REBUILD_REFUSED = (
    "refused while this process holds the index for live queries: a rebuild empties the "
    "collection under them; stop the service and run 'ragwright ingest SOURCES --rebuild'"
)


class SharedIndex(VectorIndex, Protocol):
    """An index one process can keep open across requests (:class:`~.edge.index.EdgeIndex`)."""

    def commit(self) -> None:
        """Make what was written durable and committed, keeping the index open."""
        ...

    def add_chunking_version(self, version: str) -> None:
        """Add ``version`` to the contract, as an open that consents to it would."""
        ...


# Opens the shared index: with a chunking version, creating the collection (with that
# version) when it does not exist; with ``None``, an existing one only (IndexNotFound).
SharedOpener = Callable[[str | None], SharedIndex]


class HeldIndex:
    """The one open index of a process, opened on first use, shared by every request."""

    def __init__(self, backend: str, location: str, open_shared: SharedOpener) -> None:
        self.backend = backend
        self.location = location
        self._open_shared = open_shared
        self._opening = threading.Lock()
        self._writer = threading.Lock()
        self._index: SharedIndex | None = None

    def view(
        self,
        chunking_version: str,
        *,
        write: bool,
        add_chunking_version: bool = False,
        any_chunking_version: bool = False,
        rebuild: bool = False,
    ) -> HeldIndexView:
        """A request's view of the shared index, its contract checked for
        ``chunking_version`` as an open would check it (not its integrity: that was
        verified once, when the index was opened).

        Raises:
            RequestError: ``rebuild`` (refused while held).
            IndexNotFound: a read before anything was ingested.
            IndexBusy: ``write`` while another ingestion of this process writes.
            ContractMismatch: the version is not in the contract and no consent to add it.
            IndexDamaged: the first open found the index damaged.
        """
        if rebuild:
            raise RequestError("rebuild", REBUILD_REFUSED)
        index = self._shared(chunking_version if write else None)
        if write and not self._writer.acquire(blocking=False):
            raise IndexBusy(self.location, "another ingestion in this process")
        try:
            held = index.contract.chunking_versions
            if not any_chunking_version and chunking_version not in held:
                if not add_chunking_version:
                    raise ContractMismatch("chunking_versions", chunking_version, list(held))
                index.add_chunking_version(chunking_version)
        except BaseException:
            if write:
                self._writer.release()
            raise
        return HeldIndexView(index, self._writer if write else None)

    def state(self) -> IndexState:
        """Opened or not (trying to open it as a reader would), its count and why it
        is not readable; never raises for an index that cannot be opened."""
        try:
            index = self._shared(None)
        except (RagwrightError, OSError) as error:
            return IndexState(
                self.backend,
                self.location,
                held=True,
                opened=False,
                reason=" ".join(str(error).split()),
                error=type(error).__name__,
            )
        with index.reading():
            points, committed = index.count(), index.committed_points
        return IndexState(
            self.backend,
            self.location,
            held=True,
            opened=True,
            points=points,
            committed_points=committed,
            writing=self._writer.locked(),
        )

    def close(self) -> None:
        """Close the shared index (committing what was written); call it after the
        requests that use it ended."""
        with self._opening:
            index, self._index = self._index, None
        if index is not None:
            index.close()

    def _shared(self, create_version: str | None) -> SharedIndex:
        with self._opening:
            if self._index is None:
                self._index = self._open_shared(create_version)
            return self._index


class HeldIndexView:
    """One request's handle on the held index: every call goes to the shared index.

    ``close`` never closes it: a writer's view commits what it wrote and lets the next
    ingestion in; a reader's does nothing.
    """

    def __init__(self, index: SharedIndex, writer: threading.Lock | None) -> None:
        self._index = index
        self._writer = writer

    @property
    def contract(self) -> CollectionContract:
        return self._index.contract

    @property
    def committed_points(self) -> int | None:
        return self._index.committed_points

    def read_part(self, ids: Sequence[uuid.UUID], part: IndexPart) -> dict[uuid.UUID, Any]:
        return self._index.read_part(ids, part)

    @property
    def atomic_upsert(self) -> bool:
        return self._index.atomic_upsert

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        self._index.upsert(points)

    def retrieve(
        self,
        ids: Sequence[uuid.UUID],
        *,
        with_vectors: bool = False,
        payload_fields: Sequence[str] | None = None,
    ) -> list[StoredPoint]:
        return self._index.retrieve(ids, with_vectors=with_vectors, payload_fields=payload_fields)

    def scroll(
        self,
        point_filter: PointFilter | None = None,
        *,
        payload_fields: Sequence[str] | None = None,
    ) -> Iterator[StoredPoint]:
        return self._index.scroll(point_filter, payload_fields=payload_fields)

    def set_payload(self, ids: Sequence[uuid.UUID], payload: Mapping[str, Any]) -> None:
        self._index.set_payload(ids, payload)

    def delete_payload_keys(self, ids: Sequence[uuid.UUID], keys: Sequence[str]) -> None:
        self._index.delete_payload_keys(ids, keys)

    def delete(self, ids: Sequence[uuid.UUID]) -> None:
        self._index.delete(ids)

    def count(self, point_filter: PointFilter | None = None) -> int:
        return self._index.count(point_filter)

    def facet(
        self,
        field: str,
        point_filter: PointFilter | None = None,
        *,
        exact: bool = True,
        limit: int | None = None,
    ) -> dict[str | int, int]:
        return self._index.facet(field, point_filter, exact=exact, limit=limit)

    def prefetch_payloads(self) -> int:
        return self._index.prefetch_payloads()

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        return self._index.search(vector, point_filter, limit=limit)

    def search_sparse(
        self, vector: SparseVector, point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        return self._index.search_sparse(vector, point_filter, limit=limit)

    def update_sparse(self, vectors: Sequence[tuple[uuid.UUID, SparseVector]]) -> None:
        self._index.update_sparse(vectors)

    def record_lexical_stats(self, stats: LexicalStats) -> None:
        self._index.record_lexical_stats(stats)

    def reading(self) -> AbstractContextManager[object]:
        return self._index.reading()

    def close(self) -> None:
        """A writer's view commits and lets the next writer in (once); the shared
        index stays open."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            self._index.commit()
        finally:
            writer.release()

    def __enter__(self) -> HeldIndexView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
