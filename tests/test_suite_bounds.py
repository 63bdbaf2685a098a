"""The suite cannot hang: every test has a time bound, and reading a child's output is
bounded too (tests/processes.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.processes import read_line


def test_every_test_runs_under_a_timeout(request: pytest.FixtureRequest) -> None:
    # pytest-timeout reads the bound from pyproject.toml; without the plugin or the
    # setting, a hung test would stop the whole run (seen: 21 minutes in one readline).
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) > 0


def test_a_child_that_never_prints_fails_the_read_instead_of_hanging() -> None:
    silent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with pytest.raises(AssertionError, match="no line from the child"):
            read_line(silent, timeout=0.5)
        assert silent.poll() is not None  # killed, not left behind
    finally:
        silent.kill()
        silent.wait(30)
        assert silent.stdout is not None
        silent.stdout.close()


def test_a_child_that_exits_without_a_line_fails_the_read() -> None:
    quiet = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(AssertionError, match="closed its output"):
            read_line(quiet)
    finally:
        quiet.wait(30)
        assert quiet.stdout is not None
        quiet.stdout.close()
