"""No two classes in the source share a name.

Two classes with one name (``Session`` for a signed-in browser and for a SQL
transaction, ``Budget`` for tokens and for a request's time) make a traceback, a search
or an import ambiguous, and invite an ``import ... as`` alias to tell them apart. The
check walks every module of ``ragwright`` with :mod:`ast` and counts every class
statement, nested ones and those under ``if TYPE_CHECKING:`` included.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ragwright

ROOT = Path(ragwright.__file__).parent


def class_definitions(root: Path) -> dict[str, list[str]]:
    """Every class name under ``root`` → where each class of that name is defined
    (``path:line``, the path relative to ``root``)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return dict(found)


def shared_names(root: Path) -> dict[str, list[str]]:
    """The class names defined more than once under ``root`` (no exception is allowed)."""
    return {name: places for name, places in class_definitions(root).items() if len(places) > 1}


def test_no_two_classes_in_the_source_share_a_name() -> None:
    shared = shared_names(ROOT)
    assert not shared, f"class names defined more than once: {shared}"


def test_the_check_finds_a_name_defined_twice_nested_or_not(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "a.py").write_text("class Session:\n    pass\n\nclass Alone:\n    pass\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "def f():\n    class Session:\n        pass\n    return Session\n"
    )
    assert shared_names(tmp_path) == {"Session": ["a.py:1", "pkg/b.py:2"]}
