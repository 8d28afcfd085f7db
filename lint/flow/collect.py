"""The collection pass: every call of the module is read once, in source order, by the fact extractor the API
table names for its method (:data:`upsertsink.lint.base.spark_api.METHODS`, ``fact=...``) and by the rules' own
extractors (their ``method_hooks``). The result is a frozen :class:`~upsertsink.lint.flow.facts.Facts`.

No extractor computes data flow: which sources reach a fact is asked only after every fact is known (keys
included), so the answer cannot depend on the order of the code.
"""

from __future__ import annotations

import ast
import re
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..base.spark_api import (
    FACTS,
    PANDAS_FRAMES,
    PIPELINE_CDC_FLOWS,
    PIPELINE_STORED,
    ROW_METHODS,
    STORE_METHODS,
    is_library,
    pipeline_name,
)
from ..catalogue import METHOD_HOOKS, SUBSCRIPT_HOOKS
from ..model import chains
from ..model.callsites import called_name, given_argument
from ..model.reaching import reaching
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values import sql as sqlmod
from ..values.evaluate import Values
from . import extract_columns, extract_tables
from .facts import Facts, KeyDecl, RowEffect, Src, Write, strip_qualifier, summary_sources
from .pipelines import _pipeline_flow, pipeline_expectations

if TYPE_CHECKING:
    from ..rules.context import Context


# fact name (the API table's ``fact=NAME``) -> its extractor ``on_NAME(collector, call, scope)``
EXTRACTORS = {
    name[3:]: fn
    for module in (extract_columns, extract_tables)
    for name, fn in vars(module).items()
    if name.startswith("on_")
}


class Collector:
    """Builds the :class:`Facts` of one module from its model; rules' extractors add theirs through it."""

    def __init__(self, model: SemanticModel, values: Values) -> None:
        self.model = model
        self.values = values
        # the names an import binds to UpsertSink under another name (only they need a qualified lookup)
        self._sink_aliases = frozenset(
            name for s in model.scopes for name, full in s.imports.items() if full.endswith(".UpsertSink")
        )
        self.writes: list[Write] = []
        self.rows: list[RowEffect] = []
        self.declared: list[KeyDecl] = []
        self.sink_calls: list[tuple[ast.Call, Scope]] = []
        # the MERGE calls (``.merge(source, condition)``) with their condition, if any
        self.merges: list[tuple[ast.Call, ast.AST | None, Scope]] = []
        self.seq_conds: list[tuple[ast.AST, Scope]] = []
        self.dbt_keys: list[tuple[ast.Call, Scope]] = []
        self.ext_keys: list[tuple[str, Scope, str | None]] = []  # (key, scope, table: None when not known)
        self.ddl_keys: list[tuple[str, str, str]] = []
        self.joins: list[tuple[ast.Call, Scope]] = []
        self.tables_written: set[str] = set()
        self.sql_writes: list[tuple[ast.Call, str, bool, tuple[str, ...]]] = []
        self.sql_views: list[tuple[ast.Call, str, tuple[str, ...]]] = []
        self.pipeline_flows: list[tuple[ast.Call, str | None, str | None]] = []  # (call, target, source)
        self.sql_udfs: dict[str, tuple[ast.AST, Scope]] = {}
        self.seeded: set[str] = set()
        self.writes_data = model.dbt_model
        self.rule_state: dict[str, object] = {}  # per-module scratch space of rule extractors, by rule
        self.widgets: dict[str, tuple[ast.AST, Scope]] = {}
        # the names of the module's top-level imports of modules that are not libraries (F.col(...) is pyspark's)
        self._project_modules = {a for a, mod in model.module.imports.items() if not is_library(mod)}
        self.ext_frames: list[tuple[ast.AST, Scope, str | None]] = []
        self._current: ast.Call | None = None  # the call being read: the anchor of what it writes
        self._given: dict[int, set[str]] = {}  # id(scope) -> the names it makes records (_plain_dict)

    def collect(self, ctx: Context) -> Facts:
        """Read every call (``ctx`` is what the rules' extractors see), then freeze the facts."""
        model = self.model
        for call, scope in model.calls:
            self._process_call(call, scope, ctx)
        for fscope in model.decorated:
            found = model.pipeline_decorator(fscope)
            if found is not None and found[0] in PIPELINE_STORED:
                self.writes_data = True  # a pipeline table's query function: its DataFrame is the table
            if found is not None:
                pipeline_expectations(self, fscope)  # @dlt.expect_or_drop(...): a filter of its rows
        for sub, scope in model.attr_subscripts:  # pdf.iloc[:10]: the rules' hooks of ``iloc`` read it
            self._current = sub
            for hook in SUBSCRIPT_HOOKS.get(sub.value.attr, ()):
                hook(ctx, sub, scope)
        for target, value, scope in model.sub_writes:
            sl = target.slice
            if type(sl) is ast.Tuple and sl.elts:  # pdf.loc[:, "col"] = ...
                sl = sl.elts[-1]
            if type(sl) is ast.Constant and isinstance(sl.value, str) and not self._plain_dict(target.value, scope):
                self._current = self._frame_made(target.value, scope)
                self._add_write(sl.value, scope, value, node=target)
        self._current = None
        for call, scope in self.sink_calls:
            delete_when = model.kwarg(call, "delete_when")
            if delete_when is not None:
                self._current = call  # it decides the rows of the sink's own table
                self._condition_effect(delete_when, scope)
        self._current = None
        for (
            call,
            cond,
            scope,
        ) in self.merges:  # a MERGE's condition decides which keys are inserted or matched
            if cond is not None:
                self._current = call
                self._condition_effect(cond, scope)
        self._current = None
        return Facts(
            writes=tuple(self.writes),
            rows=tuple(self.rows),
            declared=tuple(self.declared),
            sink_calls=tuple(self.sink_calls),
            merges=tuple(self.merges),
            seq_conds=tuple(self.seq_conds),
            dbt_keys=tuple(self.dbt_keys),
            ext_keys=tuple(self.ext_keys),
            ddl_keys=tuple(self.ddl_keys),
            joins=tuple(self.joins),
            tables_written=frozenset(self.tables_written),
            sql_writes=tuple(self.sql_writes),
            sql_views=tuple(self.sql_views),
            pipeline_flows=tuple(self.pipeline_flows),
            sql_udfs=MappingProxyType(dict(self.sql_udfs)),
            seeded=frozenset(self.seeded),
            writes_data=self.writes_data,
            rule_state=self.rule_state,
            widgets=MappingProxyType(dict(self.widgets)),
            ext_frames=tuple(self.ext_frames),
        )

    # ---- what rules' extractors record
    def add_row_effect(
        self,
        kind: str,
        scope: Scope,
        own: Src | None = None,
        subset: list[str] | None = None,
        expr: ast.AST | None = None,
    ) -> None:
        """Record that the code decides which rows are written (filter, limit, sample, dedup); ``expr``
        is an expression whose sources decide them too (the ordering before a limit)."""
        self._row(RowEffect(kind, scope, expr=expr, own=own, subset=subset))

    def declare(
        self,
        column: str,
        label: str,
        scope: Scope | None,
        sequence: bool = False,
        history: bool = False,
        table: str | None = None,
    ) -> None:
        """A key (or sequence) column the code declares (of ``table``, when known)."""
        self.declared.append(KeyDecl(strip_qualifier(column), label, scope, sequence, history, table))

    def _add_write(
        self,
        column: str,
        scope: Scope,
        expr: ast.AST | None = None,
        sql=None,
        node=None,
        rename: bool = False,
    ) -> None:
        self.writes.append(Write(column, scope, expr, sql, node, rename, anchor=self._current))

    def _row(self, effect: RowEffect) -> None:
        if effect.anchor is None:
            effect.anchor = self._current
        self.rows.append(effect)

    def _process_call(self, call: ast.Call, scope: Scope, ctx: Context) -> None:
        self._current = call
        func = call.func
        called = called_name(func)
        if called in PIPELINE_CDC_FLOWS and pipeline_name(self.model.qualname(func, scope)) == called:
            _pipeline_flow(self, call, scope, PIPELINE_CDC_FLOWS[called])  # dlt.apply_changes(...)
            return
        if type(func) is ast.Name:
            if func.id == "UpsertSink" or (
                func.id in self._sink_aliases
                and (self.model.qualname(func, scope) or "").endswith(".UpsertSink")
            ):
                self.sink_calls.append((call, scope))
                self.writes_data = True
                return
            if func.id in STORE_METHODS:  # write_deltalake(path, df)
                self.writes_data = True
            fact = FACTS.get(func.id) if func.id in PANDAS_FRAMES else None
            if fact is not None and chains.pandas_name(self.model, func, scope):
                EXTRACTORS[fact](self, call, scope)  # from pandas import DataFrame; DataFrame(records)
                return
            bound = self.model.lookup(func.id, scope)  # not bound here, or bound by an import only
            if bound is None or (func.id in bound.imports and func.id not in bound.assigns):
                ext = self.model.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    self._external_call(call, scope, ext)
            return
        if type(func) is not ast.Attribute:
            return
        m = func.attr
        if m in ROW_METHODS and self.model.qualname(func, scope) is not None:
            return  # a module function (numpy.where, random.sample...), not a DataFrame method
        fact = FACTS.get(m)
        handler = EXTRACTORS.get(fact) if fact is not None else None
        if handler is not None:
            handler(self, call, scope)
        for hook in METHOD_HOOKS.get(m, ()):
            hook(ctx, call, scope)
        if m in STORE_METHODS or chains.after_write(func.value):
            self.writes_data = True
        if m == "transform" and call.args:  # df.transform(helper): the helper's writes happen here
            ext = self.model.resolve_external(call.args[0], scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)
        elif handler is None and (self.model.externals or (self._project_modules and self._module_call(func))):
            ext = self.model.resolve_external(func, scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)

    def _module_call(self, func: ast.Attribute) -> bool:
        """``writer.upsert(...)``, ``lake.writer.upsert(...)``: a function of a module imported at the top,
        looked up before any summary is known too, so that the run brings the module's summary."""
        base = func.value
        while type(base) is ast.Attribute:
            base = base.value
        return type(base) is ast.Name and base.id in self._project_modules

    def _frame_made(self, node: ast.AST, scope: Scope) -> ast.AST | None:
        """The call that made the DataFrame ``pdf["c"] = ...`` adds a column to (``pdf.loc[...]``'s too): the
        one binding of the name that reaches the assignment. The column flows where that DataFrame flows."""
        if type(node) is ast.Attribute and node.attr in ("loc", "iloc", "at"):
            node = node.value
        if type(node) is not ast.Name:
            return None
        bound = reaching(self.model, node, scope)[1]
        return bound[0] if len(bound) == 1 and type(bound[0]) in (ast.Call, ast.Subscript) else None

    def _plain_dict(self, node: ast.AST, scope: Scope) -> bool:
        """Is ``node["k"] = v`` a dict's item, not a DataFrame's column: ``node`` (a name, or ``self.attr``) is
        bound to dict literals or ``dict()`` only, and a name is never made a record (appended to a list, put
        in a list or tuple, given to a table or row constructor, yielded), as a run's metrics or timings are
        (returned, logged)."""
        if type(node) is ast.Attribute:
            bound = [v for v, _s in self.model.attr_values(node, scope) or ()]
        elif type(node) is ast.Name:
            bound = reaching(self.model, node, scope)[1]
        else:
            return False
        if not bound or not all(_is_dict(v) for v in bound):
            return False
        if type(node) is ast.Attribute:
            return True
        owner = reaching(self.model, node, scope)[0] or scope
        given = self._given.get(id(owner))
        if given is None:  # the names its scope makes records, computed once a scope
            given = self._given[id(owner)] = set()
            for n in ast.walk(owner.node if owner.node is not None else self.model.tree):
                t = type(n)
                if t is ast.List or t is ast.Tuple or t is ast.Set:
                    given.update(e.id for e in n.elts if type(e) is ast.Name)
                elif (t is ast.Yield or t is ast.YieldFrom) and type(n.value) is ast.Name:
                    given.add(n.value.id)
                elif t is ast.Call and called_name(n.func) in _RECORD_TAKERS:
                    given.update(a.id for a in [*n.args, *(k.value for k in n.keywords)] if type(a) is ast.Name)
        return node.id not in given

    def _external_call(self, call: ast.Call, scope: Scope, ext: tuple[dict, str, str]) -> None:
        """A call of another file's function: the columns it writes are written here, its keys known here."""
        entry, _kind, label = ext
        transform = bool(call.args) and call.func.__class__ is ast.Attribute and call.func.attr == "transform"
        callee = self.model.segment(call.args[0] if transform else call.func, 40)
        # ``.transform(helper)`` in a chain: reported at ``transform``, not where the chain starts
        span = self.model.method_span(call) if transform else self.model.span(call)
        for column, rows in entry.get("writes", ()):
            for own in summary_sources(rows, span, callee, label):
                self.writes.append(Write(column, scope, None, None, call, own=own, anchor=call))
        history = entry.get("history", ())
        for k in entry.get("keys", ()):
            if k not in history:  # a history sink's sequence column is learned as one, below
                self.ext_keys.append((k, scope, None))
        for s in history:
            self.declare(s, "sequence column", scope, sequence=True, history=True)
        for position, name in entry.get("seq_args", ()):  # upsert(df, path, keys, sequence_by="lsn")
            for s in self.values.const_strings(given_argument(call, position, name), scope) or ():
                if _COLUMN_NAME.fullmatch(s):
                    self.declare(s, "sequence column", scope, sequence=True)
        if "key_args" in entry or "cond_arg" in entry:  # upsert(df, "silver.orders", ["order_no"]): the keys
            table = None  # and table given here
            for position, name in entry.get("table_arg", ()):
                names = self.values.const_strings(given_argument(call, position, name), scope)
                table = names[0] if names and len(names) == 1 else table
            for position, name in entry.get("key_args", ()):  # a key, or a list of them: each name given is one
                for k in self.values.const_strings(given_argument(call, position, name), scope) or ():
                    if _COLUMN_NAME.fullmatch(k):
                        self.ext_keys.append((k, scope, table))
            for position, name in entry.get("frame_arg", ()):  # the DataFrame it writes into that table
                frame = given_argument(call, position, name)
                if frame is not None:
                    self.ext_frames.append((frame, scope, table))
            for position, name in entry.get("cond_arg", ()):  # the MERGE's condition, given whole
                arg = given_argument(call, position, name)
                text = self.values.str_value(arg, scope) if arg is not None else None
                for k in sqlmod.named(sqlmod.condition_keys(text.text)) if text is not None else ():
                    if _COLUMN_NAME.fullmatch(strip_qualifier(k)):
                        self.ext_keys.append((strip_qualifier(k), scope, table))

    def _condition_effect(self, cond: ast.AST, scope: Scope, kind: str = "merge") -> None:
        """A condition that decides rows: ``merge`` (which keys are inserted, deleted, matched), ``update``
        (whether a matched row's values are updated: values only, the keys stay) or ``filter``."""
        text = self.values.sql_text(cond, scope) if self.values.may_be_text(cond, scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._row(RowEffect(kind, scope, sql=(part, text)))
        else:
            self._row(RowEffect(kind, scope, expr=cond))


# calls that make a dict a row: collected into a list, or given to a table or row constructor
_RECORD_TAKERS = frozenset(
    {"append", "extend", "insert", "add", "put", "DataFrame", "createDataFrame", "from_pylist", "from_pydict",
     "from_records", "from_dict", "json_normalize", "Row", "write_deltalake", "RecordBatch"}
)


def _is_dict(node: ast.AST) -> bool:
    t = type(node)
    return t is ast.Dict or t is ast.DictComp or (
        t is ast.Call and type(node.func) is ast.Name and node.func.id in ("dict", "defaultdict", "OrderedDict")
    )


_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
