"""Target tables: which table each write of the module goes to, and which DataFrames flow into it.

A key is a key of the table a write goes to. The tables written with keys are the MERGEs
(``DeltaTable.forPath(spark, path).merge(source, condition)``, delta-rs ``DeltaTable(path).merge(...)``) and
the sinks (``UpsertSink(target, keys).write(df)``, ``UpsertSink.for_table(name, keys)``). From each one's
source DataFrame the DataFrame calls it is built from are followed backwards (method chains, every binding
of a name, the arguments of joins and unions, what a local function returns); a column write or row choice
made by one of those calls goes to that table. A fact no table is found for is judged against every key of
the module, as before tables were told apart. A column dropped on the way (``.drop("rn")`` after a
``row_number`` filter) does not reach the table: on every path from the call that writes it, it is dropped.
"""

from __future__ import annotations

import ast
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from ..model import chains
from ..model.callsites import arguments, call_sites, called_name
from ..model.reaching import reaching
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values.evaluate import Values
from ..values.paths import table_name
from .extract_columns import renamed_pairs
from .facts import Facts, norm

_DELTA_OPENERS = {"forPath": 1, "forName": 1}  # DeltaTable.forPath(spark, path): the path's position
# Writer methods that store a DataFrame into a table or path without a key: df.write...saveAsTable("t")
_KEYLESS_WRITES = {
    "saveAsTable": ("name",),
    "insertInto": ("tableName",),
    "toTable": ("tableName",),
    "save": ("path",),
    "to_table": ("name",),  # pandas-on-Spark: psdf.to_table("t"), psdf.to_delta("/p")
    "to_delta": ("path",),
}
# DataFrame methods that register it as a view by name (the name: their first argument, or `name=`)
_TEMP_VIEWS = frozenset({"createOrReplaceTempView", "createTempView", "createGlobalTempView",
                         "createOrReplaceGlobalTempView"})
_BUDGET = 5_000  # nodes one backward walk visits at most
# calls that remove (or replace) columns: select keeps only the columns it names
_REPLACING = frozenset(
    {"drop", "withColumn", "withColumns", "select", "agg", "count", "withColumnRenamed", "withColumnsRenamed", "rename"}
)
# pandas' groupby options that keep the grouping columns (as columns or as the index, written either way)
_GROUP_OPTIONS = frozenset({"by", "as_index", "sort", "dropna", "observed", "group_keys"})
_ALIASES = frozenset({"alias", "name"})
_SEMI = frozenset({"\0semi"})  # carried below the other side of a semi or anti join: none of its columns is kept
_LOOKUP = frozenset({"\0lookup"})  # carried with the dropped columns: below the looked-up side of an outer join
# A table whose name is not known (``DeltaTable.forName(spark, table)`` with ``table`` read from a conf): it is
# followed for the columns dropped on the way to it, never named (tables_of leaves it out)
_UNNAMED = "\0unnamed"
# the time-window functions of a grouping, named by Spark after themselves
_WINDOW_COLUMNS = frozenset({"window", "session_window"})


def merge_target(model: SemanticModel, values: Values, call: ast.Call, scope: Scope) -> str | None:
    """The table a ``.merge(...)`` call writes: the path or name its DeltaTable was opened with."""
    if type(call.func) is not ast.Attribute:
        return None
    for step, where in chains.down_chain(model, call.func.value, scope):
        if type(step) is not ast.Call:
            continue
        func = step.func
        if type(func) is ast.Attribute and func.attr in _DELTA_OPENERS:
            position = _DELTA_OPENERS[func.attr]
            arg = step.args[position] if len(step.args) > position else None
            return table_name(values, arg, where)
        if type(func) is ast.Name and func.id == "DeltaTable":  # delta-rs: DeltaTable(path)
            return table_name(values, step.args[0] if step.args else model.kwarg(step, "table_uri"), where)
    return None


def sink_target(model: SemanticModel, values: Values, call: ast.Call, scope: Scope) -> str | None:
    """The table an ``UpsertSink(target, ...)`` / ``UpsertSink.for_table(name, ...)`` writes."""
    arg = call.args[0] if call.args else model.kwarg(call, "target", "name", "table")
    return table_name(values, arg, scope)


def sink_sources(model: SemanticModel, sink: ast.Call) -> list[tuple[ast.AST, Scope]]:
    """The DataFrames given to the sink's ``write(df, ...)``: on the sink itself or a name bound to it."""
    out: list[tuple[ast.AST, Scope]] = []
    for call, scope in model.calls:
        func = call.func
        if type(func) is not ast.Attribute or func.attr != "write" or not call.args:
            continue
        receiver = func.value
        if type(receiver) is ast.Name:
            bound = model.single_value(receiver, scope)
            receiver = bound[0] if bound is not None else receiver
        if receiver is sink:
            out.append((call.args[0], scope))
    return out


def _plain(names: list[str]) -> bool:
    """Are these column names all known plain names (no unknown expression, star or nested field)?"""
    return bool(names) and not any(n.startswith("<") or "*" in n or "." in n for n in names)


def _bare(name: str) -> str:
    """A pipeline's dataset name as another dataset refers to it: ``LIVE.orders`` and ``orders`` alike."""
    return name.lower().removeprefix("live.")


class Targets:
    """Which tables the DataFrame calls of a module flow into."""

    def __init__(self, model: SemanticModel, values: Values, facts: Facts) -> None:
        self.model = model
        self._flows: dict[int, set[str]] = {}  # id(DataFrame call) -> tables it flows into
        # (id(DataFrame call), table) -> the columns (normalized) dropped on every path from it to the table
        self._dropped: dict[tuple[int, str], frozenset[str]] = {}
        self._values = values
        self._columns = frozenset(facts.by_column)  # every column the module writes (normalized)
        self.keyless: set[str] = set()  # tables written by a writer that takes no key (saveAsTable...)
        # a write inside a helper of the module (``def upsert(df, table, keys)``) is read once per call of the
        # helper, with that call's arguments: each call's DataFrame goes to that call's table
        for call, _cond, scope in facts.merges:
            for args in self._calls_of(scope):
                with self._bound(scope, args):
                    table = merge_target(model, values, call, scope)
                source = call.args[0] if call.args else model.kwarg(call, "source")
                if source is not None:
                    self._follow(source, scope, table or _UNNAMED, args)
                if table is None:
                    continue
                clause: ast.Call | None = call  # the MERGE and its clauses write the table too
                while clause is not None:
                    self._flows.setdefault(id(clause), set()).add(table)
                    clause = model.chain_parent.get(id(clause))
        for call, scope in facts.sink_calls:
            for args in self._calls_of(scope):
                with self._bound(scope, args):
                    table = sink_target(model, values, call, scope)
                for source, where in sink_sources(model, call):
                    self._follow(source, where, table or _UNNAMED, args if where is scope else None)
                if table is not None:  # the sink's own choices (delete_when) decide its table's rows
                    self._flows.setdefault(id(call), set()).add(table)
        for frame, scope, table in facts.ext_frames:  # upsert(df, "silver.t", keys) of another file
            self._follow(frame, scope, table or _UNNAMED)
        self._pipelines(facts)
        if model.dbt_model and "model" in model.module.funcs:  # dbt writes what ``model`` returns
            fscope = model.module.funcs["model"][1]
            table = Path(values.origin).stem if values.origin else "model"
            for returned in fscope.returns:
                self._follow(returned, fscope, table)
        # a view by name: the spark.sql calls defining it (with what they read) and DataFrames registered as it
        views: dict[str, list[tuple[ast.Call, tuple[str, ...]]]] = {}
        frames: dict[str, list[tuple[ast.AST, Scope]]] = {}
        for call, view, reads in facts.sql_views:
            views.setdefault(view, []).append((call, reads))
        for call, scope in model.calls:
            func = call.func
            written: ast.AST | None = None
            if type(func) is ast.Attribute and func.attr in _TEMP_VIEWS:  # df.createOrReplaceTempView("v")
                view = table_name(values, call.args[0] if call.args else model.kwarg(call, "name"), scope)
                if view is not None:
                    frames.setdefault(view.lower(), []).append((func.value, scope))
            elif type(func) is ast.Attribute and func.attr in _KEYLESS_WRITES:
                on_frame = func.attr in ("to_table", "to_delta")  # a frame's own method, not a writer's
                written = func.value if on_frame else chains.writer_source(func.value)
                arg = call.args[0] if call.args else model.kwarg(call, *_KEYLESS_WRITES[func.attr])
            elif type(func) is ast.Attribute and func.attr == "writeTo":  # df.writeTo("t").append()
                written = func.value
                arg = call.args[0] if call.args else model.kwarg(call, "table")
            elif called_name(func) == "write_deltalake":  # delta-rs: write_deltalake(table_or_uri, data, ...)
                written = call.args[1] if len(call.args) > 1 else model.kwarg(call, "data")
                arg = call.args[0] if call.args else model.kwarg(call, "table_or_uri")
            if written is not None:
                table = table_name(values, arg, scope)
                if table is not None:
                    self.keyless.add(table)
                self._follow(written, scope, table or _UNNAMED)
                if type(func) is ast.Attribute and func.attr != "writeTo":
                    self._writer_chain(func.value, table or _UNNAMED)
        for call, table, keyless, reads in facts.sql_writes:  # spark.sql("INSERT INTO t SELECT ..."), MERGE INTO
            self._flows.setdefault(id(call), set()).add(table)
            if keyless:
                self.keyless.add(table)
            self._views_read(reads, table, views, frames, set())

    def _calls_of(self, scope: Scope) -> list[dict[str, tuple[ast.AST, Scope]] | None]:
        """What each call of the function of ``scope`` in this module gives its parameters; [None] (read
        once, parameters unknown) for code outside a function or a function not called here."""
        if scope.kind != "function" or not self._values.may_call(scope):
            return [None]
        return [arguments(site, where, scope) for site, where in call_sites(self.model, scope)] or [None]

    def _bound(self, scope: Scope, args: dict[str, tuple[ast.AST, Scope]] | None) -> AbstractContextManager:
        return self._values.at_call(scope, args) if args is not None else nullcontext()

    def _writer_chain(self, node: ast.AST, table: str) -> None:
        """The writer's own calls (``df.write.mode(...).option("replaceWhere", ...)``) write ``table``: a
        choice they make (a replaceWhere predicate) decides that table's rows, not another's of ``df``."""
        for _ in range(30):
            if type(node) is ast.Call:
                self._flows.setdefault(id(node), set()).add(table)
                node = node.func
            elif type(node) is ast.Attribute and node.attr not in chains.WRITE_ATTRS:
                node = node.value
            else:
                return

    def _views_read(
        self, reads: tuple[str, ...], table: str, views: dict[str, list[tuple[ast.Call, tuple[str, ...]]]],
        frames: dict[str, list[tuple[ast.AST, Scope]]], seen: set[str],
    ) -> None:
        """A SQL statement writing ``table`` reads these views: what defines them (a CREATE VIEW's spark.sql
        call, and the views it reads in turn; a DataFrame registered as the view) flows into ``table``."""
        for name in reads:
            if name in seen:
                continue
            seen.add(name)
            for call, inner in views.get(name, ()):
                self._flows.setdefault(id(call), set()).add(table)
                self._views_read(inner, table, views, frames, seen)
            for frame, scope in frames.get(name, ()):
                self._follow(frame, scope, table)

    def _pipelines(self, facts: Facts) -> None:
        """A declarative pipeline's tables: what a ``@dlt.table`` / ``@dp.materialized_view`` function returns
        goes to its table (its ``name=`` or the function's name), written without a key; an ``append_flow``'s
        to its ``target``; a CDC flow's source (a view or table of the module, by name) to the flow's target,
        whose keys the flow declares; the flow's own conditions (``apply_as_deletes``) decide its target's rows."""
        model, values = self.model, self._values
        by_name: dict[str, Scope] = {}
        for fscope in model.decorated:
            found = model.pipeline_decorator(fscope)
            if found is None:
                continue
            kind, dec = found
            param = "target" if kind == "append_flow" else "name"
            given = model.kwarg(dec, param) if type(dec) is ast.Call else None
            name = table_name(values, given, fscope.parent or fscope) if given is not None else None
            if name is None and given is not None:
                name = _UNNAMED  # name=f"{table}_raw": a table, not the function's name
            name = name or fscope.node.name  # type: ignore[attr-defined]
            if name != _UNNAMED:
                by_name[_bare(name)] = fscope
            if kind in ("table", "materialized_view", "append_flow"):
                if name != _UNNAMED:
                    self.keyless.add(name)
                for returned in fscope.returns:
                    self._follow(returned, fscope, name)
        for call, target, source in facts.pipeline_flows:
            if target is None:
                continue
            self._flows.setdefault(id(call), set()).add(target)
            fscope = by_name.get(_bare(source)) if source else None
            if fscope is not None:
                for returned in fscope.returns:
                    self._follow(returned, fscope, target)

    def tables_of(self, anchor: ast.AST | None) -> frozenset[str]:
        """The tables the DataFrame made by ``anchor`` is written to (empty: not known)."""
        if anchor is None:
            return frozenset()
        return frozenset(t for t in self._flows.get(id(anchor), ()) if t != _UNNAMED)

    def column_tables(
        self, anchor: ast.AST | None, column: str, scope: Scope | None = None
    ) -> frozenset[str] | None:
        """The tables the column ``anchor`` writes reaches: ``tables_of(anchor)`` less those it is dropped
        on the way to (empty: a table whose name is not known, or none found); None when it is dropped on
        the way to every write it is followed to, named or not (dropped before every write), or, when no
        write is known, later in its own chain (``withColumn("rn", ...).filter(...).drop("rn")``)."""
        flows = self._flows.get(id(anchor)) if anchor is not None else None
        if not flows:
            return None if scope is not None and self._dropped_in_chain(anchor, column, scope) else frozenset()
        col_n = norm(column)
        kept = [
            t for t in flows if not ({col_n} | _SEMI) & self._dropped.get((id(anchor), t), frozenset())
        ]
        if not kept:
            return None
        return frozenset(t for t in kept if t != _UNNAMED)

    def _dropped_in_chain(self, anchor: ast.AST | None, column: str, scope: Scope) -> bool:
        col_n = norm(column)
        call = self.model.chain_parent.get(id(anchor)) if type(anchor) is ast.Call else None
        for _ in range(30):
            if call is None:
                return False
            if call.func.attr in _REPLACING and col_n in self._drops(call, scope):  # type: ignore[attr-defined]
                return True
            call = self.model.chain_parent.get(id(call))
        return False

    def unnamed_only(self, anchor: ast.AST | None) -> bool:
        """Is the DataFrame made by ``anchor`` followed only to writes whose table name is not known?"""
        flows = self._flows.get(id(anchor)) if anchor is not None else None
        return bool(flows) and all(t == _UNNAMED for t in flows)

    def lookup_only(self, anchor: ast.AST | None) -> bool:
        """Is the DataFrame made by ``anchor`` only the looked-up side of an outer join on every path to its
        known tables (``legs.join(carriers, "code", "left")``: which carrier rows exist changes the joined
        values, never which legs are written)?"""
        flows = self._flows.get(id(anchor), ()) if anchor is not None else ()
        return bool(flows) and all(_LOOKUP <= self._dropped.get((id(anchor), t), frozenset()) for t in flows)

    def _lookup_side(self, call: ast.Call, scope: Scope) -> int:
        """Of ``a.join(b, on, how)``: 1 when ``b`` is only looked up (a left outer join), 2 when ``a`` is (a
        right outer join), 3 when only ``a``'s columns are kept (a semi or anti join: ``b`` chooses rows), else
        0 (inner and full joins choose rows and keep columns on both sides)."""
        how = call.args[2] if len(call.args) > 2 else self.model.kwarg(call, "how")
        names = self._values.const_strings(how, scope) if how is not None else None
        word = names[0].lower().replace("_", "") if names and len(names) == 1 else ""
        if word in ("semi", "leftsemi", "anti", "leftanti"):
            return 3
        return 1 if word in ("left", "leftouter") else 2 if word in ("right", "rightouter") else 0

    def _drops(self, call: ast.Call, scope: Scope) -> frozenset[str]:
        """The columns ``df.drop(...)`` removes: names given as strings (Spark's ``drop("a", "b")``, pandas'
        ``drop(columns=[...])`` or ``drop([...], axis=1)``); pandas' rows (``index=``, ``axis=0``) are none.
        ``withColumn("c", v)`` / ``withColumns({"c": v})`` replace the column ``c`` the DataFrame below
        them held: its earlier value is not written either; ``withColumnRenamed("c", "d")`` (and
        ``withColumnsRenamed({"c": "d"})``, pandas' ``rename(columns={"c": "d"})``) writes it as ``d``, and
        no column ``c``."""
        model = self.model
        if call.func.attr == "select":  # type: ignore[attr-defined]
            return self._selected_out(call, scope)
        if call.func.attr in ("agg", "count"):  # type: ignore[attr-defined]
            return self._aggregated_out(call, scope)
        if call.func.attr in ("withColumn", "withColumnRenamed"):  # type: ignore[attr-defined]
            names = self._values.const_strings(call.args[0], scope) if call.args else None
            return frozenset(norm(n) for n in names or ())
        if call.func.attr in ("withColumnsRenamed", "rename"):  # type: ignore[attr-defined]
            return frozenset(norm(old) for old, _new in renamed_pairs(model, self._values, call, scope))
        if call.func.attr == "withColumns":  # type: ignore[attr-defined]
            given = call.args[0] if call.args else None
            if type(given) is not ast.Dict:
                return frozenset()
            return frozenset(
                norm(k.value) for k in given.keys if type(k) is ast.Constant and isinstance(k.value, str)
            )
        axis = model.kwarg(call, "axis")
        if model.kwarg(call, "index") is not None or (
            type(axis) is ast.Constant and axis.value in (0, "index", "rows")
        ):
            return frozenset()
        columns = model.kwarg(call, "columns")
        out: set[str] = set()
        for arg in [columns] if columns is not None else call.args:
            # "rn", ["a", "b"], F.col("rn"), df.rn, a constant: an unknown expression names nothing
            out.update(norm(n) for n in self._values.col_names(arg, scope) if not n.startswith("<"))
        return frozenset(out)

    def _selected_out(self, call: ast.Call, scope: Scope) -> frozenset[str]:
        """The columns ``df.select("a", F.col("b"), F.col("c").alias("d"))`` leaves out: every column the
        module writes but those named, when each argument names plain columns or is given a known name (none
        for a star, an unnamed expression, which may keep its column's name, or an unknown name)."""
        if call.keywords or not call.args:
            return frozenset()
        kept: set[str] = set()
        for arg in call.args:
            alias = self._alias(arg, scope)
            names = self._values.col_names(arg, scope) if alias is None else alias
            if not _plain(names):
                return frozenset()
            kept.update(norm(n) for n in names)
        return self._columns - kept

    def _alias(self, arg: ast.AST, scope: Scope) -> list[str] | None:
        """The name ``expr.alias("n")`` / ``.name("n")`` gives its column: [] when it is not known, None
        for an argument that is not such a call."""
        if type(arg) is not ast.Call or type(arg.func) is not ast.Attribute or arg.func.attr not in _ALIASES:
            return None
        return (self._values.const_strings(arg.args[0], scope) if arg.args else None) or []

    def _aggregated_out(self, call: ast.Call, scope: Scope) -> frozenset[str]:
        """The columns an aggregation leaves out: ``df.groupBy("k").agg(F.sum("a").alias("total"))`` (or
        ``.count()``) keeps its grouping columns and the names its aggregates are given (a dict's keys,
        keyword names), so every other column the module writes is not written below it; ``df.agg(...)``
        keeps only the aggregates. None are left out when a grouping column or an alias is not a known name,
        or an aggregate is given as a bare string (pandas' ``agg("sum")`` keeps every column)."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if type(receiver) is ast.Name:
            bound = self.model.single_value(receiver, scope)
            receiver = bound[0] if bound is not None else receiver
        kept: set[str] = set()
        grouped = (
            type(receiver) is ast.Call
            and type(receiver.func) is ast.Attribute
            and receiver.func.attr in chains.GROUPING
        )
        if not grouped and call.func.attr == "count":  # type: ignore[attr-defined]
            return frozenset()  # df.count() is a number, not a DataFrame
        if grouped:
            if any(kw.arg not in _GROUP_OPTIONS for kw in receiver.keywords):
                return frozenset()
            by = self.model.kwarg(receiver, "by")  # pandas' groupby(by=...)
            for arg in [*receiver.args, *([by] if by is not None else [])]:
                names = self._grouping_names(arg, scope)
                if names is None:
                    return frozenset()
                kept.update(norm(n) for n in names)
        kept.add("count")
        for arg in call.args:
            if type(arg) is ast.Dict:
                if any(type(k) is not ast.Constant or not isinstance(k.value, str) for k in arg.keys):
                    return frozenset()
                kept.update(norm(k.value) for k in arg.keys)  # type: ignore[union-attr]
            elif (alias := self._alias(arg, scope)) is not None:
                if not alias:
                    return frozenset()
                kept.update(norm(n) for n in alias)
            elif type(arg) is not ast.Call:
                return frozenset()
        kept.update(norm(kw.arg) for kw in call.keywords if kw.arg)
        return self._columns - kept

    def _grouping_names(self, arg: ast.AST, scope: Scope) -> list[str] | None:
        """The names of the columns a grouping expression gives: plain columns, an ``alias``, Spark's own
        name for a time window (``F.window(...)``: ``window``); None when not known."""
        alias = self._alias(arg, scope)
        if alias is not None:
            return alias or None
        if type(arg) is ast.Call:
            sname = self.model.spark_name(self.model.qualname(arg.func, scope))
            if sname in _WINDOW_COLUMNS:
                return [sname]
        names = self._values.col_names(arg, scope)
        return names if _plain(names) else None

    def _follow(
        self, node: ast.AST, scope: Scope, table: str, args: dict[str, tuple[ast.AST, Scope]] | None = None
    ) -> None:
        """Mark every DataFrame call ``node`` is built from as flowing into ``table``; ``args``: what one
        call of the function ``node`` is in gives its parameters (followed into the caller)."""
        model = self.model
        home = scope
        none: frozenset[str] = frozenset()
        # each entry carries the columns dropped between it and the write; a node is visited once per set
        stack: list[tuple[ast.AST, Scope, frozenset[str]]] = [(node, scope, none)]
        seen: set[tuple[int, frozenset[str]]] = set()
        dropped = self._dropped
        while stack and len(seen) < _BUDGET:
            node, scope, gone = stack.pop()
            if (id(node), gone) in seen:
                continue
            seen.add((id(node), gone))
            t = type(node)
            if t is ast.Call or t is ast.Subscript:  # a subscript too: ``pdf.iloc[:100]`` chooses rows
                self._flows.setdefault(id(node), set()).add(table)
                key = (id(node), table)
                before = dropped.get(key)
                dropped[key] = gone if before is None else before & gone  # dropped on every path
            if t is ast.Call:
                func = node.func
                side = (
                    self._lookup_side(node, scope)
                    if type(func) is ast.Attribute and func.attr == "join"
                    else 0
                )
                if type(func) is ast.Attribute:
                    below = gone | self._drops(node, scope) if func.attr in _REPLACING else gone
                    stack.append((func.value, scope, below | _LOOKUP if side == 2 else below))
                else:
                    returned = model.returned(node, scope)
                    if returned is not None:
                        stack.append((*returned, gone))
                other = _LOOKUP if side == 1 else _SEMI if side == 3 else frozenset()
                for i, a in enumerate(node.args):
                    stack.append((a, scope, gone | other if i == 0 else gone))
                for kw in node.keywords:
                    stack.append((kw.value, scope, gone | other if kw.arg == "other" else gone))
            elif t is ast.Attribute or t is ast.Subscript or t is ast.Starred:
                stack.append((node.value, scope, gone))
            elif t is ast.Name:
                owner, bound = reaching(model, node, scope)
                stack.extend((v, owner, gone) for v in bound)
                if args and owner is home and node.id in args and node.id in home.params:
                    stack.append((*args[node.id], gone))  # a parameter: the argument of this call
            elif t is ast.List or t is ast.Tuple:
                stack.extend((e, scope, gone) for e in node.elts)
