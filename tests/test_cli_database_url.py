"""A ``RAGWRIGHT_DATABASE_URL`` that cannot be used stops a command at start-up with one
line on stderr naming the setting and the problem, exit 1, never the password
(issue 20, item 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.conftest import free_port

PASSWORD = "s3cr3t-Pa55word"


def database_urls() -> dict[str, tuple[str, str, str]]:
    """Each fault: (URL, password text that must never appear, what stderr must say)."""
    closed = free_port()  # bound and released: nothing listens on it
    return {
        "bad-escape": (
            f"postgresql://ragwright:{PASSWORD}%zz@127.0.0.1/ragwright",
            f"{PASSWORD}%zz",
            "not a valid PostgreSQL connection URL",
        ),
        "closed-port": (
            f"postgresql://ragwright:{PASSWORD}@127.0.0.1:{closed}/ragwright",
            PASSWORD,
            "Connection refused",
        ),
    }


@pytest.mark.parametrize("fault", ["bad-escape", "closed-port"])
@pytest.mark.parametrize("command", [("keys", "list"), ("serve",)])
def test_an_unusable_database_url_is_one_line_without_the_password(
    tmp_path: Path, fault: str, command: tuple[str, ...]
) -> None:
    url, secret, problem = database_urls()[fault]
    args = [*command, "--port", str(free_port())] if command == ("serve",) else [*command]
    result = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RAGWRIGHT_HOME": str(tmp_path), "RAGWRIGHT_DATABASE_URL": url},
        check=False,
        timeout=120,  # a start-up that went on to serve would otherwise never end
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "RAGWRIGHT_DATABASE_URL" in lines[0], lines
    assert problem in lines[0], lines
    assert secret not in output and PASSWORD not in output
