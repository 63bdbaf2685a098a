"""Progress display for long commands, fed by ``(event, count)`` callbacks.

On a terminal: a progress bar with elapsed time and ETA on stderr. Otherwise, with
``--progress``: one plain line every ``interval`` seconds (and a last one at the end),
so a long run whose output goes to a file or a pipe still shows that it moves.
Without either, nothing is printed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# A total starts a phase (named after its unit); the advancing events count its work:
# ingestion's chunks (unchanged or embedded), calibration's questions retrieved and then
# threshold combinations swept, then questions scored for the answerability signal;
# an answer run's questions answered.
TOTALS = {
    "plan": "chunks",
    "questions": "questions",
    "combinations": "combinations",
    "signals": "answerability signals",
    "answers": "answers",
}
ADVANCING = frozenset({"unchanged", "embedded", "retrieved", "swept", "scored", "answered"})


class ProgressDisplay:
    """A context manager and ``(event, count)`` callback."""

    def __init__(
        self,
        *,
        force_lines: bool = False,
        interval: float = 5.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.unit = "items"
        self._stream = stream or sys.stderr
        self._terminal = self._stream.isatty()
        self._lines = force_lines and not self._terminal
        self._interval = interval
        self._clock = clock
        self._total: int | None = None
        self._done = 0
        self._started = clock()
        self._last_line = self._started
        self._bar: Progress | None = None
        self._task: Any = None
        if self._terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=self._stream),
                transient=True,
            )

    def __enter__(self) -> ProgressDisplay:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self._lines and self._total is not None:
            self._line()

    def __call__(self, event: str, count: int) -> None:
        if event in TOTALS:
            if self._lines and self._total is not None:
                self._line()  # the last line of the phase that ends here
            self.unit, self._total, self._done = TOTALS[event], count, 0
            self._started = self._last_line = self._clock()
            if self._bar is not None:
                self._task = self._bar.add_task(self.unit, total=count)
            return
        if event not in ADVANCING:
            return
        self._done += count
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, count)
        elif self._lines and self._clock() - self._last_line >= self._interval:
            self._line()

    def _line(self) -> None:
        now = self._clock()
        self._last_line = now
        elapsed = now - self._started
        total = self._total or 0
        rate = self._done / elapsed if elapsed > 0 else 0.0
        share = f" ({100 * self._done / total:.0f}%)" if total else ""
        eta = ""
        if rate > 0 and total > self._done:
            eta = f", ETA {_duration((total - self._done) / rate)}"
        print(
            f"progress: {self._done}/{total} {self.unit}{share}, "
            f"{rate:.1f} {self.unit}/s, elapsed {_duration(elapsed)}{eta}",
            file=self._stream,
            flush=True,
        )


def _duration(elapsed: float) -> str:
    seconds = round(elapsed)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
