"""Window specifications: the partition and order columns a ``Window`` expression holds (through names,
helpers that build the window and chained ``partitionBy``/``orderBy`` calls)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.spark_api import ORDER_WRAPPERS

if TYPE_CHECKING:
    from ..model.scopes import Scope
    from .evaluate import Values


def window_spec(values: Values, node: ast.AST, scope: Scope, depth: int = 0) -> tuple[tuple, tuple] | None:
    if depth > 20:
        return None
    t = type(node)
    if t is ast.Name:
        s = values.model.lookup(node.id, scope)
        if s is None or node.id not in s.assigns:
            q = values.model.qualname(node, scope) or node.id
            return ((), ()) if q.rsplit(".", 1)[-1] == "Window" else None
        bound = [v for v in s.assigns[node.id] if v is not None]
        if len(bound) != 1:
            return None
        return window_spec(values, bound[0], s, depth + 1)
    if t is ast.Attribute:
        return ((), ()) if node.attr == "Window" else None
    if t is ast.Call and type(node.func) is ast.Name:  # a helper that builds the window
        s = values.model.lookup(node.func.id, scope)
        if s is None or node.func.id not in s.funcs:
            # ``Window()``: an instance of the class, whose methods build specs as the class' do
            return window_spec(values, node.func, scope, depth + 1) if not node.args else None
        fscope = s.funcs[node.func.id][1]
        specs = {window_spec(values, r, fscope, depth + 1) for r in fscope.returns}
        return specs.pop() if len(specs) == 1 else None
    if t is ast.Call and type(node.func) is ast.Attribute:
        base = window_spec(values, node.func.value, scope, depth + 1)
        if base is None:
            return None
        part, order = base
        m = node.func.attr
        args = [a for a in node.args if not _constant_order(values, a, scope)]
        cols = tuple(c for a in args for c in values.col_names(a, scope))
        if m == "partitionBy":
            return (part + cols, order)
        if m == "orderBy":
            return (part, order + cols)
        return base
    return None


def window_orders(values: Values, node: ast.AST, scope: Scope, depth: int = 0) -> list[tuple[ast.AST, Scope]]:
    """The expressions a window is ordered by (``orderBy``/``rowsBetween`` arguments aside), found along
    the same names, helpers and chained calls as :func:`window_spec`."""
    if depth > 20:
        return []
    t = type(node)
    if t is ast.Name:
        bound = values.model.single_value(node, scope)
        return window_orders(values, bound[0], bound[1], depth + 1) if bound is not None else []
    if t is ast.Call and type(node.func) is ast.Name:
        returned = values.model.returned(node, scope)
        return window_orders(values, returned[0], returned[1], depth + 1) if returned is not None else []
    if t is ast.Call and type(node.func) is ast.Attribute:
        below = window_orders(values, node.func.value, scope, depth + 1)
        return below + [(a, scope) for a in node.args] if node.func.attr == "orderBy" else below
    return []


def _constant_order(values: Values, node: ast.AST, scope: Scope) -> bool:
    """``F.lit(0)`` (also ``.desc()``) in a window: the same value on every row, so it breaks no tie."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in ORDER_WRAPPERS:
        node = node.func.value
    if type(node) is not ast.Call or not node.args or type(node.args[0]) is not ast.Constant:
        return False
    return values.model.spark_name(values.model.qualname(node.func, scope)) == "lit"
