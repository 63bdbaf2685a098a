"""The state of one writing pass (:func:`~ragwright.pipeline.writing.write_slices`):
the slices it holds, the embedding calls not made yet and outstanding, and what it hands
to the writer thread (staged batches, new documents' live points, each slice's switch).
``staging_avgdl`` is the BM25 mean length new points are encoded against.
"""

from __future__ import annotations

import contextvars
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from ragwright.deadline import current_bound
from ragwright.errors import DimensionMismatch, EmbeddingProviderError, FailureCategory
from ragwright.pipeline.planning import (
    DocumentKey,
    PlannedDocument,
    ProgressCallback,
    SlicePlan,
    plan_slice,
)
from ragwright.pipeline.staging import prepare_live, stage_points, stage_prepared
from ragwright.pipeline.switching import Writer, switch_slice
from ragwright.protocols import BULK_EMBEDDING, Embedder, SparseEncoder, VectorIndex
from ragwright.types import ChunkingPolicy, IndexPoint, SliceReport, SourceDocument

# Slices the writing pass holds at once: one switching (its plans are needed until it is
# verified) and up to two embedding, so the next slices' embedding calls keep
# ``in_flight`` requests outstanding while a slice is switched and verified.
SLICES_IN_FLIGHT = 3


@dataclass(slots=True, eq=False)
class HeldSlice:
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


class WritingPass:
    """The state of :func:`~ragwright.pipeline.writing.write_slices`: slices held,
    embedding calls not made yet and outstanding (in the order they were made), and the
    reports collected."""

    def __init__(
        self,
        slices: Iterator[tuple[Sequence[SourceDocument], list[PlannedDocument] | None]],
        staging_avgdl: float,
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
        self.staging_avgdl = staging_avgdl
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
        self.held: deque[HeldSlice] = deque()  # planned, not reported: SLICES_IN_FLIGHT at most
        self.waiting: deque[tuple[HeldSlice, int]] = deque()  # calls not made (slice, start)
        self.calls: deque[tuple[HeldSlice, int, Future[list[list[float]]]]] = deque()
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
        held = HeldSlice(
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
        avgdl, encoded = self.staging_avgdl, held.plan.encoded
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

    def _hand_over(self, held: HeldSlice) -> None:
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
    def _switch_of(held: HeldSlice) -> Future[SliceReport]:
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
