"""Fact extractors for the calls that choose rows and write tables: ``filter``/``where``, MERGEs and their
clauses, SQL statements, writers, ``DeltaTable.forName/forPath``, joins, dbt configs, sinks, writer
options, identity columns and widgets. Each ``on_NAME(col, call, scope)`` is the extractor the API table
names ``fact=NAME``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.spark_api import MATCHED_UPDATES, MERGE_CONDITION_KEYWORDS, MERGE_MAPS
from ..model import chains
from ..model.scopes import Scope
from ..values import sql as sqlmod
from ..values.columns import column_names, condition_names
from ..values.strings import PosText
from . import records
from .facts import RowEffect, strip_qualifier

if TYPE_CHECKING:
    from .facts import Collector


def on_widget(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``dbutils.widgets.text(name, default, ...)``: what ``dbutils.widgets.get(name)`` may return."""
    col.widgets.update(records.widget_default(call, col.values, scope))


def on_option(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``.option("replaceWhere", "...")`` on a writer: the predicate decides which rows are replaced."""
    if len(call.args) < 2 or col.values.const_strings(call.args[0], scope) != ["replaceWhere"]:
        return
    col._condition_effect(call.args[1], scope)


def on_add_column(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``DeltaTable.create(spark)...addColumn("id", ..., generatedAlwaysAs=IdentityGenerator())``."""
    gen = col.model.kwarg(call, "generatedAlwaysAs", "generatedByDefaultAs")
    if type(gen) is not ast.Call or not call.args:
        return
    name = gen.func.attr if type(gen.func) is ast.Attribute else getattr(gen.func, "id", "")
    names = col.values.const_strings(call.args[0], scope)
    if name == "IdentityGenerator" and names:
        col.ddl_keys.append((names[0], "?", "identity column", None))


# ---- where tables are written and read, joins, dbt models
def on_table_write(col: Collector, call: ast.Call, scope: Scope) -> None:
    if call.func.attr == "save" and not chains.after_write(call.func.value):
        return  # model.save(path), not a DataFrame writer
    col.writes_data = True
    arg = call.args[0] if call.args else col.model.kwarg(call, "name", "path", "tableName")
    names = col.values.const_strings(arg, scope) if arg is not None else None
    if names:
        col.tables_written.add(names[0].lower())


def on_delta_table(col: Collector, call: ast.Call, scope: Scope) -> None:
    # DeltaTable.forName(spark, "t") / forPath(spark, "/p"): a table that is merged into (written)
    if len(call.args) > 1:
        names = col.values.const_strings(call.args[1], scope)
        if names:
            col.tables_written.add(names[0].lower())


def on_join(col: Collector, call: ast.Call, scope: Scope) -> None:
    if call.args:
        col.joins.append((call, scope))


def on_dbt_config(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``dbt.config(unique_key=...)`` in a dbt Python model: the model's keys."""
    owner = call.func.value
    if type(owner) is not ast.Name:
        return
    s = col.model.lookup(owner.id, scope)
    if owner.id != "dbt" and not (s is not None and s.kind == "function" and s.params[:1] == [owner.id]):
        return
    col.writes_data = True  # a dbt model's returned DataFrame is its table
    node = col.model.kwarg(call, "unique_key")
    if node is not None:
        col.dbt_keys.append((call, scope))


# ---- the shared flow's handlers, one per DataFrame/DeltaTable method (dispatched through _FLOW)
def on_sink(col: Collector, call: ast.Call, scope: Scope) -> None:
    col.sink_calls.append((call, scope))


def on_sink_for_table(col: Collector, call: ast.Call, scope: Scope) -> None:
    """``UpsertSink.for_table(name, keys, **options)``: a sink like the constructor's (same positions)."""
    recv = call.func.value
    q = col.model.qualname(recv, scope) or ""
    if (type(recv) is ast.Name and recv.id == "UpsertSink") or q == "UpsertSink" or q.endswith(".UpsertSink"):
        col.sink_calls.append((call, scope))
        col.writes_data = True


def on_sql(col: Collector, call: ast.Call, scope: Scope) -> None:
    if call.args:
        text = col.values.sql_text(call.args[0], scope)
        if text is not None:
            _sql_statements(col, text, scope, call)


def on_filter(col: Collector, call: ast.Call, scope: Scope) -> None:
    if call.args and not chains.looked_only(col.model, call):
        col._condition_effect(call.args[0], scope, "filter")


def on_merge(col: Collector, call: ast.Call, scope: Scope) -> None:
    cond = call.args[1] if len(call.args) > 1 else col.model.kwarg(call, *MERGE_CONDITION_KEYWORDS)
    col.merges.append((call, cond, scope))


def on_merge_map(col: Collector, call: ast.Call, scope: Scope) -> None:
    args = call.args
    kw, pos = MERGE_MAPS[call.func.attr]
    mapping = col.model.kwarg(call, kw)
    if mapping is None and len(args) > pos:
        mapping = args[pos]
    cond = col.model.kwarg(call, *MERGE_CONDITION_KEYWORDS)
    if cond is None and pos == 1 and args:
        cond = args[0]
    elif cond is None and pos == 0 and len(args) > 1:
        cond = args[1]
    if cond is not None:
        update = call.func.attr in MATCHED_UPDATES
        col._condition_effect(cond, scope, "update" if update else "merge")
        if update:
            col.seq_conds.append((cond, scope))
    mapping = col.model.resolve_dict(mapping, scope) if mapping is not None else None
    if type(mapping) is not ast.Dict:
        return
    for k, v in zip(mapping.keys, mapping.values, strict=False):
        if k is None or v is None:
            continue
        name = strip_qualifier(column_names(col.values, k, scope)[0])  # {"t.valid_to": ...}, {self.valid_to_col: ...}
        text = col.values.sql_text(v, scope) if col.values.may_be_text(v, scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                col._add_write(name, scope, sql=(part, text), node=call)
        else:
            col._add_write(name, scope, v, node=call)


def on_update_all(col: Collector, call: ast.Call, scope: Scope) -> None:
    cond = col.model.kwarg(call, *MERGE_CONDITION_KEYWORDS) or (call.args[0] if call.args else None)
    if cond is not None:
        col._condition_effect(cond, scope, "update")
        col.seq_conds.append((cond, scope))


def on_key_condition(col: Collector, call: ast.Call, scope: Scope) -> None:
    """A MERGE clause whose condition decides which keys are deleted or inserted: ``whenMatchedDelete``,
    ``whenNotMatchedBySourceDelete``, ``whenNotMatchedInsertAll`` (and delta-rs' snake-case names)."""
    cond = col.model.kwarg(call, *MERGE_CONDITION_KEYWORDS) or (call.args[0] if call.args else None)
    if cond is not None:
        col._condition_effect(cond, scope)


def _sql_statements(col: Collector, text: PosText, scope: Scope, call: ast.Call) -> None:
    result = sqlmod.analyze_statements(text.text)
    if not result.ok:
        return
    writes = bool(result.tables_written or result.statements)
    looked = chains.looked_only(col.model, call) or chains.quick_look(col.model, call, writes)
    if not looked:
        for name, part in result.outputs:
            col._add_write(name, scope, sql=(part, text), node=call)
    for kind, part in result.rows:
        if not looked:
            col._row(RowEffect(kind, scope, sql=(part, text)))
    for name, part in result.writes:
        col._add_write(name, scope, sql=(part, text), node=call)
    merged = {s.table for s in result.statements if s.kind == "merge"}
    merged_table = next(iter(merged)) if len(merged) == 1 else None
    for k in condition_names(col.values, text, result.merge_keys, scope):  # the keys of the text's one MERGE
        col.declare(k, "merge key", scope, table=merged_table)  # are that table's (every one of them)
    for s in result.statements:
        if s.table:
            col.sql_writes.append((call, s.table, s.kind not in ("merge", "update"), s.reads))
    for view, reads in result.views:
        col.sql_views.append((call, view, reads))
    for c in result.sequence_cols:
        col.declare(c, "sequence column", scope, sequence=True, table=merged_table)
    for column, table, what in result.ddl_keys:
        col.ddl_keys.append((column, table, what, scope))
    if result.tables_written:
        col.writes_data = True
        col.tables_written.update(t.lower() for t in result.tables_written)
