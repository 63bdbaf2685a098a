"""``ragwright model status`` and ``ragwright model stop``: the background processes a
command leaves for the next one, made visible and stoppable: the local model's
(``RAGWRIGHT_CHAT_KEEP_WARM``) and the warm command process that runs ``ask`` and
``search`` (``RAGWRIGHT_COMMAND_KEEP_WARM``, :mod:`ragwright.warm`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragwright.cli.common import AsJson, app, plural, print_json

if TYPE_CHECKING:
    from ragwright.settings import Settings

model_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The background processes: the local model's and the warm command process "
    "(status, stop). The first command that needs the model starts the model's; it exits "
    "after RAGWRIGHT_CHAT_KEEP_WARM idle seconds. An ask or search run in its own process "
    "starts a warm command process that runs the next ones from the same directory and "
    "environment (any variable but a terminal's: another value gets a process of its "
    "own); it exits after RAGWRIGHT_COMMAND_KEEP_WARM idle seconds.",
)
app.add_typer(model_app, name="model")


@model_app.command("status")
def model_status(as_json: AsJson = False) -> None:
    """Show the background model and the warm command process.

    The background model of this home: its process, address, threads
    (RAGWRIGHT_CHAT_THREADS) and how long until it exits unless used. The warm command
    process of this directory and environment: its process, the commands it has run, and
    how long until it exits unless used; and the pids of the other warm command processes
    serving this home (from other directories or environments)."""
    from ragwright.runtime import background_model
    from ragwright.settings import load_settings

    settings = load_settings()
    running = background_model(settings)
    command = _command_process(stop=False)
    data: dict[str, object] = {"running": running is not None}
    now = time.time()
    if running is not None:
        idle = running.idle_seconds(now)
        data |= {
            "pid": running.pid,
            "address": running.base_url,
            "context_tokens": running.context_tokens,
            "threads": running.threads,
            "uptime_seconds": round(now - running.started_at, 1),
            "idle_seconds": round(idle, 1),
            "exits_in_seconds": round(max(0.0, running.idle_timeout - idle), 1),
        }
    data["command_process"] = command
    from ragwright.warm.client import of_home

    home = str(settings.storage.home.resolve())
    others = [
        int(found["pid"])
        for found in of_home(home)
        if command is None or found["pid"] != command["pid"]
    ]
    data["other_command_processes"] = sorted(others)
    if as_json:
        print_json(data)
        return
    if running is None:
        print("background model: not running (the next ask starts it)")
    else:
        threads = (
            "threads: one per core (default)"
            if running.threads is None
            else f"threads: {running.threads}"
        )
        print(
            f"background model: running (pid {running.pid}, {running.base_url}, {threads}), "
            f"idle {data['idle_seconds']} s, exits after {data['exits_in_seconds']} s more "
            "without use"
        )
    if command is None:
        print(
            "warm command process: not running (the next ask or search runs in its own "
            "process and starts one, unless RAGWRIGHT_COMMAND_KEEP_WARM is 0)"
        )
    else:
        state = "running a command" if command["busy"] else f"idle {command['idle_seconds']} s"
        print(
            f"warm command process: running (pid {command['pid']}, "
            f"{plural(int(command['served']), 'command')} run here so far), {state}, exits after "
            f"{command['exits_in_seconds']} s more without use"
        )

    if others:
        print(
            f"other warm command processes of this home: {', '.join(map(str, others))} (other "
            "directories or environments; each exits after its idle timeout; `ragwright model "
            "stop --all` ends them)"
        )


@model_app.command("stop")
def model_stop(
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Also stop the warm command processes serving this home from other "
            "directories or environments.",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Stop both background processes now.

    The background model of this home and the warm command process of this directory and
    environment (the next command that needs them starts them again)."""
    from ragwright.runtime import stop_background_model
    from ragwright.settings import load_settings

    settings = load_settings()
    stopped = stop_background_model(settings)
    command = _command_process(stop=True)
    others = _stop_other_command_processes(settings) if every else []
    if command is not None:  # stopping already, it may still have answered
        others = [pid for pid in others if pid != command["pid"]]
    if as_json:
        print_json(
            {
                "stopped": stopped is not None,
                "pid": stopped.pid if stopped else None,
                "command_process_pid": command["pid"] if command else None,
                **({"other_command_process_pids": others} if every else {}),
            }
        )
        return
    if stopped is None:
        print("background model: not running")
    else:
        print(f"background model: stopped (pid {stopped.pid})")
    if command is None:
        print("warm command process: not running")
    else:
        print(f"warm command process: stopped (pid {command['pid']})")
    if every:
        listed = ", ".join(map(str, others)) if others else "none"
        print(f"other warm command processes stopped: {listed}")


def _stop_other_command_processes(settings: Settings) -> list[int]:
    """End the other warm command processes serving this home (each between commands:
    one running a command ends after it); their pids."""
    from ragwright.processes import alive
    from ragwright.warm.client import of_home

    pids = sorted(
        int(found["pid"]) for found in of_home(str(settings.storage.home.resolve()), stop=True)
    )
    give_up = time.monotonic() + 10.0
    while time.monotonic() < give_up and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return pids


def _command_process(*, stop: bool) -> dict[str, Any] | None:
    """The warm command process serving this context (:mod:`ragwright.warm`), as its
    status says; ``stop`` ends it (and waits up to 10 s for it to exit)."""
    from ragwright.warm.client import Context, status

    found = status(Context(), stop=stop)
    if found is None:
        return None
    now = time.time()
    idle = 0.0 if found["busy"] else max(0.0, now - found["last_used"])
    found |= {
        "uptime_seconds": round(now - found["started_at"], 1),
        "idle_seconds": round(idle, 1),
        "exits_in_seconds": round(max(0.0, found["idle_timeout"] - idle), 1),
    }
    if stop:
        from ragwright.processes import alive

        give_up = time.monotonic() + 10.0
        while time.monotonic() < give_up and alive(int(found["pid"])):
            time.sleep(0.05)
    return found
