"""A second process that reads the validation pass's sources ahead of it.

The validation pass reads every document (reading and validating its file is the
source's work), digests it and, for a document nothing is stored under, chunks it and
measures its embedding inputs; then it scans the index for the stored points of each
slice. In one interpreter all of it shares one core. Here a forked child iterates the
sources itself, a slice at a time, and sends each slice's documents with their source
digests and, in a new collection (where every document is new), each document's
chunk and term counts. The parent keeps every step that reads the index or decides:
the duplicate check, the scans, what changed (docs/ingestion.md, "A source reader").

The outcome is that of reading in process, errors included, in the same order:

- slices are the same ``slice_size`` documents from the start, so the parent meets
  them, and any error of a slice's checks, exactly as it would alone;
- a document's check the child could not make (it raised) is made again by the parent
  when it reaches that document, which raises the same error at the same point;
- when the sources themselves raise in the child (a file unreadable, a document
  invalid), or anything goes wrong with the child (see
  :class:`~ragwright.pipeline.forked.Replies`), the parent reads the rest itself from
  the first document it did not receive, and so meets the same error there.

A fork, not a fresh interpreter: the child inherits the sources, the chunking policy and
the embedder's token counting as they are. It closes every descriptor it does not need
(the index's files above all), never touches the index and leaves by ``os._exit``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Generator, Iterable, Sequence, Sized
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragwright.pipeline.forked import Child, can_fork, close_inherited, start_child
from ragwright.pipeline.planning import check_new_document, document_source_digest, in_slices
from ragwright.protocols import Embedder, SparseEncoder
from ragwright.types import ChunkingPolicy, SourceDocument

# Documents a run must hold before its sources are read in a second process: below it,
# the fork costs more than the second core saves.
MIN_DOCUMENTS = 2048
# How long the parent waits for a slice while the child neither replies nor uses CPU
# before it gives up on the child (a stopped child, or one blocked on a hung file
# system, never answers; one busy reading a slow file uses CPU and is waited for).
STALL_SECONDS = 60.0


@runtime_checkable
class CountedSource(Protocol):
    """A source that knows how many documents its last complete pass yielded
    (``None`` before one)."""

    documents_read: int | None


@dataclass(frozen=True, slots=True)
class ReadSlice:
    """A slice of documents as read, with what the child worked out for it (``None``:
    the parent works it out): each document's source digest and, speculatively, each
    document's (chunks, BM25 terms, split) from :func:`check_new_document` (``None`` for one
    whose check raised)."""

    documents: list[SourceDocument]
    digests: list[str] | None = None
    checks: list[tuple[int, int, bool] | None] | None = None


@dataclass(frozen=True, slots=True)
class ReadingWork:
    """What the child computes for each document besides reading it."""

    policy: ChunkingPolicy
    embedder: Embedder
    sparse_encoder: SparseEncoder
    # Check every document as new (a new collection: nothing is stored under any key).
    check_new: bool
    count_terms: bool

    def digests(self, documents: Sequence[SourceDocument]) -> list[str]:
        return [
            document_source_digest(d, self.policy, self.embedder, self.sparse_encoder)
            for d in documents
        ]

    def checks(self, documents: Sequence[SourceDocument]) -> list[tuple[int, int, bool] | None]:
        checked: list[tuple[int, int, bool] | None] = []
        for document in documents:
            try:
                checked.append(
                    check_new_document(
                        document,
                        self.policy,
                        self.embedder,
                        self.sparse_encoder,
                        count_terms=self.count_terms,
                    )
                )
            except Exception:
                checked.append(None)  # the parent checks it again and raises the error
        return checked


def known_size(documents: Iterable[SourceDocument]) -> int | None:
    """How many documents ``documents`` holds, when it knows without a pass."""
    if isinstance(documents, Sized):
        return len(documents)
    if isinstance(documents, CountedSource):
        return documents.documents_read
    return None


def wanted(documents: Iterable[SourceDocument]) -> bool:
    """Whether a run over ``documents`` reads them in a second process: it is known to
    hold :data:`MIN_DOCUMENTS` or more, and :func:`~ragwright.pipeline.forked.can_fork`."""
    size = known_size(documents)
    return size is not None and size >= MIN_DOCUMENTS and can_fork()


def read_slices(
    documents: Iterable[SourceDocument],
    slice_size: int,
    work: ReadingWork | None,
) -> Generator[ReadSlice, None, None]:
    """``documents`` in slices of ``slice_size``, read by a forked child with ``work``
    (or here, without). Close the iterator when done early: that stops the child."""
    if work is None:
        yield from (ReadSlice(part) for part in in_slices(documents, slice_size))
        return
    try:
        reader = SourceReader(documents, slice_size, work)
    except OSError:  # no fork now (a process, memory or descriptor limit): read here
        yield from (ReadSlice(part) for part in in_slices(documents, slice_size))
        return
    received = 0
    try:
        while (read := reader.next()) is not None:
            if not read.documents:  # the end of the sources
                return
            received += len(read.documents)
            yield read
    finally:
        reader.close()
    # The child stopped early (the sources raised, or it was given up on): read the rest
    # here, from the first document not received, which raises any error of the sources.
    rest = itertools.islice(documents, received, None)
    yield from (ReadSlice(part) for part in in_slices(rest, slice_size))


class SourceReader:
    """The child and the pipe its slices come back on."""

    def __init__(self, documents: Iterable[SourceDocument], slice_size: int, work: ReadingWork):
        self._child = Child(_serve, (documents, slice_size, work), "ragwright-source-reader")
        self._number = 0
        self.slices = 0  # slices the child read that the parent used

    @property
    def pid(self) -> int | None:
        return self._child.pid

    def next(self) -> ReadSlice | None:
        """The next slice (no documents: the sources ended), or ``None`` when the child
        failed or was given up on."""
        self._number += 1
        reply = self._child.replies.take(self._number, STALL_SECONDS)
        if reply is None or reply[0] == "failed":
            return None
        if reply[0] == "end":
            self._child.ended = True
            return ReadSlice([])
        _, documents, digests, checks = reply
        self.slices += 1
        return ReadSlice(documents, digests, checks)

    def close(self) -> None:
        self._child.close()


def _serve(
    results: Any,
    parent: int,
    documents: Iterable[SourceDocument],
    slice_size: int,
    work: ReadingWork,
) -> None:
    """The child: read the sources a slice at a time and send each with its digests and
    checks, then the end (or ``failed`` when the sources raised)."""
    number = 0
    try:
        start_child(parent)
        close_inherited(keep={0, 1, 2, results.fileno()})
        try:
            for part in in_slices(documents, slice_size):
                number += 1
                try:
                    digests: list[str] | None = work.digests(part)
                except Exception:
                    digests = None  # the parent digests them and meets the error
                # Every other slice: the parent checks the others meanwhile, so the
                # checks (chunking, above all) are shared by both cores.
                checks = work.checks(part) if work.check_new and number % 2 else None
                results.send((number, "read", part, digests, checks))
        except Exception:
            results.send((number + 1, "failed"))
            return
        results.send((number + 1, "end"))
    except BaseException:
        pass
    finally:
        # Straight out: no flush of output buffered in the parent before the fork, no
        # handler of the parent's.
        os._exit(0)
