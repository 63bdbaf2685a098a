"""A second process that reads and plans the writing pass's slices ahead of it.

The writing pass is CPU-bound in one interpreter: chunking, payloads and BM25 encoding
are Python, and the embedded engine holds the interpreter's lock while it converts,
upserts and seals. So a first ingestion uses one core. The part of a slice that needs no
index is done here, in a forked child, a slice ahead of the parent: reading the slice's
documents from the sources (the child iterates its own copy of the slices, so the parent
reads no source at all) and :func:`~ragwright.pipeline.planning.plan_documents` (source
digest, chunks, stored ids, payloads, embedding-input lengths, BM25 term counts and
vectors). Each slice's plans come back with their documents. The parent still makes
every decision that reads the index (what to embed, keep and delete) and every write, so
what a crash leaves and the run's result are those of an in-process run
(docs/ingestion.md, "A planning process").

A fork, not a fresh interpreter: the child inherits the sources, the embedder's token
counting (its tokenizer and caches) and the chunking policy as they are, with nothing to
rebuild. It is forked before the writing pass starts its threads, closes every
descriptor it does not need (the index's files and locks stay the parent's alone), never
touches the index, and leaves by ``os._exit``, so no handler or buffer of the parent
runs in it.

Anything unexpected costs only time. A slice the child fails to plan comes back as its
documents, and the parent plans it. When the sources raise in the child, or the parent
gives up on the child (:class:`~ragwright.pipeline.forked.Replies`: the child gone, a
reply out of order, none within :data:`STALL_SECONDS`, the run's deadline passed), the
parent reads and plans every later slice itself, from the first slice it did not
receive, so any error of the sources or of planning is raised here, with the message the
in-process path gives.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ragwright.pipeline.forked import Child, can_fork, close_inherited, start_child
from ragwright.pipeline.planning import PlannedDocument, plan_documents
from ragwright.protocols import Embedder, SparseEncoder
from ragwright.types import ChunkingPolicy, SourceDocument

# Chunks a run must write before it forks a planning process: below it, the fork and
# the transfers cost more than the second core saves (docs/ingestion.md).
MIN_CHUNKS = 4096
# How long the parent waits for a slice while the child neither replies nor uses CPU
# before it gives up on the child (a stopped child, or one blocked on a hung file
# system, never answers; one busy reading a slow file uses CPU and is waited for).
STALL_SECONDS = 60.0

Planned = tuple[Sequence[SourceDocument], list[PlannedDocument] | None]


def wanted(planned_chunks: int) -> bool:
    """Whether a run writing ``planned_chunks`` chunks plans in a second process: only
    where fork exists, this process may run on two cores or more, and the run is large
    enough."""
    return planned_chunks >= MIN_CHUNKS and can_fork()


def start(
    slices: Iterable[Sequence[SourceDocument]],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    avgdl: float,
) -> PlanningProcess | None:
    """A planning process for ``slices``, or ``None`` when none can be forked now (a
    process, memory or descriptor limit): the writing pass then plans in process."""
    try:
        return PlanningProcess(slices, policy, embedder, sparse_encoder, avgdl)
    except OSError:
        return None


class PlanningProcess:
    """The child and the pipe its plans come back on; :meth:`slices` yields each slice
    with its plans."""

    def __init__(
        self,
        slices: Iterable[Sequence[SourceDocument]],
        policy: ChunkingPolicy,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        avgdl: float,
    ) -> None:
        self._child = Child(
            _serve, (slices, policy, embedder, sparse_encoder, avgdl), "ragwright-planner"
        )
        # The parent's own copy of the slices, untouched until it reads the rest itself.
        self._slices = slices
        self.planned_slices = 0  # slices the child planned that the parent used

    @property
    def pid(self) -> int | None:
        return self._child.pid

    def slices(self) -> Iterator[Planned]:
        """Each slice with the child's plans of its documents (``None``: plan it here)."""
        received = 0
        while (reply := self._child.replies.take(received + 1, STALL_SECONDS)) is not None:
            status, carried = reply
            if status == "end":
                self._child.ended = True
                return
            if status == "unread":  # the sources raised in the child
                break
            received += 1
            if status == "failed":
                yield carried, None
            else:
                self.planned_slices += 1
                yield [p.plan.document for p in carried], carried
        self._child.replies.give_up()
        # Read (and plan) the rest here, from the first slice not received: an error of
        # the sources is raised here, as it would be without the child.
        yield from ((part, None) for part in itertools.islice(self._slices, received, None))

    def close(self) -> None:
        self._child.close()


def _serve(
    results: Any,
    parent: int,
    slices: Iterable[Sequence[SourceDocument]],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    avgdl: float,
) -> None:
    """The child: read and plan each slice, send its plans (or, when planning fails, its
    documents), then the end (``unread`` when the sources raised). A send blocks until
    the parent reads: the child stays about a slice ahead, and ends on a broken pipe when
    the parent is gone."""
    number = 0
    try:
        # The index's files (its WAL lock above all) must close when the parent closes
        # them: a lock inherited here would keep the parent from reopening its shard.
        start_child(parent)
        close_inherited(keep={0, 1, 2, results.fileno()})
        parts = iter(slices)
        while True:
            try:
                documents = next(parts, None)
            except Exception:
                results.send((number + 1, "unread", None))
                return
            number += 1
            if documents is None:
                results.send((number, "end", None))
                return
            try:
                planned = plan_documents(documents, policy, embedder, sparse_encoder, avgdl)
            except Exception:
                results.send((number, "failed", list(documents)))
                continue
            results.send((number, "planned", planned))
    except BaseException:
        pass
    finally:
        # Straight out: no flush of output buffered in the parent before the fork, no
        # handler of the parent's.
        os._exit(0)
