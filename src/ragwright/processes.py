"""Whether a process is still alive, for the commands that manage background processes
(the local model's, the warm command process) and their tests."""

from __future__ import annotations

import contextlib
import os


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a process of another user counts; a child of this process
    that has exited and is not yet reaped does not, and is reaped here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False
    return True
