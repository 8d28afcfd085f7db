"""Taint: which nondeterministic sources reach an expression, a column or a row choice.

Computed on demand from the frozen facts, the semantic model, the values and the keys (a window ordered by
a key cannot tie); memoized and cycle-safe. Taint changes nothing it reads: the same question always gets
the same answer, whichever is asked first. In semgrep's words: the catalogue's calls are the *sources*, the
written columns and row choices the *sinks*, names, calls of local functions, UDFs, SQL text and other
files' summaries the *propagators*, and the order-fixing functions (``sort_array``) the *sanitizers*.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from ..base.sources import (
    METHOD_SOURCES,
    ORDER_CODE,
    ORDER_FIXING_FUNCTIONS,
    ORDER_INSENSITIVE_ARGS_OF,
    ROW_VALUE_CODES,
    SPARK_ORDERED_OK,
    SPARK_RANKING,
    UDF_FACTORIES,
    WINDOW_TIES_CODE,
)
from ..base.spark_api import FRAME_METHODS, RECORD_TABLES, WIDGET_READS
from ..base.structs import replace
from ..base.types import Src
from ..model.callsites import arguments, call_sites, called_name, default_of, is_default
from ..model.reaching import reaching
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values import sql as sqlmod
from ..values.evaluate import Values
from ..values.strings import PosText
from ..values.windows import window_orders, window_spec
from . import records
from .call_sources import as_udf, source_of_call
from .facts import EMPTY, Facts, RowEffect, Write, norm, summary_sources
from .keys import Keys

_PARTS = (ast.keyword, ast.comprehension, ast.FormattedValue)  # parts of an expression that hold expressions


class Taint:
    """The sources reaching the expressions and columns of one module."""

    def __init__(
        self, model: SemanticModel, values: Values, facts: Facts, keys: Keys, fix_hooks: Mapping[str, Callable]
    ) -> None:
        self.model = model
        self.fix_hooks = fix_hooks  # rule code -> the fix its catalogue sources offer (the rules' FIX_HOOKS)
        self.values = values
        self.facts = facts
        self.keys = keys
        self._unique = {norm(k) for k in keys.keys} | {norm(s) for s in keys.sequence}
        self._memo: dict[int, frozenset] = {}
        self._busy: set[int] = set()
        self._col_memo: dict[str, frozenset] = {}
        self._col_busy: set[str] = set()
        # columns cut short (asked again while being computed: ``withColumn("k", F.col("k").cast(...))``): what
        # is computed meanwhile is partial, kept only until the outermost column is done (recomputed, exponential)
        self._col_cut: set[str] = set()
        self._partial: dict[object, frozenset] = {}
        self._fn_memo: dict[int, frozenset] = {}
        # tables built from dict records whose fields were written as columns: pd.DataFrame([{...}])
        self._records = {id(w.anchor) for w in facts.writes if type(w.anchor) is ast.Call and _records_table(w.anchor)}

    def of(self, node: ast.AST | None, scope: Scope) -> frozenset:
        """The sources reaching the value of ``node`` (evaluated in ``scope``)."""
        if node is None:
            return EMPTY
        key = id(node)
        memo = self._memo.get(key, self._partial.get(key))
        if memo is not None:
            return memo
        if key in self._busy:
            return EMPTY
        self._busy.add(key)
        outer_cut, self._col_cut = self._col_cut, set()
        try:
            result = self._of(node, scope)
        finally:
            self._busy.discard(key)
            cut, self._col_cut = self._col_cut, outer_cut | self._col_cut
        (self._partial if cut else self._memo)[key] = result
        return result

    def _of(self, node: ast.AST, scope: Scope) -> frozenset:
        t = type(node)
        if t is ast.Constant:
            return EMPTY
        if t is ast.Name:
            return self.name_taint(node.id, scope, node)
        if t is ast.Call:
            return self.call_taint(node, scope)
        if t is ast.Attribute:
            bound = self.model.attr_values(node, scope)
            if bound is not None:  # self.attr: whatever the class's methods bind to it
                out = EMPTY
                for value, vscope in bound:
                    out = out | self.of(value, vscope)
                return out
            ext = self.model.resolve_external(node, scope)
            if ext is not None and ext[1] == "value":
                return self._ext_srcs(ext, node)
            out = self.of(node.value, scope)
            if type(node.value) is ast.Name and self.model.qualname(node.value, scope) is None:
                out = out | self.column_taint(node.attr)  # df.col_name
            return out
        if t is ast.Subscript:
            out = self.of(node.value, scope) | self.of(node.slice, scope)
            sl = node.slice
            if type(sl) is ast.Constant and isinstance(sl.value, str):
                out |= self.column_taint(sl.value)
            return out
        if t is ast.Lambda or t is ast.FunctionDef:  # s.map(lambda v: f"{v}-{uuid4()}"): what a lambda returns
            fscope = self.model.fn_scopes.get(id(node))
            return self.of(node.body, fscope) if fscope is not None and t is ast.Lambda else EMPTY
        out = EMPTY
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) or type(child) in _PARTS:
                out = out | self.of(child, scope)
        return out

    def name_taint(self, name: str, scope: Scope, node: ast.AST | None = None) -> frozenset:
        s = self.model.lookup(name, scope)
        if s is None or name not in s.assigns:
            if node is not None:
                ext = self.model.resolve_external(node, scope)
                if ext is not None and ext[1] == "value":
                    return self._ext_srcs(ext, node)
            return EMPTY
        out = EMPTY
        bound = reaching(self.model, node, scope)[1] if type(node) is ast.Name else s.assigns[name]
        for value in bound:
            if value is not None:
                out = out | self.of(value, s)
        if s.kind == "function" and name in s.params:
            out = out | self.param_taint(s, name)
        return out

    def param_taint(self, fscope: Scope, name: str) -> frozenset:
        """What the module's own calls of the function pass for parameter ``name``, and its default where a
        call leaves it out or no call of the function is known here (``prefix=str(uuid.uuid4())``)."""
        out, sites = EMPTY, call_sites(self.model, fscope)
        for call, scope in sites:
            given = arguments(call, scope, fscope).get(name)
            if given is not None and (given[1] is scope or is_default(given[0], fscope)):
                out = out | self.of(*given)
        default = default_of(fscope, name) if not sites else None
        return out | self.of(default, fscope.parent or fscope) if default is not None else out

    def column_taint(self, column: str) -> frozenset:
        """Sources reaching a column by name (through every write of that column in the module)."""
        col = norm(column)
        memo = self._col_memo.get(col, self._partial.get(col))
        if memo is not None:
            return memo
        if col in self._col_busy:
            self._col_cut.add(col)
            return EMPTY
        self._col_busy.add(col)
        outer_cut, self._col_cut = self._col_cut, set()
        out = EMPTY
        try:
            for w in self.facts.by_column.get(col, ()):
                out = out | self.write_taint(w)
        finally:
            self._col_busy.discard(col)
            self._col_cut.discard(col)  # its own writes reading it add nothing new: the union is complete
            cut, self._col_cut = self._col_cut, outer_cut | self._col_cut
        (self._partial if cut else self._col_memo)[col] = out
        if not self._col_busy:
            self._partial.clear()
        return out

    def write_taint(self, w: Write | RowEffect) -> frozenset:
        if isinstance(w, Write) and w.rename and isinstance(w.expr, ast.Constant):
            return self.column_taint(str(w.expr.value))
        out = self.of(w.expr, w.scope) if w.expr is not None else EMPTY
        if w.sql is not None:
            out = out | self.sql_taint(w.sql[0], w.sql[1], w.scope)
        if w.own is not None:
            out = out | {w.own}
        return out

    def sql_taint(self, part: sqlmod.SqlPart, text: PosText, scope: Scope) -> frozenset:
        out = set()
        for site in part.sites:
            if site.window is not None and not self.may_tie(*site.window):
                continue
            line, col, eline, ecol = text.span(site.start, site.end)
            alt = text.last_line
            spelled = text.text[site.start : site.end]  # array_agg, not sqlglot's collect_list
            shown = spelled.lower() if spelled.isidentifier() and site.name.islower() else site.name
            partition = None
            if site.window is not None and site.rule == WINDOW_TIES_CODE:
                partition = frozenset(norm(c) for c in site.window[0])
            out.add(
                Src(
                    site.rule,
                    line,
                    col,
                    eline,
                    ecol,
                    f"{shown} in SQL",
                    via=text.origin_of(site.start),
                    alt_line=alt,
                    partition=partition,
                    order_only=site.name in ORDER_INSENSITIVE_ARGS_OF,
                )
            )
        for ref in part.refs:
            out |= self.column_taint(ref) if ref not in part.null_refs else _nullness(self.column_taint(ref))
        for hole in part.holes:
            node = text.holes.get(hole)
            if node is not None:
                out |= self.of(node, scope)
        for name in part.calls:
            registered = self.facts.sql_udfs.get(name.lower())
            if registered is not None:
                out |= self._udf_taint(registered[0], registered[1], name)
        return frozenset(out)

    def may_tie(self, partition: tuple[str, ...], order: tuple[str, ...]) -> bool:
        """Heuristic: a window ordering may tie unless it includes a key or sequence column that is not a
        partition column, or it orders by two or more distinct columns (the last one a tie-breaker)."""
        order_n = {norm(c) for c in order}
        part_n = {norm(c) for c in partition}
        if not order_n:
            return True
        if (order_n - part_n) & self._unique:
            return False
        return len(order_n - part_n) < 2

    def call_taint(self, call: ast.Call, scope: Scope) -> frozenset:
        if id(call) in self._records:  # each field carries its own sources as a column: frame["ts"] is ts
            return EMPTY
        func = call.func
        ft = type(func)
        out: set[Src] = set()
        q = self.model.qualname(func, scope) if ft is ast.Name or ft is ast.Attribute else None
        source = source_of_call(self.model, call, q, self.facts.seeded, self.fix_hooks)
        if source is not None:
            out.add(source)
        if (self.facts.widgets or self.model.runs) and (
            func.attr if ft is ast.Attribute else getattr(func, "id", "")
        ) in WIDGET_READS:
            out |= self._widget_taint(call, scope)
        sname = self.model.spark_name(q)
        args = call.args
        if ft is ast.Attribute and func.attr in _NULL_TESTS and not args:  # F.col("closed_at").isNull()
            return _nullness(self.of(func.value, scope))
        if sname in _NULL_TEST_FUNCTIONS:  # F.isnull(c)
            return _nullness(frozenset(x for a in args for x in self.of(a, scope)))
        if sname is not None:
            if sname == "expr" and args:
                text = self.values.str_value(args[0], scope)
                if text is not None:
                    ok, _alias, part = sqlmod.analyze_expression(text.text)
                    if ok:
                        out |= self.sql_taint(part, text, scope)
            elif sname != "lit":
                for a in args:  # F.col("seq"), F.col(SEQ) with SEQ = "seq" (a name bound once, to a string)
                    bound = self.model.single_value(a, scope) if type(a) is ast.Name else None
                    a = bound[0] if bound is not None else a
                    if type(a) is ast.Constant and isinstance(a.value, str):
                        out |= self.column_taint(a.value)
            if sname in _COUNTING and args:  # size(array_intersect(collected, ...)): a count, in any order
                given = [*args, *(kw.value for kw in call.keywords)]
                counted = out.union(*(self.of(a, scope) for a in given))
                return frozenset(x for x in counted if not x.order_only)
            if sname in ORDER_FIXING_FUNCTIONS and args:
                # sort_array(collect_set(x)): the array's order, the only problem of collect_*, is fixed here
                fixed = set()
                for a in args:
                    if type(a) is ast.Call and type(a.func) is ast.Attribute and a.func.attr == "over":
                        a = a.func.value  # sort_array(collect_set(x).over(w))
                    if type(a) is ast.Call and self.model.spark_name(self.model.qualname(a.func, scope)) in (
                        ORDER_INSENSITIVE_ARGS_OF
                    ):
                        fixed.add(self.model.span(a))
                rest = frozenset(
                    x
                    for a in args
                    for x in self.of(a, scope)
                    if not (x.rule == ORDER_CODE and (x.line, x.col, x.end_line, x.end_col) in fixed)
                )
                for kw in call.keywords:
                    rest = rest | self.of(kw.value, scope)
                return frozenset(out) | rest
            if sname in UDF_FACTORIES:
                return frozenset(out)
        if ft is ast.Attribute:
            m = func.attr
            if m in METHOD_SOURCES:
                out.add(
                    self.model.src(METHOD_SOURCES[m], call, what=f"{m}()", span=self.model.method_span(call))
                )
            if m == "over":
                return frozenset(out | self._over_taint(call, scope))
            if m in FRAME_METHODS and sname is None:  # F.coalesce(...) is a function, df.coalesce(2) a method
                return EMPTY
            cls = self.model.self_class(func.value, scope)
            if cls is not None and m in cls.funcs:  # self.method(...): what the method returns
                fn, fscope = cls.funcs[m]
                out |= self.returns_taint(fn, fscope)
            elif q is None:
                out |= self.of(func.value, scope)
            else:
                ext = self.model.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    out |= self._ext_srcs(ext, call)
        elif ft is ast.Name:
            out |= self._local_call_taint(func.id, scope)
            if self.model.lookup(func.id, scope) is None or self.model.is_import(func.id, scope):
                ext = self.model.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    out |= self._ext_srcs(ext, call)
        elif ft is ast.Call and self.model.is_udf_factory(func, scope) and func.args:
            out |= self._udf_taint(func.args[0], scope, self.model.segment(func.args[0], 30))
        else:
            out |= self.of(func, scope)
        for a in args:
            out |= self.of(a, scope)
        for kw in call.keywords:
            out |= self.of(kw.value, scope)
        return frozenset(out)

    def _widget_taint(self, call: ast.Call, scope: Scope) -> frozenset:
        """``dbutils.widgets.get(name)`` / ``getArgument(name)``: the default the notebook gave the widget."""
        func = call.func
        if type(func) is ast.Attribute and not records.is_widgets(func.value):
            return EMPTY
        if type(func) is ast.Name and self.model.lookup(func.id, scope) is not None:
            return EMPTY
        name = records.widget_name(call, self.values, scope)
        widget = self.facts.widgets.get(name or "")
        if widget is not None:
            return self.of(widget[0], widget[1])
        for spec in self.model.module.star if name else ():  # a widget a %run notebook defined
            if not spec.startswith("%run:"):
                continue
            self.model.wants.add(f"{spec}.{name}")
            summary = self.model.externals.get(spec) or {}
            rows = summary.get("widgets", {}).get(name)
            if rows:
                callee = f'dbutils.widgets.get("{name}")'
                return frozenset(
                    summary_sources(rows, self.model.span(call), callee, summary.get("path", "?"))
                )
        return EMPTY

    def _over_taint(self, call: ast.Call, scope: Scope) -> frozenset:
        func = call.func
        assert isinstance(func, ast.Attribute)
        inner = func.value
        spec = window_spec(self.values, call.args[0], scope) if call.args else ((), ())
        ties = spec is None or self.may_tie(*spec)
        name = None
        if type(inner) is ast.Call:
            name = self.model.spark_name(self.model.qualname(inner.func, scope))
        out = set(self.of(inner, scope))
        # a window ordered by a nondeterministic value (monotonically_increasing_id(), rand(), a clock column,
        # also named by a string: orderBy("ts")) numbers and picks rows by that value: its sources decide
        ordered_by = EMPTY
        for a, s in window_orders(self.values, call.args[0], scope) if call.args else ():
            named = type(a) is ast.Constant and isinstance(a.value, str)
            ordered_by = ordered_by | self.of(a, s) | (self.column_taint(a.value) if named else EMPTY)
        out |= ordered_by
        if name in SPARK_RANKING and spec is not None and ties and not ordered_by:
            src = self.model.src(
                WINDOW_TIES_CODE,
                inner,
                what=f"{self.model.segment(inner.func, 40)}() over a window that may tie",
            )
            out.add(replace(src, partition=frozenset(norm(c) for c in spec[0])))
        elif name in SPARK_ORDERED_OK and spec is not None and not ties:
            own = self.model.span(inner)
            out = {
                s for s in out if not (s.rule == ORDER_CODE and (s.line, s.col, s.end_line, s.end_col) == own)
            }
        for a in call.args:
            out |= self.of(a, scope)
        return frozenset(out)

    def _ext_srcs(self, ext: tuple[dict, str, str], node: ast.AST, key: str = "returns") -> frozenset:
        """Sources another file's definition carries, reported at ``node`` (the use in this file)."""
        entry, kind, _label = ext  # _label: the defining file
        rows = entry.get(key, ()) if kind == "func" else entry.get("sources", ())
        callee = self.model.segment(node.func if type(node) is ast.Call else node, 40)
        return frozenset(summary_sources(rows, self.model.span(node), callee, _label))

    def _local_call_taint(self, name: str, scope: Scope) -> frozenset:
        s = self.model.lookup(name, scope)
        if s is None:
            return EMPTY
        out = EMPTY
        if name in s.funcs:
            fn, fscope = s.funcs[name]
            if name in s.udfs:
                out = out | self._udf_taint_fn(fn, fscope, name)
            else:
                out = out | self.returns_taint(fn, fscope)
        for value in s.assigns.get(name, ()):
            while (
                type(value) is ast.Call
                and type(value.func) is ast.Attribute
                and value.func.attr in ("asNondeterministic", "withName")
            ):
                value = value.func.value
            if type(value) is ast.Call and self.model.is_udf_factory(value, s):
                target = value.args[0] if value.args else None
                if (
                    type(value.func) is ast.Attribute
                    and value.func.attr == "register"
                    and len(value.args) > 1
                ):
                    target = value.args[1]
                if target is not None:
                    out = out | self._udf_taint(target, s, name)
            elif type(value) is ast.Lambda:
                out = out | self.of(value.body, self.model.fn_scopes.get(id(value), s))
        return out

    def returns_taint(self, fn: ast.AST, fscope: Scope) -> frozenset:
        key = id(fn)
        if key in self._fn_memo:
            return self._fn_memo[key]
        self._fn_memo[key] = EMPTY
        out = EMPTY
        for r in fscope.returns:
            out = out | self.of(r, fscope)
        self._fn_memo[key] = out
        return out

    def _udf_taint(self, target: ast.AST, scope: Scope, label: str) -> frozenset:
        if type(target) is ast.Lambda:
            fscope = self.model.fn_scopes.get(id(target))
            inner = self.of(target.body, fscope) if fscope is not None else EMPTY
            return as_udf(inner, label)
        if type(target) is ast.Name:
            s = self.model.lookup(target.id, scope)
            if s is not None and target.id in s.funcs:
                fn, fscope = s.funcs[target.id]
                return self._udf_taint_fn(fn, fscope, label)
        return EMPTY

    def _udf_taint_fn(self, fn: ast.AST, fscope: Scope, label: str) -> frozenset:
        return as_udf(self.returns_taint(fn, fscope), label)


# of the order-fixing functions, those that count an array's elements: its order never matters to them
_COUNTING = frozenset({"size", "array_size", "cardinality"})
# null tests: what they answer depends on whether a value is null, never on the value
_NULL_TESTS = frozenset({"isNull", "isNotNull"})
_NULL_TEST_FUNCTIONS = frozenset({"isnull", "isnotnull"})


def _nullness(sources: frozenset) -> frozenset:
    """The sources that decide whether a value is null: the value sources (a clock, a random number, a UUID,
    a partition id) never are; an order-dependent aggregate or window function can be (``first``, ``lag``)."""
    return frozenset(s for s in sources if s.rule not in ROW_VALUE_CODES)


def _records_table(call: ast.Call) -> bool:
    """Does ``call`` turn dict records into a table (``pd.DataFrame(rows)``, ``pa.Table.from_pylist(rows)``)?"""
    return called_name(call.func) in RECORD_TABLES
