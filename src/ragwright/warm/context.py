"""The context a warm command process serves, as the name of its socket.

Standard library only: the command-line launcher computes it before importing anything
of the application (the point of a warm process is not to pay those imports).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

# Variables a terminal or a login sets that do not change what a command does; a warm
# process serving one terminal serves another with the same settings. The command
# still runs with the caller's own values of them.
VOLATILE = frozenset(
    {
        "_",
        "COLORTERM",
        "COLUMNS",
        "DISPLAY",
        "GPG_TTY",
        "HISTCONTROL",
        "HISTFILE",
        "HISTSIZE",
        "LINES",
        "LS_COLORS",
        "OLDPWD",
        "PROMPT_COMMAND",
        "PS1",
        "PWD",
        "SHLVL",
        "STY",
        "TERM",
        "TMUX",
        "TMUX_PANE",
        "WINDOWID",
    }
)
VOLATILE_PREFIXES = ("SSH_", "TERM_", "XDG_SESSION_", "VSCODE_")

PACKAGE = Path(__file__).resolve().parents[1]


def _volatile(name: str) -> bool:
    return name in VOLATILE or name.startswith(VOLATILE_PREFIXES)


def code_fingerprint(package: Path = PACKAGE) -> list[object]:
    """What changes when the code a command would run changes: every Python file of the
    package (path, size, modification time) and the modification time of each directory
    on the import path (installing or removing a package changes its directory)."""
    files: list[tuple[str, int, int]] = []
    pending = [package]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    pending.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    files.append((entry.path, stat.st_size, stat.st_mtime_ns))
    paths = []
    # sys.path[0] is the script's directory (or the working directory, under ``-m``):
    # where the command was started from, not what it runs.
    for directory in sys.path[1:]:
        try:
            paths.append((directory, os.stat(directory or ".").st_mtime_ns))
        except OSError:
            continue
    return [sorted(files), paths]


def context_digest(
    environ: Mapping[str, str], cwd: str, fingerprint: list[object] | None = None
) -> str:
    """The digest naming one context: user, file mode mask, interpreter, code, directory,
    environment."""
    relevant = sorted((k, v) for k, v in environ.items() if not _volatile(k))
    mask = os.umask(0o022)  # reading the mask means setting it: put it straight back
    os.umask(mask)
    material = [
        os.getuid(),
        mask,
        sys.prefix,
        os.path.realpath(sys.executable),
        sys.version,
        code_fingerprint() if fingerprint is None else fingerprint,
        cwd,
        relevant,
    ]
    return hashlib.sha256(json.dumps(material).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def address(digest: str) -> str:
    """The socket address (Linux's abstract namespace: no file, gone with the process)."""
    return f"\0ragwright-warm-{os.getuid()}-{digest}"
