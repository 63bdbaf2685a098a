"""The project's import graph, drawn from the source: no circle, and the shared records
(``protocols.py``, ``types.py``, ``errors.py``, with ``deadline.py``) at the bottom.

The graph holds every ``ragwright`` module and, as its edges, the imports written at
module level (the statements a reader sees at the top of the file).

- Imports under ``if TYPE_CHECKING:`` **count** as edges: an annotation names a module
  the reader must understand first, and a circle hidden behind ``TYPE_CHECKING`` is
  still a circle (``protocols`` ↔ ``chat.contract`` was one).
- Imports inside a function body do **not** count for the circle check: they are
  deliberate late bindings (a costly SDK, a command's own adapters) that run after
  every module has loaded. For the shared records they count too: those modules may
  import nothing of the project above them, not even late.
- ``from package import name`` is an edge to ``package.name`` when that is a module,
  else to the package (its ``__init__``); importing a submodule adds no edge to its
  parent packages (Python loads them first, but a package is not a dependency of its
  own children's readers).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ragwright

ROOT = Path(ragwright.__file__).parent

BOTTOM = {
    # module: the project modules it may import (anything at all, even inside functions)
    "ragwright.errors": set(),
    "ragwright.types": set(),
    "ragwright.deadline": set(),
    "ragwright.threads": set(),
    "ragwright.stages": set(),
    "ragwright.protocols": {"ragwright.types", "ragwright.errors", "ragwright.deadline"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements run when the module loads, ``TYPE_CHECKING`` blocks
    included; function and class bodies are not entered."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level(block)
            for handler in node.handlers:
                yield from _module_level(handler.body)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The project modules one import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolved against the importing module's package
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package.pop()
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, *([node.module] if node.module else [])])
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
            for alias in node.names
        ]
    found = set()
    for name in names:
        known = name
        while known not in MODULES and "." in known:
            known = known.rsplit(".", 1)[0]
        if known in MODULES and known != module:
            found.add(known)
    return found


def _edges(module: str, *, lazy: bool) -> set[str]:
    tree = ast.parse(MODULES[module].read_text("utf-8"))
    nodes = (
        [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        if lazy
        else list(_module_level(tree.body))
    )
    return set().union(*(_targets(module, n) for n in nodes))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_is_read_from_the_source() -> None:
    # Guards the reader itself: a graph without the edges we know would pass vacuously.
    assert "ragwright.pipeline.answer" in MODULES
    assert "ragwright.types" in _edges("ragwright.protocols", lazy=False)
    assert "ragwright.core.assembly" in _edges("ragwright.pipeline.answer_stages", lazy=False)


def test_the_shared_records_import_nothing_above_them() -> None:
    offending = {
        module: sorted(_edges(module, lazy=True) - allowed) for module, allowed in BOTTOM.items()
    }
    assert not any(offending.values()), offending


def test_the_import_graph_has_no_circle() -> None:
    graph = {module: _edges(module, lazy=False) for module in MODULES}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_a_circle_is_found_when_there_is_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
