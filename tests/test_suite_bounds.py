"""The suite cannot hang: every test has a time bound, reading a child's output line by
line is bounded (tests/processes.py), and every child run to its end has a timeout."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


# Calls that wait for a child to end and read all it wrote: each must carry a timeout.
# ``x.wait()`` with no argument (a Popen's, an Event's) waits forever too.
_WHOLE_RUNS = {"run", "call", "check_call", "check_output"}


def _unbounded_child_waits(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        whole_run = (
            isinstance(func.value, ast.Name)
            and func.value.id == "subprocess"
            and func.attr in _WHOLE_RUNS
        )
        bare_wait = func.attr == "wait" and not node.args
        if (whole_run or bare_wait or func.attr == "communicate") and not any(
            keyword.arg == "timeout" for keyword in node.keywords
        ):
            lines.append(node.lineno)
    return lines


def test_every_child_the_tests_run_to_its_end_has_a_timeout() -> None:
    assert _unbounded_child_waits("import subprocess\nsubprocess.run(['x'], check=True)\n") == [2]
    assert _unbounded_child_waits("p.communicate()\n") == [1]
    assert _unbounded_child_waits("p.wait()\np.wait(30)\np.wait(timeout=30)\n") == [1]
    assert _unbounded_child_waits("subprocess.run(['x'], timeout=5)\n") == []
    tests = Path(__file__).resolve().parent
    unbounded = {
        f"{path.relative_to(tests.parent)}:{line}"
        for path in tests.rglob("*.py")
        for line in _unbounded_child_waits(path.read_text("utf-8"))
    }
    assert not unbounded, f"a child run to its end without a timeout: {sorted(unbounded)}"
