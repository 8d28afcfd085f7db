"""Issue #47, item 5: the linter knows the sink's merge engines. A partial-update sink's ``sequence_groups``
names sequence columns (a nondeterministic value in one is an error, as in ``sequence_by``); ND012 names
the aggregate engine as the exactly-once way to accumulate."""

from __future__ import annotations

from lint_helpers import lint_code
from upsertsink.lint.rules import RULES


def test_the_keys_of_sequence_groups_are_sequence_columns() -> None:
    findings = lint_code(
        """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        GROUPS = {"pay_seq": ["paid_at", "amount"], "addr_seq": ["street", "city"]}
        sink = UpsertSink("/lake/payments", keys=["payment_id"], merge_engine="partial_update",
                          sequence_groups=GROUPS)
        out = (df.withColumn("pay_seq", F.current_timestamp())
                 .withColumn("addr_seq", F.col("address_version"))
                 .withColumn("loaded_at", F.current_timestamp()))
        sink.write(out, batch_id=7)
        """
    )
    assert [(f.rule, f.severity, f.target, f.column_name) for f in findings] == [
        ("ND001", "error", "sequence", "pay_seq"),
        ("ND001", "warning", "column", "loaded_at"),
    ]


def test_sequence_groups_of_a_sink_for_a_named_table() -> None:
    [f] = lint_code(
        """
        import uuid
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        sink = UpsertSink.for_table("silver.customers", ["customer_id"], merge_engine="partial_update",
                                    sequence_groups={"contact_seq": ["email", "phone"]})
        sink.write(df.withColumn("contact_seq", F.lit(str(uuid.uuid4()))), batch_id=3)
        """
    )
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND003", "error", "sequence", "contact_seq")


def test_an_accumulating_merge_is_told_about_the_aggregate_engine() -> None:
    [f] = lint_code(
        """
        (DeltaTable.forName(spark, "dw.totals").alias("t")
            .merge(daily.alias("s"), "t.account = s.account")
            .whenMatchedUpdate(set={"total": "t.total + s.amount"})
            .execute())
        """
    )
    assert f.rule == "ND012"
    assert 'UpsertSink(path, keys=[...], merge_engine="aggregate", aggregates={"total": "sum"})' in f.message
    explained = RULES["ND012"].explain()
    assert 'merge_engine="aggregate"' in explained and "exactly-once" in explained
