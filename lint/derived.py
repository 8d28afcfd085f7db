"""Which columns a column's value is computed from, when it is computed from columns alone.

A dedup keeps one row per value of its subset. A key written after it (``withColumn("order_sk",
F.sha2(F.col("order_id").cast("string"), 256))``) computed only from subset columns has one value per
subset value too, so the dedup cannot change the set of keys written: only which row's other values
survive. The question here is syntax only: which column names an expression reads; an expression of any
other kind (a UDF, a helper, a window, a method not listed) answers None, and the dedup stays an error.
"""

from __future__ import annotations

import ast

from upsertsink.lint.facts import Facts, norm
from upsertsink.lint.model import SemanticModel
from upsertsink.lint.scopes import Scope
from upsertsink.lint.values import Values

# Column methods whose string arguments are not columns (a type name, a new name) and whose value is a
# function of the column they are called on and their other arguments
_COLUMN_METHODS = frozenset({"cast", "astype", "alias", "name", "substr"})


def key_sources(facts: Facts, model: SemanticModel, values: Values, keys: list[str]) -> dict[str, frozenset[str]]:
    """For each key (normalized) whose every write is computed from known columns only: those columns."""
    out: dict[str, frozenset[str]] = {}
    for k in keys:
        writes = facts.by_column.get(norm(k), ())
        read: set[str] = set()
        for w in writes:
            found = reads(model, values, w.expr, w.scope) if w.expr is not None and w.sql is None else None
            if found is None or w.own is not None or w.rename:
                break
            read |= found
        else:
            if writes and read:
                out[norm(k)] = frozenset(norm(c) for c in read)
    return out


def reads(model: SemanticModel, values: Values, node: ast.AST, scope: Scope, depth: int = 0) -> set[str] | None:
    """The column names a Column expression reads (``F.col("a")``, ``df["a"]``, ``df.a``, a Spark function's
    string arguments, literals reading none), or None when it is anything else."""
    if depth > 30:
        return None
    t = type(node)
    if t is ast.Constant:
        return set()
    if t is ast.BinOp:
        left, right = reads(model, values, node.left, scope, depth + 1), reads(model, values, node.right, scope, depth + 1)
        return left | right if left is not None and right is not None else None
    if t is ast.Subscript or (t is ast.Attribute and type(node.value) is ast.Name):  # df["a"], df.a
        names = values.col_names(node, scope)
        return set(names) if names and not any(n.startswith("<") for n in names) else None
    if t is not ast.Call:
        return None
    func = node.func
    sname = model.spark_name(model.qualname(func, scope))
    if sname in ("col", "column"):
        names = values.const_strings(node.args[0], scope) if node.args else None
        return set(names) if names and len(names) == 1 else None
    if sname == "lit":
        return set()
    if sname is not None:  # a Spark function: its string arguments name columns (concat_ws's first: the separator)
        args = node.args[1:] if sname == "concat_ws" else node.args
        out: set[str] = set()
        for a in [*args, *(kw.value for kw in node.keywords)]:
            found = {a.value} if type(a) is ast.Constant and isinstance(a.value, str) else reads(model, values, a, scope, depth + 1)
            if found is None:
                return None
            out |= found
        return out
    if type(func) is ast.Attribute and func.attr in _COLUMN_METHODS:  # F.col("a").cast("string")
        out = reads(model, values, func.value, scope, depth + 1)
        for a in node.args:
            found = set() if type(a) is ast.Constant else reads(model, values, a, scope, depth + 1)
            if out is None or found is None:
                return None
            out |= found
        return out
    return None
