"""File paths and table names in code: the table an expression names (``base + "/orders"``), the path it
names (``Path(__file__).parent / "sql" / "merge.sql"``), and the ``.sql`` file of the linted tree it points to."""

from __future__ import annotations

import ast
import posixpath
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Protocol

    from ..model.scopes import Scope
    from ..model.semantic import SemanticModel
    from .strings import PosText

    class Values(Protocol):
        """What a path or a table name needs of :class:`~upsertsink.lint.values.evaluate.Values` (which
        imports this module)."""

        model: SemanticModel
        origin: str | None

        def str_value(self, node: ast.AST | None, scope: Scope) -> PosText | None: ...
        def const_strings(self, node: ast.AST | None, scope: Scope) -> list[str] | None: ...


# The digest of a place a .sql file was looked for and not found (a file result's ``deps``): one appearing there
# later changes what the code reads.
ABSENT = ""

def table_name(values: Values, node: ast.AST | None, scope: Scope) -> str | None:
    """The table name or path an expression gives: a string (``base + "/orders"``, an f-string, a name or
    parameter bound to one), or one string of a list; None when any part of it is not known."""
    if node is None:
        return None
    text = values.str_value(node, scope)
    if text is not None and "__ph" not in text.text:
        return canonical_table(text.text)
    names = values.const_strings(node, scope)
    return canonical_table(names[0]) if names and len(names) == 1 else None


def canonical_table(name: str) -> str:
    """A table's name as Spark resolves it, so that two spellings of one table are one: a catalog name
    (``Main.Sales.`Orders```) without backquotes and in lower case (identifiers are case-insensitive); a
    path or URI as written."""
    if "/" in name or ":" in name:
        return name
    return name.replace("`", "").lower()


def path_value(values: Values, node: ast.AST, scope: Scope, depth: int = 0) -> str | None:
    """The file path an expression names (``Path(__file__).parent / "sql" / "merge.sql"``...)."""
    if depth > 20:
        return None
    t = type(node)
    if t is ast.Constant and isinstance(node.value, str):
        return node.value
    if t is ast.Name:
        if node.id == "__file__":
            return values.origin
        value = values.model.single_value(node, scope)
        return path_value(values, value[0], value[1], depth + 1) if value is not None else None
    if t is ast.JoinedStr or t is ast.BinOp and isinstance(node.op, ast.Add):
        text = values.str_value(node, scope)
        return text.text if text is not None and "__ph" not in text.text else None
    if t is ast.BinOp and isinstance(node.op, ast.Div):
        left, right = (
            path_value(values, node.left, scope, depth + 1),
            path_value(values, node.right, scope, depth + 1),
        )
        return posixpath.join(left, right) if left is not None and right is not None else None
    if t is ast.Attribute and node.attr == "parent":
        inner = path_value(values, node.value, scope, depth + 1)
        return posixpath.dirname(inner) if inner is not None else None
    if t is ast.Call:
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
        if name in ("Path", "PurePath", "PosixPath", "join", "joinpath"):
            parts = list(node.args)
            if name == "joinpath" and type(func) is ast.Attribute:
                parts = [func.value, *parts]
            values = [path_value(values, a, scope, depth + 1) for a in parts]
            if not values or any(v is None for v in values):
                return None
            return posixpath.join(*values)  # type: ignore[arg-type]
        if name == "dirname" and node.args:
            inner = path_value(values, node.args[0], scope, depth + 1)
            return posixpath.dirname(inner) if inner is not None else None
        if name in ("resolve", "absolute", "abspath", "expanduser") and type(func) is ast.Attribute:
            target = node.args[0] if name == "abspath" and node.args else func.value
            return path_value(values, target, scope, depth + 1)
    return None


def find_sql_file(raw: str, origin: str | None, root: str | None) -> tuple[Path | None, list[Path]]:
    """A .sql file named relative to the linted file, one of its parent folders, or the project root (only
    files inside the project root are read), and the places looked at before it where no such file is: the
    answer depends on their staying empty."""
    path = Path(raw)
    candidates: list[Path] = []
    if path.is_absolute():
        candidates.append(path)
    else:
        if origin:
            here = Path(origin).parent
            candidates += [folder / path for folder in (here, *here.parents)]
        if root:
            candidates.append(Path(root) / path)
    top = Path(root).resolve() if root else None
    empty: list[Path] = []
    for c in candidates:
        try:
            resolved = c.resolve()
        except OSError:
            continue
        if top is not None and top != resolved and top not in resolved.parents:
            continue
        if resolved.is_file():
            return resolved, empty
        empty.append(resolved)
    return None, empty


def shown(path: Path, root: str | None) -> str:
    if root:
        try:
            return path.relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return path.name
