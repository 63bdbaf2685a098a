"""What the tests of ingestion's forked children share: the index as a whole, a run's
summary, sources that act when a child reads them, and whether a process still runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.processes import alive
from ragwright.types import SourceDocument

# The test process: a child is any other.
PARENT = os.getpid()
ROOT = Path(__file__).resolve().parents[2]


def contents(index: EdgeIndex) -> list[tuple[str, str, str, str]]:
    """Every point: id, payload, dense and BM25 vectors."""
    points = list(index.scroll())
    ids = [p.point_id for p in points]
    dense, sparse = index.read_part(ids, "dense"), index.read_part(ids, "sparse")
    return sorted(
        (
            str(p.point_id),
            json.dumps(p.payload, sort_keys=True),
            json.dumps([round(x, 6) for x in dense[p.point_id]]),
            json.dumps([list(sparse[p.point_id].indices), list(sparse[p.point_id].values)]),
        )
        for p in points
    )


def summary(report: Any) -> tuple[Any, ...]:
    return (report.documents, report.chunks, report.embedded, report.unchanged, report.deleted)


class Source:
    """A corpus that knows its size, as a folder does after the command's first read;
    ``on_read(position, passes)`` runs as each document is read, in whichever process
    reads it, with the passes that process began over the source (a forked child
    counts on from its parent's count at the fork)."""

    def __init__(
        self,
        documents: list[SourceDocument],
        on_read: Callable[[int, int], None] | None = None,
    ) -> None:
        self.documents = documents
        self.on_read = on_read
        self.passes = 0

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[SourceDocument]:
        self.passes += 1
        for position, document in enumerate(self.documents):
            if self.on_read is not None:
                self.on_read(position, self.passes)
            yield document


def in_child(position: int, action: Callable[[], None]) -> Callable[[int, int], None]:
    """``action`` when a child (not the test's process) reads document ``position``."""

    def on_read(at: int, _passes: int) -> None:
        if at == position and os.getpid() != PARENT:
            action()

    return on_read


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit may wait for a reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return alive(pid)
    return state != "Z"


def child_outlives_parent(script: str, tmp_path: Path) -> bool:
    """Run ``script`` (which starts a child, prints its pid and exits without closing
    it) and tell whether the child still runs some seconds later. Output goes to a file,
    not a pipe the child would hold open; a child left running is killed."""
    out = tmp_path / "child-pid"
    with out.open("w") as stdout:
        subprocess.run(
            [sys.executable, "-c", script],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            timeout=120,
            check=True,
            cwd=ROOT,
        )
    child = int(out.read_text().split()[0])
    try:
        # Wide bounds for a busy machine.
        for _ in range(600):
            if not running(child):
                return False
            time.sleep(0.05)
        return running(child)
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)


def record_starts(monkeypatch: pytest.MonkeyPatch, kind: Any) -> list[Any]:
    """Every instance of ``kind`` (a forked child's handle) made from now on."""
    made: list[Any] = []
    real = kind.__init__

    def recording(self: Any, *args: Any) -> None:
        real(self, *args)
        made.append(self)

    monkeypatch.setattr(kind, "__init__", recording)
    return made
