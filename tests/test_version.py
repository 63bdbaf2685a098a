"""The version has one source: ``ragwright.__version__``, which pyproject reads."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import ragwright
from tests.conftest import REPO
from tests.processes import CHILD_TIMEOUT


def test_the_command_reports_the_distribution_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ragwright", "--version"],
        capture_output=True,
        text=True,
        check=True,
        # The same ragwright as this process (a checkout or the install).
        env={**os.environ, "PYTHONPATH": str(Path(ragwright.__file__).resolve().parents[1])},
        timeout=CHILD_TIMEOUT,
    )
    assert result.stdout.strip() == f"ragwright {importlib.metadata.version('ragwright')}"


def test_pyproject_reads_the_version_from_the_package() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "ragwright.__version__"}
