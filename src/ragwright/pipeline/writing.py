"""The writing pass of an ingestion run: stage, switch and verify, batch after batch.

:func:`ingest_batch` writes one batch of a run's changed documents (a worker's work
item); :func:`write_batches` writes a run's batches one after another with the
embedding calls of the next ones in flight while one is switched. The steps, the
ordering and what a crash leaves are in :mod:`ragwright.pipeline.ingest` and
docs/ingestion.md ("A run, step by step"). Both passes of a run share the helpers here
that read a batch's stored points and plan its documents.
"""

from __future__ import annotations

import contextvars
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ragwright.core.chunking import TokenCounter, build_chunks
from ragwright.core.lexical import document_vector
from ragwright.core.points import (
    DOCUMENT_FIELDS,
    LEXICAL_TERMS,
    LIVE,
    STAGED,
    DocumentPlan,
    PlannedPoint,
    chunk_body,
    format_document_input,
    plan_document,
    read_payload,
    source_digest,
)
from ragwright.deadline import current_bound
from ragwright.errors import (
    ContractMismatch,
    DimensionMismatch,
    EmbeddingProviderError,
    FailureCategory,
    InputTooLong,
    ReadBackError,
)
from ragwright.protocols import Embedder, SparseEncoder, VectorIndex
from ragwright.types import (
    ChunkingPolicy,
    FieldMatch,
    IndexPoint,
    PointFilter,
    SharedDocumentId,
    SourceDocument,
    StoredPoint,
)

# Called with a phase name and a count: ("plan", total_chunks), ("embedded", n),
# ("switched", 1) … The CLI drives its progress bar from these; tests record them.
ProgressCallback = Callable[[str, int], None]
_READBACK_FIELDS = ("text", "document_id", "chunking_version", "document_type", "publication_state")
T = TypeVar("T")
# A document's identity: its tenant (None for untenanted) and its id.
DocumentKey = tuple[str | None, str]


def document_key(document: SourceDocument) -> DocumentKey:
    """The (tenant, id) pair that identifies ``document`` in the index."""
    return (document.tenant, document.document_id)


@dataclass(slots=True)
class _DocumentWork:
    plan: DocumentPlan
    to_embed: list[PlannedPoint] = field(default_factory=list)
    kept: list[uuid.UUID] = field(default_factory=list)
    obsolete: list[uuid.UUID] = field(default_factory=list)


def token_counter(embedder: Embedder, document: SourceDocument) -> TokenCounter | None:
    """Counts the model tokens of a chunk text as it will be embedded for ``document``."""
    if not embedder.counts_tokens:
        return None
    profile = embedder.profile
    title = document.title

    def count(text: str) -> int:
        # Chunk texts open with their heading; a heading equal to the title is dropped
        # from the embedding input (see core.points.chunk_body), so count it that way.
        heading = text.split("\n\n", 1)[0]
        body = chunk_body(title, heading, text)
        return embedder.count_tokens([format_document_input(profile, title, body)])[0]

    return count


@dataclass(frozen=True, slots=True)
class BatchContext:
    """What a worker needs to ingest one batch of a run: small and JSON-able."""

    chunking_version: str
    staging_avgdl: float

    def to_json(self) -> dict[str, Any]:
        return {"chunking_version": self.chunking_version, "staging_avgdl": self.staging_avgdl}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchContext:
        return cls(str(data["chunking_version"]), float(data["staging_avgdl"]))


@dataclass(frozen=True, slots=True)
class BatchReport:
    """What one batch of changed documents did (JSON-able, to be summed by the run)."""

    chunks: int = 0
    embedded: int = 0
    payload_updated: int = 0
    deleted: int = 0
    verified: int = 0
    documents_changed: int = 0
    embedding_tokens: int = 0
    shared_ids: tuple[SharedDocumentId, ...] = ()
    changed_documents: tuple[DocumentKey, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks,
            "embedded": self.embedded,
            "payload_updated": self.payload_updated,
            "deleted": self.deleted,
            "verified": self.verified,
            "documents_changed": self.documents_changed,
            "embedding_tokens": self.embedding_tokens,
            "shared_ids": [
                [s.document_id, s.tenant, list(s.other_tenants)] for s in self.shared_ids
            ],
            "changed_documents": [list(key) for key in self.changed_documents],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchReport:
        counts = {
            name: int(data[name])
            for name in (
                "chunks",
                "embedded",
                "payload_updated",
                "deleted",
                "verified",
                "documents_changed",
                "embedding_tokens",
            )
        }
        return cls(
            **counts,
            shared_ids=tuple(
                SharedDocumentId(str(document_id), tenant, tuple(others))
                for document_id, tenant, others in data["shared_ids"]
            ),
            changed_documents=tuple(
                (tenant, str(doc)) for tenant, doc in data["changed_documents"]
            ),
        )


def document_source_digest(
    document: SourceDocument,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
) -> str:
    """The digest a document's points carry of its source under this run's chunking
    and profiles: stored live under it, the document is unchanged."""
    return source_digest(
        document,
        chunking_version=policy.version,
        profile=embedder.profile,
        lexical_profile_id=sparse_encoder.profile.profile_id,
    )


def chunk_and_plan(
    document: SourceDocument, policy: ChunkingPolicy, embedder: Embedder, source: str
) -> DocumentPlan:
    """Chunk ``document`` (counting tokens with the embedder's tokenizer) and plan its
    stored ids, payloads and digest."""
    chunks = build_chunks(document, policy, count_tokens=token_counter(embedder, document))
    return plan_document(document, chunks, embedder.profile, source=source)


def ingest_batch(
    documents: Sequence[SourceDocument],
    context: BatchContext,
    *,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    batch_size: int = 64,
    progress: ProgressCallback | None = None,
    phase_hook: Callable[[str, str], None] | None = None,
) -> BatchReport:
    """Write one batch of the run's changed documents: stage, switch, verify.

    Idempotent: a batch run again after a crash reuses the staged points and finishes a
    half-switched document; a document already switched is verified and still counted
    as changed, so the run's summary is the same whoever finished the batch.
    """
    (report,) = write_batches(
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


# Document batches the writing pass holds at once: one switching (its plans are needed
# until it is verified) and up to two embedding, so the next batches' embedding calls
# keep ``in_flight`` requests outstanding while a batch is switched and verified.
BATCHES_IN_FLIGHT = 3


@dataclass(slots=True, eq=False)
class _Batch:
    """One batch of the writing pass: its plans, its inputs in embedding order (length
    sorted), the staged writes handed to the writer and, once all are, its switch."""

    work: list[_DocumentWork]
    held: dict[str, set[str | None]]
    pending: list[PlannedPoint]
    lengths: list[int]
    calls_left: int = 0
    tokens: int = 0
    writes: list[Future[None]] = field(default_factory=list)
    switched: Future[BatchReport] | None = None


def write_batches(
    batches: Iterable[Sequence[SourceDocument]],
    context: BatchContext,
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
) -> list[BatchReport]:
    """Stage, switch and verify each batch of documents; their reports, in order.

    ``on_changed``, when given, receives each batch's changed documents as soon as the
    batch is verified, and the reports kept leave them out: a run then holds no list of
    every document it changed.

    Up to the embedder's ``in_flight`` embedding calls are outstanding at once, across
    batch boundaries: the next batch is planned (scanned, chunked) as soon as the
    current one's calls are all made, so its calls go out while the current one's last
    calls return and while it is switched and verified. At most
    :data:`BATCHES_IN_FLIGHT` batches are held. One writer thread does every index
    write of the pass in order: a batch's staged upserts (each read back), then its
    switch and verify, which starts only once every point of the batch is staged and
    read back. After one of its writes fails the writer starts nothing more; a failed
    embedding call lets the writer finish what it was handed (staged points, switches of
    batches already staged), which an uninterrupted sequence of batches would also have
    done, then raises. Each embedding call runs in a copy of the caller's context,
    so it spends the caller's deadline.

    ``shared_in_run`` names the document ids the run holds under several tenants: a
    later batch reports such an id as shared with an earlier batch's document even when
    that one is not written yet, as one batch after another would.
    """
    if context.chunking_version != policy.version:
        raise ContractMismatch("chunking_version", context.chunking_version, policy.version)
    in_flight = max(1, int(getattr(embedder, "in_flight", 1)))
    with (
        ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="ragwright-embed") as pool,
        _Writer() as writer,
    ):
        writing = _WritingPass(
            iter(batches),
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
        finally:
            writing.cancel()


class _WritingPass:
    """The state of :func:`write_batches`: batches held, embedding calls not made yet
    and outstanding (in the order they were made), and the reports collected."""

    def __init__(
        self,
        batches: Iterator[Sequence[SourceDocument]],
        context: BatchContext,
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
        writer: _Writer,
        on_changed: Callable[[Sequence[DocumentKey]], None] | None = None,
    ) -> None:
        self.on_changed = on_changed
        self.batches = batches
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
        self.held: deque[_Batch] = deque()  # planned, not reported: BATCHES_IN_FLIGHT at most
        self.waiting: deque[tuple[_Batch, int]] = deque()  # calls not made yet (batch, start)
        self.calls: deque[tuple[_Batch, int, Future[list[list[float]]]]] = deque()
        self.earlier: dict[str, set[str | None]] = {}  # tenants of shared ids seen so far
        self.reports: list[BatchReport] = []
        self.more = True

    def run(self) -> list[BatchReport]:
        while True:
            self._make_calls()
            if self.calls:
                self._take_call()
            elif self.held:
                # No call left: every held batch is with the writer; wait for the oldest.
                self._switch_of(self.held[0]).result()
            else:
                return self.reports
            self._collect()

    def cancel(self) -> None:
        """Cancel the embedding calls not started yet (after a failure)."""
        for _batch, _start, call in self.calls:
            call.cancel()

    def _make_calls(self) -> None:
        """Keep ``in_flight`` calls outstanding, planning the next batch when the held
        ones have no call left to make (and fewer than BATCHES_IN_FLIGHT are held)."""
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
                batch, start = self.waiting.popleft()
                texts = [p.embedding_input for p in batch.pending[start : start + self.batch_size]]
                in_context = contextvars.copy_context().run
                call = self.pool.submit(in_context, self.embedder.embed_documents, texts)
                self.calls.append((batch, start, call))
            elif not self._plan_next():
                return

    def _plan_next(self) -> bool:
        if not self.more or len(self.held) >= BATCHES_IN_FLIGHT:
            return False
        documents = next(self.batches, None)
        if documents is None:
            self.more = False
            return False
        batch = _plan_batch(
            documents, self.policy, self.embedder, self.sparse_encoder, self.index, self.earlier
        )
        for document in documents:
            if document.document_id in self.shared_in_run:
                self.earlier.setdefault(document.document_id, set()).add(document.tenant)
        self.held.append(batch)
        starts = range(0, len(batch.pending), self.batch_size)
        batch.calls_left = len(starts)
        self.waiting.extend((batch, start) for start in starts)
        if not starts:  # nothing to embed (a metadata change, or every point staged)
            self._hand_over(batch)
        return True

    def _take_call(self) -> None:
        """Hand the oldest call's vectors to the writer (and, after its batch's last
        call, the batch's switch) or, when no batch can be planned until the oldest
        is switched and that ends first, just collect it."""
        batch, start, call = self.calls[0]
        oldest = self.held[0].switched
        if not self.waiting and len(self.held) == BATCHES_IN_FLIGHT and oldest is not None:
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
        points = batch.pending[start : start + self.batch_size]
        if self.embedder.counts_tokens:
            batch.tokens += sum(batch.lengths[start : start + self.batch_size])
        batch.writes.append(
            self.writer.submit(
                _write_and_verify,
                self.index,
                self.sparse_encoder,
                points,
                vectors,
                self.context.staging_avgdl,
            )
        )
        self.notify("embedded", len(points))
        batch.calls_left -= 1
        if batch.calls_left == 0:
            self._hand_over(batch)

    def _hand_over(self, batch: _Batch) -> None:
        batch.switched = self.writer.submit(
            _switch_batch, batch, self.index, self.notify, self.hook
        )

    @staticmethod
    def _switch_of(batch: _Batch) -> Future[BatchReport]:
        if batch.switched is None:  # pragma: no cover
            raise AssertionError("unreachable: a batch with no call left is handed over")
        return batch.switched

    def _collect(self) -> None:
        """Move the reports of the oldest batches that are switched and verified."""
        while self.held and (switched := self.held[0].switched) is not None and switched.done():
            report = switched.result()
            if self.on_changed is not None:
                self.on_changed(report.changed_documents)
                report = replace(report, changed_documents=())
            self.reports.append(report)
            self.held.popleft()


def _plan_batch(
    documents: Sequence[SourceDocument],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    index: VectorIndex,
    earlier: dict[str, set[str | None]],
) -> _Batch:
    """Scan the batch's stored points and plan its documents: what to embed (in
    length-sorted order), keep and delete, and which ids the index holds for other
    tenants (``earlier``: those of earlier batches of the pass, written or not)."""
    existing = scan_documents(index, policy.version, documents)
    held: dict[str, set[str | None]] = {}
    for tenant, document_id in existing:
        held.setdefault(document_id, set()).add(tenant)
    work: list[_DocumentWork] = []
    for document in documents:
        if document.document_id in earlier:
            held.setdefault(document.document_id, set()).update(earlier[document.document_id])
        source = document_source_digest(document, policy, embedder, sparse_encoder)
        plan = chunk_and_plan(document, policy, embedder, source)
        stored = existing.get(document_key(document), {})
        desired = {p.stored_id for p in plan.points}
        work.append(
            _DocumentWork(
                plan,
                to_embed=[p for p in plan.points if p.stored_id not in stored],
                kept=[p.stored_id for p in plan.points if p.stored_id in stored],
                obsolete=[sid for sid in stored if sid not in desired],
            )
        )
    pending = [p for item in work for p in item.to_embed]
    lengths = check_lengths(embedder, pending)
    # Padding is wasted compute: each embedding call gets inputs of similar length.
    order = sorted(range(len(pending)), key=lambda i: lengths[i])
    return _Batch(work, held, [pending[i] for i in order], [lengths[i] for i in order])


def _switch_batch(
    batch: _Batch,
    index: VectorIndex,
    notify: ProgressCallback,
    hook: Callable[[str, str], None],
) -> BatchReport:
    """Switch and verify every document of a staged batch (on the writer thread)."""
    for write in batch.writes:
        write.result()  # written before this, in order; a document switches only staged
    payload_updated = deleted = 0
    new = [item for item in batch.work if not item.kept and not item.obsolete]
    verified = _switch_new(index, new, hook)
    for item in new:
        notify("switched", len(item.plan.points))
    for item in batch.work:
        if item.kept or item.obsolete:
            payload_updated += _refresh_kept(index, item)
            deleted += len(item.obsolete)
            verified += _switch(index, item, hook)
            notify("switched", len(item.plan.points))
    return BatchReport(
        chunks=sum(len(item.plan.points) for item in batch.work),
        embedded=len(batch.pending),
        payload_updated=payload_updated,
        deleted=deleted,
        verified=verified,
        documents_changed=len(batch.work),
        embedding_tokens=batch.tokens,
        shared_ids=_shared_ids(batch.work, batch.held),
        changed_documents=tuple(document_key(item.plan.document) for item in batch.work),
    )


class _Writer:
    """One thread that runs the writing pass's index writes in the order given.

    After a task fails, the tasks after it do not run (they raise the same error), and
    :meth:`check` raises it on the caller's thread. Leaving the block waits for the
    tasks already given (those after a failure end at once).
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragwright-writer")
        self._failure: BaseException | None = None

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def submit(self, task: Callable[..., T], *args: Any) -> Future[T]:
        def run() -> T:
            if self._failure is not None:
                raise self._failure
            try:
                return task(*args)
            except BaseException as error:
                self._failure = error
                raise

        return self._pool.submit(contextvars.copy_context().run, run)

    def check(self) -> None:
        """Raise the first failure of a write, if any."""
        if self._failure is not None:
            raise self._failure


def _shared_ids(
    work: Sequence[_DocumentWork], held: dict[str, set[str | None]]
) -> tuple[SharedDocumentId, ...]:
    """Written documents whose id the index also held under other tenants."""
    shared = []
    for item in work:
        document = item.plan.document
        others = held.get(document.document_id, set()) - {document.tenant}
        if others:
            shared.append(
                SharedDocumentId(
                    document.document_id, document.tenant, tuple(sorted(others, key=tenant_order))
                )
            )
    return tuple(shared)


def tenant_order(tenant: str | None) -> tuple[bool, str]:
    """Untenanted first, then tenants by name."""
    return (tenant is not None, tenant or "")


@dataclass(frozen=True, slots=True)
class PointState:
    """A stored point as change detection reads it: its document digest, source digest,
    its document's chunk count and its index state (as stored: not validated)."""

    document: Any
    source: Any
    count: Any
    state: Any


def scan_documents(
    index: VectorIndex, version: str, documents: Sequence[SourceDocument]
) -> dict[DocumentKey, dict[uuid.UUID, PointState]]:
    """(tenant, document_id) → {stored id: digests, chunk count, state} for the stored
    points of ``documents``' ids (every tenant's: shared ids are reported)."""
    found: dict[DocumentKey, dict[uuid.UUID, PointState]] = {}
    if not documents:
        return found
    ids = tuple(sorted({d.document_id for d in documents}))
    points = index.scroll(
        PointFilter(
            must=(FieldMatch("chunking_version", (version,)), FieldMatch("document_id", ids))
        ),
        payload_fields=(
            "document_id",
            "document_digest",
            "source_digest",
            "chunk_count",
            "index_state",
            "tenant",
        ),
    )
    for point in points:
        p = point.payload
        document_id, tenant = p.get("document_id"), p.get("tenant")
        # A point without a readable document id or tenant cannot be reconciled; keep it
        # visible to read-time validation rather than guessing which document owns it.
        if isinstance(document_id, str) and (tenant is None or isinstance(tenant, str)):
            found.setdefault((tenant, document_id), {})[point.point_id] = PointState(
                p.get("document_digest"),
                p.get("source_digest"),
                p.get("chunk_count"),
                p.get("index_state"),
            )
    return found


def check_lengths(embedder: Embedder, pending: Sequence[PlannedPoint]) -> list[int]:
    """Token counts of every pending input; the first over the limit stops the run."""
    if not embedder.counts_tokens:
        return [len(p.embedding_input) for p in pending]
    lengths = embedder.count_tokens([p.embedding_input for p in pending])
    limit = embedder.profile.max_input_tokens
    for point, tokens in zip(pending, lengths, strict=True):
        if tokens > limit:
            raise InputTooLong(
                f"document {point.chunk.document_id!r}, chunk {point.chunk.chunk_id!r}",
                tokens,
                limit,
                document_id=point.chunk.document_id,
                chunk_id=point.chunk.chunk_id,
            )
    return lengths


def _write_and_verify(
    index: VectorIndex,
    sparse_encoder: SparseEncoder,
    batch: Sequence[PlannedPoint],
    vectors: Sequence[Sequence[float]],
    avgdl: float,
) -> None:
    # A point's id is its content's (embedding input and BM25 text), so a point already
    # live with the plan's document digest is this very point after its switch: another
    # attempt at the batch switched it (a worker presumed dead after its lease that still
    # writes) or a concurrent run did. Staging it again would hide it until its document
    # switches again, which never comes if this attempt then dies: it is left as it is.
    planned = {p.stored_id: p.payload["document_digest"] for p in batch}
    switched = {
        point.point_id
        for point in index.retrieve(list(planned))
        if point.payload.get("index_state") == LIVE
        and point.payload.get("document_digest") == planned[point.point_id]
    }
    # BM25 encoding runs here, on the writer thread, while the model embeds the next batch.
    points = []
    for p, vector in zip(batch, vectors, strict=True):
        if p.stored_id in switched:
            continue
        terms = sparse_encoder.terms(p.lexical_text)
        points.append(
            IndexPoint(
                p.stored_id,
                vector,
                {**p.payload, "index_state": STAGED, LEXICAL_TERMS: len(terms)},
                document_vector(terms, sparse_encoder.profile, avgdl),
            )
        )
    if not points:
        return
    index.upsert(points)
    stored = {p.point_id: p.payload for p in index.retrieve([p.point_id for p in points])}
    for point in points:
        payload = stored.get(point.point_id)
        if payload is None:
            raise ReadBackError(str(point.point_id), "not found after upsert")
        for name in _READBACK_FIELDS:
            if payload.get(name) != point.payload[name]:
                raise ReadBackError(str(point.point_id), f"payload field {name!r} differs")


def _refresh_kept(index: VectorIndex, item: _DocumentWork) -> int:
    """Bring chunk-level fields of reused points up to date (e.g. shifted positions)."""
    if not item.kept:
        return 0
    wanted = {p.stored_id: p.payload for p in item.plan.points}
    for point in index.retrieve(item.kept):
        chunk_fields = {k: v for k, v in wanted[point.point_id].items() if k not in DOCUMENT_FIELDS}
        if any(point.payload.get(k) != v for k, v in chunk_fields.items()):
            index.set_payload([point.point_id], chunk_fields)
    return len(item.kept)


def _switch(index: VectorIndex, item: _DocumentWork, hook: Callable[[str, str], None]) -> int:
    document = item.plan.document
    ids = [p.stored_id for p in item.plan.points]
    hook(document.document_id, "staged")
    index.delete(item.obsolete)
    hook(document.document_id, "obsolete-deleted")
    index.set_payload(ids, item.plan.document_fields)
    # A tenant never leaves a point: it is part of the document's identity (a document
    # under another tenant has other points), so only an optional source_uri can go.
    absent = [k for k in ("source_uri",) if k not in item.plan.document_fields]
    index.delete_payload_keys(ids, absent)
    hook(document.document_id, "live")
    return _verify(index, item.plan, ids)


def _switch_new(
    index: VectorIndex, work: Sequence[_DocumentWork], hook: Callable[[str, str], None]
) -> int:
    """Switch documents none of whose points was stored before the batch: one flip.

    Each such point was staged by this batch with its plan's whole payload (document
    fields included, ``index_state`` aside) or was already live with the plan's digest,
    so :func:`_switch` would only flip ``index_state``: one ``set_payload`` flips every
    point of these documents at once (each document still all-or-nothing) and one
    read-back verifies them, where a switch per document cost three writes and a read,
    each write a free-space check and a WAL record (docs/ingestion.md).
    """
    ids = [p.stored_id for item in work for p in item.plan.points]
    for phase in ("staged", "obsolete-deleted"):  # nothing obsolete to delete
        for item in work:
            hook(item.plan.document.document_id, phase)
    index.set_payload(ids, {"index_state": LIVE})
    for item in work:
        hook(item.plan.document.document_id, "live")
    stored = {point.point_id: point for point in index.retrieve(ids)}
    return sum(
        _verify_points(
            item.plan, [stored[p.stored_id] for p in item.plan.points if p.stored_id in stored]
        )
        for item in work
    )


def _verify(index: VectorIndex, plan: DocumentPlan, ids: Iterable[uuid.UUID]) -> int:
    return _verify_points(plan, index.retrieve(list(ids)))


def _verify_points(plan: DocumentPlan, stored: Sequence[StoredPoint]) -> int:
    wanted = {p.stored_id: p.payload for p in plan.points}
    if len(stored) != len(wanted):
        raise ReadBackError(
            plan.document.document_id, f"{len(stored)} of {len(wanted)} points found"
        )
    for point in stored:
        payload = read_payload(point.point_id, point.payload)
        if payload.index_state != LIVE or payload.document_digest != plan.digest:
            raise ReadBackError(
                str(point.point_id), "not live with the planned digest after switch"
            )
        if payload.text != wanted[point.point_id]["text"]:
            raise ReadBackError(str(point.point_id), "text differs after switch")
    return len(stored)
