"""The validation pass's source reader (pipeline/source_process.py): a run whose sources a
forked child reads writes the same index and raises the same errors, in the same order,
as one that reads them itself; a child that fails, stalls or is killed costs only time;
the child ends with its parent."""

from __future__ import annotations

import dataclasses
import os
import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import ChunkingError, DocumentError, InputTooLong, SourceError
from ragwright.pipeline import planning_process, source_process, validation
from ragwright.processes import alive
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import SourceDocument
from tests.pipeline.forking import (
    Source,
    child_outlives_parent,
    contents,
    in_child,
    record_starts,
    summary,
)
from tests.pipeline.test_ingest_stream import LONG_HEADING, POLICY, corpus, doc
from tests.pipeline.test_ingest_stream import run as ingest_run

SLICE = 8
# An embedding limit a document of 28-word paragraphs exceeds and the corpus's do not.
SMALL = dataclasses.replace(HASHING_PROFILE, max_input_tokens=30)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[source_process.SourceReader]:
    """Every source reader a run starts (the writing pass's planner stays in process)."""
    monkeypatch.setattr(source_process, "MIN_DOCUMENTS", 1)
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", 10**9)
    return record_starts(monkeypatch, source_process.SourceReader)


@pytest.fixture
def open_index(tmp_path: Path) -> Iterator[Any]:
    opened: list[EdgeIndex] = []

    def make(name: str, profile: Any = HASHING_PROFILE) -> EdgeIndex:
        index = EdgeIndex(tmp_path / name, contract_for(profile, POLICY.version))
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()


def run(index: EdgeIndex, documents: Any, **kw: Any) -> Any:
    return ingest_run(index, documents, slice_size=SLICE, **kw)


def test_the_same_index_as_reading_in_process(
    open_index: Any, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    here, there = open_index("here"), open_index("there")
    first = run(here, Source(corpus(40)))
    assert started == []  # not asked for: no child
    # What the parent digests and checks itself (the child's calls are its own).
    done_here: list[str] = []
    for name in ("check_new_document", "document_source_digest"):
        real = getattr(validation, name)
        monkeypatch.setattr(validation, name, _recording(real, name, done_here))
    second = run(there, Source(corpus(40)), planning_process=True)
    # Five slices, every one read and digested by the child; new documents checked
    # there one slice in two, here the others (slices 2 and 4: 16 documents).
    assert len(started) == 1 and started[0].slices == 5
    assert done_here == ["check_new_document"] * 16
    assert summary(first) == summary(second)
    assert contents(here) == contents(there)
    # Unchanged, then edited (kept, new and obsolete points, a pruned document): the same.
    for documents in (corpus(40), corpus(24) + corpus(39, revision="b")[24:]):
        assert summary(run(here, Source(documents), prune=True)) == summary(
            run(there, Source(documents), prune=True, planning_process=True)
        )
        assert contents(here) == contents(there)
    assert [reader.slices for reader in started] == [5, 5, 5]
    assert not any(alive(reader.pid) for reader in started)  # each child ended with its run


def _recording(real: Any, name: str, calls: list[str]) -> Any:
    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(*args, **kwargs)

    return recording


def test_a_run_of_unknown_or_small_size_reads_in_process(
    open_index: Any, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(open_index("unknown"), iter_again(corpus(10)), planning_process=True)
    monkeypatch.setattr(source_process, "MIN_DOCUMENTS", 11)
    run(open_index("small"), Source(corpus(10)), planning_process=True)
    assert started == []


class iter_again:  # noqa: N801 (reads as the plain iterable it stands for)
    """Re-iterable, without a size."""

    def __init__(self, documents: list[SourceDocument]) -> None:
        self.documents = documents

    def __iter__(self) -> Iterator[SourceDocument]:
        return iter(self.documents)


def _outcome(index: EdgeIndex, documents: Any, **kw: Any) -> str:
    try:
        run(index, documents, embedder=HashingEmbedder(profile=SMALL), **kw)
    except (ChunkingError, DocumentError, InputTooLong, SourceError) as error:
        return f"{type(error).__name__}: {error}"
    return "written"


def _long(position: int) -> Callable[[list[SourceDocument]], None]:
    def change(documents: list[SourceDocument]) -> None:
        documents[position] = doc(90 + position, heading=LONG_HEADING)

    return change


def _duplicate(position: int, of: int) -> Callable[[list[SourceDocument]], None]:
    def change(documents: list[SourceDocument]) -> None:
        documents[position] = documents[of]

    return change


@pytest.mark.parametrize(
    "changes",
    [
        [_long(21)],  # checked by the child (slice 3), raised by the parent
        [_long(12)],  # a slice the parent checks itself
        [_long(13), _duplicate(30, of=2)],  # the earlier slice's error comes first
        [_long(17), _duplicate(22, of=2)],  # one slice: its duplicate check comes first
    ],
)
def test_bad_input_raises_the_same_first_error_and_writes_nothing(
    open_index: Any, started: list[Any], changes: list[Any]
) -> None:
    documents = corpus(40)
    for change in changes:
        change(documents)
    alone = _outcome(open_index("here", SMALL), Source(documents))
    there = open_index("there", SMALL)
    assert _outcome(there, Source(documents), planning_process=True) == alone != "written"
    assert len(started) == 1 and list(there.scroll()) == []
    assert not alive(started[0].pid)


def _unreadable(at: int) -> None:
    raise SourceError(f"sources/doc-{at:03d}.md", "unreadable: scripted")


def test_sources_that_raise_raise_the_same_error_at_the_same_document(
    open_index: Any, started: list[Any]
) -> None:
    def everywhere(at: int, _passes: int) -> None:
        if at == 27:
            _unreadable(at)

    alone = _outcome(open_index("here"), Source(corpus(40), everywhere))
    there = open_index("there")
    assert _outcome(there, Source(corpus(40), everywhere), planning_process=True) == alone
    assert "doc-027" in alone and list(there.scroll()) == []
    assert started[0].slices == 3  # the slices before the error came from the child


@pytest.mark.parametrize(
    ("action", "read_by_child"),
    [
        (lambda: _unreadable(20), 2),  # raises in the child only: the parent reads on
        (lambda: os.kill(os.getpid(), signal.SIGKILL), 2),  # killed
        (lambda: time.sleep(60), 2),  # stuck: given up on after STALL_SECONDS (5 s here)
    ],
    ids=["raises", "killed", "stuck"],
)
def test_a_child_that_fails_costs_only_time(
    open_index: Any,
    started: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    action: Callable[[], None],
    read_by_child: int,
) -> None:
    # Short enough for a test; a healthy child reads a slice in milliseconds.
    monkeypatch.setattr(source_process, "STALL_SECONDS", 5.0)
    here, there = open_index("here"), open_index("there")
    expected = summary(run(here, Source(corpus(40))))
    got = run(there, Source(corpus(40), in_child(20, action)), planning_process=True)
    assert summary(got) == expected
    assert started[0].slices == read_by_child
    assert not alive(started[0].pid)
    assert contents(here) == contents(there)


CHILD_OF_A_DYING_PARENT = textwrap.dedent(
    """
    import os
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.pipeline.source_process import ReadingWork, SourceReader
    from ragwright.testing.fakes import HashingEmbedder
    from ragwright.types import ChunkingPolicy
    from tests.pipeline.test_ingest_stream import corpus

    work = ReadingWork(ChunkingPolicy(), HashingEmbedder(), Bm25Encoder(), True, True)
    reader = SourceReader(corpus(400), 8, work)  # more than its pipe holds
    print(reader.pid, flush=True)
    os._exit(0)  # killed, in effect: nothing closes the child
    """
)


def test_the_child_ends_when_its_parent_is_gone(tmp_path: Path) -> None:
    assert not child_outlives_parent(CHILD_OF_A_DYING_PARENT, tmp_path)


STUCK_CHILD_OF_A_DYING_PARENT = textwrap.dedent(
    """
    import os, time
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.pipeline.source_process import ReadingWork, SourceReader
    from ragwright.testing.fakes import HashingEmbedder
    from ragwright.types import ChunkingPolicy
    from tests.pipeline.forking import Source, in_child
    from tests.pipeline.test_ingest_stream import corpus

    # Stuck reading its first document (a hung file system, say): it sends nothing.
    source = Source(corpus(8), in_child(0, lambda: time.sleep(600)))
    work = ReadingWork(ChunkingPolicy(), HashingEmbedder(), Bm25Encoder(), True, True)
    reader = SourceReader(source, 8, work)
    time.sleep(0.5)  # the child is set up and stuck
    print(reader.pid, flush=True)
    os._exit(0)  # killed, in effect: nothing closes the child
    """
)


def test_a_stuck_child_ends_when_its_parent_is_gone(tmp_path: Path) -> None:
    """It would never send again, so only the parent-death signal ends it."""
    assert not child_outlives_parent(STUCK_CHILD_OF_A_DYING_PARENT, tmp_path)


def _no_fork() -> int:
    raise BlockingIOError(11, "Resource temporarily unavailable (scripted)")


def test_when_no_child_can_be_forked_the_run_reads_and_plans_in_process(
    open_index: Any, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process or memory limit costs the children, not the run."""
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", 1)
    planners = record_starts(monkeypatch, planning_process.PlanningProcess)
    here, there = open_index("here"), open_index("there")
    expected = summary(run(here, Source(corpus(40))))
    monkeypatch.setattr(os, "fork", _no_fork)
    assert summary(run(there, Source(corpus(40)), planning_process=True)) == expected
    assert started == [] and planners == []
    assert contents(here) == contents(there)
