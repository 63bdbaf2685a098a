"""The ``ragwright`` command's entry point, before any of the application is imported.

``ask`` and ``search`` are handed to a warm command process when one serves this
context (:mod:`ragwright.warm`); otherwise, and for every other command, the command
runs here (:func:`ragwright.cli.common.run`), and an ``ask`` or ``search`` run here
starts a warm process for the next one when ``RAGWRIGHT_COMMAND_KEEP_WARM`` is above 0.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragwright.warm.client import Context


def main() -> None:
    arguments = sys.argv[1:]
    command = next((a for a in arguments if not a.startswith("-")), None)
    context = None
    from ragwright.warm.client import WARM_COMMANDS

    if command in WARM_COMMANDS and "--help" not in arguments:
        from ragwright.warm.client import Context, forward

        context = Context()  # the environment and directory as they are at the start
        code = forward(arguments, context)
        if code is not None:
            sys.exit(code)
    from ragwright.cli.common import run

    code = run(arguments)
    if context is not None:
        _start_warm(context)
    sys.exit(code)


def _start_warm(context: Context) -> None:
    """Start a warm process for the next command, as the settings ask."""
    from ragwright.settings import load_settings
    from ragwright.warm.client import start

    try:
        idle = load_settings().chat.command_keep_warm
    except Exception:  # settings the command already reported as invalid
        return
    if idle > 0:
        try:
            start(context, idle)
        except OSError:  # no process can be started (limits): the next command runs here
            return
