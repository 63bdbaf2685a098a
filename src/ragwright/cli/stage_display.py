"""What ``ragwright ask`` is doing while it waits, and how long each part took.

On a terminal: one spinner line on stderr naming the current stage ("retrieving
evidence", "starting the local model", "waiting for the model's answer") with the time
spent so far, replaced at the end by one line with the total and the stages' times.
Otherwise, with ``--progress``: one plain line per stage as it starts, and the same last
line. Without either, nothing is printed (a pipe or a file gets the answer only).
Stages come from :mod:`ragwright.stages`; no question or text is ever shown here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from rich.console import Console
from rich.status import Status

STAGE_WORDS = {
    "open": "opening the index and loading the embedding model",
    "retrieve": "retrieving evidence",
    "assemble": "assembling the context",
    "score": "scoring evidence sentences against the question",
    "start-model": "starting the local model (later commands reuse it)",
    "generate": "waiting for the model's answer",
    "validate": "checking the answer against its evidence",
}


class StageDisplay:
    """A context manager and stage listener (``display("retrieve")``)."""

    def __init__(
        self,
        *,
        force_lines: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        terminal = self._stream.isatty()
        self._lines = force_lines and not terminal
        self._clock = clock
        self._started = clock()
        self._status: Status | None = None
        if terminal:
            self._status = Status("asking", console=Console(file=self._stream))
        self.shown = terminal or self._lines

    def __enter__(self) -> StageDisplay:
        self._started = self._clock()
        if self._status is not None:
            self._status.start()
        self("open")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()

    def __call__(self, stage: str) -> None:
        words = STAGE_WORDS.get(stage, stage)
        elapsed = self._clock() - self._started
        if self._status is not None:
            self._status.update(f"{words} (at {elapsed:.1f} s)")
        elif self._lines:
            print(f"ask: {words} (at {elapsed:.1f} s)", file=self._stream, flush=True)

    def finish(self, timings_ms: Mapping[str, float]) -> None:
        """The last line: the total and every stage's time, largest first."""
        if not self.shown:
            return
        total = self._clock() - self._started
        parts = ", ".join(
            f"{stage} {ms / 1000:.1f} s"
            for stage, ms in sorted(timings_ms.items(), key=lambda item: -item[1])
        )
        print(
            f"ask: took {total:.1f} s" + (f" ({parts})" if parts else ""),
            file=self._stream,
            flush=True,
        )
