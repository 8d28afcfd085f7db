"""The non-idempotent write rules (ND011-ND014) beyond their own examples: how batch functions are found,
which writes append, what counts as a marker, what accumulates, and the seeded-random split (ND002/ND004)."""

from __future__ import annotations

from lint_helpers import lint_code, summary


def rules(code: str, keys: tuple[str, ...] = ()) -> list[tuple[str, int, str]]:
    """(rule, line, severity) per finding."""
    return [(f.rule, f.line, f.severity) for f in lint_code(code, keys=keys)]


def test_functions_passed_through_partial_lambda_and_methods_are_batch_functions() -> None:
    code = """
        import functools

        def write(cfg, df, epoch):
            df.write.format("delta").mode("append").saveAsTable(cfg.table)

        class Job:
            def sink(self, df, epoch_id):
                df.write.mode("append").save("/lake/x")

            def start(self, stream):
                stream.writeStream.foreachBatch(self.sink).start()

        stream.writeStream.foreachBatch(functools.partial(write, CFG)).start()
        stream.writeStream.foreachBatch(lambda df, eid: df.write.mode("append").saveAsTable("t")).start()
    """
    found = lint_code(code)
    assert [(f.rule, f.line) for f in found] == [("ND011", 5), ("ND011", 9), ("ND011", 15)]
    by_line = {f.line: f for f in found}
    # partial(write, CFG): Spark passes (df, epoch) after the bound argument, so `epoch` is the epoch id
    assert by_line[5].fix is not None and 'txnVersion", epoch)' in by_line[5].fix["message"]
    # no .format(...): Delta is an assumption, so the fix is unsafe and says so
    assert by_line[9].fix is not None and by_line[9].fix["applicability"] == "unsafe"
    assert "assumes the table is a Delta table" in by_line[9].fix["message"]
    assert by_line[15].fix is None  # a lambda has no name to derive an app id from
    assert "the foreachBatch function `Job.sink`" in by_line[9].message


def test_helpers_called_from_a_batch_function_are_checked_too() -> None:
    code = """
        def save(df, version):
            df.write.format("delta").mode("append").saveAsTable("dw.audit")

        def handle(batch_df, epoch_id):
            save(batch_df, epoch_id)

        events.writeStream.foreachBatch(handle).start()
    """
    [f] = lint_code(code)
    assert (f.rule, f.line, f.severity) == ("ND011", 3, "error")
    assert "`save`, called from the batch function `handle`" in f.message
    assert f.fix is None  # only the function Spark calls gets the epoch-id fix


def test_methods_called_as_self_m_from_a_batch_method_are_checked_too() -> None:
    code = """
        from delta.tables import DeltaTable

        class Job:
            def merge_totals(self, df):
                (DeltaTable.forName(self.spark, "gold.totals").alias("t")
                    .merge(df.alias("s"), "t.id = s.id")
                    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

            def audit(self, df, version):
                df.write.format("delta").mode("append").saveAsTable("dw.audit")

            def process(self, batch_df, epoch_id):
                self.merge_totals(batch_df)
                self.audit(batch_df, epoch_id)

            def run(self, stream):
                stream.writeStream.foreachBatch(self.process).start()
    """
    found = lint_code(code)
    assert [(f.rule, f.line, f.severity) for f in found] == [("ND013", 7, "warning"), ("ND011", 11, "error")]
    assert "`Job.merge_totals`, called from the batch function `Job.process`" in found[0].message
    assert "`Job.audit`, called from the batch function `Job.process`" in found[1].message


def test_which_writes_append() -> None:
    code = """
        def handle(df, batch_id):
            df.write.insertInto("dw.a")
            df.write.insertInto("dw.b", overwrite=True)
            df.write.mode("overwrite").insertInto("dw.c")
            df.writeTo("dw.d").append()
            df.writeTo("dw.e").overwritePartitions()
            df.write.format("kafka").option("topic", "events").save()
            df.write.format("jdbc").option("dbtable", "t").mode("append").save()
            df.write.mode("overwrite").parquet("/x")
            df.write.save("/y")
    """
    found = lint_code(code)
    assert [(f.rule, f.line) for f in found] == [("ND011", 3), ("ND011", 6), ("ND011", 8), ("ND011", 9)]
    assert "a Kafka write" in found[2].message and "`events`" in found[2].message
    assert "a JDBC append to `t`" in found[3].message


def test_markers_make_appends_and_merges_idempotent() -> None:
    code = """
        from delta.tables import DeltaTable

        def handle(df, epoch_id):
            spark.conf.set("spark.databricks.delta.write.txnAppId", "job")
            spark.conf.set("spark.databricks.delta.write.txnVersion", epoch_id)
            df.write.mode("append").saveAsTable("dw.a")
            DeltaTable.forName(spark, "dw.b").alias("t").merge(df.alias("s"), "t.k = s.k").execute()
            spark.sql("INSERT INTO dw.c SELECT * FROM v")

        def other(df, epoch_id):
            df.write.mode("append").options(txnAppId="other", txnVersion=epoch_id).saveAsTable("dw.d")
            df.write.mode("append").option("txnAppId", "x").saveAsTable("dw.e")

        s.writeStream.foreachBatch(handle).start()
        s.writeStream.foreachBatch(other).start()
    """
    assert rules(code) == [("ND011", 13, "error")]  # txnAppId alone is not enough


def test_merges_in_batch_functions_python_deltalake_and_sql() -> None:
    code = """
        from deltalake import DeltaTable, CommitProperties, Transaction
        import pandas as pd

        def upsert(batch_df, batch_id):
            dt = DeltaTable("/lake/t")
            dt.merge(batch_df.toPandas(), "t.id = s.id", source_alias="s", target_alias="t") \\
                .when_matched_update_all().execute()
            joined = batch_df.toPandas().merge(pd.DataFrame(LOOKUP), on="code")
            spark.sql("MERGE INTO dw.x USING v ON dw.x.id = v.id WHEN MATCHED THEN UPDATE SET *")

        def marked(batch_df, batch_id):
            dt = DeltaTable("/lake/u")
            if batch_id <= (dt.transaction_version("app") or -1):
                return
            dt.merge(batch_df, "t.id = s.id", source_alias="s", target_alias="t",
                     commit_properties=CommitProperties(app_transactions=[Transaction("app", batch_id)])
                     ).when_matched_update_all().execute()
    """
    assert rules(code) == [("ND013", 7, "warning"), ("ND013", 10, "warning")]


def test_accumulating_updates() -> None:
    code = """
        from pyspark.sql import functions as F
        merger = target.alias("t").merge(src.alias("s"), "t.id = s.id")
        (merger
            .whenMatchedUpdate(set={
                "n": "n + 1",
                "total": F.expr("coalesce(t.total, 0) + s.amount"),
                "log": F.concat(F.col("t.log"), F.lit("|"), F.col("s.msg")),
                "price": "s.price",
                "gross": "t.net * 1.2",
                "best": F.greatest("t.best", "s.best"),
            })
            .whenNotMatchedBySourceUpdate(set={"misses": F.col("t.misses") + 1})
            .execute())
    """
    assert summary(lint_code(code)) == [
        ("ND012", 6, 14, "write", "n"),
        ("ND012", 7, 18, "write", "total"),
        ("ND012", 8, 16, "write", "log"),
        ("ND012", 13, 50, "write", "misses"),
    ]


def test_accumulation_guarded_by_a_newer_wins_condition_is_idempotent() -> None:
    code = """
        from pyspark.sql import functions as F
        (target.alias("t").merge(src.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(condition=F.col("s.batch") > F.col("t.batch"),
                               set={"total": "t.total + s.amount", "batch": "s.batch"})
            .whenMatchedUpdate(condition="s.seq > t.seq", set={"hits": "t.hits + 1"})
            .execute())
        spark.sql('''MERGE INTO t USING s ON t.id = s.id
                     WHEN MATCHED AND s.v > t.v THEN UPDATE SET t.total = t.total + s.x, t.v = s.v''')
    """
    # the second clause compares seq but does not set it: a replay still matches and adds again
    assert [(f.rule, f.line, f.column_name) for f in lint_code(code)] == [("ND012", 6, "hits")]


def test_accumulation_in_sql_read_from_a_file(tmp_path) -> None:
    from upsertsink.lint.check.checker import CheckOptions, check_bytes

    (tmp_path / "merge.sql").write_text(
        "MERGE INTO dw.balances AS b\nUSING moves AS m ON b.account = m.account\n"
        "WHEN MATCHED THEN UPDATE SET b.balance = b.balance - m.amount\n"
    )
    job = tmp_path / "job.py"
    job.write_text("from pathlib import Path\nspark.sql(Path('merge.sql').read_text())\n")
    options = CheckOptions(origin=str(job), root=str(tmp_path))
    [f] = check_bytes("job.py", job.read_bytes(), [], [], options=options).findings
    assert (f.rule, f.line, f.column_name, f.severity) == ("ND012", 2, "balance", "error")


def test_sink_writes_without_batch_id() -> None:
    code = """
        from upsertsink import UpsertSink

        class Loader:
            def __init__(self):
                self.sink = UpsertSink("/lake/t", keys=["id"])

            def load(self, df, batch_id):
                self.sink.write(df)

        sink = UpsertSink("/lake/u", keys=["id"], sequence_by="ts")
        for batch_id in pending_batches():
            sink.write(read(batch_id))
            sink.write(read(batch_id), batch_id)
        for table in TABLES:
            sink.write(spark.table(table))
        while chunk := next_chunk():
            UpsertSink("/lake/v", keys=["id"]).write(chunk)
    """
    found = lint_code(code)
    assert [(f.rule, f.line, f.severity) for f in found] == [
        ("ND014", 9, "error"),
        ("ND014", 13, "warning"),
        ("ND014", 18, "error"),
    ]
    assert found[0].fix is not None and found[0].fix["applicability"] == "unsafe"
    assert found[1].fix is None  # a loop: the batch's id is whatever the loop has, not known here
    assert "a loop over `pending_batches()`" in found[1].message


def test_seeded_random_is_partition_dependent_not_random() -> None:
    code = """
        from pyspark.sql import functions as F
        a = df.withColumn("a", F.rand())
        b = df.withColumn("b", F.rand(7))
        c = df.withColumn("c", F.randn(seed=7))
        d = spark.sql("SELECT rand() AS d, rand(3) AS e, shuffle(xs) AS f FROM t")
    """
    assert [(f.rule, f.line, f.column_name) for f in lint_code(code)] == [
        ("ND002", 3, "a"),
        ("ND004", 4, "b"),
        ("ND004", 5, "c"),
        ("ND002", 6, "d"),
        ("ND004", 6, "e"),
        ("ND002", 6, "f"),
    ]


def test_noqa_after_a_backslash_continuation_or_a_multi_line_string() -> None:
    code = '''
        from pyspark.sql import functions as F
        df2 = df.withColumn("r", F.rand()) \\
            .withColumn("b", F.lit(1))  # noqa: ND002
        df3 = df.select(F.rand().alias("x"), F.lit("""a
        b""").alias("y"))  # noqa: ND002
        df4 = df.withColumn("z", F.rand())  # noqa: ND001
    '''
    assert [(f.rule, f.line) for f in lint_code(code)] == [("ND002", 7)]


def test_files_without_batch_functions_merges_or_sinks_give_no_write_finding() -> None:
    code = """
        def nightly(df):
            df.write.mode("append").saveAsTable("dw.history")
            pdf = df.toPandas().merge(other, on="id")
        def record(run, batch_id, result):
            print(run, batch_id, result)
    """
    assert lint_code(code) == []


def test_cassandra_appends_are_upserts() -> None:
    code = """
        def writeCountsToCassandra(updatedCountsDF, batchId):
            (updatedCountsDF
              .write
              .format("org.apache.spark.sql.cassandra")
              .mode("append")
              .options(table=tableName, keyspace=keyspaceName)
              .save())

        counts.writeStream.foreachBatch(writeCountsToCassandra).outputMode("update").start()
    """
    assert lint_code(code) == []
