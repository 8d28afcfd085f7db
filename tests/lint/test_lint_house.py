"""The linter's house keeps its seams (docs/design-notes.md, "The linter's house"): its folders import only
the folders below them, so the semantic model never imports the facts or the rules; no import circle, imports
inside functions and under ``TYPE_CHECKING`` counted; no source file over 500 lines and no function over 100;
and nothing in ``upsertsink/`` but the command line imports the linter.

Imports are read from the sources with ``ast`` (no module is imported): ``from .x import y`` and
``from upsertsink.lint.x import y`` alike, wherever they stand.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = REPO / "lint"
PACKAGE = "upsertsink.lint"

# The folders in the order a run uses them: each may import only itself and the folders before it.
LAYERS = ("base", "model", "values", "flow", "rules", "check", "run", "command", "server")
# The package's own modules at the top: what each may import.
TOP = {"__init__": set(), "__main__": {"command"}, "catalogue": {"base", "values"}}
# The modules of upsertsink/ that are the command line: the only ones that import the linter.
CLI_MODULES = {"upsertsink/__main__.py", "upsertsink/launch.py"}
# Known exceptions, each with its reason; the test fails when one is no longer true, so the list stays short.
SINK_IMPORTS_KNOWN = {
    # the sink refuses a nondeterministic ``delete_when`` with the linter's public catalogue API
    "upsertsink/predicate.py": "upsertsink.lint.catalogue",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LINT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


MODULES = {module_name(p): p for p in sorted(LINT.rglob("*.py"))}


def imported(path: Path, name: str) -> set[str]:
    """The modules of the linter ``path`` (the module ``name``) imports, anywhere in it."""
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
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # a name of a module is its module
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith(PACKAGE):
                out.add(target)
    return out


GRAPH = {name: imported(path, name) for name, path in MODULES.items()}


def place(name: str) -> str:
    """The folder of a module (its first part under the package), or its own name at the top."""
    parts = name[len(PACKAGE) :].lstrip(".").split(".")
    return parts[0] if parts[0] in LAYERS else (parts[0] or "__init__")


def test_the_folders_are_the_layers_and_every_module_is_in_one() -> None:
    folders = {p.name for p in LINT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS)
    assert {place(name) for name in MODULES} == set(LAYERS) | set(TOP)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_own_folder_and_those_below_it(name: str) -> None:
    here = place(name)
    allowed = TOP[here] if here in TOP else set(LAYERS[: LAYERS.index(here) + 1]) | {"__init__"}
    wrong = sorted(t for t in GRAPH[name] if place(t) not in allowed)
    assert not wrong, f"{name} ({here}/) may import only {sorted(allowed)}"


def test_the_model_never_imports_the_facts_or_the_rules() -> None:
    """The issue's own words for the most important seam (the layers above say it too)."""
    model = [name for name in MODULES if place(name) == "model"]
    assert model
    assert not [(m, t) for m in model for t in GRAPH[m] if place(t) in ("flow", "rules")]


def test_no_import_circle_in_the_linter() -> None:
    """Tarjan's strongly connected components of the import graph: every one is a single module."""
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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_source_file_over_500_lines_and_no_function_over_100() -> None:
    long_files, long_functions = [], []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 500:
            long_files.append(name)
        for node in ast.walk(ast.parse(text)):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and node.end_lineno - node.lineno + 1 > 100:
                long_functions.append(f"{name}.{node.name}")
    assert long_files == [] and long_functions == []


def linter_imports(path: Path) -> set[str]:
    """What a module of upsertsink/ imports of the linter: import statements anywhere, and the lazy forms
    (``importlib.import_module("upsertsink.lint...")``, a ``"module:attribute"`` string of a command table)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
            names = [node.value.partition(":")[0]]
        out |= {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}
    return out


def test_nothing_in_upsertsink_but_the_command_line_imports_the_linter() -> None:
    sink = REPO / "upsertsink"
    found = {}
    for path in sorted(sink.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("upsertsink/lint/"):  # the source checkout's face of the package (lint/ itself)
            continue
        if rel in CLI_MODULES or (path.parent == sink and path.name.startswith("cli")):
            continue
        names = linter_imports(path)
        if names:
            found[rel] = min(names)
    assert found == SINK_IMPORTS_KNOWN


def test_the_command_line_modules_do_import_the_linter() -> None:
    """The check above reads what it should: the modules it lets through are the ones that import it."""
    assert linter_imports(REPO / "upsertsink" / "launch.py")
    assert linter_imports(REPO / "upsertsink" / "cli.py")
