"""ND007: ``dropDuplicates(subset)`` keeps an arbitrary row of each group."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..base.spark_api import COLUMN_KEEPING, PASS_THROUGH
from ..flow.facts import norm
from ..model import chains
from .rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from ..flow.context import Context
    from ..model.scopes import Scope


def _selects_only(ctx: Context, node: ast.AST, scope: Scope, columns: list[str]) -> bool:
    """Does the DataFrame expression ``node`` hold only ``columns`` (its nearest select lists no other)?"""
    wanted = {norm(c) for c in columns}
    for step, where in chains.down_chain(ctx.model, node, scope):
        if type(step) is not ast.Call or type(step.func) is not ast.Attribute:
            return False
        m = step.func.attr
        if m in ("select", "toDF") and step.args:
            names = [c for a in step.args for c in (ctx.values.const_strings(a, where) or ["<expr>"])]
            return bool(names) and {norm(c) for c in names} <= wanted
        if m not in PASS_THROUGH and m not in COLUMN_KEEPING:
            return False
    return False


def _own_columns(subset: ast.AST, frame: ast.AST) -> bool:
    """Is the subset the deduplicated frame's own column list (``src.dropDuplicates(src.columns)``)?"""
    if type(subset) is ast.Starred:
        subset = subset.value
    return (
        type(subset) is ast.Attribute
        and subset.attr == "columns"
        and type(subset.value) is ast.Name
        and type(frame) is ast.Name
        and subset.value.id == frame.id
    )


def _dedup_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``dropDuplicates(subset)``: an arbitrary row of each group survives (pandas ``keep=`` is exact)."""
    subset_node = call.args[0] if call.args else ctx.model.kwarg(call, "subset")
    if (
        subset_node is None
        or ctx.model.kwarg(call, "keep") is not None
        or chains.looked_only(ctx.model, call)
    ):
        return
    if _own_columns(subset_node, call.func.value):  # src.dropDuplicates(src.columns): every column
        return
    subset = ctx.values.const_strings(subset_node, scope)
    if subset is not None and _selects_only(ctx, call.func.value, scope, subset):
        return  # every selected column is in the subset: only exact duplicates are removed
    what = f"{call.func.attr}() with a subset"
    own = ctx.model.source(RULE.code, call, what=what, span=ctx.model.method_span(call))
    ctx.facts.add_row_effect("dedup", scope, own=own, subset=subset or [])


RULE = Rule(
    code="ND007",
    name="drop-duplicates-subset",
    verb="keeps an arbitrary row of each duplicate group",
    summary="`dropDuplicates(subset)` / `drop_duplicates(subset)`: which of the duplicates survives is "
    "arbitrary.",
    description="""
With a subset, Spark keeps one row per distinct subset value, and which one depends on the order rows reach
the aggregation (`dropDuplicatesWithinWatermark(subset)` on a stream alike). When the subset leaves out a key column, a replay can write a different set of keys: an
error reaching that key. When the subset holds every key (deduplicating by exactly the written key set), the
keys are right and only the surviving row's *values* are order-dependent: a warning (`column_name: "*"`). A
key computed from subset columns alone (`F.sha2(F.col("order_id").cast("string"), 256)` after a dedup by
`order_id`) counts as held, also when a helper computes it (`hash_key("order_id")`, of this file or
imported from another, or `add_key(df, "order_id")` whose every call names the same column).
With no known keys, a sequence column outside the subset is reported as an error, else a warning.
`dropDuplicates()` without a subset, a subset that holds every selected column
(`df.select("a", "b").dropDuplicates(["a", "b"])`) and the frame's own column list
(`src.dropDuplicates(src.columns)`) remove exact duplicates only and are deterministic.
pandas' `drop_duplicates(..., keep=...)` is deterministic for a deterministic input order.
""",
    why="A replay can keep a different row of each group.",
    method_hooks={
        "dropDuplicates": _dedup_hook,
        "drop_duplicates": _dedup_hook,
        "dropDuplicatesWithinWatermark": _dedup_hook,
    },
    fix={
        "rows": "pick the surviving row explicitly: `row_number()` over `partitionBy(keys).orderBy(sequence "
        "desc, tie_breaker)` and keep `rn = 1` (or let UpsertSink's sequence_by resolve duplicates).",
        "column": "pick the surviving row explicitly with a tie-free ordering.",
    },
    invalid=(
        Invalid(
            "from upsertsink import UpsertSink\n"
            "clean = df.dropDuplicates(['order_id'])\n"
            "UpsertSink('/t', keys=['order_id', 'line_no'], sequence_by='version').write(clean)\n",
            2,
            12,
            "key",
            "line_no",
        ),
        Invalid(
            "from upsertsink import UpsertSink\n"
            "clean = df.dropDuplicates(['id'])\n"
            "UpsertSink('/t', keys=['id'], sequence_by='version').write(clean)\n",
            2,
            12,
            "column",
            "*",
        ),
        Invalid("clean = pdf.drop_duplicates(subset=['id', 'day'])\n", 1, 13, "column", "*"),
    ),
    valid=(
        Valid("clean = df.dropDuplicates()\n", keys=("id",)),
        Valid(
            "pairs = df.select('id', 'tag').dropDuplicates(['id', 'tag'])\n"
            "pairs.write.saveAsTable('id_tags')\n",
            keys=("id",),
        ),
        Valid("clean = pdf.drop_duplicates(subset=['id'], keep='last')\n", keys=("id",)),
    ),
)
