"""ND014: ``UpsertSink(...).write(df)`` in a batch function or a loop over batches without ``batch_id``."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any

from ..base.types import FixSpec
from ..model.callsites import passed
from ._writes_common import BATCH_FUNCTION_HOOKS, TRIGGER_WORDS, BatchFn, batch_functions, write_state
from .rule import Invalid, Valid, WriteRule

if TYPE_CHECKING:
    from ..flow.context import Context


_BATCH_WORD = re.compile(r"batch|epoch|chunk|micro", re.IGNORECASE)


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
    st = write_state(ctx)
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
                    (
                        span,
                        f"a loop over `{ctx.model.segment(node.iter if t is not ast.While else node.test, 40)}`",
                    )
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
        if passed(ctx.model.kwarg(call, "batch_id")) or (len(call.args) > 1 and passed(call.args[1])):
            continue  # batch_id=None: written without a marker, as when left out
        if any(type(a) is ast.Starred for a in call.args) or any(kw.arg is None for kw in call.keywords):
            continue
        sink = _sink_of(ctx, f.value, scope, sinks)
        if sink is None:
            continue
        bf = batch.get(id(scope))
        if bf is not None and bf.pipeline:
            bf = None  # a pipeline function has no batch id to pass (only a loop over batches in it counts)
        where = bf.where() if bf is not None else _in_loop(ctx, call)
        if where is None:
            continue
        ordered = passed(ctx.model.kwarg(sink, "sequence_by", "sequence"))
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
        ctx.report(RULE.code, ctx.model.span(call), note, "warning" if ordered else "error", fix=fix)


def check_sink_writes(ctx: Context) -> None:
    """Find ND014 in one module (called once, after the shared flow has seen every call)."""
    if ctx.facts.sink_calls:
        _check_sink_writes(ctx, batch_functions(ctx))


RULE = WriteRule(
    code="ND014",
    name="sink-write-without-batch-id",
    family="Non-idempotent writes",
    verb="writes without a batch id",
    summary="`UpsertSink(...).write(df)` inside a `foreachBatch` function, a function taking a batch id, or a "
    "loop over batches, called without `batch_id`.",
    description="""
UpsertSink's replay protection works by batch id: it records the id in the commit, skips a batch it already
committed and verifies a replay's content. Without `batch_id` (or with `batch_id=None`, and `sequence_by=None`
is no sequence) every call is a fresh write: the upsert by key
still converges when a replay has the same content, but nothing is skipped or verified, and without
`sequence_by` a batch re-sent after newer ones writes its older rows over theirs (an error then; with
`sequence_by`, a warning). Loops count as batch loops when their variables or iterable are named like
batches (`batch`, `epoch`, `chunk`, `micro`). A declarative pipeline's query function (`@dlt.table`...) is
not reported: it has no batch id to pass (the write rules ND011 and ND013 do look at its writes).
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
    trigger_words=TRIGGER_WORDS,
    method_hooks=BATCH_FUNCTION_HOOKS,
    module_hooks=(check_sink_writes,),
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
        Valid(
            "from pyspark import pipelines as dp\n"
            "from upsertsink import UpsertSink\n"
            'sink = UpsertSink("/lake/regions", keys=["region_id"])\n\n'
            "@dp.materialized_view\n"
            "def regions():\n"
            '    df = spark.read.table("raw.regions")\n'
            "    sink.write(df)\n"
            "    return df\n"
        ),
    ),
)
