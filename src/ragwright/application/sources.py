"""The documents an ingestion run reads, and the guard ``--rebuild`` passes first.

Sources are streamed: each pass reads them one file at a time, so the corpus is never
held (docs/ingestion.md, "Memory"). A rebuild empties the collection, so it is refused on
bad input and while the collection holds tenants the run does not ingest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragwright.application.components import (
    DocumentStream,
    LoadedSources,
    OpenIndex,
    ReadSources,
)
from ragwright.application.requests.corpus import IngestRequest
from ragwright.errors import (
    ContractMismatch,
    IndexDamaged,
    IndexNotFound,
    SourceError,
    VectorIndexError,
)
from ragwright.types import SourceDocument


class Sources:
    """Reads a request's sources (loaded whole or streamed) and guards rebuilds."""

    def __init__(
        self,
        load: ReadSources[LoadedSources],
        stream: ReadSources[DocumentStream],
        open_index: OpenIndex,
    ) -> None:
        self._load = load
        self._stream = stream
        self._open_index = open_index

    def stream_documents(self, request: IngestRequest) -> DocumentStream:
        """The documents of :meth:`load_documents`, read and validated one file at a time
        on each iteration (what ``ingest`` indexes; see :class:`DocumentStream`)."""
        return self._stream(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
            tenant=request.tenant,
        )

    def load_documents(self, request: IngestRequest) -> LoadedSources:
        """The validated documents ``request.sources`` hold (what ``ingest`` would index;
        ``ingest --server`` sends them to a service)."""
        return self._load(
            request.sources,
            document_type=request.document_type,
            publication_state=request.publication_state,
            skip_invalid=request.skip_invalid,
            tenant=request.tenant,
        )

    def open(
        self, request: IngestRequest, version: str
    ) -> tuple[Iterable[SourceDocument], DocumentStream | None]:
        """The run's documents: the request's, or its sources streamed (then also the
        stream, for what it skipped), with ``--rebuild`` checked.

        They are read once here, keeping nothing, before the index is opened for
        writing, so invalid or missing sources leave no index behind (``--rebuild``'s
        check made that pass already).
        """
        stream = None if request.documents else self.stream_documents(request)
        documents = request.documents if stream is None else stream
        self.check_rebuild(request, documents, stream, version)
        if stream is not None and not request.rebuild:
            for _ in stream:
                pass
        return documents, stream

    def check_rebuild(
        self,
        request: IngestRequest,
        documents: Iterable[SourceDocument],
        sources: Any,
        version: str,
    ) -> None:
        """Refuse ``--rebuild`` on bad input or across tenants.

        One pass over ``documents`` keeping only their tenants; ``sources`` (a stream or
        loaded sources, or ``None``) then tells how many documents were invalid.
        """
        if not request.rebuild:
            return
        tenants = {d.tenant for d in documents}
        invalid = () if sources is None else sources.invalid
        if invalid or not tenants:
            # The sources are about to become the whole index: never on bad input.
            raise SourceError(
                ", ".join(str(s) for s in request.sources),
                f"--rebuild refused: {len(invalid)} invalid documents"
                if invalid
                else "--rebuild refused: the sources hold no documents",
            )
        scope = tenants | ({request.tenant} if request.tenant is not None else set())
        self._refuse_across_tenants(version, scope, request.sources)

    def _refuse_across_tenants(
        self, version: str, scope: set[str | None], sources: tuple[Path, ...]
    ) -> None:
        """A rebuild empties the collection: refuse it while the collection still reads
        and holds documents of tenants outside the run's scope (tenant scope applies to
        deletes; untenanted documents are outside a run whose sources hold none). A
        damaged or missing index cannot be read, so the sources decide (a rebuild is the
        recovery from damage)."""
        try:
            index = self._open_index(version, write=False, any_chunking_version=True, verify=False)
        except (IndexDamaged, IndexNotFound, ContractMismatch):
            return  # unreadable, empty or built under another contract: the sources decide
        try:
            outside = _tenants_outside(
                index.scroll(payload_fields=("tenant", "document_id")), scope
            )
        except IndexDamaged:
            return  # a stored part does not read back: the rebuild is its recovery
        except Exception as error:  # anything else: refuse (fail closed), never delete blind
            raise VectorIndexError(
                "--rebuild refused: cannot read which tenants the collection holds "
                f"({type(error).__name__}: {' '.join(str(error).split())}); nothing was "
                "deleted; run it again once the index answers"
            ) from error
        finally:
            index.close()
        if outside:
            named = ", ".join(f"{t} ({n} chunks)" for t, n in sorted(outside.items()))
            raise SourceError(
                ", ".join(str(s) for s in sources),
                f"--rebuild refused: the collection also holds tenants this run does not "
                f"ingest: {named}; rebuild from sources covering every tenant, or ingest "
                "without --rebuild",
            )


def _tenants_outside(points: Iterable[Any], scope: set[str | None]) -> Counter[str]:
    """Chunks per tenant outside ``scope`` (any failure to read them is the caller's:
    not knowing whom a rebuild deletes is no licence to delete everyone)."""
    outside: Counter[str] = Counter()
    for point in points:
        tenant = point.payload.get("tenant")
        if tenant not in scope:
            outside[str(tenant) if tenant is not None else "(untenanted)"] += 1
    return outside
