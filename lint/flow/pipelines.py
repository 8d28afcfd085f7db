"""Declarative pipelines: the CDC flows of ``dlt`` and ``pyspark.pipelines`` (``apply_changes``,
``create_auto_cdc_flow`` and the snapshot flows) as facts: their keys and sequences are declared keys and
sequences, an expression given as the sequence is the sequence itself."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.spark_api import NAME_ARG_FUNCTIONS, PIPELINE_CDC_CONDITIONS, pipeline_name
from ..model.callsites import given_argument
from ..model.scopes import Scope
from ..values import sql as sqlmod
from .facts import SCD2_FLOW_LABEL

if TYPE_CHECKING:
    from .facts import Collector


# ---- declarative pipelines
def _pipeline_flow(col: Collector, call: ast.Call, scope: Scope, params: tuple[str, ...]) -> None:
    """A declarative pipeline's CDC flow (``dlt.apply_changes``, ``dp.create_auto_cdc_flow``, the snapshot
    flows; ``params``: its parameters in positional order): it upserts its source's rows into ``target``
    by ``keys``, the newest by ``sequence_by`` winning. A ``sequence_by`` that is not a column
    (``F.current_timestamp()``, ``"a + b"``) is a sequence of its own: a column named after the
    expression, written here. The source view's columns reach the keys and the sequence by name."""
    col.writes_data = True

    def arg(param: str) -> ast.AST | None:
        return given_argument(call, params.index(param), param)

    targets = col.values.const_strings(arg("target"), scope)
    target = targets[0] if targets and len(targets) == 1 else None
    flow = f"the pipeline flow into `{target}`" if target else "the pipeline flow"
    if target:
        col.tables_written.add(target.lower())
    sources = col.values.const_strings(arg("source"), scope) if "source" in params else None
    col.pipeline_flows.append((call, target, sources[0] if sources and len(sources) == 1 else None))
    for k in _column_list(col, arg("keys"), scope):
        col.declare(k, f"key of {flow}", scope, table=target)
    if "sequence_by" in params:
        seq = arg("sequence_by")
        if seq is not None:
            _pipeline_sequence(col, seq, scope, _scd2(col, call, scope), target)
    for keyword in PIPELINE_CDC_CONDITIONS:
        cond = col.model.kwarg(call, keyword)
        if cond is not None:
            col._condition_effect(cond, scope)


def _column_list(col: Collector, node: ast.AST | None, scope: Scope) -> list[str]:
    """Column names given as strings or ``col(...)`` (a list, one name, or a name bound to a list)."""
    if node is None:
        return []
    names = col.values.const_strings(node, scope)
    if names is not None:
        return names
    items = node.elts if type(node) in (ast.List, ast.Tuple) else [node]
    out: list[str] = []
    for e in items:
        sub = col.values.const_strings(e, scope)
        if sub is None and type(e) is ast.Call:
            sub = [c for c in col.values.col_names(e, scope) if not c.startswith("<")]
        out.extend(sub or [])
    return out


def _scd2(col: Collector, call: ast.Call, scope: Scope) -> bool:
    """Does the flow keep history (``stored_as_scd_type=2``, or ``"2"``): every row version stays, opened
    and closed at its sequence value (``__START_AT``/``__END_AT``)?"""
    node = col.model.kwarg(call, "stored_as_scd_type")
    if node is None:
        return False
    strings = col.values.const_strings(node, scope)
    return col.values.const_int(node, scope) == 2 or (strings is not None and strings[:1] == ["2"])


def _pipeline_sequence(
    col: Collector, node: ast.AST, scope: Scope, history: bool = False, table: str | None = None
) -> None:
    """A CDC flow's ``sequence_by``: a column (``"v"``, ``col("v")``), columns (``struct("a", "b")``), or
    an expression (SQL text or a Column) that is itself the sequence; ``history``: the flow is stored as SCD
    type 2, so the sequence orders every kept version; ``table``: the flow's target, whose sequence it is."""
    label = SCD2_FLOW_LABEL if history else "sequence column"
    if type(node) is ast.Name:  # SEQUENCE = F.col("v") ... sequence_by=SEQUENCE
        bound = col.model.single_value(node, scope)
        if bound is not None and type(bound[0]) is ast.Call:
            node, scope = bound
    sname = col.model.spark_name(col.model.qualname(node.func, scope)) if type(node) is ast.Call else None
    if sname == "expr" and len(node.args) == 1:
        node = node.args[0]  # F.expr("..."): SQL text, like a string
    elif sname == "struct" and node.args:
        names = [_column_list(col, a, scope) for a in node.args]
        if all(len(n) == 1 for n in names):
            for n in names:
                col.declare(n[0], label, scope, sequence=True, history=history, table=table)
            return
    elif sname in NAME_ARG_FUNCTIONS:
        names = _column_list(col, node, scope)
        if len(names) == 1:
            col.declare(names[0], label, scope, sequence=True, history=history, table=table)
            return
    text = col.values.sql_text(node, scope) if col.values.may_be_text(node, scope) else None
    if text is not None:  # a string is a SQL expression (pyspark.pipelines: ``expr(sequence_by)``)
        ok, alias, part = sqlmod.analyze_expression(text.text)
        if not ok:
            return
        if alias is not None and part.refs == {alias} and not (part.sites or part.calls or part.holes):
            col.declare(alias, label, scope, sequence=True, history=history, table=table)
            return
        column = " ".join(text.text.split())
        col._add_write(column, scope, sql=(part, text), node=node)
    else:
        column = col.model.segment(node, 80)
        col._add_write(column, scope, node, node=node)
    col.declare(column, label, scope, sequence=True, history=history, table=table)


# the expectations that drop the rows failing them (``expect`` only counts, ``expect_or_fail`` stops the update)
_DROPPING = {"expect_or_drop": 1, "expect_all_or_drop": 0}


def pipeline_expectations(col: Collector, fscope: Scope) -> None:
    """``@dlt.expect_or_drop("fresh", "event_ts > current_timestamp() - INTERVAL 1 DAY")`` (and
    ``expect_all_or_drop({...})``) on a query function: a filter of the rows its table receives, like a
    ``.filter(...)`` of what the function returns."""
    model, outer = col.model, fscope.parent or fscope
    anchors = [r for r in fscope.returns if type(r) is ast.Call]
    for dec in fscope.node.decorator_list:  # type: ignore[union-attr]
        name = pipeline_name(model.qualname(dec.func, outer)) if type(dec) is ast.Call else None
        if name not in _DROPPING or not anchors:
            continue
        given = given_argument(dec, _DROPPING[name], "constraint" if name == "expect_or_drop" else "expectations")
        resolved = model.resolve_dict(given, outer) if given is not None else None
        predicates = resolved.values if type(resolved) is ast.Dict else [given] if given is not None else []
        for predicate in predicates:
            for anchor in anchors:  # as a .filter(predicate) of what the function returns
                col._current = anchor
                col._condition_effect(predicate, outer, "filter")
    col._current = None
