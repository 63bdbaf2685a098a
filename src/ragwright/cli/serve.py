"""``ragwright serve`` (the HTTP service) and ``ragwright worker`` (answer jobs without
HTTP); docs/service.md."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Annotated, Any

import typer

from ragwright.cli.common import app, application
from ragwright.errors import ConfigError, IndexBusy


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, metavar="PORT", help="TCP port.")
    ] = 8000,
) -> None:
    """Serve answers, search and status over HTTP (OpenAPI at /openapi.json), and a
    page for people at / (sign in with a key, ask, open the cited passages, status).

    Callers authenticate with API keys from 'ragwright keys add'. The process owns the
    embedded index: ingest through it (POST /v1/ingestions, 'ragwright ingest --server')
    while it serves. Startup refuses a broken configuration (templates, embedding model,
    an index built under other settings) with one line; a missing or damaged index and
    an unreachable model are reported by /readyz instead.
    """
    import uvicorn

    from ragwright.service import create_app

    try:  # before anything slow starts: a port in use is one line, not a late traceback
        socket.create_server((host, port)).close()
    except OSError as error:
        raise ConfigError(
            "--host/--port",
            f"cannot listen on {host}:{port}: {os.strerror(error.errno) if error.errno else error}",
        ) from error
    from ragwright.settings import load_settings

    # A long-lived process keeps its own model in-process (no background process whose
    # idle timeout it would have to keep feeding).
    settings = load_settings().with_overrides(chat_keep_warm=0)
    if settings.embedding.threads is None:
        # Concurrent requests use the cores better than one request's intra-op threads,
        # and a free core keeps the event loop's refusals fast (benchmarks/service_load.py).
        settings = settings.with_overrides(embedding_threads=1)
    app_ = application(settings)
    for warning in app_.check_serving():
        print(f"warning: {warning}", file=sys.stderr)
    # Without a declared degradation mode every answer would be unavailable: the model
    # must answer before the service listens, and that probe is the service's first.
    probed = not settings.answers.evidence_only_on_model_failure and not app_.templates()
    if probed and (problem := asyncio.run(app_.probe_model())) is not None:
        raise ConfigError(
            "RAGWRIGHT_CHAT_PROVIDER",
            f"the chat model does not answer ({problem}) and no degradation mode is declared "
            "(RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE=false and no RAGWRIGHT_TEMPLATES)",
        )
    log_to_stderr()
    print(
        f"ragwright starting on http://{host}:{port} (the page at /, OpenAPI at /openapi.json; "
        "ready when /readyz answers 200)",
        file=sys.stderr,
    )
    uvicorn.run(
        create_app(app_, probe_model=not probed),
        host=host,
        port=port,
        log_level="info",
        access_log=False,  # the service logs one line per request, without bodies
    )


@app.command()
def worker(
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            metavar="N",
            help="Answer jobs this process runs at once (default RAGWRIGHT_JOB_WORKERS).",
        ),
    ] = None,
) -> None:
    """Run answer jobs (POST /v1/answer-jobs) without serving HTTP, until interrupted.

    Claims jobs from the shared job store (PostgreSQL with RAGWRIGHT_DATABASE_URL, so
    workers on several machines share one queue), within the job pool. With the
    embedded index the worker must own it: run workers beside a Qdrant server
    (RAGWRIGHT_BACKEND=qdrant), or inside 'ragwright serve' (RAGWRIGHT_JOB_WORKERS).
    """
    from ragwright.application.job_runner import JobRunner
    from ragwright.application.jobs import JobLimits
    from ragwright.settings import load_settings

    app_ = application(load_settings().with_overrides(chat_keep_warm=0))
    settings = app_.settings
    concurrency = jobs or settings.jobs.workers or 1
    if app_.index_state().error == "IndexBusy":
        # Every job would fail to read the index and go back to the queue: refuse now.
        raise IndexBusy(str(settings.index_path))

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signal_number, stop.set)
        runner = JobRunner(
            app_,
            app_.jobs(),
            concurrency=concurrency,
            limits=JobLimits(settings.jobs.capacity, settings.jobs.tenant_capacity),
            lease_seconds=settings.jobs.lease,
            deadline_seconds=settings.jobs.deadline,
        )
        print(
            f"ragwright worker {runner.worker_id}: up to {concurrency} jobs at once",
            file=sys.stderr,
        )
        with app_.hold_index():
            async with app_.chat_kept_open("jobs"):
                await runner.run(stop)

    log_to_stderr()
    asyncio.run(run())


class _StderrNow(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted, not to the stream
    that was current when the handler was made (that one may be closed since: a command
    run in-process by a test runner, or a redirected stderr)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def log_to_stderr() -> None:
    # One line per request, job step and answer mode, never a body (docs/service.md).
    log = logging.getLogger("ragwright")
    if not log.handlers:
        handler = _StderrNow()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
