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

Anything unexpected in the child (an error planning a slice, the child killed) makes
the parent plan that slice, and every later one once the child is gone, itself: the
in-process path raises the same errors with the same messages, so the child can only
ever save time.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ragwright.pipeline.planning import PlannedDocument, plan_documents
from ragwright.protocols import Embedder, SparseEncoder
from ragwright.types import ChunkingPolicy, SourceDocument

# Chunks a run must write before it forks a planning process: below it, the fork and
# the transfers cost more than the second core saves (docs/ingestion.md).
MIN_CHUNKS = 4096
# Slices handed to the child before the writing pass asks for them.
LOOKAHEAD = 2
# How often a waiting parent checks that the child lives (seconds).
_POLL = 1.0


def wanted(planned_chunks: int) -> bool:
    """Whether a run writing ``planned_chunks`` chunks plans in a second process: only
    where fork exists, a second core does, and the run is large enough."""
    return (
        planned_chunks >= MIN_CHUNKS
        and (os.cpu_count() or 1) >= 2
        and "fork" in multiprocessing.get_all_start_methods()
    )


class PlanningProcess:
    """The child and the two queues to it; :meth:`ahead` pairs slices with their plans."""

    def __init__(
        self,
        policy: ChunkingPolicy,
        embedder: Embedder,
        sparse_encoder: SparseEncoder,
        avgdl: float,
    ) -> None:
        # Output buffered in this process would be written again by the child's exit.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        context = multiprocessing.get_context("fork")
        # Slices go through a queue (its feeder thread never blocks this process); plans
        # come back through a pipe whose only writing end is the child's, so a child
        # killed mid-plan reads as the end of the pipe, never as a wait for the rest.
        self._tasks: Any = context.Queue()
        self._tasks.cancel_join_thread()  # a child gone with a full pipe: exit anyway
        self._results, writer = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_serve,
            args=(
                self._tasks,
                (self._results, writer),
                policy,
                embedder,
                sparse_encoder,
                avgdl,
            ),
            name="ragwright-planner",
            daemon=True,
        )
        self._process.start()
        writer.close()
        self._gone = False
        self.planned_slices = 0  # slices the child planned that the parent used

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def ahead(
        self, slices: Iterable[Sequence[SourceDocument]]
    ) -> Iterator[tuple[Sequence[SourceDocument], list[PlannedDocument] | None]]:
        """Each slice with the child's plans of its documents (``None``: plan it here),
        the child working :data:`LOOKAHEAD` slices ahead."""
        handed: deque[Sequence[SourceDocument]] = deque()
        for documents in slices:
            self._send(documents)
            handed.append(documents)
            if len(handed) > LOOKAHEAD:
                first = handed.popleft()
                yield first, self._receive()
        while handed:
            first = handed.popleft()
            yield first, self._receive()

    def close(self) -> None:
        """Stop the child (at once if it is busy) and wait for it."""
        with contextlib.suppress(Exception):
            self._tasks.put(None)
        self._process.join(timeout=_POLL)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._tasks.close()
        self._results.close()

    def _send(self, documents: Sequence[SourceDocument]) -> None:
        if not self._gone:
            self._tasks.put(list(documents))

    def _receive(self) -> list[PlannedDocument] | None:
        while not self._gone:
            try:
                if not self._results.poll(_POLL):
                    self._gone = not self._process.is_alive()
                    continue
                status, planned = self._results.recv()
            except (EOFError, OSError):  # the child ended
                self._gone = True
                continue
            if status != "planned":
                return None
            self.planned_slices += 1
            return list(planned)
        return None


def _serve(
    tasks: Any,
    pipe: tuple[Any, Any],
    policy: ChunkingPolicy,
    embedder: Embedder,
    sparse_encoder: SparseEncoder,
    avgdl: float,
) -> None:
    """The child: plan each slice it is handed until told to stop or its parent is gone."""
    reader, results = pipe
    reader.close()
    # The index's files (its WAL lock above all) must close when the parent closes them:
    # a lock inherited here would keep the parent from reopening its own shard.
    _close_inherited(keep={0, 1, 2, results.fileno(), tasks._reader.fileno()})
    try:
        while True:
            # The parent's end of the queue is the only one left open (the descriptors
            # above are closed): when the parent is gone, however it went, this reads EOF.
            documents = tasks.get()
            if documents is None:
                return
            try:
                planned = plan_documents(documents, policy, embedder, sparse_encoder, avgdl)
            except Exception:  # the parent plans the slice itself and raises the error
                results.send(("failed", None))
                continue
            results.send(("planned", planned))
    except (KeyboardInterrupt, EOFError, BrokenPipeError):  # Ctrl-C, or the parent is gone
        pass
    finally:
        # Straight out: no flush of output buffered in the parent before the fork, no
        # handler of the parent's.
        os._exit(0)


def _close_inherited(keep: set[int]) -> None:
    """Close every descriptor this forked child inherited but ``keep``."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: every descriptor a process may hold
        names = [str(fd) for fd in range(3, os.sysconf("SC_OPEN_MAX"))]
    for name in names:
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
