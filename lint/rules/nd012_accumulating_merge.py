"""ND012: a MERGE update that accumulates into the target row's own value (a replay applies it again)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..model import chains
from ..values import sqlsimple
from ._writes_common import TRIGGER_WORDS, const, sql_module
from .rule import Invalid, Valid, WriteRule

if TYPE_CHECKING:
    from ..flow.context import Context


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


def _updates(ctx: Context) -> list:
    return ctx.facts.rule_state.setdefault("merge-updates", [])


def _on_update_clause(ctx: Context, call: ast.Call, scope: Any) -> None:
    _updates(ctx).append((call, scope))


def _sql_accumulates(node: Any, column: str, names: frozenset[str]) -> str | None:
    """``adds`` / ``appends`` / ``unions`` when the SQL value folds the target's own ``column`` into itself."""
    from sqlglot import exp

    col_l = column.lower()
    for ref in node.find_all(exp.Column):
        if sql_module().column_name(ref).lower() != col_l:
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


def _text_accumulates(text: str, column: str, names: frozenset[str]) -> str | None:
    """:func:`_sql_accumulates` of a SQL text. A simple one (columns, literals and comparisons:
    lint/values/sqlsimple.py) folds nothing into a column and is answered without sqlglot."""
    if sqlsimple.parse(text) is not None:
        return None
    tree = sql_module().parse_expression(text)
    return _sql_accumulates(tree, column, names) if tree is not None else None


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
    if (
        type(node) in (ast.Constant, ast.JoinedStr, ast.BinOp)
        and ctx.values.str_value(node, scope) is not None
    ):
        text = ctx.values.str_value(node, scope)
        return _text_accumulates(text.text, column, names) if text is not None else None
    for sub in ast.walk(node):
        t = type(sub)
        if t is ast.BinOp and isinstance(sub.op, _PY_ADDS):
            if any(_py_self_ref(ctx, side, scope, column, names, False) for side in (sub.left, sub.right)):
                return "adds"
        elif t is ast.Call:
            sname = ctx.model.spark_name(ctx.model.qualname(sub.func, scope))
            if sname == "expr" and sub.args:
                text = ctx.values.str_value(sub.args[0], scope)
                kind = _text_accumulates(text.text, column, names) if text is not None else None
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
            return const(ctx, step.args[0], where)
    return None


def _newer_columns(ctx: Context, cond: ast.AST | None, scope: Any) -> list[str]:
    """Columns a clause condition compares between source and target by order (newer-wins)."""
    if cond is None:
        return []
    text = ctx.values.str_value(cond, scope)
    if text is not None:
        return [a.lower() for _t, a, _u, b in sql_module().condition_guards(text.text) if a.lower() == b.lower()]
    out = []
    for cmp in _column_conjuncts(cond):
        if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) in (ast.Gt, ast.Lt):
            sides = []
            for side in (cmp.left, cmp.comparators[0]):
                if type(side) is ast.Call and side.args and type(side.args[0]) is ast.Constant:
                    sides.append(str(side.args[0].value))
            if len(sides) == 2 and sides[0] != sides[1]:
                a, b = (s.rpartition(".")[2].lower() for s in sides)
                if a == b:
                    out.append(a)
    return out


def _column_conjuncts(cond: ast.AST) -> list[ast.AST]:
    """The parts a Column condition requires: through ``&`` (never under ``|`` or ``~``)."""
    out, stack = [], [cond]
    while stack:
        n = stack.pop()
        if type(n) is ast.BinOp and type(n.op) is ast.BitAnd:
            stack.extend((n.left, n.right))
        else:
            out.append(n)
    return out


def _guarded_by_other_name(
    ctx: Context, cond: ast.AST | None, scope: Any, columns: list, target: frozenset[str]
) -> bool:
    """Does the condition compare a column of one side by order with a column of the target (an alias in
    ``target``) that the update sets to the first (``s.batch_id > t.last_batch_id`` with ``last_batch_id =
    s.batch_id``)? After the update the comparison is false for a replay of the same batch, as with one
    name on both sides; a target column set to itself (``batch_id = t.batch_id``) never advances."""
    if cond is None:
        return False
    text = ctx.values.str_value(cond, scope)
    if text is None:
        return False
    sets: dict[str, tuple[str, str]] = {}
    for column, value in columns:
        if column and value is not None:
            source = _column_value(ctx, value, scope)
            if source is not None:
                sets[column.rpartition(".")[2].strip("`").lower()] = source
    for ta, ca, tb, cb in sql_module().condition_guards(text.text):
        for (t1, c1), (t2, c2) in (((ta, ca), (tb, cb)), ((tb, cb), (ta, ca))):
            # c2 (of the target t2) is set to c1 of the other table t1
            if t1.lower() in target or (t2 and t2.lower() not in target):
                continue
            if sets.get(c2.lower()) in ((t1.lower(), c1.lower()), ("", c1.lower())):
                return True
    return False


def _column_value(ctx: Context, value: ast.AST, scope: Any) -> tuple[str, str] | None:
    """(qualifier, column) of a merge map value that is a bare column: ``"s.batch_id"`` or
    ``F.col("s.batch_id")``; None for any other value."""
    names = ctx.values.col_names(value, scope)
    if len(names) != 1 or names[0].startswith("<"):
        return None
    parts = names[0].strip().split(".")
    if len(parts) > 2 or not all(p.replace("_", "").isalnum() for p in parts):
        return None
    return (parts[0].lower(), parts[1].lower()) if len(parts) == 2 else ("", parts[0].lower())


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
        (const(ctx, k, scope) if k is not None else None, v)
        for k, v in zip(mapping.keys, mapping.values, strict=False)
    ]
    merge = _merge_call(ctx, call.func.value, scope)
    target = source = None
    if merge is not None:
        mcall, mscope = merge
        target = const(ctx, ctx.model.kwarg(mcall, "target_alias"), mscope) or _alias_of(
            ctx, mcall.func.value, mscope
        )
        src_node = mcall.args[0] if mcall.args else ctx.model.kwarg(mcall, "source")
        source = const(ctx, ctx.model.kwarg(mcall, "source_alias"), mscope) or (
            _alias_of(ctx, src_node, mscope) if src_node is not None else None
        )
    names = frozenset({target.lower()}) if target else _TARGET_NAMES - {(source or "").lower()}
    assigned = {c.rpartition(".")[2].strip("`").lower(): v for c, v in columns if c}
    for c in _newer_columns(ctx, cond, scope):
        kept = _column_value(ctx, assigned[c], scope) if assigned.get(c) is not None else None
        if c in assigned and not (kept is not None and kept[1] == c and kept[0] in names):
            return  # WHEN MATCHED AND s.batch > t.batch ... SET batch = s.batch: a replay is not applied again
    if _guarded_by_other_name(ctx, cond, scope, columns, names):
        return  # s.batch_id > t.last_batch_id ... SET last_batch_id = s.batch_id: the same guard
    for column, value in columns:
        if not column or value is None:
            continue
        name = column.rpartition(".")[2].strip("`")
        kind = _py_accumulates(ctx, value, scope, name, names)
        if kind is not None:
            _report_accumulation(ctx, ctx.model.span(value), name, kind, ctx.model.segment(value, 50), 0)


def _report_accumulation(
    ctx: Context, span: tuple, column: str, kind: str, shown: str, alt_line: int
) -> None:
    what = {
        "adds": "adds to the value the target row already holds",
        "appends": "appends to the value the target row already holds",
        "unions": "merges the batch's elements into the ones the target row already holds",
    }[kind]
    if kind == "unions":
        note = f"the MERGE update `{column} = {shown}` {what}"
        ctx.report(RULE.code, span, note, "warning", column=column, advice="union", alt_line=alt_line)
        return
    note = f"the MERGE update `{column} = {shown}` {what}"
    ctx.report(RULE.code, span, note, "error", column=column, alt_line=alt_line)


def _check_sql_merges(ctx: Context, call: ast.Call, scope: Any) -> None:
    if call.func.attr != "sql" or not call.args:
        return
    text = ctx.values.sql_text(call.args[0], scope)
    if text is None or "merge" not in text.text.lower():
        return
    result = sql_module().analyze_statements(text.text)
    for mu in result.merge_updates:
        if mu.guarded:
            continue
        kind = _sql_accumulates(mu.value, mu.column, frozenset(mu.target_names))
        if kind is not None:
            shown = mu.value.sql(dialect="spark")
            shown = shown if len(shown) <= 50 else shown[:47] + "..."
            _report_accumulation(ctx, text.span(mu.start, mu.end), mu.column, kind, shown, text.last_line)


def check_accumulating_merges(ctx: Context) -> None:
    """Find ND012 in one module (called once, after the shared flow has seen every call)."""
    for call, scope in _updates(ctx):
        _check_update_clause(ctx, call, scope)
    for call, scope in ctx.model.calls:
        if type(call.func) is ast.Attribute and call.func.attr == "sql":
            _check_sql_merges(ctx, call, scope)


RULE = WriteRule(
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
s.batch_id > t.batch_id THEN UPDATE SET ..., batch_id = s.batch_id`, or in a delta-spark or delta-rs
clause `condition="s.batch_id > t.last_batch_id"` with `last_batch_id` set to `s.batch_id`): a replay then
matches nothing. The guard must be a strict `>`/`<` comparison that the whole condition requires (joined by
`AND`, `&` for Column expressions): `s.batch_id >= t.batch_id`, or one joined by `OR` (`... OR s.force`),
lets the same batch through again, and so does a guard column the update sets to its own value
(`batch_id = t.batch_id`).

For a total that must grow with every batch, upsertsink's aggregate engine is the exactly-once
alternative: `UpsertSink(path, keys=[...], merge_engine="aggregate", aggregates={"total": "sum", "n":
"count"})` (also `UpsertSink.for_table(...)`) folds each batch in once, because the batch id is recorded in
the same commit as the new totals: a replayed batch is skipped and checked, never counted twice.
""",
    why="A replayed batch is applied again on top of its own first application (double counting).",
    why_in={
        "union": "Applying it twice gives the same set, but the result depends on what the row held before, "
        "so a batch replayed after later ones brings back elements they removed.",
    },
    fix={
        "write": 'write with `UpsertSink(path, keys=[...], merge_engine="aggregate", aggregates={"total": '
        '"sum"})` and a `batch_id` (each batch folded in exactly once: the batch id is committed with the '
        "totals), or compute the new value from the batch alone, or guard the clause with a newer-wins "
        'condition on a column the update also sets (`condition="s.batch_id > t.last_batch_id"`, '
        '`set={..., "last_batch_id": "s.batch_id"}`).',
        "union": "if elements may be removed by later batches, guard the clause with a newer-wins condition on "
        "a column it also sets, or rebuild the set from the batch.",
    },
    trigger_words=TRIGGER_WORDS,
    method_hooks={m: _on_update_clause for m in _UPDATE_CLAUSES},
    module_hooks=(check_accumulating_merges,),
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
        Valid(  # the fix this rule advises: the guard compares two names, the update sets the target's one
            "from pyspark.sql import functions as F\n"
            '(target.alias("t").merge(src.alias("s"), "t.id = s.id")\n'
            '    .whenMatchedUpdate(condition="s.batch_id > t.last_batch_id",\n'
            '                       set={"total": "t.total + s.amount", "last_batch_id": F.col("s.batch_id")})\n'
            "    .execute())\n"
        ),
        Valid(
            'spark.sql("""MERGE INTO t USING s ON t.id = s.id\n'
            'WHEN MATCHED THEN UPDATE SET t.total = s.subtotal + s.tax""")\n'
        ),
    ),
)
