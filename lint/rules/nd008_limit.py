"""ND008: ``limit(n)`` without an ordering before it."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from upsertsink.lint import chains
from upsertsink.lint.rules.base import Catalogue, Invalid, Rule, Valid

if TYPE_CHECKING:
    from upsertsink.lint.context import Context


def _limit_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``limit(n)`` without an ordering before it (``limit(0)`` selects nothing and is exact)."""
    if not call.args or chains.looked_only(ctx.model, call):
        return
    first = call.args[0]
    if type(first) is ast.Constant and first.value == 0:
        return
    ordered = chains.ordering(ctx.model, call.func.value, scope)
    if ordered is not None:
        order_call, order_scope = ordered
        # orderBy(F.rand()).limit(n) is a random sample: the ordering's sources decide the rows
        keys = ast.Tuple(elts=list(order_call.args), ctx=ast.Load())
        # (whether any source reaches the ordering is asked once every fact and key is known)
        ctx.facts.add_row_effect("limit", order_scope, expr=keys)
        return
    own = ctx.model.source(
        RULE.code, call, what=f"{call.func.attr}() without orderBy", span=ctx.model.method_span(call)
    )
    ctx.facts.add_row_effect("limit", scope, own=own)


RULE = Rule(
    code="ND008",
    name="limit-without-order",
    verb="keeps an arbitrary set of rows",
    summary="`limit(n)` (or SQL `LIMIT n`) without an ordering before it.",
    description="""
Without `orderBy`, `limit(n)` returns whichever n rows the first tasks produce. Limits that only feed an
action that looks at the data (`show()`, `collect()`, `toPandas()`, `count()`, `display(...)`...) are not
reported, nor is `limit(0)` (it selects nothing, e.g. to take a schema). The
ordering is searched along the method chain and through one variable (`ordered = df.orderBy(...)`;
`ordered.limit(10)`).
""",
    why="A replay can write a different subset of rows.",
    method_hooks={"limit": _limit_hook},
    catalogue=Catalogue(sql_clauses=frozenset({"limit"})),
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
    ),
    valid=(
        Valid("batch = df.orderBy('id').limit(1000)\n", keys=("id",)),
        Valid("df.limit(20).show()\nprint(df.limit(5).collect())\n", keys=("id",)),
        Valid("empty = df.limit(0)\nempty.write.saveAsTable('schema_only')\n", keys=("id",)),
    ),
)
