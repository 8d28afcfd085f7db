"""Python values that become rows or columns outside any DataFrame method: lists of dict records turned into a
table (``pa.Table.from_pylist(records)``, ``pd.DataFrame(records)``, ``spark.createDataFrame(records)``; tuple
records too, named by the schema given beside them (``createDataFrame(rows, "a string, b int")``, a ``toDF``
right after) or as Spark names them (``_1``, ``_2``...)) and
Databricks notebook widgets (``dbutils.widgets.text(name, default)`` read back by ``dbutils.widgets.get``).

Syntax only, as the collection pass needs it: which expression a record's field or a widget's default is;
whether a nondeterministic source reaches it is :mod:`upsertsink.lint.flow.taint`'s question.
"""

from __future__ import annotations

import ast

from ..base.spark_api import WIDGETS_OBJECT
from ..model.names import dotted
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values.evaluate import Values


def record_fields(
    model: SemanticModel, values: Values, call: ast.Call, scope: Scope
) -> list[tuple[str, ast.AST, Scope]]:
    """(field name, value expression, its scope) of every dict record of the list ``call`` turns into a table:
    a list literal of dicts, a list comprehension of a dict, or a list name filled by ``.append({...})``, ``.extend(...)`` (a list or a
    comprehension of dicts) or ``+=``; tuple records in those forms when the column names are given (a
    schema of names or a DDL string, pandas' ``columns=``, a ``toDF`` of names) or Spark gives them (``_1``,
    ``_2``... when no schema is given), each element the column of its position."""
    node = call.args[0] if call.args else model.kwarg(call, "data", "mapping")
    out: list[tuple[str, ast.AST, Scope]] = []
    if node is None:
        return out
    columns = _schema_names(model, values, call, scope)
    # no schema at all: Spark names a tuple's fields _1, _2... (pandas 0, 1...: not followed)
    positional = columns is None and type(call.func) is ast.Attribute and call.func.attr == "createDataFrame"
    for record, rscope in _records(model, node, scope, tuples=bool(columns) or positional):
        if type(record) is ast.Tuple:  # ("c", ts) with the names of the schema given beside the records
            names = columns or [f"_{i}" for i in range(1, len(record.elts) + 1)]
            for name, value in zip(names, record.elts, strict=False):
                out.append((name, value, rscope))
            continue
        if type(record) is ast.Dict:
            pairs = [(k, v) for k, v in zip(record.keys, record.values, strict=False) if k is not None]
        else:  # dict(name=value, ...)
            pairs = [(ast.Constant(value=kw.arg), kw.value) for kw in record.keywords if kw.arg]
        for key, value in pairs:
            names = values.const_strings(key, rscope)
            if names:
                out.append((names[0], value, rscope))
    return out


def _schema_names(model: SemanticModel, values: Values, call: ast.Call, scope: Scope) -> list[str] | None:
    """The column names given beside tuple records: ``createDataFrame(rows, "a string, b int")`` or
    ``(rows, ["a", "b"])``, a ``StructType`` of ``StructField``s, ``createDataFrame(rows).toDF("a", "b")``,
    pandas' ``DataFrame(rows, columns=["a", "b"])``; [] when they are not known, None when none are given."""
    schema = model.kwarg(call, "schema", "columns")
    func = call.func
    spark = type(func) is ast.Attribute and func.attr == "createDataFrame"
    if schema is None and len(call.args) > 1 and spark:
        schema = call.args[1]  # (pandas' second argument is the index)
    renamed = model.chain_parent.get(id(call)) if schema is None and spark else None
    if renamed is not None and renamed.func.attr == "toDF" and renamed.args:  # createDataFrame(rows).toDF("a", "b")
        schema = renamed.args[0] if len(renamed.args) == 1 else ast.List(elts=renamed.args)
    if schema is None:
        return None
    if type(schema) is ast.Name:
        bound = model.single_value(schema, scope)
        if bound is not None and type(bound[0]) is ast.Call:
            schema, scope = bound
    if type(schema) is ast.Call:  # StructType([StructField("a", ...), ...])
        return _struct_names(values, schema, scope)
    if type(schema) is ast.List or type(schema) is ast.Tuple:
        names = [values.const_strings(e, scope) for e in schema.elts]
        return [n[0] for n in names] if all(n and len(n) == 1 for n in names) else []
    text = values.const_strings(schema, scope)
    if not text or len(text) != 1:
        return []
    out, depth, part = [], 0, ""
    for ch in text[0] + ",":  # a DDL string: split at the top-level commas, the first word of each is the name
        if ch == "," and depth == 0:
            words = part.replace(":", " ").split()
            if not words:
                return []
            out.append(words[0].strip("`"))
            part = ""
            continue
        depth += (ch in "(<") - (ch in ")>")
        part += ch
    return out


def _struct_names(values: Values, schema: ast.Call, scope: Scope) -> list[str]:
    fields = schema.args[0] if schema.args and (dotted(schema.func) or "").endswith("StructType") else None
    if type(fields) is not ast.List:
        return []
    out = []
    for f in fields.elts:
        if type(f) is not ast.Call or not (dotted(f.func) or "").endswith("StructField") or not f.args:
            return []
        name = values.const_strings(f.args[0], scope)
        if not name or len(name) != 1:
            return []
        out.append(name[0])
    return out


def _records(
    model: SemanticModel, node: ast.AST, scope: Scope, tuples: bool = False
) -> list[tuple[ast.AST, Scope]]:
    t = type(node)
    if t is ast.List:
        return [(e, scope) for e in node.elts if _is_record(e, tuples)]
    if t is ast.ListComp or t is ast.GeneratorExp:
        return [(node.elt, scope)] if _is_record(node.elt, tuples) else []
    if t is not ast.Name:
        return []
    owner = model.lookup(node.id, scope)
    if owner is None or node.id not in owner.assigns:
        return []
    out: list[tuple[ast.AST, Scope]] = []
    for value in owner.assigns[node.id]:
        if type(value) is ast.List or type(value) is ast.ListComp:
            out += _records(model, value, owner, tuples)
    for call, cscope in model.calls:  # records.append({...}), records.extend([{...}, ...])
        func = call.func
        if (
            type(func) is ast.Attribute
            and func.attr in ("append", "extend")
            and type(func.value) is ast.Name
            and func.value.id == node.id
            and len(call.args) == 1
            and model.lookup(node.id, cscope) is owner
        ):
            if func.attr == "extend":  # a list or a comprehension of records (``+=`` is an assignment)
                arg = call.args[0]
                out += _records(model, arg, cscope, tuples) if type(arg) is not ast.Name else []
                continue
            record = call.args[0] if type(call.args[0]) is ast.Tuple else model.resolve_dict(call.args[0], cscope)
            if _is_record(record, tuples):
                out.append((record, cscope))
    return out


def _is_record(node: ast.AST | None, tuples: bool = False) -> bool:
    if type(node) is ast.Dict or (tuples and type(node) is ast.Tuple):
        return True
    return type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "dict" and not node.args


def is_widgets(node: ast.AST) -> bool:
    """Is ``node`` the notebook's widget object (``dbutils.widgets``)?"""
    return dotted(node) == WIDGETS_OBJECT


def widget_default(call: ast.Call, values: Values, scope: Scope) -> dict[str, tuple[ast.AST, Scope]]:
    """``dbutils.widgets.text(name, default, ...)`` (``dropdown``...): {name: (default, scope)}, else {}."""
    if type(call.func) is not ast.Attribute or not is_widgets(call.func.value):
        return {}
    name = widget_name(call, values, scope)
    default = call.args[1] if len(call.args) > 1 else SemanticModel.kwarg(call, "defaultValue")
    return {name: (default, scope)} if name is not None and default is not None else {}


def widget_name(call: ast.Call, values: Values, scope: Scope) -> str | None:
    """The constant name a widget call (``text(name, ...)``, ``get(name)``) is about."""
    node = call.args[0] if call.args else SemanticModel.kwarg(call, "name", "argName")
    names = values.const_strings(node, scope) if node is not None else None
    return names[0] if names else None
