"""The sink's house keeps its seams (docs/design-notes.md, "The house"): what may import what, and no import
circle, counting imports inside functions and under ``TYPE_CHECKING``. Imports are read from the sources with
``ast``; no module is imported. (The linter's own house: tests/lint/test_lint_house.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "upsertsink"


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "lint" not in p.relative_to(PACKAGE).parts}


def _imports(path: Path, name: str) -> set[str]:
    """The modules of upsertsink/ (not the linter) that ``path`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` imports the module (the package's face only hands names on)
            named = [f"{base}.{a.name}" for a in node.names]
            targets = named if all(n in MODULES for n in named) else [*named, base]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target != "upsertsink":
                out.add(target)
    return out


GRAPH = {name: _imports(path, name) for name, path in MODULES.items()}


def _under(module: str, folder: str) -> bool:
    return module == folder or module.startswith(folder + ".")


def test_the_table_folder_never_imports_the_engines_the_protocol_or_the_sink():
    wrong = {m: sorted(i for i in GRAPH[m] if any(_under(i, f) for f in (
        "upsertsink.engines", "upsertsink.protocol", "upsertsink.sink")))
        for m in GRAPH if _under(m, "upsertsink.table")}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_sidecar_folder_imports_neither_tables_nor_engines():
    wrong = {m: sorted(i for i in GRAPH[m] if any(_under(i, f) for f in (
        "upsertsink.table", "upsertsink.engines", "upsertsink.protocol", "upsertsink.sink")))
        for m in GRAPH if _under(m, "upsertsink.sidecar")}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_engines_never_import_each_other():
    embedded, spark = "upsertsink.engines.embedded", "upsertsink.engines.spark"
    assert not any(_under(i, spark) for i in GRAPH[embedded])
    assert embedded not in {i for m in GRAPH if _under(m, spark) for i in GRAPH[m]}


def test_no_import_circle_in_the_sink():
    """Tarjan's strongly connected components over every import, function-level ones included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []
