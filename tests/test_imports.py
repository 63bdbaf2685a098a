"""The pure core imports nothing but the standard library and its own layer."""

from __future__ import annotations

import subprocess
import sys

GUARD = r"""
import sys, importlib.abc
allowed_prefixes = ("ragwright.core", "ragwright.types", "ragwright.errors")
class Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or name == "ragwright":
            return None
        if name.startswith(allowed_prefixes):
            return None
        raise ImportError(f"core imported {name}")
sys.meta_path.insert(0, Guard())
import pkgutil, importlib, ragwright.core as core
for module in pkgutil.iter_modules(core.__path__):
    importlib.import_module(f"ragwright.core.{module.name}")
print("ok")
"""


def test_core_imports_only_the_standard_library() -> None:
    result = subprocess.run(
        [sys.executable, "-c", GUARD], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
