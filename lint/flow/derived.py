"""Which columns a column's value is computed from, when it is computed from columns alone.

A dedup keeps one row per value of its subset. A key written after it (``withColumn("order_sk",
F.sha2(F.col("order_id").cast("string"), 256))``) computed only from subset columns has one value per
subset value too, so the dedup cannot change the set of keys written: only which row's other values
survive. The question here is syntax only: which column names an expression reads; an expression of any
other kind (a UDF, a window, a method not listed) answers None, and the dedup stays an error. A helper is
read through: a call of one of this file that returns one expression (``hash_key("click_id")``) reads
what that expression reads with the call's arguments for its parameters; another file's helper says in
its summary which columns it reads and which parameters name them (``derives``, :func:`param_reads`); a
parameter of the function a column is computed in (``def add_key(df, col)``) names what every call of
that function gives it.
"""

from __future__ import annotations

import ast

from ..model.callsites import arguments, call_sites, given_argument
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values.evaluate import Values
from .facts import Facts, norm

# a parameter -> (the argument a call gives it, the scope of that call, that scope's own parameters)
Env = dict[str, tuple[ast.AST, Scope, "Env | None"]]

# Column methods whose string arguments are not columns (a type name, a new name) and whose value is a
# function of the column they are called on and their other arguments
_COLUMN_METHODS = frozenset({"cast", "astype", "alias", "name", "substr"})


def key_sources(
    facts: Facts, model: SemanticModel, values: Values, keys: list[str]
) -> dict[str, frozenset[str]]:
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


def computed_alike(facts: Facts, column: str, among: set[str]) -> bool:
    """Is every value of ``column`` computed by the same expression as a column of ``among`` (normalized
    names)? A pipeline's ``sequence_by=F.to_date("created_at")`` and a dedup by ``created_date`` written as
    ``F.to_date("created_at")``: rows of one duplicate group cannot differ in that sequence."""
    writes = facts.by_column.get(norm(column), ())
    if not writes or any(w.expr is None or w.own is not None or w.rename for w in writes):
        return False
    alike = {
        ast.dump(w.expr)
        for c in among
        for w in facts.by_column.get(c, ())
        if w.expr is not None and w.own is None and not w.rename
    }
    return all(ast.dump(w.expr) in alike for w in writes)


def reads(
    model: SemanticModel, values: Values, node: ast.AST, scope: Scope, depth: int = 0, env: Env | None = None
) -> set[str] | None:
    """The column names a Column expression reads (``F.col("a")``, ``df["a"]``, ``df.a``, a Spark function's
    string arguments, literals reading none, a local helper's one returned expression), or None when it is
    anything else. ``env``: what the parameters of the helper being read through are given."""
    if depth > 30:
        return None
    node, scope, env = _given(node, scope, env)
    t = type(node)
    if t is ast.Constant:
        return set()
    if t is ast.BinOp:
        left = reads(model, values, node.left, scope, depth + 1, env)
        right = reads(model, values, node.right, scope, depth + 1, env)
        return left | right if left is not None and right is not None else None
    if t is ast.Subscript or (t is ast.Attribute and type(node.value) is ast.Name):  # df["a"], df.a
        names = values.col_names(node, scope)
        return set(names) if names and not any(n.startswith("<") for n in names) else None
    if t is not ast.Call:
        return None
    func = node.func
    sname = model.spark_name(model.qualname(func, scope))
    if sname in ("col", "column"):
        names = _names(model, values, node.args[0], scope, env) if node.args else None
        return set(names) if names and len(names) == 1 else None
    if sname == "lit":
        return set()
    if (
        sname is not None
    ):  # a Spark function: its string arguments name columns (concat_ws's first: the separator)
        args = node.args[1:] if sname == "concat_ws" else node.args
        out: set[str] = set()
        for a in [*args, *(kw.value for kw in node.keywords)]:
            a, ascope, aenv = _given(a, scope, env)
            is_name = type(a) is ast.Constant and isinstance(a.value, str)
            found = {a.value} if is_name else reads(model, values, a, ascope, depth + 1, aenv)
            if found is None:
                return None
            out |= found
        return out
    if type(func) is ast.Attribute and func.attr in _COLUMN_METHODS:  # F.col("a").cast("string")
        out = reads(model, values, func.value, scope, depth + 1, env)
        for a in node.args:
            found = set() if type(a) is ast.Constant else reads(model, values, a, scope, depth + 1, env)
            if out is None or found is None:
                return None
            out |= found
        return out
    returned = model.returned(node, scope)  # hash_key("click_id"): a helper of this file
    if returned is None:
        return _external(model, values, node, scope, depth, env)
    expr, fscope = returned
    if getattr(fscope.node, "decorator_list", None):
        return None  # a UDF (``@F.udf``) computes its value from the row's values, not from column names
    given = {
        p: (arg, s, env if s is scope else None) for p, (arg, s) in arguments(node, scope, fscope).items()
    }
    return reads(model, values, expr, fscope, depth + 1, given)


# a parameter's stand-in while a function is read for another file (see param_reads)
_PARAM = "\0param:"


def param_reads(model: SemanticModel, values: Values, fscope: Scope) -> dict | None:
    """For the files that import it: what a function returning one Column expression reads, as the
    columns it names itself and the parameters whose argument names (or is) a column it reads
    (``def hash_key(c): return F.sha2(F.col(c), 256)``: parameter 0). None when it reads anything else."""
    if len(fscope.returns) != 1 or not fscope.params or getattr(fscope.node, "decorator_list", None):
        return None
    env: Env = {p: (ast.Constant(value=_PARAM + p), fscope, None) for p in fscope.params}
    found = reads(model, values, fscope.returns[0], fscope, 0, env)
    params = [[i, p] for i, p in enumerate(fscope.params) if found and _PARAM + p in found]
    if not params:
        return None
    assert found is not None
    return {"columns": sorted(c for c in found if not c.startswith(_PARAM)), "params": params}


def _external(
    model: SemanticModel, values: Values, node: ast.Call, scope: Scope, depth: int, env: Env | None
) -> set[str] | None:
    """What a call of another file's function reads, by that function's ``derives`` (param_reads)."""
    ext = model.resolve_external(node.func, scope)
    spec = ext[0].get("derives") if ext is not None and ext[1] == "func" else None
    if spec is None:
        return None
    out = set(spec["columns"])
    for position, name in spec["params"]:
        arg = given_argument(node, position, name)
        if arg is None:
            return None  # its default: not known here
        arg, ascope, aenv = _given(arg, scope, env)
        names = values.const_strings(arg, ascope)
        found = (
            set(names) if names and len(names) == 1 else reads(model, values, arg, ascope, depth + 1, aenv)
        )
        if found is None:
            return None
        out |= found
    return out


def _given(node: ast.AST, scope: Scope, env: Env | None) -> tuple[ast.AST, Scope, Env | None]:
    """A parameter of the helper being read through: the argument its call gives it, where it is given."""
    while env and type(node) is ast.Name and node.id in env:
        node, scope, env = env[node.id]
    return node, scope, env


def _names(
    model: SemanticModel, values: Values, node: ast.AST, scope: Scope, env: Env | None
) -> list[str] | None:
    """The column names ``F.col(node)`` may name: a constant, a parameter given one by the helper's call,
    or a parameter of the function the column is computed in that its every call gives the same name."""
    node, scope, env = _given(node, scope, env)
    names = values.const_strings(node, scope)
    if names is not None or type(node) is not ast.Name or node.id not in scope.params:
        return names
    found: set[str] = set()
    for call, cscope in call_sites(model, scope):
        arg = arguments(call, cscope, scope).get(node.id)
        given = values.const_strings(arg[0], arg[1]) if arg is not None else None
        if not given or len(given) != 1:
            return None
        found.update(given)
    return sorted(found) if len(found) == 1 else None
