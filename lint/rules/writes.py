"""ND011-ND014: writes that are not idempotent, so a retried or replayed batch changes the table again.

The other rules ask whether a replay computes the same *values*; these ask whether writing the same values
twice leaves the same table. Their detector (:func:`check_writes`, a module hook) runs once per module after
the shared flow has seen every call:

- ND011: an append (``.write.mode("append")``, ``insertInto``, ``writeTo(...).append()``, JDBC and Kafka
  batch writes, SQL ``INSERT INTO``) inside a Structured Streaming ``foreachBatch`` function (or a function
  taking a batch/epoch id) with no Delta ``txnAppId``/``txnVersion``;
- ND012: a MERGE update that accumulates into the target's own value (``t.total + s.amount``, ``t.n + 1``,
  ``concat(t.log, ...)``, ``array_union(t.tags, ...)``), in Python or in SQL ``MERGE INTO`` text;
- ND013: a hand-written Delta MERGE inside such a function with no batch marker;
- ND014: ``UpsertSink(...).write(df)`` inside such a function, or a loop over batches, without ``batch_id``.

"Batch functions" are the functions a module passes to ``foreachBatch`` (by name, ``self.method``, lambda
or ``functools.partial``), functions with a parameter named like a batch id (``batch_id``, ``epoch_id``,
``batchId``...), and the module's own functions they call (a few calls deep).
"""

from __future__ import annotations

from upsertsink.lint import chains

import ast
import re
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

from upsertsink.lint.rules.base import Catalogue, FixSpec, Invalid, Valid, WriteRule

_BATCH_PARAM = re.compile(r"^(micro_?)?(batch|epoch)_?(id|no|num|number|idx|index)$", re.IGNORECASE)
_BATCH_WORD = re.compile(r"batch|epoch|chunk|micro", re.IGNORECASE)
_TXN_CONFS = frozenset({"spark.databricks.delta.write.txnappid", "spark.databricks.delta.write.txnversion"})
_TXN_OPTIONS = frozenset({"txnappid", "txnversion"})
# Sinks whose "append" is an upsert by the table's primary key: a replayed epoch overwrites itself.
_UPSERTING_FORMATS = frozenset({"org.apache.spark.sql.cassandra", "cassandra"})
_TERMINALS = frozenset({"save", "saveAsTable", "insertInto", "jdbc", "parquet", "csv", "json", "orc", "text"})
_UPDATE_CLAUSES = {  # method -> (keyword of the map, its position, keyword of the condition, its position)
    "whenMatchedUpdate": ("set", 1, "condition", 0),
    "whenNotMatchedBySourceUpdate": ("set", 1, "condition", 0),
    "when_matched_update": ("updates", 0, "predicate", 1),
    "when_not_matched_by_source_update": ("updates", 0, "predicate", 1),
}
# When a merge's target alias is unknown, qualifiers that name a target by convention.
_TARGET_NAMES = frozenset({"t", "target", "tgt", "trg", "dst", "dest", "existing", "old", "current", "base"})
_ADDS = frozenset({"Add", "Sub", "Mul", "Div"})
_APPENDS = frozenset(
    {"DPipe", "Concat", "ConcatWs", "ArrayConcat", "ArrayAppend", "ArrayPrepend", "ArrayInsert"}
)
_UNION_NAMES = frozenset({"array_union", "map_concat"})
_APPEND_NAMES = frozenset(
    {"concat", "concat_ws", "array_append", "array_prepend", "array_insert", "array_concat"}
)
_PY_ADDS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


@dataclass
class BatchFn:
    """A function that writes one batch: how it was recognized and which parameter holds the batch id."""

    scope: Any
    name: str  # qualified inside the module: ``handle``, ``Job.write_batch``, ``main.<lambda>``
    epoch: str | None  # the parameter holding the epoch / batch id, when known
    how: str  # foreachBatch | param | called
    via: str = ""  # for ``called``: the batch function that calls it
    is_lambda: bool = False

    def where(self) -> str:
        """How the message names the function."""
        if self.how == "foreachBatch":
            return f"the foreachBatch function `{self.name}`"
        if self.how == "called":
            return f"`{self.name}`, called from the batch function `{self.via}`"
        return f"`{self.name}` (it takes the batch id `{self.epoch}`)"


@dataclass
class _Writer:
    terminal: str
    mode: str | None = None
    fmt: str | None = None
    options: frozenset[str] = frozenset()
    write_node: ast.AST | None = None  # the ``x.write`` attribute (or ``writeTo(...)`` call)
    through_name: bool = False  # the chain continues through a variable
    v2: bool = False
    target: str | None = None


def _sql() -> Any:
    """The shared SQL module (imported late: it imports the catalogue, which imports the rules)."""
    from upsertsink.lint import sql

    return sql


def _state(ctx: Context) -> dict:
    return ctx.facts.rule_state.setdefault("writes", {"foreach": [], "updates": []})


def _on_foreach_batch(ctx: Context, call: ast.Call, scope: Any) -> None:
    _state(ctx)["foreach"].append((call, scope))


def _on_update_clause(ctx: Context, call: ast.Call, scope: Any) -> None:
    _state(ctx)["updates"].append((call, scope))


# ---------------------------------------------------------------------------------------- batch functions
def _qualname(scope: Any) -> str:
    names: list[str] = []
    s = scope
    while s is not None and s.parent is not None:
        node = s.node
        names.append(
            node.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            else "<lambda>"
        )
        s = s.parent
    return ".".join(reversed(names))


def _params(scope: Any) -> list[str]:
    """Positional parameters as a caller passes them (``self`` left out for methods)."""
    params = list(scope.params)
    if scope.parent is not None and scope.parent.kind == "class" and params:
        params = params[1:]
    return params


def _callables(ctx: Context, node: ast.AST, scope: Any, depth: int = 0) -> list[tuple[Any, int, bool]]:
    """(function scope, number of arguments bound before Spark's (df, epoch_id), is a lambda) for the
    function an expression names."""
    if depth > 5:
        return []
    t = type(node)
    if t is ast.Lambda:
        fscope = ctx.model.lambda_scope(node)
        return [(fscope, 0, True)] if fscope is not None else []
    if t is ast.Name:
        s = ctx.model.lookup(node.id, scope)
        if s is None:
            return []
        if node.id in s.funcs:
            return [(s.funcs[node.id][1], 0, False)]
        value = ctx.model.single_value(node, scope)
        return _callables(ctx, value[0], value[1], depth + 1) if value is not None else []
    if t is ast.Attribute:
        cls = ctx.model.self_class(node.value, scope)
        if cls is not None and node.attr in cls.funcs:
            return [(cls.funcs[node.attr][1], 0, False)]
        return []
    if t is ast.Call and node.args:
        q = ctx.model.qualname(node.func, scope) or ""
        name = node.func.id if type(node.func) is ast.Name else ""
        if q == "functools.partial" or name == "partial":
            return [
                (f, bound + len(node.args) - 1, lam)
                for f, bound, lam in _callables(ctx, node.args[0], scope, depth + 1)
            ]
    return []


def batch_functions(ctx: Context) -> dict[int, BatchFn]:
    """The module's batch functions by id of their scope (memoized per module)."""
    st = _state(ctx)
    if "batch" in st:
        return st["batch"]
    out: dict[int, BatchFn] = {}
    for call, scope in st["foreach"]:
        target = call.args[0] if call.args else ctx.model.kwarg(call, "func")
        if target is None:
            continue
        for fscope, bound, lam in _callables(ctx, target, scope):
            params = _params(fscope)
            epoch = params[bound + 1] if len(params) > bound + 1 else None
            out[id(fscope)] = BatchFn(fscope, _qualname(fscope), epoch, "foreachBatch", is_lambda=lam)
    scopes = {id(s): s for _c, s in ctx.model.calls if s.kind == "function"}
    for key, fscope in scopes.items():
        if key in out:
            continue
        for p in _params(fscope):
            if _BATCH_PARAM.match(p) or p in ("batchId", "epochId"):
                out[key] = BatchFn(fscope, _qualname(fscope), p, "param")
                break
    # the module's own functions that a batch function calls (a few calls deep)
    work = list(out.values())
    for _ in range(3):
        found: list[BatchFn] = []
        by_scope = calls_by_scope(ctx)
        for bf in work:
            for call in by_scope.get(id(bf.scope), ()):
                if type(call.func) is not ast.Name:
                    continue
                s = ctx.model.lookup(call.func.id, bf.scope)
                if s is None or call.func.id not in s.funcs:
                    continue
                callee = s.funcs[call.func.id][1]
                if id(callee) in out:
                    continue
                params = _params(callee)
                epoch = None
                for i, a in enumerate(call.args):
                    if type(a) is ast.Name and bf.epoch and a.id == bf.epoch and i < len(params):
                        epoch = params[i]
                for kw in call.keywords:
                    if type(kw.value) is ast.Name and bf.epoch and kw.value.id == bf.epoch and kw.arg:
                        epoch = kw.arg
                new = BatchFn(callee, _qualname(callee), epoch, "called", via=bf.name)
                out[id(callee)] = new
                found.append(new)
        if not found:
            break
        work = found
    st["batch"] = out
    return out


def calls_by_scope(ctx: Context) -> dict[int, list[ast.Call]]:
    """The module's calls grouped by the scope they are made in (memoized)."""
    st = _state(ctx)
    if "by_scope" not in st:
        by: dict[int, list[ast.Call]] = {}
        for call, scope in ctx.model.calls:
            by.setdefault(id(scope), []).append(call)
        st["by_scope"] = by
    return st["by_scope"]


def _txn_marked(ctx: Context, bf: BatchFn) -> bool:
    """Does the function set Delta's session-level transaction identifiers (both of them) before writing?"""
    seen: set[str] = set()
    for call in calls_by_scope(ctx).get(id(bf.scope), ()):
        if type(call.func) is ast.Attribute and call.func.attr == "set" and call.args:
            names = ctx.values.const_strings(call.args[0], bf.scope)
            if names and names[0].lower() in _TXN_CONFS:
                seen.add(names[0].lower())
    return seen == _TXN_CONFS


# ---------------------------------------------------------------------------------------- ND011 appends
def _const(ctx: Context, node: ast.AST | None, scope: Any) -> str | None:
    if node is None:
        return None
    if type(node) is ast.Attribute:  # SaveMode.Append
        return node.attr.lower()
    names = ctx.values.const_strings(node, scope)
    return names[0] if names and len(names) == 1 else None


def _writer(ctx: Context, call: ast.Call, scope: Any) -> _Writer | None:
    """What a terminal writer call (``save``, ``saveAsTable``...) does, read back along its chain."""
    m = call.func.attr
    w = _Writer(m)
    options: set[str] = set()
    for kw in call.keywords:
        if kw.arg == "mode":
            w.mode = (_const(ctx, kw.value, scope) or "").lower() or None
        elif kw.arg == "format":
            w.fmt = (_const(ctx, kw.value, scope) or "").lower() or None
        elif kw.arg in ("name", "tableName", "path", "table"):
            w.target = _const(ctx, kw.value, scope)
        elif kw.arg:
            options.add(kw.arg.lower())
    if call.args and m != "jdbc":
        w.target = w.target or _const(ctx, call.args[0], scope)
    elif m == "jdbc" and len(call.args) > 1:
        w.target = _const(ctx, call.args[1], scope)
    node: ast.AST = call.func.value
    for _ in range(40):
        t = type(node)
        if t is ast.Call and type(node.func) is ast.Attribute:
            a = node.func.attr
            if a == "mode" and node.args:
                w.mode = w.mode or (_const(ctx, node.args[0], scope) or "").lower() or None
            elif a == "format" and node.args:
                w.fmt = w.fmt or (_const(ctx, node.args[0], scope) or "").lower() or None
            elif a == "option" and node.args:
                key = _const(ctx, node.args[0], scope)
                if key:
                    options.add(key.lower())
                    if key.lower() in ("path", "dbtable", "topic") and len(node.args) > 1:
                        w.target = w.target or _const(ctx, node.args[1], scope)
            elif a == "options":
                options.update(kw.arg.lower() for kw in node.keywords if kw.arg)
                for arg in node.args:
                    d = ctx.model.resolve_dict(arg, scope)
                    if type(d) is ast.Dict:
                        options.update(k.lower() for k in (_const(ctx, k, scope) for k in d.keys) if k)
            elif a == "writeTo":
                w.v2, w.write_node = True, node
                w.target = w.target or (_const(ctx, node.args[0], scope) if node.args else None)
                break
            node = node.func.value
        elif t is ast.Attribute:
            if node.attr == "write":
                w.write_node = node
                break
            if node.attr == "writeStream":
                return None  # a streaming writer: not a batch write
            node = node.value
        elif t is ast.Name:
            value = ctx.model.single_value(node, scope)
            if value is None:
                return None
            node, scope = value
            w.through_name = True
        else:
            return None
    if w.write_node is None:
        return None
    w.options = frozenset(options)
    return w


def _appends(ctx: Context, call: ast.Call, scope: Any, w: _Writer) -> bool:
    m = w.terminal
    if m == "append":
        return w.v2
    if w.v2:
        return False
    if m == "insertInto":
        over = ctx.model.kwarg(call, "overwrite")
        if over is None and len(call.args) > 1:
            over = call.args[1]
        overwrite = type(over) is ast.Constant and over.value is True
        return not overwrite and w.mode in (None, "append")
    if m == "save" and w.fmt == "kafka":
        return w.mode in (None, "append")
    return w.mode == "append"


def _kind(w: _Writer) -> str:
    if w.terminal == "jdbc" or w.fmt == "jdbc":
        return "a JDBC append"
    if w.fmt == "kafka":
        return "a Kafka write (Kafka batch writes always append)"
    if w.terminal in ("parquet", "csv", "json", "orc", "text") or w.fmt in (
        "parquet",
        "csv",
        "json",
        "orc",
        "text",
    ):
        return "a file append"
    return "a table append"


def _check_append(ctx: Context, call: ast.Call, scope: Any, bf: BatchFn, index: dict[int, int]) -> None:
    m = call.func.attr
    if m not in _TERMINALS and m != "append":
        return
    w = _writer(ctx, call, scope)
    if w is None or w.fmt in _UPSERTING_FORMATS or not _appends(ctx, call, scope, w):
        return
    if _TXN_OPTIONS <= w.options or _txn_marked(ctx, bf):
        return
    where = f" `{w.target}`" if w.target else ""
    note = (
        f"`{m}()` makes {_kind(w)}{' to' if where else ''}{where} in {bf.where()} with no txnAppId/txnVersion "
        "writer options and no UpsertSink"
    )
    fix = None
    fixable = (
        bf.how == "foreachBatch"
        and not bf.is_lambda
        and bf.epoch
        and w.fmt in ("delta", None)
        and m in ("save", "saveAsTable")
        and not w.through_name
        and type(w.write_node) is ast.Attribute
    )
    if fixable:
        n = index.get(id(bf.scope), 0) + 1
        index[id(bf.scope)] = n
        message = (
            f'add `.option("txnAppId", ...)` (this module and `{bf.name}`) and `.option("txnVersion", '
            f"{bf.epoch})`: Delta then skips an epoch it already committed (give the query a new app id if it "
            "is ever restarted from a new checkpoint)"
        )
        if w.fmt is None:  # the table's format is not in the code: Delta is an assumption
            message += (
                "; this assumes the table is a Delta table (Databricks' default format, elsewhere only with "
                "`spark.sql.sources.default=delta`): another format ignores these options"
            )
        fix = FixSpec(
            "txn-options",
            ctx.model.span(w.write_node),
            "safe" if w.fmt == "delta" else "unsafe",
            message,
            (("function", bf.name), ("epoch", bf.epoch or ""), ("index", str(n))),
        )
    ctx.report(APPEND.code, ctx.model.method_span(call), note, "error", fix=fix)


# ---------------------------------------------------------------------------------------- ND013 merges
def _is_delta_merge(ctx: Context, call: ast.Call, scope: Any) -> bool:
    """A DeltaTable merge (delta-spark or deltalake), not a pandas join."""
    parent = ctx.model.chain_parent.get(id(call))
    while parent is not None:
        attr = parent.func.attr
        if attr.startswith("when") or attr == "execute":
            return True
        parent = ctx.model.chain_parent.get(id(parent))
    for step, _where in chains.down_chain(ctx.model, call.func.value, scope, limit=20):
        if type(step) is ast.Call:
            f = step.func
            name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
            if name in ("forPath", "forName", "DeltaTable", "create", "createOrReplace"):
                return True
    return False


def _deltalake_marked(ctx: Context, call: ast.Call, bf: BatchFn) -> bool:
    """deltalake: the merge commits a Transaction and the function reads the app's last version."""
    if ctx.model.kwarg(call, "commit_properties") is None:
        return False
    return any(
        type(c.func) is ast.Attribute and c.func.attr == "transaction_version"
        for c in calls_by_scope(ctx).get(id(bf.scope), ())
    )


def _check_merge(ctx: Context, call: ast.Call, scope: Any, bf: BatchFn) -> None:
    if call.func.attr != "merge" or not _is_delta_merge(ctx, call, scope):
        return
    if _txn_marked(ctx, bf) or _deltalake_marked(ctx, call, bf):
        return
    note = f"a hand-written Delta MERGE in {bf.where()} records no batch marker"
    ctx.report(UNMARKED_MERGE.code, ctx.model.method_span(call), note, "warning")


def _check_sql(ctx: Context, call: ast.Call, scope: Any, bf: BatchFn) -> None:
    if call.func.attr != "sql" or not call.args:
        return
    text = ctx.values.sql_text(call.args[0], scope)
    if text is None:
        return
    result = _sql().analyze_statements(text.text)
    if not result.ok:
        return
    marked = None
    for st in result.statements:
        if marked is None:
            marked = _txn_marked(ctx, bf)
        if marked:
            return
        span = text.span(st.start, st.end)
        table = f" `{st.table}`" if st.table else ""
        if st.kind == "insert" and st.append:
            note = f"SQL `INSERT INTO`{table} in {bf.where()} appends with no txnAppId/txnVersion"
            ctx.report(APPEND.code, span, note, "error", alt_line=text.last_line)
        elif st.kind == "merge":
            note = f"a hand-written SQL `MERGE INTO`{table} in {bf.where()} records no batch marker"
            ctx.report(UNMARKED_MERGE.code, span, note, "warning", alt_line=text.last_line)


# ---------------------------------------------------------------------------------------- ND012 accumulation
def _sql_accumulates(node: Any, column: str, names: frozenset[str]) -> str | None:
    """``adds`` / ``appends`` / ``unions`` when the SQL value folds the target's own ``column`` into itself."""
    from sqlglot import exp

    col_l = column.lower()
    for ref in node.find_all(exp.Column):
        if _sql().column_name(ref).lower() != col_l:
            continue
        qual = str(ref.table).lower() if ref.table else ""
        if qual and qual not in names:
            continue
        p = ref.parent if ref is not node else None
        while p is not None:
            cls = type(p).__name__
            if cls in _ADDS:
                return "adds"
            if cls in _APPENDS:
                return "appends"
            fname = str(p.name).lower() if isinstance(p, exp.Anonymous) else ""
            if fname in _UNION_NAMES or cls == "ArrayUnion":
                return "unions"
            if fname in _APPEND_NAMES:
                return "appends"
            if p is node:
                break
            p = p.parent
    return None


def _py_self_ref(
    ctx: Context, node: ast.AST, scope: Any, column: str, names: frozenset[str], strings: bool
) -> bool:
    """Does the Python expression refer to the target's ``column`` (``F.col("t.total")``, or a column-name
    string passed to a Spark function when ``strings``)?"""
    col_l = column.lower()

    def matches(text: str) -> bool:
        qual, _, name = text.rpartition(".")
        return name.strip("`").lower() == col_l and (not qual or qual.strip("`").lower() in names)

    if strings and type(node) is ast.Constant and isinstance(node.value, str):
        return matches(node.value)
    for sub in ast.walk(node):
        if type(sub) is ast.Call and sub.args:
            sname = ctx.model.spark_name(ctx.model.qualname(sub.func, scope))
            first = sub.args[0]
            if (
                sname in ("col", "column")
                and type(first) is ast.Constant
                and isinstance(first.value, str)
                and matches(first.value)
            ):
                return True
    return False


def _py_accumulates(
    ctx: Context, node: ast.AST, scope: Any, column: str, names: frozenset[str], depth: int = 0
) -> str | None:
    if depth > 5:
        return None
    if type(node) is ast.Name:
        value = ctx.model.single_value(node, scope)
        return (
            _py_accumulates(ctx, value[0], value[1], column, names, depth + 1) if value is not None else None
        )
    if type(node) in (ast.Constant, ast.JoinedStr, ast.BinOp) and ctx.values.str_value(node, scope) is not None:
        text = ctx.values.str_value(node, scope)
        tree = _sql().parse_expression(text.text) if text is not None else None
        return _sql_accumulates(tree, column, names) if tree is not None else None
    for sub in ast.walk(node):
        t = type(sub)
        if t is ast.BinOp and isinstance(sub.op, _PY_ADDS):
            if any(_py_self_ref(ctx, side, scope, column, names, False) for side in (sub.left, sub.right)):
                return "adds"
        elif t is ast.Call:
            sname = ctx.model.spark_name(ctx.model.qualname(sub.func, scope))
            if sname == "expr" and sub.args:
                text = ctx.values.str_value(sub.args[0], scope)
                tree = _sql().parse_expression(text.text) if text is not None else None
                kind = _sql_accumulates(tree, column, names) if tree is not None else None
                if kind:
                    return kind
            elif (sname in _APPEND_NAMES or sname in _UNION_NAMES) and any(
                _py_self_ref(ctx, a, scope, column, names, True) for a in sub.args
            ):
                return "unions" if sname in _UNION_NAMES else "appends"
    return None


def _merge_call(ctx: Context, node: ast.AST, scope: Any) -> tuple[ast.Call, Any] | None:
    """The ``merge(...)`` call an update clause belongs to (down its chain, through variables)."""
    for step, where in chains.down_chain(ctx.model, node, scope, limit=40):
        if type(step) is not ast.Call or type(step.func) is not ast.Attribute:
            return None
        if step.func.attr == "merge":
            return step, where
    return None


def _alias_of(ctx: Context, node: ast.AST, scope: Any) -> str | None:
    """The ``.alias("x")`` a DataFrame/DeltaTable expression carries (along its chain and variables)."""
    for step, where in chains.down_chain(ctx.model, node, scope, limit=20):
        if type(step) is not ast.Call or type(step.func) is not ast.Attribute:
            return None
        if step.func.attr in ("alias", "as_") and step.args:
            return _const(ctx, step.args[0], where)
    return None


def _newer_columns(ctx: Context, cond: ast.AST | None, scope: Any) -> list[str]:
    """Columns a clause condition compares between source and target by order (newer-wins)."""
    if cond is None:
        return []
    text = ctx.values.str_value(cond, scope)
    if text is not None:
        return _sql().condition_sequences(text.text)
    out = []
    for cmp in ast.walk(cond):
        if (
            type(cmp) is ast.Compare
            and len(cmp.ops) == 1
            and type(cmp.ops[0]) in (ast.Gt, ast.GtE, ast.Lt, ast.LtE)
        ):
            sides = []
            for side in (cmp.left, cmp.comparators[0]):
                if type(side) is ast.Call and side.args and type(side.args[0]) is ast.Constant:
                    sides.append(str(side.args[0].value))
            if len(sides) == 2 and sides[0] != sides[1]:
                a, b = (s.rpartition(".")[2].lower() for s in sides)
                if a == b:
                    out.append(a)
    return out


def _check_update_clause(ctx: Context, call: ast.Call, scope: Any) -> None:
    map_kw, map_pos, cond_kw, cond_pos = _UPDATE_CLAUSES[call.func.attr]
    mapping = ctx.model.kwarg(call, map_kw)
    if mapping is None and len(call.args) > map_pos:
        mapping = call.args[map_pos]
    cond = ctx.model.kwarg(call, cond_kw, "condition", "predicate")
    if cond is None and len(call.args) > cond_pos:
        cond = call.args[cond_pos]
    if mapping is None:
        return
    mapping = ctx.model.resolve_dict(mapping, scope)
    if type(mapping) is not ast.Dict:
        return
    columns = [
        (_const(ctx, k, scope) if k is not None else None, v)
        for k, v in zip(mapping.keys, mapping.values, strict=False)
    ]
    assigned = {c.rpartition(".")[2].strip("`").lower() for c, _ in columns if c}
    if any(c.lower() in assigned for c in _newer_columns(ctx, cond, scope)):
        return  # WHEN MATCHED AND s.batch > t.batch ... SET batch = s.batch: a replay is not applied again
    merge = _merge_call(ctx, call.func.value, scope)
    target = source = None
    if merge is not None:
        mcall, mscope = merge
        target = _const(ctx, ctx.model.kwarg(mcall, "target_alias"), mscope) or _alias_of(
            ctx, mcall.func.value, mscope
        )
        src_node = mcall.args[0] if mcall.args else ctx.model.kwarg(mcall, "source")
        source = _const(ctx, ctx.model.kwarg(mcall, "source_alias"), mscope) or (
            _alias_of(ctx, src_node, mscope) if src_node is not None else None
        )
    names = frozenset({target.lower()}) if target else _TARGET_NAMES - {(source or "").lower()}
    for column, value in columns:
        if not column or value is None:
            continue
        name = column.rpartition(".")[2].strip("`")
        kind = _py_accumulates(ctx, value, scope, name, names)
        if kind is not None:
            _report_accumulation(ctx, ctx.model.span(value), name, kind, ctx.model.segment(value, 50), 0)


def _report_accumulation(ctx: Context, span: tuple, column: str, kind: str, shown: str, alt_line: int) -> None:
    what = {
        "adds": "adds to the value the target row already holds",
        "appends": "appends to the value the target row already holds",
        "unions": "merges the batch's elements into the ones the target row already holds",
    }[kind]
    if kind == "unions":
        note = (
            f"the MERGE update `{column} = {shown}` {what}: applying it twice gives the same set, but the "
            "result depends on what the row held before, so a batch replayed after later ones brings back "
            "elements they removed"
        )
        ctx.report(
            ACCUMULATING_MERGE.code, span, note, "warning", column=column, advice="union", alt_line=alt_line
        )
        return
    note = f"the MERGE update `{column} = {shown}` {what}"
    ctx.report(ACCUMULATING_MERGE.code, span, note, "error", column=column, alt_line=alt_line)


def _check_sql_merges(ctx: Context, call: ast.Call, scope: Any) -> None:
    if call.func.attr != "sql" or not call.args:
        return
    text = ctx.values.sql_text(call.args[0], scope)
    if text is None or "merge" not in text.text.lower():
        return
    result = _sql().analyze_statements(text.text)
    for mu in result.merge_updates:
        if mu.guarded:
            continue
        kind = _sql_accumulates(mu.value, mu.column, frozenset(mu.target_names))
        if kind is not None:
            shown = mu.value.sql(dialect="spark")
            shown = shown if len(shown) <= 50 else shown[:47] + "..."
            _report_accumulation(ctx, text.span(mu.start, mu.end), mu.column, kind, shown, text.last_line)


# ---------------------------------------------------------------------------------------- ND014 sink writes
def _sink_of(
    ctx: Context, node: ast.AST, scope: Any, sinks: dict[int, ast.Call], depth: int = 0
) -> ast.Call | None:
    if depth > 6:
        return None
    t = type(node)
    if t is ast.Call:
        return sinks.get(id(node))
    if t is ast.Name:
        value = ctx.model.single_value(node, scope)
        return _sink_of(ctx, value[0], value[1], sinks, depth + 1) if value is not None else None
    if t is ast.Attribute:
        bound = ctx.model.attr_values(node, scope)
        if bound is not None and len(bound) == 1:
            return _sink_of(ctx, bound[0][0], bound[0][1], sinks, depth + 1)
    return None


def _batch_loops(ctx: Context) -> list[tuple[tuple[int, int, int, int], str]]:
    """Loops over batches: (span of the loop, how the message names it)."""
    st = _state(ctx)
    if "loops" not in st:
        loops = []
        for node in ast.walk(ctx.model.tree):
            t = type(node)
            if t is ast.For or t is ast.AsyncFor:
                parts = [node.target, node.iter]
            elif t is ast.While:
                parts = [node.test]
            else:
                continue
            words = [
                n.id if type(n) is ast.Name else n.attr
                for p in parts
                for n in ast.walk(p)
                if type(n) in (ast.Name, ast.Attribute)
            ]
            named = next((w for w in words if _BATCH_WORD.search(w)), None)
            if named is not None:
                span = (
                    node.lineno,
                    node.col_offset,
                    node.end_lineno or node.lineno,
                    node.end_col_offset or 0,
                )
                loops.append(
                    (span, f"a loop over `{ctx.model.segment(node.iter if t is not ast.While else node.test, 40)}`")
                )
        st["loops"] = loops
    return st["loops"]


def _in_loop(ctx: Context, call: ast.Call) -> str | None:
    pos = (call.lineno, call.col_offset)
    for (line, col, eline, ecol), label in _batch_loops(ctx):
        if (line, col) <= pos <= (eline, ecol):
            return label
    return None


def _check_sink_writes(ctx: Context, batch: dict[int, BatchFn]) -> None:
    sinks = {id(c): c for c, _s in ctx.facts.sink_calls}
    for call, scope in ctx.model.calls:
        f = call.func
        if type(f) is not ast.Attribute or f.attr != "write" or not call.args:
            continue
        if ctx.model.kwarg(call, "batch_id") is not None or len(call.args) > 1:
            continue
        if any(type(a) is ast.Starred for a in call.args) or any(kw.arg is None for kw in call.keywords):
            continue
        sink = _sink_of(ctx, f.value, scope, sinks)
        if sink is None:
            continue
        bf = batch.get(id(scope))
        where = bf.where() if bf is not None else _in_loop(ctx, call)
        if where is None:
            continue
        ordered = ctx.model.kwarg(sink, "sequence_by", "sequence") is not None
        note = f"`{ctx.model.segment(call, 50)}` in {where} passes no `batch_id`"
        if not ordered:
            note += " (and the sink has no `sequence_by`: an older batch re-sent after newer ones overwrites their rows)"
        fix = None
        if bf is not None and bf.epoch:
            fix = FixSpec(
                "add-keyword",
                ctx.model.span(call),
                "unsafe",
                f"pass `batch_id={bf.epoch}`: the sink then skips a batch id it already committed for its app_id "
                "(a query restarted from a new checkpoint starts its epochs at 0 again: give it a new app_id)",
                (("name", "batch_id"), ("value", bf.epoch)),
            )
        ctx.report(
            SINK_WITHOUT_BATCH_ID.code, ctx.model.span(call), note, "warning" if ordered else "error", fix=fix
        )


# ---------------------------------------------------------------------------------------- the module hook
def check_writes(ctx: Context) -> None:
    """Find ND011-ND014 in one module (called once, after the shared flow has seen every call)."""
    st = _state(ctx)
    for call, scope in st["updates"]:
        _check_update_clause(ctx, call, scope)
    for call, scope in ctx.model.calls:
        if type(call.func) is ast.Attribute and call.func.attr == "sql":
            _check_sql_merges(ctx, call, scope)
    batch = batch_functions(ctx)
    if batch:
        by_scope = calls_by_scope(ctx)
        index: dict[int, int] = {}
        for key, bf in batch.items():
            for call in by_scope.get(key, ()):
                if type(call.func) is not ast.Attribute:
                    continue
                _check_append(ctx, call, bf.scope, bf, index)
                _check_merge(ctx, call, bf.scope, bf)
                _check_sql(ctx, call, bf.scope, bf)
    if ctx.facts.sink_calls:
        _check_sink_writes(ctx, batch)


def app_id(module: str, function: str, index: str) -> str:
    """The Delta txnAppId the ND011 fix writes: ``<module>.<function>`` (``-N`` for a function's Nth
    fixed write, so two writes of one epoch to the same table do not share an id)."""
    base = f"{module}.{function}" if module else function
    return base if index in ("", "1") else f"{base}-{index}"


_TRIGGERS = Catalogue(trigger_words=frozenset({"batch", "epoch", "merge", "upsertsink"}))

APPEND = WriteRule(
    code="ND011",
    name="append-in-foreach-batch",
    family="Non-idempotent writes",
    verb="appends without idempotence",
    summary="An append inside a Structured Streaming `foreachBatch` function (or a function taking a batch "
    'id): `.write.mode("append")`, `insertInto`, `writeTo(...).append()`, JDBC and Kafka batch writes, '
    "SQL `INSERT INTO`, with no Delta `txnAppId`/`txnVersion` and no UpsertSink.",
    description="""
Structured Streaming gives `foreachBatch` exactly-once only if the function's writes are idempotent: when a
query restarts after a failure it runs the last epoch again, with the same epoch id and the same data, and
an append writes those rows a second time (Delta's documentation warns about exactly this). Delta makes an
append idempotent with two writer options, `txnAppId` (a name for this writer) and `txnVersion` (the epoch
id): a write whose version is not above the last one committed for that app id is skipped. Reported for
appends to tables and paths (`mode("append")`, `insertInto` without `overwrite=True`,
`writeTo(...).append()`), JDBC and Kafka batch writes (they cannot skip a replay at all) and SQL
`INSERT INTO` (not `INSERT OVERWRITE` / `REPLACE WHERE`), in the function passed to `foreachBatch`, in a
function with a batch/epoch id parameter (`batch_id`, `epoch_id`, `batchId`...), and in the module's
functions they call. Not reported when the write carries both options, when the function sets the session
confs `spark.databricks.delta.write.txnAppId`/`txnVersion`, for writes through UpsertSink, or for
Cassandra (its writes are upserts by primary key).
""",
    why="A restarted query runs its last epoch again, and the append writes the same rows a second time "
    "(duplicates).",
    fix={
        "write": 'make the write skip an epoch it already committed: for Delta, add `.option("txnAppId", '
        '"<writer name>")` and `.option("txnVersion", epoch_id)` (`--fix` adds them to a Delta append in a '
        "foreachBatch function), or upsert with `foreachBatch(UpsertSink(path, keys=[...]).foreach_batch)`; "
        "for JDBC or Kafka, make the write idempotent downstream (an upsert keyed by the row's key, or records "
        "keyed by the epoch id and deduplicated).",
    },
    autofix='Safe: a Delta append (`.format("delta")` then `save`/`saveAsTable`) in a `foreachBatch` function '
    'gains `.option("txnAppId", "<module>.<function>")` and `.option("txnVersion", <epoch id>)` right after '
    "`.write`; the app id is the linted file's module path and the function's name, so it is stable and "
    "unique per writer. If the query is ever started again from a new checkpoint, its epoch ids restart "
    "at 0: change the app id then. The same fix is unsafe when the code does not name the format "
    '(`mode("append").saveAsTable(...)`): it assumes a Delta table, and another format ignores the options.',
    catalogue=_TRIGGERS,
    method_hooks={"foreachBatch": _on_foreach_batch},
    module_hooks=(check_writes,),
    invalid=(
        Invalid(
            "def write_batch(batch_df, epoch_id):\n"
            '    batch_df.write.format("delta").mode("append").saveAsTable("dw.events")\n\n'
            "stream.writeStream.foreachBatch(write_batch).start()\n",
            2,
            51,
            "write",
            "*",
            severity="error",
            fixed="def write_batch(batch_df, epoch_id):\n"
            '    batch_df.write.option("txnAppId", "example.write_batch").option("txnVersion", epoch_id)'
            '.format("delta").mode("append").saveAsTable("dw.events")\n\n'
            "stream.writeStream.foreachBatch(write_batch).start()\n",
        ),
        Invalid(
            "class Job:\n"
            "    def _sink(self, df, batch_id):\n"
            "        (df.write\n"
            '           .format("delta")\n'
            '           .mode("append")\n'
            "           .save(self.path))\n\n"
            "    def run(self, stream):\n"
            "        stream.writeStream.foreachBatch(self._sink).start()\n",
            6,
            13,
            "write",
            "*",
            severity="error",
            fixed="class Job:\n"
            "    def _sink(self, df, batch_id):\n"
            '        (df.write.option("txnAppId", "example.Job._sink").option("txnVersion", batch_id)\n'
            '           .format("delta")\n'
            '           .mode("append")\n'
            "           .save(self.path))\n\n"
            "    def run(self, stream):\n"
            "        stream.writeStream.foreachBatch(self._sink).start()\n",
        ),
        Invalid(
            "def load(df, batch_id):\n"
            '    df.write.mode("append").saveAsTable("dw.loads")\n\n'
            "stream.writeStream.foreachBatch(load).start()\n",
            2,
            29,
            "write",
            "*",
            severity="error",
            fixed="def load(df, batch_id):\n"
            '    df.write.option("txnAppId", "example.load").option("txnVersion", batch_id)'
            '.mode("append").saveAsTable("dw.loads")\n\n'
            "stream.writeStream.foreachBatch(load).start()\n",
            unsafe=True,
        ),
        Invalid(
            "def to_postgres(df, epoch_id):\n"
            '    df.write.jdbc(URL, "public.events", mode="append", properties=PROPS)\n\n'
            "events.writeStream.foreachBatch(to_postgres).start()\n",
            2,
            14,
            "write",
            "*",
            severity="error",
        ),
        Invalid(
            "def load(spark, batch_id):\n"
            '    spark.sql(f"INSERT INTO dw.loads SELECT *, {batch_id} AS b FROM staging")\n',
            2,
            17,
            "write",
            "*",
            severity="error",
        ),
    ),
    valid=(
        Valid(
            "def write_batch(batch_df, epoch_id):\n"
            '    (batch_df.write.format("delta").mode("append")\n'
            '        .option("txnAppId", "events-sink").option("txnVersion", epoch_id)\n'
            '        .saveAsTable("dw.events"))\n\n'
            "stream.writeStream.foreachBatch(write_batch).start()\n"
        ),
        Valid(
            "from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/events", keys=["event_id"])\n'
            "stream.writeStream.foreachBatch(sink.foreach_batch).start()\n"
        ),
        Valid(
            "def write_batch(batch_df, epoch_id):\n"
            '    batch_df.write.format("delta").mode("overwrite").save("/lake/latest")\n\n'
            "stream.writeStream.foreachBatch(write_batch).start()\n"
        ),
        Valid('def nightly(df):\n    df.write.mode("append").saveAsTable("dw.history")\n'),
    ),
)

ACCUMULATING_MERGE = WriteRule(
    code="ND012",
    name="accumulating-merge-update",
    family="Non-idempotent writes",
    verb="accumulates into the target's value",
    summary="A MERGE update that folds the target row's own value into the new one (`t.total + s.amount`, "
    "`t.n + 1`, `concat(t.log, ...)`, `array_append`, `array_union`), in delta-spark, deltalake or SQL "
    "`MERGE INTO` text.",
    description="""
An upsert is idempotent when the new value of a column depends only on the batch: writing the batch twice
sets the same value twice. An update that reads the target's current value and adds to it (a running
total, a counter, a log appended to) applies the batch *again* on every replay. Found in
`whenMatchedUpdate(set=...)` / `when_matched_update(updates=...)` maps (SQL strings, `F.expr`, Column
expressions, values held in variables) and in `UPDATE SET` of SQL `MERGE INTO` statements: `+ - * /`,
`concat`, `||`, `concat_ws`, `array_append`/`array_prepend`/`array_insert`/`array_concat` over the target's
own column are errors; `array_union` and `map_concat` are a warning (applying them twice gives the same
set, but the result still depends on what the row held before, so a batch replayed after later ones brings
back elements they removed). The target is recognized by the merge's target alias (`.alias("t")`,
`target_alias=`, `MERGE INTO tbl AS t`), or by an unqualified reference to the same column. Not reported
when the clause is guarded by a newer-wins condition on a column it also sets (`WHEN MATCHED AND
s.batch_id > t.batch_id THEN UPDATE SET ..., batch_id = s.batch_id`): a replay then matches nothing.
""",
    why="A replayed batch is applied again on top of its own first application (double counting).",
    fix={
        "write": "compute the new value from the batch alone, or make the whole write happen once per batch: "
        'guard the clause with a newer-wins condition on a column the update also sets (`condition="s.batch_id '
        '> t.last_batch_id"`, `set={..., "last_batch_id": "s.batch_id"}`), or write per-batch rows keyed by '
        "batch id (UpsertSink with `batch_id`) and aggregate when reading.",
        "union": "if elements may be removed by later batches, guard the clause with a newer-wins condition on "
        "a column it also sets, or rebuild the set from the batch.",
    },
    catalogue=_TRIGGERS,
    method_hooks={m: _on_update_clause for m in _UPDATE_CLAUSES},
    invalid=(
        Invalid(
            '(DeltaTable.forName(spark, "dw.totals").alias("t")\n'
            '    .merge(daily.alias("s"), "t.account = s.account")\n'
            '    .whenMatchedUpdate(set={"total": "t.total + s.amount"})\n'
            "    .whenNotMatchedInsertAll()\n"
            "    .execute())\n",
            3,
            38,
            "write",
            "total",
            severity="error",
        ),
        Invalid(
            "from pyspark.sql import functions as F\n"
            'updates = {"visits": F.col("visits") + 1, "log": F.concat("tgt.log", F.lit(";"), "src.event")}\n'
            '(target.alias("tgt").merge(src.alias("src"), "tgt.id = src.id")\n'
            "    .whenMatchedUpdate(set=updates).execute())\n",
            2,
            22,
            "write",
            "visits",
            severity="error",
        ),
        Invalid(
            'spark.sql("""\n'
            "    MERGE INTO dw.counters c USING updates u ON c.id = u.id\n"
            "    WHEN MATCHED THEN UPDATE SET c.hits = c.hits + u.hits\n"
            "    WHEN NOT MATCHED THEN INSERT *\n"
            '""")\n',
            3,
            36,
            "write",
            "hits",
            severity="error",
        ),
        Invalid(
            '(dt.merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t")\n'
            '    .when_matched_update(updates={"tags": "array_union(t.tags, s.tags)"})\n'
            "    .execute())\n",
            2,
            43,
            "write",
            "tags",
            severity="warning",
        ),
    ),
    valid=(
        Valid(
            '(target.alias("t").merge(src.alias("s"), "t.id = s.id")\n'
            '    .whenMatchedUpdate(set={"total": "s.total", "best": "greatest(t.best, s.best)"})\n'
            "    .execute())\n"
        ),
        Valid(
            '(target.alias("t").merge(src.alias("s"), "t.id = s.id")\n'
            '    .whenMatchedUpdate(condition="s.batch_id > t.batch_id",\n'
            '                       set={"total": "t.total + s.amount", "batch_id": "s.batch_id"})\n'
            "    .execute())\n"
        ),
        Valid(
            'spark.sql("""MERGE INTO t USING s ON t.id = s.id\n'
            'WHEN MATCHED THEN UPDATE SET t.total = s.subtotal + s.tax""")\n'
        ),
    ),
)

UNMARKED_MERGE = WriteRule(
    code="ND013",
    name="unmarked-merge-in-batch",
    family="Non-idempotent writes",
    verb="merges without a batch marker",
    summary="A hand-written Delta MERGE (delta-spark, deltalake or SQL `MERGE INTO`) inside a `foreachBatch` "
    "function or a function taking a batch id, with nothing recording which batches were committed.",
    description="""
A MERGE by key is idempotent when the replayed batch has the same content and every update is a plain
overwrite, so this is a warning, not an error: the write is legal but unverified. Nothing records which
epochs were committed, so a restarted query applies its last epoch again; if the replay's content differs
(a nondeterministic value, a source that changed) or an update is not a plain overwrite, the table drifts
and nobody notices. `UpsertSink` adds what the hand-written MERGE lacks: the epoch id is written as a Delta
transaction identifier in the same commit as the data, a replayed epoch is skipped, a replay whose content
differs from what was committed is refused (content fingerprint), `sequence_by` keeps older rows out, and
deletes are remembered so a replay cannot resurrect a row. Not reported when the function sets the session
confs `spark.databricks.delta.write.txnAppId` and `txnVersion` before the MERGE (delta-spark's MERGE honours
only these), or, with deltalake, commits a `Transaction` (`commit_properties=`) and reads
`transaction_version(...)` to skip.
""",
    why="A restarted query re-applies its last epoch unverified: a replay whose content changed, or an update "
    "that is not a plain overwrite, silently changes the table again.",
    fix={
        "write": "write with `foreachBatch(UpsertSink(path, keys=[...], sequence_by=...).foreach_batch)` (epoch "
        "id recorded with the data, replays skipped and verified, stale rows and deletes handled), or set "
        '`spark.conf.set("spark.databricks.delta.write.txnAppId", ...)` and `...txnVersion` to the epoch id '
        "before the MERGE.",
    },
    catalogue=_TRIGGERS,
    invalid=(
        Invalid(
            "from delta.tables import DeltaTable\n\n"
            "def upsert(batch_df, batch_id):\n"
            '    (DeltaTable.forPath(spark, "/lake/users").alias("t")\n'
            '        .merge(batch_df.alias("s"), "t.id = s.id")\n'
            "        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())\n\n"
            "users.writeStream.foreachBatch(upsert).start()\n",
            5,
            10,
            "write",
            "*",
            severity="warning",
        ),
        Invalid(
            "def merge_epoch(df, epoch_id):\n"
            '    df.createOrReplaceTempView("updates")\n'
            '    df.sparkSession.sql("MERGE INTO dw.users t USING updates s ON t.id = s.id "\n'
            '                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")\n',
            3,
            26,
            "write",
            "*",
            severity="warning",
        ),
    ),
    valid=(
        Valid(
            "from delta.tables import DeltaTable\n\n"
            "def upsert(batch_df, batch_id):\n"
            '    spark.conf.set("spark.databricks.delta.write.txnAppId", "users-upsert")\n'
            '    spark.conf.set("spark.databricks.delta.write.txnVersion", batch_id)\n'
            '    (DeltaTable.forPath(spark, "/lake/users").alias("t")\n'
            '        .merge(batch_df.alias("s"), "t.id = s.id")\n'
            "        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())\n\n"
            "users.writeStream.foreachBatch(upsert).start()\n"
        ),
        Valid(
            "import pandas as pd\n\n"
            "def enrich(batch_df, batch_id):\n"
            '    return batch_df.merge(pd.DataFrame(LOOKUP), on="code")\n'
        ),
    ),
)

SINK_WITHOUT_BATCH_ID = WriteRule(
    code="ND014",
    name="sink-write-without-batch-id",
    family="Non-idempotent writes",
    verb="writes without a batch id",
    summary="`UpsertSink(...).write(df)` inside a `foreachBatch` function, a function taking a batch id, or a "
    "loop over batches, called without `batch_id`.",
    description="""
UpsertSink's replay protection works by batch id: it records the id in the commit, skips a batch it already
committed and verifies a replay's content. Without `batch_id` every call is a fresh write: the upsert by key
still converges when a replay has the same content, but nothing is skipped or verified, and without
`sequence_by` a batch re-sent after newer ones writes its older rows over theirs (an error then; with
`sequence_by`, a warning). Loops count as batch loops when their variables or iterable are named like
batches (`batch`, `epoch`, `chunk`, `micro`).
""",
    why="Without a batch id the sink cannot recognize a replayed batch: it is merged again instead of "
    "skipped, and its content is not checked against what the first run wrote.",
    fix={
        "write": "pass the batch's id: `sink.write(df, batch_id=epoch_id)` in a foreachBatch function (or use "
        "`foreachBatch(sink.foreach_batch)`), the batch's number in a loop.",
    },
    autofix="Unsafe: in a function that receives the epoch/batch id, the call gains `batch_id=<that "
    "parameter>`. The sink then skips batch ids at or below the last one committed for its `app_id`, so a "
    "query restarted from a new checkpoint (epoch ids start at 0 again) needs a new `app_id`.",
    catalogue=_TRIGGERS,
    invalid=(
        Invalid(
            "from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/orders", keys=["order_id"])\n\n'
            "def handle(batch_df, epoch_id):\n"
            "    sink.write(batch_df)\n\n"
            "orders.writeStream.foreachBatch(handle).start()\n",
            5,
            5,
            "write",
            "*",
            severity="error",
            fixed="from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/orders", keys=["order_id"])\n\n'
            "def handle(batch_df, epoch_id):\n"
            "    sink.write(batch_df, batch_id=epoch_id)\n\n"
            "orders.writeStream.foreachBatch(handle).start()\n",
            unsafe=True,
        ),
        Invalid(
            "from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/orders", keys=["order_id"], sequence_by="updated_at")\n'
            "for batch in batches:\n"
            "    sink.write(batch)\n",
            4,
            5,
            "write",
            "*",
            severity="warning",
        ),
    ),
    valid=(
        Valid(
            "from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/orders", keys=["order_id"])\n\n'
            "def handle(batch_df, epoch_id):\n"
            "    sink.write(batch_df, batch_id=epoch_id)\n\n"
            "orders.writeStream.foreachBatch(handle).start()\n"
        ),
        Valid('from upsertsink import UpsertSink\nUpsertSink("/lake/dim", keys=["id"]).write(snapshot)\n'),
    ),
)

if TYPE_CHECKING:
    from upsertsink.lint.context import Context
