"""``ragwright serve``: the HTTP service (docs/service.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from typing import Annotated

import typer

from ragwright.cli.common import app, application
from ragwright.errors import ConfigError


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, metavar="PORT", help="TCP port.")
    ] = 8000,
) -> None:
    """Serve answers, search and status over HTTP (OpenAPI at /openapi.json).

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

    settings = load_settings()
    if settings.embedding_threads is None:
        # Concurrent requests use the cores better than one request's intra-op threads,
        # and a free core keeps the event loop's refusals fast (benchmarks/service_load.py).
        settings = settings.with_overrides(embedding_threads=1)
    app_ = application(settings)
    for warning in app_.check_serving():
        print(f"warning: {warning}", file=sys.stderr)
    if (
        not settings.evidence_only_on_model_failure
        and not app_.templates()
        and (problem := asyncio.run(app_.probe_model())) is not None
    ):
        # Without a declared degradation mode every answer would be unavailable.
        raise ConfigError(
            "RAGWRIGHT_CHAT_PROVIDER",
            f"the chat model does not answer ({problem}) and no degradation mode is declared "
            "(RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE=false and no RAGWRIGHT_TEMPLATES)",
        )
    # One line per request and the mode of every answer, never a body (docs/service.md).
    log = logging.getLogger("ragwright")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    print(f"ragwright serving on http://{host}:{port} (OpenAPI at /openapi.json)", file=sys.stderr)
    uvicorn.run(
        create_app(app_),
        host=host,
        port=port,
        log_level="info",
        access_log=False,  # the service logs one line per request, without bodies
    )
