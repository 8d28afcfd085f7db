"""Fact extractors for the calls that create, rename or choose columns: ``withColumn(s)``, ``select``,
``selectExpr``, ``assign``, ``agg``, ``toDF``/``createDataFrame``, records turned into tables, registered
UDFs and seeds. Each ``on_NAME(col, call, scope)`` is the extractor the API table names ``fact=NAME``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.sources import METHOD_SOURCES, ORDER_CODE, PYTHON_CALLS, PYTHON_CALLS_NO_ARGS, SPARK_FUNCTIONS
from ..base.spark_api import ALIAS_METHODS, NAME_ARG_FUNCTIONS
from ..base.types import Src
from ..model import chains
from ..model.callsites import passed
from ..model.scopes import Scope
from ..values import sql as sqlmod
from ..values.columns import column_names
from . import records
from .facts import Write

if TYPE_CHECKING:
    from .facts import Collector


def on_to_df(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``rdd.zipWithIndex().map(...).toDF([..., "row_id"])`` / ``createDataFrame(rdd, [..., "row_id"])``:
    the position index (appended last by convention) becomes the last named column."""
    m = call.func.attr
    if m == "createDataFrame":
        on_records(col, call, scope)
    if m == "toDF":
        receiver, names_nodes = call.func.value, list(call.args)
    elif len(call.args) > 1:
        receiver, names_nodes = call.args[0], [call.args[1]]
    else:
        return
    sources = _numbering_sources(col, receiver, scope)
    if not sources:
        return
    last = None
    for node in names_nodes:
        while type(node) is ast.BinOp and isinstance(node.op, ast.Add):
            node = node.right
        names = col.values.const_strings(node, scope)
        if names:
            last = names[-1]
    if last is not None:
        for src in sources:
            col.writes.append(Write(last, scope, None, None, call, own=src, anchor=call))


def _numbering_sources(col: Collector, node: ast.AST, scope: Scope) -> list[Src]:
    out: list[Src] = []
    for step, _where in chains.down_chain(col.model, node, scope, limit=30):
        if type(step) is ast.Call:
            if type(step.func) is not ast.Attribute:
                break
            if step.func.attr in METHOD_SOURCES:
                out.append(
                    col.model.src(
                        METHOD_SOURCES[step.func.attr],
                        step,
                        what=f"{step.func.attr}()",
                        span=col.model.method_span(step),
                    )
                )
    return out


def on_records(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``pa.Table.from_pylist(records)``, ``pd.DataFrame(records)``...: each field is a column write."""
    if not chains.looked_only(col.model, call):
        for column, value, vscope in records.record_fields(col.model, col.values, call, scope):
            col._add_write(column, vscope, value, node=call)


def on_seed(col: Collector, call: ast.Call, scope: Scope) -> None:
    q = col.model.qualname(call.func, scope)
    seed = call.args[0] if call.args else None
    # random.seed(time.time()) gives a new seed every run: nothing is seeded
    if passed(seed) and q in ("random.seed", "numpy.random.seed") and not _clocked(col, seed, scope):
        col.seeded.add(q.rsplit(".", 1)[0])


def _clocked(col: Collector, node: ast.AST, scope: Scope) -> bool:
    """Does a seed expression call the clock or another value source of Python (``int(time.time())``)?"""
    for n in ast.walk(node):
        if type(n) is ast.Call:
            q = col.model.qualname(n.func, scope)
            if q is not None and (q in PYTHON_CALLS or q in PYTHON_CALLS_NO_ARGS or q.startswith("secrets.")):
                return True
    return False


def on_with_column(col: Collector, call: ast.Call, scope: Scope) -> None:
    args = call.args
    if len(args) >= 2 and not chains.looked_only(col.model, call):
        # a name not known (a parameter no call gives: withColumn(name, F.rand())) is the template {name}
        for name in column_names(col.values, args[0], scope):
            col._add_write(name, scope, args[1], node=call)


def on_rename(col: Collector, call: ast.Call, scope: Scope) -> None:
    args = call.args
    if len(args) >= 2:
        old, new = col.values.const_strings(args[0], scope), col.values.const_strings(args[1], scope)
        if old and new:
            col._add_write(new[0], scope, ast.Constant(value=old[0]), node=call, rename=True)


def on_renames(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``withColumnsRenamed({"old": "new", ...})`` (Spark 3.4), pandas' ``rename(columns={...})``: each pair
    as ``withColumnRenamed``."""
    for old, new in renamed_pairs(col.model, col.values, call, scope):
        col._add_write(new, scope, ast.Constant(value=old), node=call, rename=True)


def renamed_pairs(model, values, call: ast.Call, scope: Scope) -> list[tuple[str, str]]:
    """The ``(old, new)`` column names of a renaming dict (a literal, or the one a name holds) whose both
    names are known strings: ``withColumnsRenamed``'s, pandas' ``rename(columns=...)`` or ``rename(mapping,
    axis=1)`` (a pandas ``rename`` of the index renames no column)."""
    given = model.kwarg(call, "columns", "colsMap")
    if given is None and call.args:
        axis = model.kwarg(call, "axis")
        if call.func.attr != "rename" or (type(axis) is ast.Constant and axis.value in (1, "columns")):
            given = call.args[0]
    mapping = model.resolve_dict(given, scope) if given is not None else None
    if type(mapping) is not ast.Dict:
        return []
    out = []
    for k, v in zip(mapping.keys, mapping.values, strict=False):
        old = values.const_strings(k, scope) if k is not None else None
        new = values.const_strings(v, scope)
        if old and new and len(old) == 1 and len(new) == 1:
            out.append((old[0], new[0]))
    return out


def on_register(col: Collector, call: ast.Call, scope: Scope) -> None:
    func = call.func
    if len(call.args) >= 2 and type(func.value) is ast.Attribute and func.value.attr == "udf":
        names = col.values.const_strings(call.args[0], scope)
        if names:
            col.sql_udfs[names[0].lower()] = (call.args[1], scope)


def on_with_columns(col: Collector, call: ast.Call, scope: Scope) -> None:
    if not call.args:
        return
    mapping = col.model.resolve_dict(call.args[0], scope)
    if type(mapping) is ast.Dict and not chains.looked_only(col.model, call):
        for k, v in zip(mapping.keys, mapping.values, strict=False):
            for name in column_names(col.values, k, scope) if k is not None else ():
                col._add_write(name, scope, v, node=call)


def on_select(col: Collector, call: ast.Call, scope: Scope) -> None:
    if not chains.looked_only(col.model, call):
        for a in call.args:
            _select_item(col, a, scope)


def on_assign(col: Collector, call: ast.Call, scope: Scope) -> None:
    for kw in call.keywords:
        if not kw.arg:
            continue
        if type(kw.value) is ast.Lambda and id(kw.value) in col.model.fn_scopes:
            col._add_write(kw.arg, col.model.fn_scopes[id(kw.value)], kw.value.body, node=call)
        else:
            col._add_write(kw.arg, scope, kw.value, node=call)


def on_select_expr(col: Collector, call: ast.Call, scope: Scope) -> None:
    if chains.looked_only(col.model, call):
        return
    for a in call.args:
        text = col.values.sql_text(a, scope)
        if text is None:
            continue
        ok, alias, part = sqlmod.analyze_expression(text.text)
        if ok:
            col._add_write(alias or text.text.strip(), scope, sql=(part, text), node=call)


def _select_item(col: Collector, a: ast.AST, scope: Scope) -> None:
    t = type(a)
    if t is ast.Dict:  # agg({"col": "first"}): Spark names the result "first(col)"
        for k, v in zip(a.keys, a.values, strict=False):
            names = col.values.const_strings(k, scope) if k is not None else None
            if not names or type(v) is not ast.Constant or not isinstance(v.value, str):
                continue
            rule = SPARK_FUNCTIONS.get(v.value.lower())
            if rule is not None and rule == ORDER_CODE:
                own = col.model.src(rule, v, what=f"agg({{{names[0]!r}: {v.value!r}}})")
                col.writes.append(Write(f"{v.value.lower()}({names[0]})", scope, None, None, a, own=own))
        return
    if t is ast.Constant or t is ast.Starred:
        return
    if t is ast.List or t is ast.Tuple:
        for e in a.elts:
            _select_item(col, e, scope)
        return
    if t is ast.Call and type(a.func) is ast.Attribute and a.func.attr in ALIAS_METHODS and a.args:
        for name in column_names(col.values, a.args[0], scope):
            col._add_write(name, scope, a, node=a)
        return
    sname = col.model.spark_name(col.model.qualname(a.func, scope)) if t is ast.Call else None
    if sname in NAME_ARG_FUNCTIONS:
        return
    if sname == "expr" and a.args:
        text = col.values.str_value(a.args[0], scope)
        alias = sqlmod.analyze_expression(text.text)[1] if text is not None else None
        if alias:
            col._add_write(alias, scope, a, node=a)
            return
    # a bare name, attribute or subscript is a write too: whether any source reaches it is asked later.
    # Spark names ``df["c"]`` and ``df.c`` "c"; an expression it names otherwise keeps its text
    names = col.values.col_names(a, scope) if t is ast.Subscript or t is ast.Attribute else []
    plain = len(names) == 1 and names[0].isidentifier()
    col._add_write(names[0] if plain else col.model.segment(a, 80), scope, a, node=a)
