"""The writing pass of an ingestion run: stage, switch and verify, slice after slice.

A run's changed documents are written a slice (:data:`~ragwright.pipeline.planning.DOCUMENT_SLICE`
documents) at a time. :func:`ingest_slice` writes one slice (a worker's work item);
:func:`write_slices` writes a run's slices one after another with the embedding calls
of the next ones in flight while one is switched. Planning a slice is
:mod:`ragwright.pipeline.planning`; the writer thread's staging is
:mod:`ragwright.pipeline.staging`, its switch :mod:`ragwright.pipeline.switching`. The
steps, the ordering and what a crash leaves are in :mod:`ragwright.pipeline.ingest` and
docs/ingestion.md ("A run, step by step").

Words: a *slice* is a group of a run's documents written together; a *batch* is the
inputs of one embedding call (``batch_size`` of them, ``RAGWRIGHT_BATCH_SIZE``).
"""

from __future__ import annotations

import contextvars
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from ragwright.deadline import current_bound
from ragwright.errors import (
    ContractMismatch,
    DimensionMismatch,
    EmbeddingProviderError,
    FailureCategory,
)
from ragwright.pipeline.planning import (
    DocumentKey,
    PlannedDocument,
    ProgressCallback,
    SlicePlan,
    plan_slice,
)
from ragwright.pipeline.planning_process import start as start_planning
from ragwright.pipeline.staging import prepare_live, stage_points, stage_prepared
from ragwright.pipeline.switching import Writer, switch_slice
from ragwright.protocols import BULK_EMBEDDING, Embedder, SparseEncoder, VectorIndex
from ragwright.types import ChunkingPolicy, IndexPoint, SliceReport, SourceDocument


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


# Slices the writing pass holds at once: one switching (its plans are needed until it is
# verified) and up to two embedding, so the next slices' embedding calls keep
# ``in_flight`` requests outstanding while a slice is switched and verified.
SLICES_IN_FLIGHT = 3


@dataclass(slots=True, eq=False)
class _HeldSlice:
    """A slice the writing pass holds: its plan, the embedding calls it has left to
    take, the tokens they counted, the staged writes handed to the writer and, once all
    are, its switch. ``direct``: the stored ids of its new documents when the index's
    upserts are atomic, whose points the writer builds live (``live``) instead of
    staging them, for the switch to write in one upsert."""

    plan: SlicePlan
    direct: frozenset[uuid.UUID] = frozenset()
    calls_left: int = 0
    tokens: int = 0
    writes: list[Future[None]] = field(default_factory=list)
    live: list[IndexPoint] = field(default_factory=list)
    switched: Future[SliceReport] | None = None


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
            writing = _WritingPass(
                iter(paired),
                context,
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


class _WritingPass:
    """The state of :func:`write_slices`: slices held, embedding calls not made yet
    and outstanding (in the order they were made), and the reports collected."""

    def __init__(
        self,
        slices: Iterator[tuple[Sequence[SourceDocument], list[PlannedDocument] | None]],
        context: SliceContext,
        *,
        policy: ChunkingPolicy,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        index: VectorIndex,
        batch_size: int,
        in_flight: int,
        notify: ProgressCallback,
        hook: Callable[[str, str], None],
        shared_in_run: frozenset[str],
        pool: ThreadPoolExecutor,
        writer: Writer,
        on_changed: Callable[[Sequence[DocumentKey]], None] | None = None,
    ) -> None:
        self.on_changed = on_changed
        self.slices = slices
        self.context = context
        self.policy = policy
        self.embedder = embedder
        self.sparse_encoder = sparse_encoder
        self.index = index
        self.batch_size = batch_size
        self.in_flight = in_flight
        self.notify = notify
        self.hook = hook
        self.shared_in_run = shared_in_run
        self.pool = pool
        self.writer = writer
        self.held: deque[_HeldSlice] = deque()  # planned, not reported: SLICES_IN_FLIGHT at most
        self.waiting: deque[tuple[_HeldSlice, int]] = deque()  # calls not made (slice, start)
        self.calls: deque[tuple[_HeldSlice, int, Future[list[list[float]]]]] = deque()
        self.earlier: dict[str, set[str | None]] = {}  # tenants of shared ids seen so far
        self.reports: list[SliceReport] = []
        self.more = True

    def run(self) -> list[SliceReport]:
        while True:
            self._make_calls()
            if self.calls:
                self._take_call()
            elif self.held:
                # No call left: every held slice is with the writer; wait for the oldest.
                self._switch_of(self.held[0]).result()
            else:
                return self.reports
            self._collect()

    def keep_embedded(self) -> None:
        """After a failure: stage the new documents' points already embedded but held
        for a switch that will not come, so nothing embedded is lost (the writer runs it
        after what it was handed; nothing, when a write failed)."""
        for held in self.held:
            if held.switched is None and held.direct:
                self.writer.submit(stage_prepared, self.index, held.live)

    def cancel(self) -> None:
        """Cancel the embedding calls not started yet (after a failure)."""
        for _slice, _start, call in self.calls:
            call.cancel()

    def _make_calls(self) -> None:
        """Keep ``in_flight`` calls outstanding, planning the next slice when the held
        ones have no call left to make (and fewer than SLICES_IN_FLIGHT are held)."""
        while len(self.calls) < self.in_flight:
            if self.waiting:
                bound = current_bound()
                if bound is not None and bound.expired:
                    # The run's deadline (RAGWRIGHT_INGEST_DEADLINE) passed: no new call,
                    # whether or not the embedder spends deadlines itself.
                    raise EmbeddingProviderError(
                        self.embedder.profile.provider,
                        FailureCategory.DEADLINE_EXHAUSTED,
                        "the run's deadline passed before the next embedding call",
                    )
                held, start = self.waiting.popleft()
                batch = held.plan.pending[start : start + self.batch_size]
                context = contextvars.copy_context()
                context.run(BULK_EMBEDDING.set, True)
                texts = [p.embedding_input for p in batch]
                call = self.pool.submit(context.run, self.embedder.embed_documents, texts)
                self.calls.append((held, start, call))
            elif not self._plan_next():
                return

    def _plan_next(self) -> bool:
        if not self.more or len(self.held) >= SLICES_IN_FLIGHT:
            return False
        item = next(self.slices, None)
        if item is None:
            self.more = False
            return False
        documents, planned = item
        held = _HeldSlice(
            plan_slice(
                documents,
                self.policy,
                self.embedder,
                self.sparse_encoder,
                self.index,
                self.earlier,
                planned,
            )
        )
        for document in documents:
            if document.document_id in self.shared_in_run:
                self.earlier.setdefault(document.document_id, set()).add(document.tenant)
        if self.index.atomic_upsert:
            # Nothing is stored under a new document's key (not even a staged point of
            # an earlier attempt), so every one of its points is embedded here.
            held.direct = frozenset(
                p.stored_id
                for item in held.plan.work
                if not item.kept and not item.obsolete
                for p in item.plan.points
            )
        self.held.append(held)
        starts = range(0, len(held.plan.pending), self.batch_size)
        held.calls_left = len(starts)
        self.waiting.extend((held, start) for start in starts)
        if not starts:  # nothing to embed (a metadata change, or every point staged)
            self._hand_over(held)
        return True

    def _take_call(self) -> None:
        """Hand the oldest call's vectors to the writer (and, after its slice's last
        call, the slice's switch) or, when no slice can be planned until the oldest
        is switched and that ends first, just collect it."""
        held, start, call = self.calls[0]
        oldest = self.held[0].switched
        if not self.waiting and len(self.held) == SLICES_IN_FLIGHT and oldest is not None:
            either: list[Future[Any]] = [call, oldest]
            wait(either, return_when=FIRST_COMPLETED)
            if not call.done():
                return
        self.calls.popleft()
        vectors = call.result()
        self.writer.check()
        dimensions = self.embedder.profile.dimensions
        for vector in vectors:
            if len(vector) != dimensions:
                raise DimensionMismatch(dimensions, len(vector))
        batch = held.plan.pending[start : start + self.batch_size]
        if self.embedder.counts_tokens:
            held.tokens += sum(held.plan.lengths[start : start + self.batch_size])
        avgdl, encoded = self.context.staging_avgdl, held.plan.encoded
        pairs = list(zip(batch, vectors, strict=True))
        for live in (False, True):  # staged (changed documents), then built live (new ones)
            chosen = [(p, v) for p, v in pairs if (p.stored_id in held.direct) == live]
            if not chosen:
                continue
            points, chosen_vectors = zip(*chosen, strict=True)
            common = (self.sparse_encoder, points, chosen_vectors, avgdl, encoded)
            held.writes.append(
                self.writer.submit(prepare_live, *common, held.live)
                if live
                else self.writer.submit(stage_points, self.index, *common)
            )
        self.notify("embedded", len(batch))
        held.calls_left -= 1
        if held.calls_left == 0:
            self._hand_over(held)

    def _hand_over(self, held: _HeldSlice) -> None:
        held.switched = self.writer.submit(
            switch_slice,
            held.plan,
            held.tokens,
            held.writes,
            self.index,
            self.notify,
            self.hook,
            held.live,
        )

    @staticmethod
    def _switch_of(held: _HeldSlice) -> Future[SliceReport]:
        if held.switched is None:  # pragma: no cover
            raise AssertionError("unreachable: a slice with no call left is handed over")
        return held.switched

    def _collect(self) -> None:
        """Move the reports of the oldest slices that are switched and verified."""
        while self.held and (switched := self.held[0].switched) is not None and switched.done():
            report = switched.result()
            if self.on_changed is not None:
                self.on_changed(report.changed_documents)
                report = replace(report, changed_documents=())
            self.reports.append(report)
            self.held.popleft()
