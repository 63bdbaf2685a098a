"""``ingest-worker``: run the work items of queued ingestions (``ingest --queue``)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Annotated

import typer

from ragwright.cli.common import app, application, plural
from ragwright.cli.serve import log_to_stderr


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@app.command("ingest-worker")
def ingest_worker(
    until_idle: Annotated[
        float | None,
        typer.Option(
            "--until-idle",
            metavar="SECONDS",
            min=0.0,
            help="Exit once no work item has been queued or held for SECONDS "
            "(default: run until interrupted).",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="This worker's name in the queue's records and the logs (default HOST-PID).",
        ),
    ] = None,
) -> None:
    """Run the work items of 'ragwright ingest --queue' runs, writing into the Qdrant
    server, until interrupted.

    Needs RAGWRIGHT_DATABASE_URL (the PostgreSQL that holds the queue) and
    RAGWRIGHT_BACKEND=qdrant with the server's URL, the same embedding and BM25
    settings as the coordinator; the documents come with the items, so the sources need
    not be here. A worker runs up to two items at once; a worker that dies leaves its
    items to be taken again by another after RAGWRIGHT_INGEST_LEASE seconds.
    """
    run_ingest_worker(name or default_worker_name(), until_idle)


def run_ingest_worker(
    worker: str,
    until_idle: float | None,
    phase_hook: Callable[[str, str], None] | None = None,
) -> None:
    """The worker loop of ``ingest-worker`` until a signal (or ``until_idle``);
    ``phase_hook(document_id, phase)`` runs at each document's phase (the crash tests
    hang a worker there: tests/failpoints.py)."""
    stop = threading.Event()
    # Ctrl-C and SIGTERM end the loop after the current item; the handlers the caller
    # had come back when it ends (the loop may run inside a longer-lived process).
    previous = {
        number: signal.signal(number, lambda *_: stop.set())
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    log_to_stderr()
    print(f"ragwright ingest-worker {worker}: started", file=sys.stderr)
    try:
        stats = application().ingest_worker(
            worker=worker, idle_exit=until_idle, stop=stop, phase_hook=phase_hook
        )
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
    print(
        f"ragwright ingest-worker {worker}: {plural(stats.done, 'item')} done, "
        f"{stats.failed} failed, {stats.skipped} dropped, {stats.retried} put back",
        file=sys.stderr,
    )


@contextlib.contextmanager
def local_workers(count: int, idle_exit: float) -> Iterator[Callable[[str], None]]:
    """A callback that starts ``count`` ``ingest-worker`` processes on this machine (for
    ``ingest --queue --local-workers``; called once the run is open), stopped on exit."""
    processes: list[subprocess.Popen[bytes]] = []
    stem = default_worker_name()

    def start(_run_id: str) -> None:
        for number in range(count):
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "ragwright",
                        "ingest-worker",
                        "--until-idle",
                        str(idle_exit),
                        "--name",
                        f"{stem}-local{number}",
                    ],
                    stdout=subprocess.DEVNULL,
                )
            )

    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
