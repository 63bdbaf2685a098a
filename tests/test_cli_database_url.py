"""A ``RAGWRIGHT_DATABASE_URL`` that cannot be used stops a command at start-up with one
line on stderr naming the setting and the problem, exit 1, never the password
(issue 20, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import ragwright
from tests.cli import ragwright_process as run_process
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
    env = {"RAGWRIGHT_DATABASE_URL": url}
    if command == ("serve",):  # its own process: a start-up that went on would serve
        result = run_process(*args, home=tmp_path, **env)
    else:
        result = ragwright(*args, home=tmp_path, **env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "RAGWRIGHT_DATABASE_URL" in lines[0], lines
    assert problem in lines[0], lines
    assert secret not in output and PASSWORD not in output
