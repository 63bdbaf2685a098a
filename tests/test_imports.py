"""The pure core imports nothing but the standard library and its own layer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.processes import CHILD_TIMEOUT

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
        [sys.executable, "-c", GUARD],
        capture_output=True,
        text=True,
        check=False,
        timeout=CHILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _imported_modules(package: str) -> dict[str, set[str]]:
    """Every ``ragwright`` module each file of ``package`` imports, lazy imports included."""
    import ast
    from pathlib import Path

    import ragwright

    root = Path(ragwright.__file__).parent / package
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.name] = {n for n in names if n.startswith("ragwright")}
    return found


def test_the_command_line_imports_no_adapter() -> None:
    # The CLI parses arguments into requests; the composition root picks adapters.
    imports = _imported_modules("cli")
    assert imports, "no CLI modules found"
    offending = {
        f: sorted(n for n in names if n.startswith("ragwright.adapters"))
        for f, names in imports.items()
    }
    assert not any(offending.values()), offending


def test_the_application_imports_no_adapter_and_not_the_composition_root() -> None:
    imports = _imported_modules("application")
    offending = {
        f: sorted(
            n
            for n in names
            if n.startswith(("ragwright.adapters", "ragwright.runtime", "ragwright.cli"))
        )
        for f, names in imports.items()
    }
    assert not any(offending.values()), offending


def test_the_key_records_import_only_the_standard_library_and_the_core() -> None:
    # The HTTP service imports ApiKey and KeyStore on every request path; they must stay
    # as light as the core (no adapter, no pipeline, no third-party client).
    import ast
    from pathlib import Path

    import ragwright

    source = (Path(ragwright.__file__).parent / "application" / "keys.py").read_text("utf-8")
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    allowed = ("ragwright.core", "ragwright.types", "ragwright.errors")
    offending = sorted(
        n
        for n in names
        if n.split(".")[0] not in sys.stdlib_module_names and not n.startswith(allowed)
    )
    assert not offending, offending


def test_the_service_imports_no_adapter_and_not_the_composition_root() -> None:
    # The HTTP service is a thin entry point over the application, like the CLI: it
    # neither picks adapters nor builds the application itself.
    imports = _imported_modules("service")
    assert imports, "no service modules found"
    offending = {
        f: sorted(
            n
            for n in names
            if n.startswith(("ragwright.adapters", "ragwright.runtime", "ragwright.cli"))
        )
        for f, names in imports.items()
    }
    assert not any(offending.values()), offending


def test_the_page_imports_no_adapter_and_not_the_composition_root() -> None:
    # The page (ragwright.web) is one more entry point beside the service's routes: it
    # goes through the application and the service's own paths, never an adapter.
    imports = _imported_modules("web")
    assert imports, "no web modules found"
    offending = {
        f: sorted(
            n
            for n in names
            if n.startswith(("ragwright.adapters", "ragwright.runtime", "ragwright.cli"))
        )
        for f, names in imports.items()
    }
    assert not any(offending.values()), offending


def test_a_command_that_calls_no_provider_does_not_import_the_openai_sdk() -> None:
    # The SDK alone costs ~1.4 s of start-up; a search, ingest or status never needs it
    # (an SDK error can only come from an adapter that imported it).
    program = (
        "import sys, ragwright.cli, ragwright.runtime, ragwright.adapters.rerankers;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'openai')[:3])"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=CHILD_TIMEOUT,
    )
    assert result.stdout.strip() == "[]"


def test_a_command_on_the_sqlite_stores_does_not_import_psycopg(tmp_path: Path) -> None:
    # psycopg and its pool cost ~0.15 s of every command's start; only a PostgreSQL
    # store (RAGWRIGHT_DATABASE_URL) needs them.
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "import ragwright.cli\n"
        "from ragwright.runtime.components import RuntimeComponents\n"
        "from ragwright.settings import load_settings\n"
        "parts = RuntimeComponents(load_settings(home=Path(sys.argv[1])))\n"
        "parts.draft_store().close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('psycopg'))[:3])"
    )
    result = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        check=True,
        timeout=CHILD_TIMEOUT,
    )
    assert result.stdout.strip() == "[]"
