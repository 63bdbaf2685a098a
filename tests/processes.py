"""Bounded waits on child processes, so no test can block for ever on a child that never
prints (a worker that died before its first line, a holder stuck in an import)."""

from __future__ import annotations

import subprocess
import threading
from typing import IO

# Generous: a child's first line may wait on interpreter start-up and imports on a
# loaded 2-core machine. This bounds a hang; it is not a speed check.
LINE_TIMEOUT = 120.0
# A whole child command (`python -m ragwright ...`, a crash test's writer) run to its end
# and read at once: a bound on a hang, far above any command's time on a loaded machine.
CHILD_TIMEOUT = 600.0


def read_line(
    process: subprocess.Popen[str], stream: IO[str] | None = None, timeout: float = LINE_TIMEOUT
) -> str:
    """The next line ``process`` writes to ``stream`` (its stdout by default), stripped.

    Fails the test, after killing the child, when no line comes within ``timeout``
    seconds or the child closes the stream first; the failure says which and carries
    the child's exit status.
    """
    stream = process.stdout if stream is None else stream
    if stream is None:
        raise AssertionError("the child's stream is not a pipe")
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        process.kill()
        process.wait(30)
        raise AssertionError(f"no line from the child within {timeout:.0f} s (killed it)")
    if not line or not line[0]:
        raise AssertionError(f"the child closed its output (exit status {process.poll()})")
    return line[0].strip()
