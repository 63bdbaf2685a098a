"""Queued ingestion: the validation pass runs in the coordinator, the writing pass in
``ragwright ingest-worker`` processes that take work items from a shared queue
(docs/ingestion.md, "Several workers")."""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragwright.application.corpus import IngestParts, ingest_result, open_for_writing
from ragwright.application.ingest_queue import (
    IngestQueue,
    ItemResult,
    WorkerStats,
    WorkItem,
    item_body,
    read_item_body,
    wait_for_results,
)
from ragwright.application.requests.corpus import IngestRequest, IngestResult
from ragwright.deadline import Deadline, deadline_bound
from ragwright.errors import ConfigError, ContractMismatch, IngestItemFailed, RequestError
from ragwright.pipeline.finishing import finish_run
from ragwright.pipeline.ingest import RunPlan, prepare_run
from ragwright.pipeline.planning import ProgressCallback, document_key, in_slices
from ragwright.pipeline.writing import SliceContext, ingest_slice
from ragwright.protocols import Embedder, SparseEncoder
from ragwright.settings import Settings
from ragwright.types import ChunkingPolicy, SliceReport, SourceDocument

logger = logging.getLogger(__name__)


class QueuedIngest:
    """``ingest`` over a shared queue: the coordinator's side and the worker's."""

    def __init__(
        self,
        settings: Settings,
        parts: IngestParts,
        *,
        clock: Callable[[], float],
        ingest_queue: Callable[[], IngestQueue],
    ) -> None:
        self.settings = settings
        self.parts = parts
        self.clock = clock
        self.ingest_queue = ingest_queue

    def ingest_queued(
        self,
        request: IngestRequest,
        *,
        item_size: int,
        progress: ProgressCallback | None = None,
        started: Callable[[str], None] | None = None,
        poll: float = 0.25,
    ) -> IngestResult:
        """``ingest`` with the writing pass done by ``ragwright ingest-worker`` processes:
        the validation pass runs here, the changed documents go on the shared queue in
        items of ``item_size`` documents, and the summary sums the items' recorded
        results. ``started`` is called with the run id once the run is open
        (``--local-workers`` starts its workers there).

        Raises:
            ConfigError: no Qdrant server (the embedded index is one process's) or no
                PostgreSQL (``RAGWRIGHT_DATABASE_URL``) for the queue.
            IngestItemFailed: a worker recorded a failure for an item; the run stops
                (what was written stays consistent, and the next run resumes).
            IngestRunExpired: ``RAGWRIGHT_INGEST_DEADLINE`` passed (and
                ``DEADLINE_GRACE`` after it) with items no worker finished.
        """
        self._require_index_server()
        if item_size < 1:
            raise RequestError("item_size", f"must be at least 1, got {item_size}")
        seconds = self.settings.ingest.deadline
        # Workers on other machines bound each item by the run's deadline: a time on the
        # wall clock, which the machines share (their monotonic clocks they do not).
        deadline_at = None if seconds is None else self.clock() + seconds
        queue = self.ingest_queue()
        try:
            run = _QueuedRun(self, queue, request, item_size, progress, deadline_at)
            return run.run(started, poll)
        finally:
            queue.close()

    def ingest_worker(
        self,
        *,
        worker: str,
        idle_exit: float | None = None,
        stop: threading.Event | None = None,
        phase_hook: Callable[[str, str], None] | None = None,
    ) -> WorkerStats:
        """Run ingestion work items from the shared queue into the configured index
        until ``stop`` is set (or no item was queued or held for ``idle_exit``
        seconds). Each item runs ``ingest_slice`` on its documents with the run's
        chunking policy and context, within its run's deadline and this worker's
        ``RAGWRIGHT_INGEST_DEADLINE`` from the item's start (whichever ends first); its
        report is recorded once per item."""
        self._require_index_server()
        queue = self.ingest_queue()
        embedder = self.parts.embedder()
        sparse_encoder = self.parts.sparse_encoder()

        def handle(item: WorkItem) -> Mapping[str, Any]:
            return self._run_item(item, embedder, sparse_encoder, phase_hook)

        try:
            return queue.work(handle, worker=worker, idle_exit=idle_exit, stop=stop)
        finally:
            queue.close()

    def _run_item(
        self,
        item: WorkItem,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        phase_hook: Callable[[str, str], None] | None,
    ) -> Mapping[str, Any]:
        body = read_item_body(item.body)
        if body.embedding_profile != embedder.profile.profile_id:
            raise ContractMismatch(
                "embedding_profile", body.embedding_profile, embedder.profile.profile_id
            )
        if body.lexical_profile != sparse_encoder.profile.profile_id:
            raise ContractMismatch(
                "lexical_profile_id", body.lexical_profile, sparse_encoder.profile.profile_id
            )
        item_deadline = self._item_deadline(body.deadline_at)
        index = self.parts.open_index(body.policy.version, write=True)
        try:
            with deadline_bound(item_deadline):
                report = ingest_slice(
                    body.documents,
                    SliceContext.from_json(dict(body.context)),
                    policy=body.policy,
                    embedder=embedder,
                    sparse_encoder=sparse_encoder,
                    index=index,
                    batch_size=self.settings.ingest.batch_size,
                    phase_hook=phase_hook,
                )
        finally:
            index.close()
        return report.to_json()

    def _item_deadline(self, deadline_at: float | None) -> Deadline | None:
        """A work item's deadline: its run's (``deadline_at`` on the wall clock) or this
        worker's ``RAGWRIGHT_INGEST_DEADLINE`` from now, whichever ends first."""
        deadlines = [] if deadline_at is None else [Deadline.after(deadline_at - self.clock())]
        if self.settings.ingest.deadline is not None:
            deadlines.append(Deadline.after(self.settings.ingest.deadline))
        return min(deadlines, key=lambda deadline: deadline.expires_at, default=None)

    def _require_index_server(self) -> None:
        location = self.settings.index.qdrant_location or ""
        if self.settings.index.backend != "qdrant" or not location.startswith(
            ("http://", "https://")
        ):
            raise ConfigError(
                "RAGWRIGHT_BACKEND",
                "queued ingestion needs a Qdrant server (RAGWRIGHT_BACKEND=qdrant and an "
                "http(s) RAGWRIGHT_QDRANT_LOCATION): workers in other processes write into "
                "it, and the embedded index is owned by one process",
            )


class _QueuedRun:
    """One coordinator run: prepare, enqueue the changed documents, gather the items'
    reports, finish."""

    def __init__(
        self,
        owner: QueuedIngest,
        queue: IngestQueue,
        request: IngestRequest,
        item_size: int,
        progress: ProgressCallback | None,
        deadline_at: float | None,
    ) -> None:
        self.owner = owner
        self.queue = queue
        self.request = request
        self.item_size = item_size
        self.progress = progress
        self.deadline_at = deadline_at

    def run(self, started: Callable[[str], None] | None, poll: float) -> IngestResult:
        owner, request = self.owner, self.request
        policy = owner.parts.chunking_policy(request.chunking)
        documents, stream = owner.parts.sources.open(request, policy.version)
        embedder = owner.parts.embedder()
        sparse_encoder = owner.parts.sparse_encoder()
        index = open_for_writing(owner.parts.open_index, policy.version, request)
        try:
            run = prepare_run(
                documents,
                policy=policy,
                embedder=embedder,
                sparse_encoder=sparse_encoder,
                index=index,
                prune=request.prune,
                tenants=() if request.tenant is None else (request.tenant,),
                progress=self.progress,
                skip_invalid=request.skip_invalid,
            )
            run_id = uuid.uuid4().hex
            self.queue.open_run(run_id)
            try:
                if started is not None and run.changed:
                    started(run_id)
                items = self._enqueue(run_id, run, documents, policy, embedder, sparse_encoder)
                reports = self._gather(run_id, items, poll)
                report = finish_run(
                    run,
                    [reports[number] for number in sorted(reports)],
                    index=index,
                    sparse_encoder=sparse_encoder,
                    on_changed=owner.parts.purge_drafts,
                )
            except BaseException:
                self.queue.close_run(run_id, "failed")
                raise
            self.queue.close_run(run_id, "finished")
        finally:
            index.close()
            self.queue.close()
        return ingest_result(report, request, policy, embedder, stream)

    def _enqueue(
        self,
        run_id: str,
        run: RunPlan,
        documents: Iterable[SourceDocument],
        policy: ChunkingPolicy,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
    ) -> int:
        """Queue the changed documents in items; how many items. The writing pass reads
        the sources again: only the item being built is held, whatever the corpus's
        size."""
        items = 0
        changed = (d for d in documents if document_key(d) in run.changed)
        for number, item in enumerate(in_slices(changed, self.item_size)):
            body = item_body(
                item,
                context=run.slice_context().to_json(),
                policy=policy,
                embedding_profile=embedder.profile.profile_id,
                lexical_profile=sparse_encoder.profile.profile_id,
                deadline_at=self.deadline_at,
            )
            self.queue.enqueue(run_id, number, body)
            items += 1
        self.queue.seal_run(run_id, items)
        logger.info("ingest run %s: %d work items queued", run_id, items)
        return items

    def _gather(self, run_id: str, items: int, poll: float) -> dict[int, SliceReport]:
        """Each item's report, without its changed documents (purged on arrival): the
        coordinator holds counts per item, not a list of every document."""
        reports: dict[int, SliceReport] = {}
        notify = self.progress or (lambda _event, _count: None)

        def received(result: ItemResult) -> None:
            if result.report is None:
                raise IngestItemFailed(
                    run_id, result.number, result.worker, result.error or "no report"
                )
            item = SliceReport.from_json(dict(result.report))
            self.owner.parts.purge_drafts(item.changed_documents)
            reports[result.number] = dataclasses.replace(item, changed_documents=())
            notify("embedded", item.chunks)

        wait_for_results(
            self.queue,
            run_id,
            items,
            poll=poll,
            on_result=received,
            deadline_at=self.deadline_at,
            clock=self.owner.clock,
        )
        return reports
