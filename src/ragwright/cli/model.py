"""``ragwright model status`` and ``ragwright model stop``: the local model's background
process (``RAGWRIGHT_CHAT_KEEP_WARM``), made visible and stoppable."""

from __future__ import annotations

import time

import typer

from ragwright.cli.common import AsJson, app, print_json

model_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The local model's background process: status, stop. The first command that "
    "needs the model starts it; it exits after RAGWRIGHT_CHAT_KEEP_WARM idle seconds.",
)
app.add_typer(model_app, name="model")


@model_app.command("status")
def model_status(as_json: AsJson = False) -> None:
    """Whether the background model runs for this home: its process, address, threads
    (RAGWRIGHT_CHAT_THREADS), and how long until it exits unless used."""
    from ragwright.runtime import background_model
    from ragwright.settings import load_settings

    running = background_model(load_settings())
    if running is None:
        if as_json:
            print_json({"running": False})
        else:
            print("background model: not running (the next ask starts it)")
        return
    now = time.time()
    idle = running.idle_seconds(now)
    data = {
        "running": True,
        "pid": running.pid,
        "address": running.base_url,
        "context_tokens": running.context_tokens,
        "threads": running.threads,
        "uptime_seconds": round(now - running.started_at, 1),
        "idle_seconds": round(idle, 1),
        "exits_in_seconds": round(max(0.0, running.idle_timeout - idle), 1),
    }
    if as_json:
        print_json(data)
        return
    threads = "one thread a core" if running.threads is None else f"{running.threads} thread(s)"
    print(
        f"background model: running (pid {running.pid}, {running.base_url}, {threads}), "
        f"idle {data['idle_seconds']} s, exits after {data['exits_in_seconds']} s more "
        "without use"
    )


@model_app.command("stop")
def model_stop(as_json: AsJson = False) -> None:
    """Stop the background model now (the next command that needs it starts it again)."""
    from ragwright.runtime import stop_background_model
    from ragwright.settings import load_settings

    stopped = stop_background_model(load_settings())
    if as_json:
        print_json({"stopped": stopped is not None, "pid": stopped.pid if stopped else None})
    elif stopped is None:
        print("background model: not running")
    else:
        print(f"background model: stopped (pid {stopped.pid})")
