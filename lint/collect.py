"""The collection pass: every call of the module is read once, in source order, by the fact extractor the API
table names for its method (:data:`upsertsink.lint.api.METHODS`, ``fact=...``) and by the rules' own
extractors (their ``method_hooks``). The result is a frozen :class:`~upsertsink.lint.facts.Facts`.

No extractor computes data flow: which sources reach a fact is asked only after every fact is known (keys
included), so the answer cannot depend on the order of the code.
"""

from __future__ import annotations

import ast
from types import MappingProxyType
from typing import TYPE_CHECKING

from upsertsink.lint import chains, records
from upsertsink.lint import sql as sqlmod
from upsertsink.lint.api import (
    ALIAS_METHODS,
    FACTS,
    MATCHED_UPDATES,
    MERGE_CONDITION_KEYWORDS,
    MERGE_MAPS,
    NAME_ARG_FUNCTIONS,
    PIPELINE_CDC_CONDITIONS,
    PIPELINE_CDC_FLOWS,
    PIPELINE_STORED,
    ROW_METHODS,
    STORE_METHODS,
    pipeline_name,
)
from upsertsink.lint.catalogue import METHOD_HOOKS, METHOD_SOURCES, ORDER_CODE, SPARK_FUNCTIONS
from upsertsink.lint.facts import Facts, KeyDecl, RowEffect, Src, Write, strip_qualifier, summary_sources
from upsertsink.lint.model import SemanticModel
from upsertsink.lint.scopes import Scope
from upsertsink.lint.strings import PosText
from upsertsink.lint.values import Values

if TYPE_CHECKING:
    from upsertsink.lint.context import Context


class Collector:
    """Builds the :class:`Facts` of one module from its model; rules' extractors add theirs through it."""

    def __init__(self, model: SemanticModel, values: Values) -> None:
        self.model = model
        self.values = values
        self.writes: list[Write] = []
        self.rows: list[RowEffect] = []
        self.declared: list[KeyDecl] = []
        self.sink_calls: list[tuple[ast.Call, Scope]] = []
        self.merge_conds: list[tuple[ast.AST, Scope]] = []
        self.merges: list[tuple[ast.Call, Scope]] = []  # the MERGE calls (``.merge(source, condition)``)
        self.seq_conds: list[tuple[ast.AST, Scope]] = []
        self.dbt_keys: list[tuple[ast.Call, Scope]] = []
        self.ext_keys: list[tuple[str, Scope]] = []
        self.ddl_keys: list[tuple[str, str, str]] = []
        self.joins: list[tuple[ast.Call, Scope]] = []
        self.tables_written: set[str] = set()
        self.sql_udfs: dict[str, tuple[ast.AST, Scope]] = {}
        self.seeded: set[str] = set()
        self.writes_data = model.dbt_model
        self.rule_state: dict[str, object] = {}  # per-module scratch space of rule extractors, by rule
        self.widgets: dict[str, tuple[ast.AST, Scope]] = {}
        self._current: ast.Call | None = None  # the call being read: the anchor of what it writes

    def collect(self, ctx: Context) -> Facts:
        """Read every call (``ctx`` is what the rules' extractors see), then freeze the facts."""
        model = self.model
        for call, scope in model.calls:
            self._process_call(call, scope, ctx)
        for fscope in model.decorated:
            found = model.pipeline_decorator(fscope)
            if found is not None and found[0] in PIPELINE_STORED:
                self.writes_data = True  # a pipeline table's query function: its DataFrame is the table
        for sub, scope in model.attr_subscripts:  # pdf.iloc[:10]: the rules' hooks of ``iloc`` read it
            self._current = sub
            for hook in METHOD_HOOKS.get(sub.value.attr, ()):
                hook(ctx, sub, scope)
        for target, value, scope in model.sub_writes:
            sl = target.slice
            if type(sl) is ast.Tuple and sl.elts:  # pdf.loc[:, "col"] = ...
                sl = sl.elts[-1]
            if type(sl) is ast.Constant and isinstance(sl.value, str):
                self._add_write(sl.value, scope, value, node=target)
        self._current = None
        for call, scope in self.sink_calls:
            delete_when = model.kwarg(call, "delete_when")
            if delete_when is not None:
                self._condition_effect(delete_when, scope)
        for call, scope in self.merges:  # a MERGE's condition decides which keys are inserted or matched
            cond = call.args[1] if len(call.args) > 1 else model.kwarg(call, *MERGE_CONDITION_KEYWORDS)
            if cond is not None:
                self._current = call
                self._condition_effect(cond, scope)
        self._current = None
        return Facts(
            writes=tuple(self.writes),
            rows=tuple(self.rows),
            declared=tuple(self.declared),
            sink_calls=tuple(self.sink_calls),
            merge_conds=tuple(self.merge_conds),
            merges=tuple(self.merges),
            seq_conds=tuple(self.seq_conds),
            dbt_keys=tuple(self.dbt_keys),
            ext_keys=tuple(self.ext_keys),
            ddl_keys=tuple(self.ddl_keys),
            joins=tuple(self.joins),
            tables_written=frozenset(self.tables_written),
            sql_udfs=MappingProxyType(dict(self.sql_udfs)),
            seeded=frozenset(self.seeded),
            writes_data=self.writes_data,
            rule_state=self.rule_state,
            widgets=MappingProxyType(dict(self.widgets)),
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
        self, column: str, label: str, scope: Scope | None, sequence: bool = False, history: bool = False
    ) -> None:
        """A key (or sequence) column the code declares."""
        self.declared.append(KeyDecl(strip_qualifier(column), label, scope, sequence, history))

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
        called = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        if called in PIPELINE_CDC_FLOWS and pipeline_name(self.model.qualname(func, scope)) == called:
            self._pipeline_flow(call, scope, PIPELINE_CDC_FLOWS[called])  # dlt.apply_changes(...)
            return
        if type(func) is ast.Name:
            if func.id == "UpsertSink" or (self.model.qualname(func, scope) or "").endswith(".UpsertSink"):
                self.sink_calls.append((call, scope))
                self.writes_data = True
                return
            if func.id in STORE_METHODS:  # write_deltalake(path, df)
                self.writes_data = True
            if self.model.lookup(func.id, scope) is None or self.model.is_import(func.id, scope):
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
        handler = getattr(self, f"_on_{fact}") if fact is not None else None
        if handler is not None:
            handler(call, scope)
        for hook in METHOD_HOOKS.get(m, ()):
            hook(ctx, call, scope)
        if m in STORE_METHODS or chains.after_write(func.value):
            self.writes_data = True
        if m == "transform" and call.args:  # df.transform(helper): the helper's writes happen here
            ext = self.model.resolve_external(call.args[0], scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)
        elif handler is None and self.model.externals:
            ext = self.model.resolve_external(func, scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)

    def _external_call(self, call: ast.Call, scope: Scope, ext: tuple[dict, str, str]) -> None:
        """A call of another file's function: the columns it writes are written here, its keys known here."""
        entry, _kind, label = ext
        callee = self.model.segment(
            call.func
            if not call.args or call.func.__class__ is not ast.Attribute or call.func.attr != "transform"
            else call.args[0],
            40,
        )
        for column, rows in entry.get("writes", ()):
            for own in summary_sources(rows, self.model.span(call), callee, label):
                self.writes.append(Write(column, scope, None, None, call, own=own, anchor=call))
        history = entry.get("history", ())
        for k in entry.get("keys", ()):
            if k not in history:  # a history sink's sequence column is learned as one, below
                self.ext_keys.append((k, scope))
        for s in history:
            self.declare(s, "sequence column", scope, sequence=True, history=True)

    def _on_to_df(self, call: ast.Call, scope: Scope) -> None:
        """``rdd.zipWithIndex().map(...).toDF([..., "row_id"])`` / ``createDataFrame(rdd, [..., "row_id"])``:
        the position index (appended last by convention) becomes the last named column."""
        m = call.func.attr
        if m == "createDataFrame":
            self._on_records(call, scope)
        if m == "toDF":
            receiver, names_nodes = call.func.value, list(call.args)
        elif len(call.args) > 1:
            receiver, names_nodes = call.args[0], [call.args[1]]
        else:
            return
        sources = self._numbering_sources(receiver, scope)
        if not sources:
            return
        last = None
        for node in names_nodes:
            while type(node) is ast.BinOp and isinstance(node.op, ast.Add):
                node = node.right
            names = self.values.const_strings(node, scope)
            if names:
                last = names[-1]
        if last is not None:
            for src in sources:
                self.writes.append(Write(last, scope, None, None, call, own=src, anchor=call))

    def _numbering_sources(self, node: ast.AST, scope: Scope) -> list[Src]:
        out: list[Src] = []
        for step, _where in chains.down_chain(self.model, node, scope, limit=30):
            if type(step) is ast.Call:
                if type(step.func) is not ast.Attribute:
                    break
                if step.func.attr in METHOD_SOURCES:
                    out.append(
                        self.model.src(
                            METHOD_SOURCES[step.func.attr],
                            step,
                            what=f"{step.func.attr}()",
                            span=self.model.method_span(step),
                        )
                    )
        return out

    def _on_records(self, call: ast.Call, scope: Scope) -> None:
        """``pa.Table.from_pylist(records)``, ``pd.DataFrame(records)``...: each field is a column write."""
        if not chains.looked_only(self.model, call):
            for column, value, vscope in records.record_fields(self.model, self.values, call, scope):
                self._add_write(column, vscope, value, node=call)

    def _on_widget(self, call: ast.Call, scope: Scope) -> None:
        """``dbutils.widgets.text(name, default, ...)``: what ``dbutils.widgets.get(name)`` may return."""
        self.widgets.update(records.widget_default(call, self.values, scope))

    def _on_option(self, call: ast.Call, scope: Scope) -> None:
        """``.option("replaceWhere", "...")`` on a writer: the predicate decides which rows are replaced."""
        if len(call.args) < 2 or self.values.const_strings(call.args[0], scope) != ["replaceWhere"]:
            return
        self._condition_effect(call.args[1], scope)

    def _on_add_column(self, call: ast.Call, scope: Scope) -> None:
        """``DeltaTable.create(spark)...addColumn("id", ..., generatedAlwaysAs=IdentityGenerator())``."""
        gen = self.model.kwarg(call, "generatedAlwaysAs", "generatedByDefaultAs")
        if type(gen) is not ast.Call or not call.args:
            return
        name = gen.func.attr if type(gen.func) is ast.Attribute else getattr(gen.func, "id", "")
        names = self.values.const_strings(call.args[0], scope)
        if name == "IdentityGenerator" and names:
            self.ddl_keys.append((names[0], "?", "identity column", None))

    # ---- where tables are written and read, joins, dbt models
    def _on_table_write(self, call: ast.Call, scope: Scope) -> None:
        if call.func.attr == "save" and not chains.after_write(call.func.value):
            return  # model.save(path), not a DataFrame writer
        self.writes_data = True
        arg = call.args[0] if call.args else self.model.kwarg(call, "name", "path", "tableName")
        names = self.values.const_strings(arg, scope) if arg is not None else None
        if names:
            self.tables_written.add(names[0].lower())

    def _on_delta_table(self, call: ast.Call, scope: Scope) -> None:
        # DeltaTable.forName(spark, "t") / forPath(spark, "/p"): a table that is merged into (written)
        if len(call.args) > 1:
            names = self.values.const_strings(call.args[1], scope)
            if names:
                self.tables_written.add(names[0].lower())

    def _on_join(self, call: ast.Call, scope: Scope) -> None:
        if call.args:
            self.joins.append((call, scope))

    def _on_dbt_config(self, call: ast.Call, scope: Scope) -> None:
        """``dbt.config(unique_key=...)`` in a dbt Python model: the model's keys."""
        owner = call.func.value
        if type(owner) is not ast.Name:
            return
        s = self.model.lookup(owner.id, scope)
        if owner.id != "dbt" and not (s is not None and s.kind == "function" and s.params[:1] == [owner.id]):
            return
        self.writes_data = True  # a dbt model's returned DataFrame is its table
        node = self.model.kwarg(call, "unique_key")
        if node is not None:
            self.dbt_keys.append((call, scope))

    # ---- the shared flow's handlers, one per DataFrame/DeltaTable method (dispatched through _FLOW)
    def _on_sink(self, call: ast.Call, scope: Scope) -> None:
        self.sink_calls.append((call, scope))

    def _on_sink_for_table(self, call: ast.Call, scope: Scope) -> None:
        """``UpsertSink.for_table(name, keys, **options)``: a sink like the constructor's (same positions)."""
        recv = call.func.value
        q = self.model.qualname(recv, scope) or ""
        if (
            (type(recv) is ast.Name and recv.id == "UpsertSink")
            or q == "UpsertSink"
            or q.endswith(".UpsertSink")
        ):
            self.sink_calls.append((call, scope))
            self.writes_data = True

    # ---- declarative pipelines
    def _pipeline_flow(self, call: ast.Call, scope: Scope, params: tuple[str, ...]) -> None:
        """A declarative pipeline's CDC flow (``dlt.apply_changes``, ``dp.create_auto_cdc_flow``, the snapshot
        flows; ``params``: its parameters in positional order): it upserts its source's rows into ``target``
        by ``keys``, the newest by ``sequence_by`` winning. A ``sequence_by`` that is not a column
        (``F.current_timestamp()``, ``"a + b"``) is a sequence of its own: a column named after the
        expression, written here. The source view's columns reach the keys and the sequence by name."""
        self.writes_data = True

        def arg(param: str) -> ast.AST | None:
            node = self.model.kwarg(call, param)
            i = params.index(param)
            if (
                node is None
                and i < len(call.args)
                and not any(type(a) is ast.Starred for a in call.args[: i + 1])
            ):
                node = call.args[i]
            return node

        targets = self.values.const_strings(arg("target"), scope)
        flow = f"the pipeline flow into `{targets[0]}`" if targets else "the pipeline flow"
        if targets:
            self.tables_written.add(targets[0].lower())
        for k in self._column_list(arg("keys"), scope):
            self.declare(k, f"key of {flow}", scope)
        if "sequence_by" in params:
            seq = arg("sequence_by")
            if seq is not None:
                self._pipeline_sequence(seq, scope)
        for keyword in PIPELINE_CDC_CONDITIONS:
            cond = self.model.kwarg(call, keyword)
            if cond is not None:
                self._condition_effect(cond, scope)

    def _column_list(self, node: ast.AST | None, scope: Scope) -> list[str]:
        """Column names given as strings or ``col(...)`` (a list, one name, or a name bound to a list)."""
        if node is None:
            return []
        names = self.values.const_strings(node, scope)
        if names is not None:
            return names
        items = node.elts if type(node) in (ast.List, ast.Tuple) else [node]
        out: list[str] = []
        for e in items:
            sub = self.values.const_strings(e, scope)
            if sub is None and type(e) is ast.Call:
                sub = [c for c in self.values.col_names(e, scope) if not c.startswith("<")]
            out.extend(sub or [])
        return out

    def _pipeline_sequence(self, node: ast.AST, scope: Scope) -> None:
        """A CDC flow's ``sequence_by``: a column (``"v"``, ``col("v")``), columns (``struct("a", "b")``), or
        an expression (SQL text or a Column) that is itself the sequence."""
        if type(node) is ast.Name:  # SEQUENCE = F.col("v") ... sequence_by=SEQUENCE
            bound = self.model.single_value(node, scope)
            if bound is not None and type(bound[0]) is ast.Call:
                node, scope = bound
        sname = (
            self.model.spark_name(self.model.qualname(node.func, scope)) if type(node) is ast.Call else None
        )
        if sname == "expr" and len(node.args) == 1:
            node = node.args[0]  # F.expr("..."): SQL text, like a string
        elif sname == "struct" and node.args:
            names = [self._column_list(a, scope) for a in node.args]
            if all(len(n) == 1 for n in names):
                for n in names:
                    self.declare(n[0], "sequence column", scope, sequence=True)
                return
        elif sname in NAME_ARG_FUNCTIONS:
            names = self._column_list(node, scope)
            if len(names) == 1:
                self.declare(names[0], "sequence column", scope, sequence=True)
                return
        text = self.values.sql_text(node, scope) if self.values.may_be_text(node, scope) else None
        if text is not None:  # a string is a SQL expression (pyspark.pipelines: ``expr(sequence_by)``)
            ok, alias, part = sqlmod.analyze_expression(text.text)
            if not ok:
                return
            if alias is not None and part.refs == {alias} and not (part.sites or part.calls or part.holes):
                self.declare(alias, "sequence column", scope, sequence=True)
                return
            column = " ".join(text.text.split())
            self._add_write(column, scope, sql=(part, text), node=node)
        else:
            column = self.model.segment(node, 80)
            self._add_write(column, scope, node, node=node)
        self.declare(column, "sequence column", scope, sequence=True)

    def _on_seed(self, call: ast.Call, scope: Scope) -> None:
        q = self.model.qualname(call.func, scope)
        if call.args and q in ("random.seed", "numpy.random.seed"):
            self.seeded.add(q.rsplit(".", 1)[0])

    def _on_with_column(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if len(args) >= 2:
            names = self.values.const_strings(args[0], scope)
            if names and not chains.looked_only(self.model, call):
                self._add_write(names[0], scope, args[1], node=call)

    def _on_rename(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if len(args) >= 2:
            old, new = self.values.const_strings(args[0], scope), self.values.const_strings(args[1], scope)
            if old and new:
                self._add_write(new[0], scope, ast.Constant(value=old[0]), node=call, rename=True)

    def _on_register(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        if len(call.args) >= 2 and type(func.value) is ast.Attribute and func.value.attr == "udf":
            names = self.values.const_strings(call.args[0], scope)
            if names:
                self.sql_udfs[names[0].lower()] = (call.args[1], scope)

    def _on_with_columns(self, call: ast.Call, scope: Scope) -> None:
        if not call.args:
            return
        mapping = self.model.resolve_dict(call.args[0], scope)
        if type(mapping) is ast.Dict and not chains.looked_only(self.model, call):
            for k, v in zip(mapping.keys, mapping.values, strict=False):
                names = self.values.const_strings(k, scope)
                if names:
                    self._add_write(names[0], scope, v, node=call)

    def _on_select(self, call: ast.Call, scope: Scope) -> None:
        if not chains.looked_only(self.model, call):
            for a in call.args:
                self._select_item(a, scope)

    def _on_assign(self, call: ast.Call, scope: Scope) -> None:
        for kw in call.keywords:
            if not kw.arg:
                continue
            if type(kw.value) is ast.Lambda and id(kw.value) in self.model.fn_scopes:
                self._add_write(kw.arg, self.model.fn_scopes[id(kw.value)], kw.value.body, node=call)
            else:
                self._add_write(kw.arg, scope, kw.value, node=call)

    def _on_select_expr(self, call: ast.Call, scope: Scope) -> None:
        if chains.looked_only(self.model, call):
            return
        for a in call.args:
            text = self.values.sql_text(a, scope)
            if text is None:
                continue
            ok, alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._add_write(alias or text.text.strip(), scope, sql=(part, text), node=call)

    def _on_sql(self, call: ast.Call, scope: Scope) -> None:
        if call.args:
            text = self.values.sql_text(call.args[0], scope)
            if text is not None:
                self._sql_statements(text, scope, call)

    def _on_filter(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if not args or chains.looked_only(self.model, call):
            return
        text = self.values.sql_text(args[0], scope) if self.values.may_be_text(args[0], scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._row(RowEffect("filter", scope, sql=(part, text)))
        else:
            self._row(RowEffect("filter", scope, expr=args[0]))

    def _on_merge(self, call: ast.Call, scope: Scope) -> None:
        self.merges.append((call, scope))
        cond = call.args[1] if len(call.args) > 1 else self.model.kwarg(call, *MERGE_CONDITION_KEYWORDS)
        if cond is not None:
            self.merge_conds.append((cond, scope))

    def _on_merge_map(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        kw, pos = MERGE_MAPS[call.func.attr]
        mapping = self.model.kwarg(call, kw)
        if mapping is None and len(args) > pos:
            mapping = args[pos]
        cond = self.model.kwarg(call, *MERGE_CONDITION_KEYWORDS)
        if cond is None and pos == 1 and args:
            cond = args[0]
        elif cond is None and pos == 0 and len(args) > 1:
            cond = args[1]
        if cond is not None:
            update = call.func.attr in MATCHED_UPDATES
            self._condition_effect(cond, scope, "update" if update else "merge")
            if update:
                self.seq_conds.append((cond, scope))
        mapping = self.model.resolve_dict(mapping, scope) if mapping is not None else None
        if type(mapping) is not ast.Dict:
            return
        for k, v in zip(mapping.keys, mapping.values, strict=False):
            names = self.values.const_strings(k, scope)
            if not names or v is None:
                continue
            text = self.values.sql_text(v, scope) if self.values.may_be_text(v, scope) else None
            if text is not None:
                ok, _alias, part = sqlmod.analyze_expression(text.text)
                if ok:
                    self._add_write(strip_qualifier(names[0]), scope, sql=(part, text), node=call)
            else:
                self._add_write(strip_qualifier(names[0]), scope, v, node=call)

    def _on_update_all(self, call: ast.Call, scope: Scope) -> None:
        cond = self.model.kwarg(call, *MERGE_CONDITION_KEYWORDS) or (call.args[0] if call.args else None)
        if cond is not None:
            self._condition_effect(cond, scope, "update")
            self.seq_conds.append((cond, scope))

    def _on_merge_delete(self, call: ast.Call, scope: Scope) -> None:
        cond = self.model.kwarg(call, *MERGE_CONDITION_KEYWORDS) or (call.args[0] if call.args else None)
        if cond is not None:
            self._condition_effect(cond, scope)

    def _condition_effect(self, cond: ast.AST, scope: Scope, kind: str = "merge") -> None:
        """A condition that decides rows: ``merge`` (which keys are inserted, deleted, matched) or ``update``
        (whether a matched row's values are updated: values only, the keys stay)."""
        text = self.values.sql_text(cond, scope) if self.values.may_be_text(cond, scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._row(RowEffect(kind, scope, sql=(part, text)))
        else:
            self._row(RowEffect(kind, scope, expr=cond))

    def _select_item(self, a: ast.AST, scope: Scope) -> None:
        t = type(a)
        if t is ast.Dict:  # agg({"col": "first"}): Spark names the result "first(col)"
            for k, v in zip(a.keys, a.values, strict=False):
                names = self.values.const_strings(k, scope) if k is not None else None
                if not names or type(v) is not ast.Constant or not isinstance(v.value, str):
                    continue
                rule = SPARK_FUNCTIONS.get(v.value.lower())
                if rule is not None and rule == ORDER_CODE:
                    own = self.model.src(rule, v, what=f"agg({{{names[0]!r}: {v.value!r}}})")
                    self.writes.append(Write(f"{v.value.lower()}({names[0]})", scope, None, None, a, own=own))
            return
        if t is ast.Constant or t is ast.Starred:
            return
        if t is ast.List or t is ast.Tuple:
            for e in a.elts:
                self._select_item(e, scope)
            return
        if t is ast.Call and type(a.func) is ast.Attribute and a.func.attr in ALIAS_METHODS and a.args:
            names = self.values.const_strings(a.args[0], scope)
            self._add_write(names[0] if names else self.model.segment(a.args[0], 60), scope, a, node=a)
            return
        sname = self.model.spark_name(self.model.qualname(a.func, scope)) if t is ast.Call else None
        if sname in NAME_ARG_FUNCTIONS:
            return
        if sname == "expr" and a.args:
            text = self.values.str_value(a.args[0], scope)
            alias = sqlmod.analyze_expression(text.text)[1] if text is not None else None
            if alias:
                self._add_write(alias, scope, a, node=a)
                return
        # a bare name, attribute or subscript is a write too: whether any source reaches it is asked later
        self._add_write(self.model.segment(a, 80), scope, a, node=a)

    def _sql_statements(self, text: PosText, scope: Scope, call: ast.Call) -> None:
        result = sqlmod.analyze_statements(text.text)
        if not result.ok:
            return
        writes = bool(result.tables_written or result.statements)
        looked = chains.looked_only(self.model, call) or chains.quick_look(self.model, call, writes)
        if not looked:
            for name, part in result.outputs:
                self._add_write(name, scope, sql=(part, text), node=call)
        for kind, part in result.rows:
            if not looked:
                self._row(RowEffect(kind, scope, sql=(part, text)))
        for name, part in result.writes:
            self._add_write(name, scope, sql=(part, text), node=call)
        for k in result.merge_keys:
            self.declare(k, "merge key", scope)
        for c in result.sequence_cols:
            self.declare(c, "sequence column", scope, sequence=True)
        for column, table, what in result.ddl_keys:
            self.ddl_keys.append((column, table, what, scope))
        if result.tables_written:
            self.writes_data = True
            self.tables_written.update(t.lower() for t in result.tables_written)
