"""``python -m tests.failpoints FAILPOINT ARGS...``: ``ragwright ARGS...`` with one
test-only fault injected through the factory that builds the process's work, never read
from the environment by the product:

``after-job-persist`` (with ``serve``)
    ``create_app(on_job_persisted=...)`` ends the process with status 137 once a
    submitted answer job is durable, before its 202 is sent, as a crash at that instant
    would (docs/jobs.md, "Failpoint").
``ingest-item-hang`` (with ``ingest-worker``)
    the worker loop's ``phase_hook`` holds each item for good after switching its first
    document (its heartbeat goes on), until the test kills the process
    (docs/ingestion.md).

Started as a subprocess by ``tests/replicas.py`` and ``tests/workers.py`` (and the fault
benchmark), which put the repository on ``PYTHONPATH`` (:func:`launcher_env`).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from ragwright.application.jobs import AnswerJob

AFTER_JOB_PERSIST = "after-job-persist"
INGEST_ITEM_HANG = "ingest-item-hang"
ROOT = Path(__file__).resolve().parents[1]


def die_after_persist(_job: AnswerJob) -> None:
    os._exit(137)


def hang_after_first_switch(_document_id: str, phase: str) -> None:
    if phase == "live":
        print(f"failpoint {INGEST_ITEM_HANG}: holding the item", file=sys.stderr, flush=True)
        threading.Event().wait(timeout=3600)  # until the test kills the process


def command(failpoint: str | None, *args: str) -> list[str]:
    """The command line of ``ragwright ARGS...``, with ``failpoint`` when one is given."""
    if failpoint is None:
        return [sys.executable, "-m", "ragwright", *args]
    return [sys.executable, "-m", "tests.failpoints", failpoint, *args]


def launcher_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this repository importable (for ``-m tests.failpoints``)."""
    path = [p for p in (env.get("PYTHONPATH"), str(ROOT)) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def inject(failpoint: str) -> None:
    """Give the factory that ``ragwright``'s command calls the failpoint's hook."""
    if failpoint == AFTER_JOB_PERSIST:
        from ragwright import service

        service.create_app = functools.partial(
            service.create_app, on_job_persisted=die_after_persist
        )
    elif failpoint == INGEST_ITEM_HANG:
        from ragwright.cli import workers

        workers.run_ingest_worker = functools.partial(
            workers.run_ingest_worker, phase_hook=hang_after_first_switch
        )
    else:
        raise SystemExit(f"unknown failpoint {failpoint!r}")


if __name__ == "__main__":
    inject(sys.argv[1])
    sys.argv = ["ragwright", *sys.argv[2:]]
    from ragwright.cli import main

    main()
