"""``ragwright.testing`` exports its public names, and its fakes work without pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ragwright
import ragwright.testing
import ragwright.testing.conformance
from tests.processes import CHILD_TIMEOUT

# Hides pytest from the child interpreter, as if the 'testing' extra were not installed.
WITHOUT_PYTEST = """
import importlib.abc, sys
class NoPytest(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pytest", "_pytest"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoPytest())
"""


def run_without_pytest(code: str) -> subprocess.CompletedProcess[str]:
    # The child imports the same ragwright as this process (a checkout or the install).
    source = str(Path(ragwright.__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PYTEST + code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": source},
        timeout=CHILD_TIMEOUT,
    )


def test_every_name_in_all_resolves() -> None:
    names = ragwright.testing.__all__
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(ragwright.testing, name) is not None, name


def test_every_conformance_suite_is_exported_at_package_level() -> None:
    suites = [n for n in ragwright.testing.conformance.__all__ if n.endswith("Conformance")]
    assert len(suites) == 7
    for name in suites:
        assert name in ragwright.testing.__all__
        assert getattr(ragwright.testing, name) is getattr(ragwright.testing.conformance, name)


def test_fakes_import_without_pytest() -> None:
    result = run_without_pytest(
        "from ragwright.testing import HashingEmbedder, ScriptedChatModel, WordCounter\n"
        "assert 'pytest' not in sys.modules\n"
        "print(WordCounter().count('two words'))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"


def test_a_suite_without_pytest_names_the_extra() -> None:
    result = run_without_pytest("from ragwright.testing import CacheStoreConformance\n")
    assert result.returncode != 0
    assert "pip install 'ragwright[testing]'" in result.stderr
