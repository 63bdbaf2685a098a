"""A ``RAGWRIGHT_DATABASE_URL`` that cannot be used stops a command at start-up with one
line on stderr naming the setting and the problem, exit 1, never the password
(issue 20, item 10), whatever its shape: URL or libpq key=value, IPv6, broken (issue 46,
item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli import ragwright
from tests.cli import ragwright_process as run_process
from tests.database_urls import DatabaseUrl, broken_urls, well_formed_urls
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
        "key-value": (
            f"host=127.0.0.1 port={closed} password={PASSWORD} dbname=ragwright",
            PASSWORD,
            f"RAGWRIGHT_DATABASE_URL (postgresql://127.0.0.1:{closed}/ragwright)",
        ),
        "broken-ipv6": (
            f"postgresql://ragwright:{PASSWORD}@[::1/ragwright",
            PASSWORD,
            "not a valid PostgreSQL connection URL",
        ),
    }


@pytest.mark.parametrize("fault", ["bad-escape", "closed-port", "key-value", "broken-ipv6"])
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


CLOSED_PORT = free_port()


@settings(
    max_examples=60,
    deadline=None,  # a command: 0.1 s, more on a loaded machine
    # The home only holds the settings the command reads; every example may share it.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.one_of(well_formed_urls(port=CLOSED_PORT), broken_urls(port=CLOSED_PORT)))
def test_keys_list_with_any_database_url_is_one_line_without_the_password(
    tmp_path: Path, case: DatabaseUrl
) -> None:
    result = ragwright("keys", "list", home=tmp_path, RAGWRIGHT_DATABASE_URL=case.url)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "RAGWRIGHT_DATABASE_URL" in lines[0], lines
    assert case.password not in output
    if case.where:
        assert f"({case.where})" in lines[0], lines
