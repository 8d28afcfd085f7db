"""ND013: a hand-written Delta MERGE in a batch function with no batch marker (a replay is not recognized)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..model import chains
from ._writes_common import (
    BATCH_FUNCTION_HOOKS,
    TRIGGER_WORDS,
    BatchFn,
    advice,
    batch_calls,
    batch_sql_statements,
    calls_by_scope,
    txn_marked,
)
from .rule import Invalid, Valid, WriteRule

if TYPE_CHECKING:
    from ..flow.context import Context


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
    if txn_marked(ctx, bf, call) or _deltalake_marked(ctx, call, bf):
        return
    note = f"a hand-written Delta MERGE in {bf.where()} records no batch marker"
    ctx.report(RULE.code, ctx.model.method_span(call), note, "warning", advice=advice(bf))


def _check_sql_merge(ctx: Context, call: ast.Call, bf: BatchFn) -> None:
    for text, st in batch_sql_statements(ctx, call, bf):
        if st.kind == "merge":
            table = f" `{st.table}`" if st.table else ""
            note = f"a hand-written SQL `MERGE INTO`{table} in {bf.where()} records no batch marker"
            span = text.span(st.start, st.end)
            ctx.report(RULE.code, span, note, "warning", advice=advice(bf), alt_line=text.last_line)


def check_unmarked_merges(ctx: Context) -> None:
    """Find ND013 in one module (called once, after the shared flow has seen every call)."""
    for bf, call in batch_calls(ctx):
        _check_merge(ctx, call, bf.scope, bf)
        _check_sql_merge(ctx, call, bf)


RULE = WriteRule(
    code="ND013",
    name="unmarked-merge-in-batch",
    family="Non-idempotent writes",
    verb="merges without a batch marker",
    summary="A hand-written Delta MERGE (delta-spark, deltalake or SQL `MERGE INTO`) inside a `foreachBatch` "
    "function, a function taking a batch id or a declarative pipeline's query function, with nothing "
    "recording which batches were committed.",
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
`transaction_version(...)` to skip. In a declarative pipeline's query function (`@dlt.table`,
`@dp.materialized_view`...) the MERGE is applied again on every update of the pipeline; a CDC flow
(`create_auto_cdc_flow`) is the pipeline's own way to upsert.
""",
    why="A restarted query re-applies its last epoch unverified: a replay whose content changed, or an update "
    "that is not a plain overwrite, silently changes the table again.",
    why_in={
        "pipeline": "Every update of the pipeline (a full refresh too) applies the MERGE again, unverified: "
        "a source that changed, or an update that is not a plain overwrite, silently changes the table "
        "again.",
    },
    fix={
        "write": "write with `foreachBatch(UpsertSink(path, keys=[...], sequence_by=...).foreach_batch)` (epoch "
        "id recorded with the data, replays skipped and verified, stale rows and deletes handled), or set "
        '`spark.conf.set("spark.databricks.delta.write.txnAppId", ...)` and `...txnVersion` to the epoch id '
        "before the MERGE.",
        "pipeline": "let the pipeline apply the changes: a streaming table fed by "
        "`dp.create_auto_cdc_flow(target=..., source=..., keys=[...], sequence_by=...)` "
        "(`dlt.create_auto_cdc_flow` / `dlt.apply_changes` on Databricks), or run the MERGE in a job outside "
        "the pipeline, with `UpsertSink`.",
    },
    trigger_words=TRIGGER_WORDS,
    method_hooks=BATCH_FUNCTION_HOOKS,
    module_hooks=(check_unmarked_merges,),
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
