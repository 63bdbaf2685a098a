"""The writing pass of an ingestion run: stage, switch and verify, slice after slice.

A run's changed documents are written a slice (:data:`~ragwright.pipeline.planning.DOCUMENT_SLICE`
documents) at a time. :func:`ingest_slice` writes one slice (a worker's work item);
:func:`write_slices` writes a run's slices one after another with the embedding calls
of the next ones in flight while one is switched (its state:
:mod:`ragwright.pipeline.writing_pass`). Planning a slice is
:mod:`ragwright.pipeline.planning`; the writer thread's staging is
:mod:`ragwright.pipeline.staging`, its switch :mod:`ragwright.pipeline.switching`. The
steps, the ordering and what a crash leaves are in :mod:`ragwright.pipeline.ingest` and
docs/ingestion.md ("A run, step by step").

Words: a *slice* is a group of a run's documents written together; a *batch* is the
inputs of one embedding call (``batch_size`` of them, ``RAGWRIGHT_BATCH_SIZE``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ragwright.errors import ContractMismatch
from ragwright.pipeline.planning import DocumentKey, ProgressCallback
from ragwright.pipeline.planning_process import start as start_planning
from ragwright.pipeline.switching import Writer
from ragwright.pipeline.writing_pass import SLICES_IN_FLIGHT, WritingPass
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import ChunkingPolicy, SliceReport, SourceDocument

__all__ = ["SLICES_IN_FLIGHT", "SliceContext", "ingest_slice", "write_slices"]


@dataclass(frozen=True, slots=True)
class SliceContext:
    """What a worker needs to ingest one slice of a run: small and JSON-able."""

    chunking_version: str
    staging_avgdl: float

    def to_json(self) -> dict[str, Any]:
        return {"chunking_version": self.chunking_version, "staging_avgdl": self.staging_avgdl}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SliceContext:
        return cls(str(data["chunking_version"]), float(data["staging_avgdl"]))


def ingest_slice(
    documents: Sequence[SourceDocument],
    context: SliceContext,
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    batch_size: int = 64,
    progress: ProgressCallback | None = None,
    phase_hook: Callable[[str, str], None] | None = None,
) -> SliceReport:
    """Write one slice of the run's changed documents: stage, switch, verify.

    Idempotent: a slice run again after a crash reuses the staged points and finishes a
    half-switched document; a document already switched (or written live) is verified
    and still counted as changed, so the run's summary is the same whoever finished the
    slice.
    """
    (report,) = write_slices(
        [documents],
        context,
        policy=policy,
        embedder=embedder,
        sparse_encoder=sparse_encoder,
        index=index,
        batch_size=batch_size,
        progress=progress,
        phase_hook=phase_hook,
    )
    return report


def write_slices(
    slices: Iterable[Sequence[SourceDocument]],
    context: SliceContext,
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    batch_size: int,
    progress: ProgressCallback | None = None,
    phase_hook: Callable[[str, str], None] | None = None,
    shared_in_run: frozenset[str] = frozenset(),
    on_changed: Callable[[Sequence[DocumentKey]], None] | None = None,
    planning_process: bool = False,
) -> list[SliceReport]:
    """Stage, switch and verify each slice of documents; their reports, in order.

    ``batch_size`` is the number of inputs per embedding call (and per staged upsert).
    ``on_changed``, when given, receives each slice's changed documents as soon as the
    slice is verified, and the reports kept leave them out: a run then holds no list of
    every document it changed.

    Up to the embedder's ``in_flight`` embedding calls are outstanding at once, across
    slice boundaries: the next slice is planned (scanned, chunked) as soon as the
    current one's calls are all made, so its calls go out while the current one's last
    calls return and while it is switched and verified. At most
    :data:`SLICES_IN_FLIGHT` slices are held. One writer thread does every index
    write of the pass in order: a slice's staged upserts (each read back), then its
    switch and verify, which starts only once every point of the slice is staged and
    read back. On an index whose upserts are atomic, the points of the slice's new
    documents are not staged: the writer builds them live and the switch writes them in
    one upsert. After one of its writes fails the writer starts nothing more; a failed
    embedding call lets the writer finish what it was handed (staged points, switches of
    slices already staged), which an uninterrupted sequence of slices would also have
    done, and stage the new documents' points built for slices not handed over (nothing
    embedded is lost), then raises. Each embedding call runs in a copy of the caller's context,
    so it spends the caller's deadline.

    ``shared_in_run`` names the document ids the run holds under several tenants: a
    later slice reports such an id as shared with an earlier slice's document even when
    that one is not written yet, as one slice after another would.

    ``planning_process``: read ``slices`` and plan their documents (chunks, payloads,
    lengths, BM25 vectors) in a forked child a slice ahead
    (:mod:`~ragwright.pipeline.planning_process`), which iterates its own copy of
    ``slices``; the index is read and written here either way, and the result is the
    same.
    """
    if context.chunking_version != policy.version:
        raise ContractMismatch("chunking_version", context.chunking_version, policy.version)
    in_flight = max(1, int(getattr(embedder, "in_flight", 1)))
    # Forked before this pass starts any thread of its own.
    planner = (
        start_planning(slices, policy, embedder, sparse_encoder, context.staging_avgdl)
        if planning_process
        else None
    )
    paired = planner.slices() if planner is not None else ((d, None) for d in slices)
    try:
        with (
            ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="ragwright-embed") as pool,
            Writer() as writer,
        ):
            writing = WritingPass(
                iter(paired),
                context.staging_avgdl,
                policy=policy,
                embedder=embedder,
                sparse_encoder=sparse_encoder,
                index=index,
                batch_size=batch_size,
                in_flight=in_flight,
                notify=progress or (lambda _event, _count: None),
                hook=phase_hook or (lambda _doc, _phase: None),
                shared_in_run=shared_in_run,
                pool=pool,
                writer=writer,
                on_changed=on_changed,
            )
            try:
                return writing.run()
            except BaseException:
                writing.keep_embedded()
                raise
            finally:
                writing.cancel()
    finally:
        if planner is not None:
            planner.close()
