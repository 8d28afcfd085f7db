"""ND011: an append in a batch function with no Delta transaction identifiers (a replayed epoch appends again)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..base.structs import struct
from ..base.types import FixSpec
from ..values.paths import table_name
from ._writes_common import (
    BATCH_FUNCTION_HOOKS,
    TRIGGER_WORDS,
    BatchFn,
    advice,
    batch_calls,
    batch_sql_statements,
    const,
    txn_marked,
)
from .rule import Invalid, Valid, WriteRule

if TYPE_CHECKING:
    from ..flow.context import Context


_TXN_OPTIONS = frozenset({"txnappid", "txnversion"})
# Sinks whose "append" is an upsert by the table's primary key: a replayed epoch overwrites itself.
_UPSERTING_FORMATS = frozenset({"org.apache.spark.sql.cassandra", "cassandra"})
_TERMINALS = frozenset({"save", "saveAsTable", "insertInto", "jdbc", "parquet", "csv", "json", "orc", "text"})


@struct
class _Writer:
    terminal: str
    mode: str | None = None
    fmt: str | None = None
    options: frozenset[str] = frozenset()
    write_node: ast.AST | None = None  # the ``x.write`` attribute (or ``writeTo(...)`` call)
    through_name: bool = False  # the chain continues through a variable
    v2: bool = False
    target: str | None = None


def _writer(ctx: Context, call: ast.Call, scope: Any) -> _Writer | None:
    """What a terminal writer call (``save``, ``saveAsTable``...) does, read back along its chain."""
    m = call.func.attr
    w = _Writer(m)
    options: set[str] = set()
    for kw in call.keywords:
        if kw.arg == "mode":
            w.mode = (const(ctx, kw.value, scope) or "").lower() or None
        elif kw.arg == "format":
            w.fmt = (const(ctx, kw.value, scope) or "").lower() or None
        elif kw.arg in ("name", "tableName", "path", "table"):
            w.target = table_name(ctx.values, kw.value, scope)
        elif kw.arg:
            options.add(kw.arg.lower())
    if call.args and m != "jdbc":
        w.target = w.target or table_name(ctx.values, call.args[0], scope)
    elif m == "jdbc" and len(call.args) > 1:
        w.target = table_name(ctx.values, call.args[1], scope)
    node: ast.AST = call.func.value
    for _ in range(40):
        t = type(node)
        if t is ast.Call and type(node.func) is ast.Attribute:
            a = node.func.attr
            if a == "mode" and node.args:
                w.mode = w.mode or (const(ctx, node.args[0], scope) or "").lower() or None
            elif a == "format" and node.args:
                w.fmt = w.fmt or (const(ctx, node.args[0], scope) or "").lower() or None
            elif a == "option" and node.args:
                key = const(ctx, node.args[0], scope)
                if key:
                    options.add(key.lower())
                    if key.lower() in ("path", "dbtable", "topic") and len(node.args) > 1:
                        w.target = w.target or table_name(ctx.values, node.args[1], scope)
            elif a == "options":
                options.update(kw.arg.lower() for kw in node.keywords if kw.arg)
                # options({...}) and options(**txn): the keys of a dict literal or of the one a name holds
                for arg in [*node.args, *(kw.value for kw in node.keywords if kw.arg is None)]:
                    d = ctx.model.resolve_dict(arg, scope)
                    if type(d) is ast.Dict:
                        names = (const(ctx, k, scope) for k in d.keys if k is not None)
                        options.update(k.lower() for k in names if k)
            elif a == "writeTo":
                w.v2, w.write_node = True, node
                w.target = w.target or (table_name(ctx.values, node.args[0], scope) if node.args else None)
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
    if _TXN_OPTIONS <= w.options or txn_marked(ctx, bf, call):
        return
    where = f" `{w.target}`" if w.target else ""
    note = f"`{m}()` makes {_kind(w)}{' to' if where else ''}{where} in {bf.where()}"
    if not bf.pipeline:  # a pipeline function has no epoch id to give the options
        note += " with no txnAppId/txnVersion writer options and no UpsertSink"
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
    ctx.report(RULE.code, ctx.model.method_span(call), note, "error", advice=advice(bf), fix=fix)


def _check_sql_insert(ctx: Context, call: ast.Call, bf: BatchFn) -> None:
    for text, st in batch_sql_statements(ctx, call, bf):
        if st.kind == "insert" and st.append:
            table = f" `{st.table}`" if st.table else ""
            note = f"SQL `INSERT INTO`{table} in {bf.where()} appends"
            if not bf.pipeline:
                note += " with no txnAppId/txnVersion"
            span = text.span(st.start, st.end)
            ctx.report(RULE.code, span, note, "error", advice=advice(bf), alt_line=text.last_line)


def check_appends(ctx: Context) -> None:
    """Find ND011 in one module (called once, after the shared flow has seen every call)."""
    index: dict[int, int] = {}
    for bf, call in batch_calls(ctx):
        _check_append(ctx, call, bf.scope, bf, index)
        _check_sql_insert(ctx, call, bf)


def app_id(module: str, function: str, index: str) -> str:
    """The Delta txnAppId the ND011 fix writes: ``<module>.<function>`` (``-N`` for a function's Nth
    fixed write, so two writes of one epoch to the same table do not share an id)."""
    base = f"{module}.{function}" if module else function
    return base if index in ("", "1") else f"{base}-{index}"


RULE = WriteRule(
    code="ND011",
    name="append-in-foreach-batch",
    family="Non-idempotent writes",
    verb="appends without idempotence",
    summary="An append inside a Structured Streaming `foreachBatch` function (or a function taking a batch "
    'id, or a declarative pipeline\'s query function): `.write.mode("append")`, `insertInto`, '
    "`writeTo(...).append()`, JDBC and Kafka batch writes, SQL `INSERT INTO`, with no Delta "
    "`txnAppId`/`txnVersion` and no UpsertSink.",
    description="""
Structured Streaming gives `foreachBatch` exactly-once only if the function's writes are idempotent: when a
query restarts after a failure it runs the last epoch again, with the same epoch id and the same data, and
an append writes those rows a second time (Delta's documentation warns about exactly this). Delta makes an
append idempotent with two writer options, `txnAppId` (a name for this writer) and `txnVersion` (the epoch
id): a write whose version is not above the last one committed for that app id is skipped. Reported for
appends to tables and paths (`mode("append")`, `insertInto` without `overwrite=True`,
`writeTo(...).append()`), JDBC and Kafka batch writes (they cannot skip a replay at all) and SQL
`INSERT INTO` (not `INSERT OVERWRITE` / `REPLACE WHERE`), in the function passed to `foreachBatch`, in a
function with a batch/epoch id parameter (`batch_id`, `epoch_id`, `batchId`...), in a declarative
pipeline's query function (`@dlt.table`, `@dp.table`, `@dp.materialized_view`, `@dp.append_flow`, views:
the pipeline runs it again on every update, and there is no epoch id to give the options), and in the
module's functions they call. Not reported when the write carries both options, when the function sets the
session confs `spark.databricks.delta.write.txnAppId`/`txnVersion`, for writes through UpsertSink, or for
Cassandra (its writes are upserts by primary key).
""",
    why="A restarted query runs its last epoch again, and the append writes the same rows a second time "
    "(duplicates).",
    why_in={
        "pipeline": "Every update of the pipeline (a full refresh too) appends the rows again (duplicates): "
        "there is no epoch id that would let the write skip a run already written.",
    },
    fix={
        "write": 'make the write skip an epoch it already committed: for Delta, add `.option("txnAppId", '
        '"<writer name>")` and `.option("txnVersion", epoch_id)` (`--fix` adds them to a Delta append in a '
        "foreachBatch function), or upsert with `foreachBatch(UpsertSink(path, keys=[...]).foreach_batch)`; "
        "for JDBC or Kafka, make the write idempotent downstream (an upsert keyed by the row's key, or records "
        "keyed by the epoch id and deduplicated).",
        "pipeline": "do not write from a pipeline's query function: make the appended rows a flow of the "
        "pipeline (a function decorated with `@dp.append_flow(target=...)` / `@dlt.append_flow` returning "
        "them, into a streaming table: the pipeline's checkpoint processes each input once), or append "
        "from a job outside the pipeline.",
    },
    autofix='Safe: a Delta append (`.format("delta")` then `save`/`saveAsTable`) in a `foreachBatch` function '
    'gains `.option("txnAppId", "<module>.<function>")` and `.option("txnVersion", <epoch id>)` right after '
    "`.write`; the app id is the linted file's module path and the function's name, so it is stable and "
    "unique per writer. If the query is ever started again from a new checkpoint, its epoch ids restart "
    "at 0: change the app id then. The same fix is unsafe when the code does not name the format "
    '(`mode("append").saveAsTable(...)`): it assumes a Delta table, and another format ignores the options.',
    trigger_words=TRIGGER_WORDS,
    method_hooks=BATCH_FUNCTION_HOOKS,
    module_hooks=(check_appends,),
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
            "import dlt\n\n"
            "@dlt.table\n"
            "def daily_totals():\n"
            '    totals = spark.read.table("raw.sales").groupBy("day").sum("amount")\n'
            '    totals.write.mode("append").saveAsTable("audit.totals_log")\n'
            "    return totals\n",
            6,
            33,
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
