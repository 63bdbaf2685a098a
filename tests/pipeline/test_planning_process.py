"""The writing pass's planning process (pipeline/planning_process.py): it writes the
same index as planning in-process, a child that fails or is killed costs only time, the
child never keeps the index's files, and it ends with its parent."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge import engine
from ragwright.adapters.edge.index import EdgeIndex
from ragwright.core.contracts import contract_for
from ragwright.errors import SourceError
from ragwright.pipeline import planning, planning_process, source_process
from ragwright.processes import alive
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import SourceDocument
from tests.pipeline.forking import (
    Source,
    child_outlives_parent,
    contents,
    in_child,
    record_starts,
    summary,
)
from tests.pipeline.test_ingest_stream import POLICY, corpus
from tests.pipeline.test_ingest_stream import run as ingest_run

SLICE = 8


@pytest.fixture
def reopened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The shard reopenings (after each seal); small seals make several in a run."""
    monkeypatch.setattr(engine, "SEAL_POINTS", 8)
    calls: list[Path] = []
    real = engine.load_shard

    def recording(index: Path, *args: Any) -> Any:
        calls.append(index)
        return real(index, *args)

    monkeypatch.setattr(engine, "load_shard", recording)
    return calls


@pytest.fixture
def open_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reopened: list[Path]
) -> Iterator[Any]:
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", 1)
    opened: list[EdgeIndex] = []

    def make(name: str) -> EdgeIndex:
        index = EdgeIndex(tmp_path / name, contract_for(HASHING_PROFILE, POLICY.version))
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[planning_process.PlanningProcess]:
    """Every planning process a run starts."""
    return record_starts(monkeypatch, planning_process.PlanningProcess)


def run(index: EdgeIndex, documents: list[SourceDocument], **kw: Any) -> Any:
    return ingest_run(index, documents, slice_size=SLICE, **kw)


def test_the_same_index_as_planning_in_process(
    open_index: Any, started: list[Any], reopened: list[Path]
) -> None:
    here, there = open_index("here"), open_index("there")
    first = run(here, corpus(40))
    assert started == []  # not asked for: no child
    reopened.clear()
    second = run(there, corpus(40), planning_process=True)
    assert len(started) == 1 and started[0].planned_slices == 5  # every slice's plan used
    # The parent reopened its shard while the child lived: the child holds none of its
    # files (an inherited WAL lock makes that reopen fail).
    assert len([path for path in reopened if path.name == "there"]) >= 2
    assert summary(first) == summary(second)
    assert contents(here) == contents(there)
    # A second run over edited documents (kept, new and obsolete points) agrees too.
    edited = corpus(24) + corpus(40, revision="b")[24:]
    assert summary(run(here, edited, prune=True)) == summary(
        run(there, edited, prune=True, planning_process=True)
    )
    assert contents(here) == contents(there)
    assert started[1].planned_slices == 2  # the 16 edited documents
    assert not any(alive(p.pid) for p in started)  # each child ended with its run


def test_a_small_run_plans_in_process(
    open_index: Any, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", 10_000)
    run(open_index("small"), corpus(10), planning_process=True)
    assert started == []


def _fails(documents: Any, plan: Any, *args: Any) -> Any:
    raise RuntimeError("scripted failure in the planning process")


def _is_stuck(documents: Any, plan: Any, *args: Any) -> Any:
    time.sleep(60)  # without the stall bound the run would wait it out: a failure
    return plan(documents, *args)


@pytest.mark.parametrize(
    ("misbehave", "slice_number", "planned_by_child"),
    [
        (_fails, 2, 4),  # that slice is planned here, the child goes on
        (_is_stuck, 1, 1),  # the parent kills it after STALL_SECONDS (5 s here)
    ],
)
def test_a_child_misbehaving_on_a_slice_changes_nothing_but_who_plans(
    open_index: Any,
    started: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    misbehave: Any,
    slice_number: int,
    planned_by_child: int,
) -> None:
    real = planning.plan_documents

    def planned(documents: Any, *args: Any) -> Any:
        if documents[0].document_id == f"doc-{slice_number * SLICE:03d}":
            return misbehave(documents, real, *args)
        return real(documents, *args)

    # The child is a fork: it plans with this module's function as patched here.
    monkeypatch.setattr(planning_process, "plan_documents", planned)
    if misbehave is _is_stuck:
        # Short enough for a test, long enough that a busy machine's healthy child,
        # planning the slices before, never reaches it.
        monkeypatch.setattr(planning_process, "STALL_SECONDS", 5.0)
    here, there = open_index("here"), open_index("there")
    expected = summary(run(here, corpus(40)))
    assert summary(run(there, corpus(40), planning_process=True)) == expected
    assert started[0].planned_slices == planned_by_child
    assert not alive(started[0].pid)
    assert contents(here) == contents(there)


def test_a_child_killed_mid_run_costs_only_time(
    open_index: Any, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = planning.plan_slice
    calls = 0

    def kill_child_after_first(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += bool(started)  # counts the second run's slices only
        if calls == 2:
            os.kill(started[0].pid, signal.SIGKILL)
        return real(*args, **kwargs)

    monkeypatch.setattr("ragwright.pipeline.writing_pass.plan_slice", kill_child_after_first)
    here, there = open_index("here"), open_index("there")
    expected = summary(run(here, corpus(40)))
    assert summary(run(there, corpus(40), planning_process=True)) == expected
    assert 1 <= started[0].planned_slices < 5
    assert contents(here) == contents(there)


def _unreadable(at: int) -> None:
    raise SourceError(f"sources/doc-{at:03d}.md", "unreadable: scripted")


def test_sources_that_raise_in_the_child_only_are_read_here(
    open_index: Any, started: list[Any]
) -> None:
    """The child reads the writing pass's sources itself: when they raise there, the
    parent reads the rest from the first slice it did not receive."""
    here, there = open_index("here"), open_index("there")
    expected = summary(run(here, corpus(40)))
    flaky = Source(corpus(40), in_child(20, lambda: _unreadable(20)))
    assert summary(run(there, flaky, planning_process=True)) == expected
    assert started[0].planned_slices == 2  # documents 0-15; 16-23 raised there
    assert not alive(started[0].pid)
    assert contents(here) == contents(there)


def test_sources_that_raise_on_the_writing_pass_raise_the_same_error(
    open_index: Any, started: list[Any]
) -> None:
    def second_pass(at: int, passes: int) -> None:
        if at == 20 and passes >= 2:  # read fine on the validation pass, not after
            _unreadable(at)

    outcomes = []
    for name, planned in (("here", False), ("there", True)):
        index = open_index(name)
        with pytest.raises(SourceError) as caught:
            run(index, Source(corpus(40), second_pass), planning_process=planned)
        outcomes.append((str(caught.value), contents(index)))
    assert outcomes[0] == outcomes[1]
    assert "doc-020" in outcomes[0][0] and outcomes[0][1]  # the slices before were written
    assert started[0].planned_slices == 2


CHILD_OF_A_DYING_PARENT = textwrap.dedent(
    """
    import os
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.pipeline.planning import in_slices
    from ragwright.pipeline.planning_process import PlanningProcess
    from ragwright.testing.fakes import HashingEmbedder
    from ragwright.types import ChunkingPolicy
    from tests.pipeline.test_ingest_stream import corpus

    slices = in_slices(corpus(400), 8)  # more plans than its pipe holds
    process = PlanningProcess(slices, ChunkingPolicy(), HashingEmbedder(), Bm25Encoder(), 10.0)
    print(process.pid, flush=True)
    os._exit(0)  # killed, in effect: nothing closes the child
    """
)


def test_the_child_ends_when_its_parent_is_gone(tmp_path: Path) -> None:
    assert not child_outlives_parent(CHILD_OF_A_DYING_PARENT, tmp_path)


@pytest.mark.slow
def test_ragwright_ingest_reads_and_plans_a_large_run_in_its_children(
    tmp_path: Path, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the command: a run at the size thresholds reads its sources in one child
    (the folder's size is known from the command's first read) and plans its slices in
    another, a run under them does neither, and both write the same (the bundled
    embedding model's token counting included, inherited by the children)."""
    from tests.cli import ragwright
    from tests.conftest import SAMPLES

    readers = record_starts(monkeypatch, source_process.SourceReader)
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", 10**9)
    monkeypatch.setattr(source_process, "MIN_DOCUMENTS", 10**9)
    alone = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path / "a", check=True).stdout
    )
    assert started == [] and readers == []
    monkeypatch.setattr(planning_process, "MIN_CHUNKS", alone["chunks"])
    monkeypatch.setattr(source_process, "MIN_DOCUMENTS", alone["documents"])
    forked = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path / "b", check=True).stdout
    )
    assert len(started) == 1 and started[0].planned_slices >= 1
    assert len(readers) == 1 and readers[0].slices >= 1
    assert not alive(started[0].pid) and not alive(readers[0].pid)
    assert {k: v for k, v in forked.items() if k != "sources"} == {
        k: v for k, v in alone.items() if k != "sources"
    }
    searched = [
        json.loads(
            ragwright(
                "search", "drain the queue at shutdown", "--json", home=tmp_path / h, check=True
            ).stdout
        )
        for h in ("a", "b")
    ]
    assert searched[0]["hits"] == searched[1]["hits"]
    # Again, unchanged: its sources read by a child again, nothing embedded.
    again = json.loads(
        ragwright("ingest", str(SAMPLES), "--json", home=tmp_path / "b", check=True).stdout
    )
    assert len(readers) == 2 and again["embedded"] == 0
    assert again["unchanged"] == alone["chunks"]
