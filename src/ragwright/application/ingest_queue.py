"""Ingestion split into work items on a shared queue, run by worker processes.

The coordinator (``ragwright ingest --queue``) runs the validation pass
(:func:`~ragwright.pipeline.ingest.prepare_run`) before anything is written, puts the
changed documents on the queue in items of a few documents each, waits until every item
has a recorded result, then runs :func:`~ragwright.pipeline.finishing.finish_run` over
those results (prune, BM25 statistics, the summary). Workers (``ragwright
ingest-worker``), on this machine or others, take items and run
:func:`~ragwright.pipeline.writing.ingest_slice` on them (one slice of the run's changed
documents per item) against one shared index.

Exactness: a run id scopes everything; each item's result is recorded once (the first
recorded result of ``(run id, item)`` stands, later ones are dropped), and the summary
sums exactly those rows, so an item run twice (its worker died, or was presumed dead)
counts once. ``ingest_slice`` is idempotent, so running an item again converges to the
same index. The queue engine (``IngestQueue``, adapters/ingest_queue.py) takes an
item back from a worker whose heartbeat stopped. docs/ingestion.md ("Several workers").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ragwright.errors import IngestRunExpired, RequestError
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

ITEM_FORMAT = 1
"""Version of an item's body; a worker refuses a body of another format."""

DEFAULT_ITEM_SIZE = 64
"""Documents per work item unless the coordinator is told otherwise."""

RunState = Literal["finished", "failed", "abandoned"]

DEADLINE_GRACE = 10.0
"""Seconds the coordinator waits past the run's deadline: a worker whose embedding call
the deadline stopped records that failure within them; items no worker holds never get a
result, and the coordinator stops with ``IngestRunExpired`` instead of waiting forever."""

STALL_WARNING = 60.0
"""Seconds without a new item result before the coordinator warns (and again every as
many seconds): no worker may be taking the run's items."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One item as a worker receives it: its run, its number in the run, its body."""

    run_id: str
    number: int
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The recorded result of one item: its report's JSON, or why it failed."""

    number: int
    worker: str
    report: Mapping[str, Any] | None = None
    error: str | None = None
    sequence: int = 0
    """Order of recording across the queue (for display; a coordinator must not poll
    "after the last sequence seen": sequences are taken when a result is inserted and
    become visible when its transaction commits, so a lower one can appear after a
    higher one)."""


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """What one worker did before it stopped: items recorded done or failed, dropped
    (already recorded, or their run ended), put back after a transient failure."""

    done: int = 0
    failed: int = 0
    skipped: int = 0
    retried: int = 0


class IngestQueue(Protocol):
    """A shared queue of ingestion work items with a result recorded once per item.

    Coordinator side: :meth:`open_run`, :meth:`enqueue` each item, :meth:`seal_run`
    with the count, then :meth:`renew_run` and :meth:`results` until every item has a
    result, and :meth:`close_run`. Worker side: :meth:`work`.
    """

    def open_run(self, run_id: str) -> None:
        """Record a new run (its items follow)."""
        ...

    def enqueue(self, run_id: str, number: int, body: Mapping[str, Any]) -> None:
        """Put item ``number`` of the run on the queue."""
        ...

    def seal_run(self, run_id: str, items: int) -> None:
        """Every item of the run is on the queue; there are ``items``."""
        ...

    def renew_run(self, run_id: str) -> None:
        """The coordinator is alive: a run not renewed for long is abandoned, and
        workers then drop its items without running them."""
        ...

    def results(self, run_id: str, *, known: Collection[int] = ()) -> list[ItemResult]:
        """The run's item results (one per item at most) for items not in ``known``,
        in recording order: a coordinator passes the items it has seen and gets only
        the new ones, whatever order their workers' transactions committed in."""
        ...

    def close_run(self, run_id: str, state: RunState) -> None:
        """The run ended; items of it still queued are dropped by workers."""
        ...

    def work(
        self,
        handle: Callable[[WorkItem], Mapping[str, Any]],
        *,
        worker: str,
        idle_exit: float | None = None,
        stop: threading.Event | None = None,
    ) -> WorkerStats:
        """Take items and record what ``handle`` returns (the item's report JSON) or
        the error it raised, once per item (a transient failure puts the item back a
        few times first); until ``stop`` is set, or until no item has been queued or
        held for ``idle_exit`` seconds."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def document_to_json(document: SourceDocument) -> dict[str, Any]:
    """Every field of a validated document, as JSON (tenant and revision included).

    Not ``service.client.document_body``: that is the HTTP shape, where the tenant is
    the API key's and a title is required; an item carries documents as they were read.
    """
    return {
        "document_id": document.document_id,
        "title": document.title,
        "document_type": document.document_type,
        "publication_state": document.publication_state,
        "revision": document.revision,
        "source_uri": document.source_uri,
        "tenant": document.tenant,
        "sections": [
            {
                "section_id": s.section_id,
                "heading": s.heading,
                "paragraphs": list(s.paragraphs),
                **({} if s.pages is None else {"pages": list(s.pages)}),
            }
            for s in document.sections
        ],
    }


def document_from_json(data: Mapping[str, Any]) -> SourceDocument:
    """The document :func:`document_to_json` wrote (validated by the coordinator that
    read it from its source, so it is rebuilt as it was, not validated again)."""
    tenant = data["tenant"]
    return SourceDocument(
        document_id=str(data["document_id"]),
        title=str(data["title"]),
        document_type=str(data["document_type"]),
        publication_state=str(data["publication_state"]),
        sections=tuple(
            SourceSection(
                str(s["section_id"]),
                str(s["heading"]),
                tuple(map(str, s["paragraphs"])),
                tuple(map(int, s["pages"])) if s.get("pages") is not None else None,
            )
            for s in data["sections"]
        ),
        revision=str(data["revision"]),
        source_uri=str(data["source_uri"]),
        tenant=None if tenant is None else str(tenant),
    )


def policy_to_json(policy: ChunkingPolicy) -> dict[str, Any]:
    return {
        "kind": policy.kind,
        "max_words": policy.max_words,
        "overlap": policy.overlap,
        "revision": policy.revision,
        "max_tokens": policy.max_tokens,
    }


def policy_from_json(data: Mapping[str, Any]) -> ChunkingPolicy:
    kind = data["kind"]
    if kind not in ("section-paragraphs", "sentence-blocks"):
        raise RequestError("item.policy.kind", f"unknown chunking policy {kind!r}")
    max_tokens = data["max_tokens"]
    return ChunkingPolicy(
        kind=kind,
        max_words=int(data["max_words"]),
        overlap=bool(data["overlap"]),
        revision=int(data["revision"]),
        max_tokens=None if max_tokens is None else int(max_tokens),
    )


def item_body(
    documents: Sequence[SourceDocument],
    *,
    context: Mapping[str, Any],
    policy: ChunkingPolicy,
    embedding_profile: str,
    lexical_profile: str,
    deadline_at: float | None = None,
) -> dict[str, Any]:
    """What a worker needs to run one item, with no access to the sources: the run's
    slice context, the chunking policy, the profiles it must share, the documents, and
    the run's deadline (seconds since the epoch; ``None``: none)."""
    return {
        "format": ITEM_FORMAT,
        "context": dict(context),
        "policy": policy_to_json(policy),
        "embedding_profile": embedding_profile,
        "lexical_profile": lexical_profile,
        "deadline_at": deadline_at,
        "documents": [document_to_json(d) for d in documents],
    }


def read_item_body(body: Mapping[str, Any]) -> ItemBody:
    """Parse a body :func:`item_body` wrote.

    Raises:
        RequestError: the body has another format (written by another ragwright).
    """
    if body.get("format") != ITEM_FORMAT:
        raise RequestError(
            "item.format", f"format {body.get('format')!r}, this ragwright reads {ITEM_FORMAT}"
        )
    return ItemBody(
        context=body["context"],
        policy=policy_from_json(body["policy"]),
        embedding_profile=str(body["embedding_profile"]),
        lexical_profile=str(body["lexical_profile"]),
        documents=tuple(document_from_json(d) for d in body["documents"]),
        # Absent from the items of an earlier ragwright of the same format: no deadline.
        deadline_at=None if body.get("deadline_at") is None else float(body["deadline_at"]),
    )


@dataclass(frozen=True, slots=True)
class ItemBody:
    """A parsed item body."""

    context: Mapping[str, Any]
    policy: ChunkingPolicy
    embedding_profile: str
    lexical_profile: str
    documents: tuple[SourceDocument, ...]
    deadline_at: float | None = None


def wait_for_results(
    queue: IngestQueue,
    run_id: str,
    items: int,
    *,
    poll: float,
    on_result: Callable[[ItemResult], None],
    deadline_at: float | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Renew the run and wait until all ``items`` have a recorded result; each new
    result goes to ``on_result`` once (the caller keeps what it needs of it: this keeps
    only the item numbers seen).

    ``deadline_at`` is the run's deadline (seconds since the epoch on ``clock``, the
    wall clock the workers share): ``DEADLINE_GRACE`` seconds after it the wait ends with
    ``IngestRunExpired`` naming the items still without a result. Without a deadline it
    waits for as long as it takes, warning every ``STALL_WARNING`` seconds in which no
    result arrived.

    Raises:
        IngestRunExpired: the run's deadline passed with items still outstanding.
    """
    seen: set[int] = set()
    quiet_since = clock()
    while True:
        queue.renew_run(run_id)
        for result in queue.results(run_id, known=seen):
            if result.number not in seen:
                seen.add(result.number)
                quiet_since = clock()
                on_result(result)
        if len(seen) >= items:
            return
        now = clock()
        if deadline_at is not None and now > deadline_at + DEADLINE_GRACE:
            raise IngestRunExpired(run_id, items - len(seen), items)
        if now - quiet_since >= STALL_WARNING:
            logger.warning(
                "ingest run %s: no work item result for %.0f s (%d of %d outstanding); "
                "is an `ragwright ingest-worker` taking items from this queue?",
                run_id,
                now - quiet_since,
                items - len(seen),
                items,
            )
            quiet_since = now
        sleep(poll)
