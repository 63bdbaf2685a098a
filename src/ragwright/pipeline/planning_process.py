"""A second process that plans the writing pass's slices ahead of it.

The writing pass is CPU-bound in one interpreter: chunking, payloads and BM25 encoding
are Python, and the embedded engine holds the interpreter's lock while it converts,
upserts and seals. So a first ingestion uses one core. The part of planning a slice that
needs no index (:func:`~ragwright.pipeline.planning.plan_documents`: source digest,
chunks, stored ids, payloads, embedding-input lengths, BM25 term counts and vectors) is
done here, in a forked child, up to :data:`LOOKAHEAD` slices ahead, while the parent
scans, embeds, stages and switches. The parent still makes every decision that reads the
index (what to embed, keep and delete) and every write, so what a crash leaves and the
run's result are those of an in-process run (docs/ingestion.md, "A planning process").

A fork, not a fresh interpreter: the child inherits the embedder's token counting (its
tokenizer and caches) and the chunking policy as they are, with nothing to rebuild. It
is forked before the writing pass starts its threads, closes every descriptor it does
not need (the index's files and locks stay the parent's alone), never touches the
index, and leaves by ``os._exit``, so no handler or buffer of the parent runs in it.

Anything unexpected in the child makes the parent plan that slice, and every later one
once it gives up on the child, itself: an error planning a slice, the child killed, a
reply for another slice, no reply within :data:`STALL_SECONDS` (the child is killed) or
the run's deadline passed while waiting. The in-process path raises the same errors
with the same messages, so the child changes no outcome; a stuck child costs at most
:data:`STALL_SECONDS`.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ragwright.pipeline.forked import Replies, can_fork, close_inherited, fork_context
from ragwright.pipeline.planning import PlannedDocument, document_key, plan_documents
from ragwright.protocols import Embedder, SparseEncoder
from ragwright.types import ChunkingPolicy, SourceDocument

# Chunks a run must write before it forks a planning process: below it, the fork and
# the transfers cost more than the second core saves (docs/ingestion.md).
MIN_CHUNKS = 4096
# Slices handed to the child before the writing pass asks for them.
LOOKAHEAD = 2
# How long the parent waits for one slice's plans before it kills the child and plans
# in process (a slice takes well under a second; a stopped or deadlocked child never
# answers).
STALL_SECONDS = 60.0


def wanted(planned_chunks: int) -> bool:
    """Whether a run writing ``planned_chunks`` chunks plans in a second process: only
    where fork exists, this process may run on two cores or more, and the run is large
    enough."""
    return planned_chunks >= MIN_CHUNKS and can_fork()


class PlanningProcess:
    """The child, the pipes to and from it and the thread that feeds it; :meth:`ahead`
    pairs slices with their plans."""

    def __init__(
        self,
        policy: ChunkingPolicy,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        avgdl: float,
    ) -> None:
        context = fork_context()
        # One pipe each way, each end in one process only (the other copies are closed
        # after the fork): a child gone reads as the end of the results pipe and breaks
        # the tasks pipe, never as a wait for the rest of a message.
        task_reader, self._task_writer = context.Pipe(duplex=False)
        results, result_writer = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_serve,
            args=(task_reader, result_writer, policy, embedder, sparse_encoder, avgdl),
            name="ragwright-planner",
            daemon=True,
        )
        self._process.start()
        task_reader.close()
        result_writer.close()
        self._replies = Replies(self._process, results)
        # Slices are sent by a thread of their own, so this process never blocks on a
        # full pipe while the child blocks sending plans back.
        self._outbox: queue.SimpleQueue[tuple[int, list[SourceDocument]] | None] = (
            queue.SimpleQueue()
        )
        self._feeder = threading.Thread(
            target=self._feed, name="ragwright-planner-feed", daemon=True
        )
        self._feeder.start()
        self._sent = 0
        self.planned_slices = 0  # slices the child planned that the parent used

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def ahead(
        self, slices: Iterable[Sequence[SourceDocument]]
    ) -> Iterator[tuple[Sequence[SourceDocument], list[PlannedDocument] | None]]:
        """Each slice with the child's plans of its documents (``None``: plan it here),
        the child working :data:`LOOKAHEAD` slices ahead."""
        handed: deque[tuple[int, Sequence[SourceDocument]]] = deque()
        for documents in slices:
            handed.append((self._send(documents), documents))
            if len(handed) > LOOKAHEAD:
                number, first = handed.popleft()
                yield first, self._receive(number, first)
        while handed:
            number, first = handed.popleft()
            yield first, self._receive(number, first)

    def close(self) -> None:
        """Stop the child (at once if it is busy) and wait for it and the feeder."""
        self._outbox.put(None)
        self._replies.close()
        self._feeder.join(timeout=1.0)  # a dead child broke its pipe: the feeder ended

    def _send(self, documents: Sequence[SourceDocument]) -> int:
        self._sent += 1
        if not self._replies.gone:
            self._outbox.put((self._sent, list(documents)))
        return self._sent

    def _feed(self) -> None:
        try:
            while (task := self._outbox.get()) is not None:
                self._task_writer.send(task)
        except Exception:
            pass
        finally:
            self._task_writer.close()  # the child reads the end of its tasks

    def _receive(
        self, number: int, documents: Sequence[SourceDocument]
    ) -> list[PlannedDocument] | None:
        reply = self._replies.take(number, STALL_SECONDS)
        if reply is None:
            return None
        status, planned = reply
        if status != "planned":
            return None
        if [document_key(p.plan.document) for p in planned] != [document_key(d) for d in documents]:
            self._replies.give_up()  # plans of other documents: trust none of the next ones
            return None
        self.planned_slices += 1
        return list(planned)


def _serve(
    tasks: Any,
    results: Any,
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    avgdl: float,
) -> None:
    """The child: plan each slice it is handed until its tasks end (the parent closed
    them, or is gone)."""
    try:
        # The index's files (its WAL lock above all) must close when the parent closes
        # them: a lock inherited here would keep the parent from reopening its shard.
        close_inherited(keep={0, 1, 2, tasks.fileno(), results.fileno()})
        while True:
            number, documents = tasks.recv()
            try:
                planned = plan_documents(documents, policy, embedder, sparse_encoder, avgdl)
            except Exception:
                results.send((number, "failed", None))
                continue
            results.send((number, "planned", planned))
    except BaseException:
        pass
    finally:
        # Straight out: no flush of output buffered in the parent before the fork, no
        # handler of the parent's.
        os._exit(0)
