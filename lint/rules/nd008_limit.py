"""ND008: ``limit(n)`` without an ordering before it (pandas' ``head(n)`` / ``iloc[:n]`` alike)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..base.spark_api import PANDAS_FRAMES
from ..model import chains
from .rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from ..flow.context import Context


def _limit_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``limit(n)`` without an ordering before it (``limit(0)`` selects nothing and is exact)."""
    if not call.args or chains.looked_only(ctx.model, call):
        return
    first = call.args[0]
    if type(first) is ast.Constant and first.value == 0:
        return
    _choose(ctx, call.func.value, scope, f"{call.func.attr}() without orderBy", ctx.model.method_span(call), True)


def _head_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """pandas' ``head(n)`` / ``tail(n)`` on a frame read in no order, also of a column subset
    (``pdf[cols].head()``); Spark's ``head(n)`` and ``tail(n)`` are actions that only look."""
    first = call.args[0] if call.args else ctx.model.kwarg(call, "n")
    if chains.looked_only(ctx.model, call) or (type(first) is ast.Constant and first.value == 0):
        return
    frame = _columns_of(call.func.value)
    if _pandas(ctx, frame, scope):
        what = f"{call.func.attr}() without sort_values"
        _choose(ctx, frame, scope, what, ctx.model.method_span(call))


def _columns_of(frame: ast.AST) -> ast.AST:
    """The frame a column selection (``pdf[cols]``, ``pdf[["a", "b"]]``, ``pdf["a"]``) is taken from: the
    selection keeps every row, in the frame's order."""
    while type(frame) is ast.Subscript and type(frame.slice) not in (ast.Slice, ast.Tuple):
        frame = frame.value
    return frame


def _iloc_hook(ctx: Context, sub: ast.Subscript, scope: Any) -> None:
    """pandas' ``iloc[:n]`` (the first n rows) on a frame read in no order."""
    sl = sub.slice.elts[0] if type(sub.slice) is ast.Tuple and sub.slice.elts else sub.slice
    if type(sl) is not ast.Slice or sl.upper is None or sl.step is not None:
        return
    if sl.lower is not None and not (type(sl.lower) is ast.Constant and sl.lower.value == 0):
        return
    frame = sub.value.value  # type: ignore[attr-defined]
    if _pandas(ctx, frame, scope):
        _, _, line, end = ctx.model.span(sub.value)
        span = (line, end - len("iloc"), *ctx.model.span(sub)[2:])
        _choose(ctx, frame, scope, "iloc[:n] without sort_values", span)


def _pandas(ctx: Context, frame: ast.AST, scope: Any) -> bool:
    """Is ``frame`` a pandas DataFrame (``toPandas()``, ``to_pandas()``, ``pd.read_*``, ``pd.DataFrame``)?"""
    for step, where in chains.down_chain(ctx.model, frame, scope):
        if type(step) is ast.Call and type(step.func) is ast.Attribute and step.func.attr in PANDAS_FRAMES:
            q = ctx.model.qualname(step.func, where)
            return q is None or q.startswith(("pandas.", "pyspark.pandas."))  # pandas-on-Spark: the same
        if type(step) is ast.Call and type(step.func) is ast.Name and step.func.id in PANDAS_FRAMES:
            return chains.pandas_name(ctx.model, step.func, where)  # from pandas import DataFrame
    return False


def _choose(
    ctx: Context, frame: ast.AST, scope: Any, what: str, span: tuple[int, int, int, int], spark: bool = False
) -> None:
    """The first rows of ``frame`` are kept: exact after an ordering, else an arbitrary set. A Spark
    ordering is lost past a shuffle; pandas keeps its rows' order through ``join``, ``agg``..."""
    ordered = chains.ordering(ctx.model, frame, scope, shuffles=spark)
    if ordered is not None:
        order_call, order_scope = ordered
        # orderBy(F.rand()).limit(n) is a random sample: the ordering's sources decide the rows
        keys = ast.Tuple(elts=list(order_call.args), ctx=ast.Load())
        # (whether any source reaches the ordering is asked once every fact and key is known)
        ctx.facts.add_row_effect("limit", order_scope, expr=keys)
        return
    ctx.facts.add_row_effect("limit", scope, own=ctx.model.source(RULE.code, frame, what=what, span=span))


RULE = Rule(
    code="ND008",
    name="limit-without-order",
    verb="keeps an arbitrary set of rows",
    summary="`limit(n)` (or SQL `LIMIT n`) without an ordering before it.",
    description="""
Without `orderBy`, `limit(n)` returns whichever n rows the first tasks produce. Limits that only feed an
action that looks at the data (`show()`, `collect()`, `toPandas()`, `count()`, `display(...)`...) are not
reported, also through a grouped aggregation (`df.limit(10).groupBy("k").count().show()`), nor is
`limit(0)` (it selects nothing, e.g. to take a schema). The
ordering is searched along the method chain and through one variable (`ordered = df.orderBy(...)`;
`ordered.limit(10)`), never past a shuffle (`groupBy(...).agg(...)`, `repartition`, `distinct`, `join`...:
an ordering below one is lost); `sortWithinPartitions` orders each partition only and is no ordering. pandas' `head(n)`, `tail(n)` and `iloc[:n]` choose rows the same way on a frame known to
be pandas (`toPandas()`, `to_pandas()`, `pd.read_*`, `pd.DataFrame(...)`, `DataFrame(...)` imported from
pandas) or pandas-on-Spark (`ps.read_table(...)` and the other `pyspark.pandas` readers, `df.pandas_api()`:
its frames are Spark's, read in no order), also after a column selection (`pdf[cols].head()`), unless `sort_values`/`sort_index` comes first;
Spark's `head(n)` and `tail(n)` are actions that only look.
""",
    why="A replay can write a different subset of rows.",
    method_hooks={"limit": _limit_hook, "head": _head_hook, "tail": _head_hook},
    subscript_hooks={"iloc": _iloc_hook},
    fix={
        "rows": "order before limiting with a tie-free ordering: `df.orderBy('id').limit(n)`.",
        "column": "order before limiting with a tie-free ordering.",
    },
    invalid=(
        Invalid(
            "from upsertsink import UpsertSink\nbatch = df.limit(1000)\n"
            "UpsertSink('/t', ['id']).write(batch)\n",
            2,
            12,
            "key",
            "id",
        ),
        Invalid("top = spark.sql('SELECT id, v FROM t LIMIT 10')\n", 1, 38, "key", "id", keys=("id",)),
        Invalid(
            "import pandas as pd\nfrom deltalake import write_deltalake\n"
            "pdf = pd.read_parquet('/lake/orders')\n"
            "write_deltalake('/lake/orders_sample', pdf.head(500))\n",
            4,
            44,
            "column",
            "*",
        ),
        Invalid(
            "orders = dt.to_pandas()\nfirst = orders.iloc[:200]\nwrite_deltalake('/lake/first', first)\n",
            2,
            16,
            "column",
            "*",
        ),
    ),
    valid=(
        Valid("batch = df.orderBy('id').limit(1000)\n", keys=("id",)),
        Valid("df.limit(20).show()\nprint(df.limit(5).collect())\n", keys=("id",)),
        Valid("empty = df.limit(0)\nempty.write.saveAsTable('schema_only')\n", keys=("id",)),
        Valid(
            "pdf = dt.to_pandas()\nfirst = pdf.sort_values(['id']).head(500)\n"
            "write_deltalake('/lake/first', first)\npdf.head()\n"
        ),
        Valid("rows = spark.table('t').head(5)\nspark.createDataFrame(rows).write.saveAsTable('t5')\n"),
    ),
)
