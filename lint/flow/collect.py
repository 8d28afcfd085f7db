"""The collection pass: every call of the module is read once, in source order, by the fact extractor the API
table names for its method (:data:`upsertsink.lint.base.spark_api.METHODS`, ``fact=...``) and by the rules' own
extractors (their ``method_hooks``). The result is a frozen :class:`~upsertsink.lint.flow.facts.Facts`.

No extractor computes data flow: which sources reach a fact is asked only after every fact is known (keys
included), so the answer cannot depend on the order of the code.
"""

from __future__ import annotations

import ast
import re
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
from ..model import chains
from ..model.callsites import called_name, given_argument
from ..model.reaching import reaching
from ..model.scopes import Scope
from ..values import sql as sqlmod
from . import extract_columns, extract_tables
from .facts import Collector, Facts, Write, strip_qualifier, summary_sources
from .pipelines import _pipeline_flow, pipeline_expectations

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .context import Context

    # method or attribute name -> the rules' detectors of it: (context, node, scope) -> None
    Hooks = Mapping[str, tuple[Callable, ...]]


# fact name (the API table's ``fact=NAME``) -> its extractor ``on_NAME(collector, call, scope)``
EXTRACTORS = {
    name[3:]: fn
    for module in (extract_columns, extract_tables)
    for name, fn in vars(module).items()
    if name.startswith("on_")
}


def collect(collector: Collector, ctx: Context, method_hooks: Hooks, subscript_hooks: Hooks) -> Facts:
    """Read every call of the module into ``collector`` (``ctx`` is what the rules' extractors see; the
    rules' ``method_hooks`` and ``subscript_hooks`` by method and attribute name), then freeze the facts."""
    return _Pass(collector, ctx, method_hooks, subscript_hooks).run()


class _Pass:
    """One collection pass over a module's calls, in source order."""

    def __init__(self, collector: Collector, ctx: Context, method_hooks: Hooks, subscript_hooks: Hooks) -> None:
        model = collector.model
        self.col, self.ctx, self.model, self.values = collector, ctx, model, collector.values
        self.method_hooks, self.subscript_hooks = method_hooks, subscript_hooks
        # the names an import binds to UpsertSink under another name (only they need a qualified lookup)
        self._sink_aliases = frozenset(
            name for s in model.scopes for name, full in s.imports.items() if full.endswith(".UpsertSink")
        )
        # the names of the module's top-level imports of modules that are not libraries (F.col(...) is pyspark's)
        self._project_modules = {a for a, mod in model.module.imports.items() if not is_library(mod)}
        self._given: dict[int, set[str]] = {}  # id(scope) -> the names it makes records (_plain_dict)

    def run(self) -> Facts:
        model, col, ctx = self.model, self.col, self.ctx
        for call, scope in model.calls:
            self._process_call(call, scope, ctx)
        for fscope in model.decorated:
            found = model.pipeline_decorator(fscope)
            if found is not None and found[0] in PIPELINE_STORED:
                col.writes_data = True  # a pipeline table's query function: its DataFrame is the table
            if found is not None:
                pipeline_expectations(self.col, fscope)  # @dlt.expect_or_drop(...): a filter of its rows
        for sub, scope in model.attr_subscripts:  # pdf.iloc[:10]: the rules' hooks of ``iloc`` read it
            col._current = sub
            for hook in self.subscript_hooks.get(sub.value.attr, ()):
                hook(ctx, sub, scope)
        for target, value, scope in model.sub_writes:
            sl = target.slice
            if type(sl) is ast.Tuple and sl.elts:  # pdf.loc[:, "col"] = ...
                sl = sl.elts[-1]
            if type(sl) is ast.Constant and isinstance(sl.value, str) and not self._plain_dict(target.value, scope):
                col._current = self._frame_made(target.value, scope)
                col._add_write(sl.value, scope, value, node=target)
        col._current = None
        for call, scope in col.sink_calls:
            delete_when = model.kwarg(call, "delete_when")
            if delete_when is not None:
                col._current = call  # it decides the rows of the sink's own table
                col._condition_effect(delete_when, scope)
        col._current = None
        for call, cond, scope in col.merges:  # a MERGE's condition decides which keys are inserted or matched
            if cond is not None:
                col._current = call
                col._condition_effect(cond, scope)
        col._current = None
        return col.freeze()

    def _process_call(self, call: ast.Call, scope: Scope, ctx: Context) -> None:
        self.col._current = call
        func = call.func
        called = called_name(func)
        if called in PIPELINE_CDC_FLOWS and pipeline_name(self.model.qualname(func, scope)) == called:
            _pipeline_flow(self.col, call, scope, PIPELINE_CDC_FLOWS[called])  # dlt.apply_changes(...)
            return
        if type(func) is ast.Name:
            if func.id == "UpsertSink" or (
                func.id in self._sink_aliases
                and (self.model.qualname(func, scope) or "").endswith(".UpsertSink")
            ):
                self.col.sink_calls.append((call, scope))
                self.col.writes_data = True
                return
            if func.id in STORE_METHODS:  # write_deltalake(path, df)
                self.col.writes_data = True
            fact = FACTS.get(func.id) if func.id in PANDAS_FRAMES else None
            if fact is not None and chains.pandas_name(self.model, func, scope):
                EXTRACTORS[fact](self.col, call, scope)  # from pandas import DataFrame; DataFrame(records)
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
            handler(self.col, call, scope)
        for hook in self.method_hooks.get(m, ()):
            hook(ctx, call, scope)
        if m in STORE_METHODS or chains.after_write(func.value):
            self.col.writes_data = True
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
                self.col.writes.append(Write(column, scope, None, None, call, own=own, anchor=call))
        history = entry.get("history", ())
        for k in entry.get("keys", ()):
            if k not in history:  # a history sink's sequence column is learned as one, below
                self.col.ext_keys.append((k, scope, None))
        for s in history:
            self.col.declare(s, "sequence column", scope, sequence=True, history=True)
        for position, name in entry.get("seq_args", ()):  # upsert(df, path, keys, sequence_by="lsn")
            for s in self.values.const_strings(given_argument(call, position, name), scope) or ():
                if _COLUMN_NAME.fullmatch(s):
                    self.col.declare(s, "sequence column", scope, sequence=True)
        if "key_args" in entry or "cond_arg" in entry:  # upsert(df, "silver.orders", ["order_no"]): the keys
            table = None  # and table given here
            for position, name in entry.get("table_arg", ()):
                names = self.values.const_strings(given_argument(call, position, name), scope)
                table = names[0] if names and len(names) == 1 else table
            for position, name in entry.get("key_args", ()):  # a key, or a list of them: each name given is one
                for k in self.values.const_strings(given_argument(call, position, name), scope) or ():
                    if _COLUMN_NAME.fullmatch(k):
                        self.col.ext_keys.append((k, scope, table))
            for position, name in entry.get("frame_arg", ()):  # the DataFrame it writes into that table
                frame = given_argument(call, position, name)
                if frame is not None:
                    self.col.ext_frames.append((frame, scope, table))
            for position, name in entry.get("cond_arg", ()):  # the MERGE's condition, given whole
                arg = given_argument(call, position, name)
                text = self.values.str_value(arg, scope) if arg is not None else None
                for k in sqlmod.named(sqlmod.condition_keys(text.text)) if text is not None else ():
                    if _COLUMN_NAME.fullmatch(strip_qualifier(k)):
                        self.col.ext_keys.append((strip_qualifier(k), scope, table))


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
