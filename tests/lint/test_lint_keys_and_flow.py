"""Keys from more places, flow through classes, built SQL and pass-through methods, fewer false alarms."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner
from lint_helpers import lint_code, summary
from upsertsink.lint.check.checker import CheckOptions, check_bytes
from upsertsink.lint.command.cli import lint_command

# ---------------------------------------------------------------- keys from more places


def test_dbt_python_model_unique_key() -> None:
    code = """
    from pyspark.sql import functions as F

    def model(dbt, session):
        dbt.config(materialized="incremental", unique_key=["customer_ref", "valid_from"])
        src = dbt.ref("stg_customers")
        return src.withColumn("customer_ref", F.expr("uuid()")).withColumn("loaded", F.current_date())
    """
    findings = lint_code(code, key_patterns=())
    assert summary(findings) == [
        ("ND003", 7, 51, "key", "customer_ref"),
        ("ND001", 7, 82, "column", "loaded"),
    ]
    assert "unique key of the dbt model `customer_ref`" in findings[0].message


def test_ddl_primary_key_and_identity_columns() -> None:
    code = '''
    from pyspark.sql import functions as F
    spark.sql("""
        CREATE TABLE IF NOT EXISTS dw.dim_store (
            store_num BIGINT GENERATED ALWAYS AS IDENTITY,
            store_code STRING NOT NULL,
            CONSTRAINT pk_store PRIMARY KEY (store_code)
        ) USING DELTA
    """)
    stores = raw.withColumn("store_code", F.concat(F.lit("S"), F.spark_partition_id()))
    stores.write.insertInto("dw.dim_store")
    '''
    findings = lint_code(code, key_patterns=())
    assert summary(findings) == [("ND004", 10, 60, "key", "store_code")]
    assert "primary key of table `dw.dim_store`" in findings[0].message


def test_join_against_the_written_table_gives_keys() -> None:
    code = """
    from pyspark.sql import functions as F
    TARGET = "dw.events"
    events = raw.withColumn("evt", F.concat_ws("-", "src", F.monotonically_increasing_id()))
    existing = spark.table(TARGET)
    new = events.join(existing, on=["evt"], how="left_anti")
    new.write.mode("append").saveAsTable(TARGET)
    """
    findings = lint_code(code, key_patterns=())
    assert summary(findings) == [("ND004", 4, 56, "key", "evt")]
    assert "join key against the written table `dw.events`" in findings[0].message


def test_literal_in_a_merge_on_clause_is_a_filter_not_a_key() -> None:
    code = """
    from pyspark.sql import functions as F
    ranked = src.withColumn("rn", F.row_number().over(w))
    (DeltaTable.forName(spark, "dw.t").alias("t")
        .merge(ranked.alias("s"), "t.id = s.id AND s.rn = 1")
        .whenMatchedUpdateAll().execute())
    cond = (F.col("t.k") == F.col("s.k")) & (F.col("s.flag") == 1)
    DeltaTable.forName(spark, "dw.u").alias("t").merge(other.alias("s"), cond).execute()
    other = other.withColumn("flag", F.rand())
    """
    got = summary(lint_code(code, key_patterns=()))
    # rn and flag are filters of the merge (rows), never keys of their own; flag decides which keys of dw.u
    # are matched, and dw.u's key is k (its condition, held in ``cond``; before that was read, the finding
    # named dw.t's key id)
    assert ("ND002", 9, 34, "key", "k") in got
    assert all(c not in ("rn", "flag") or t != "key" for _, _, _, t, c in got)


def test_key_patterns_apply_to_modules_that_write_and_can_be_configured(tmp_path: Path, monkeypatch) -> None:
    job = (
        "from pyspark.sql import functions as F\n"
        "dim = src.withColumn('customer_sk', F.monotonically_increasing_id())\n"
        "dim = dim.withColumn('run_id', F.expr('uuid()'))\n"
        "dim.write.format('delta').mode('overwrite').save('/lake/dim_customer')\n"
    )
    (tmp_path / "job.py").write_text(job)
    (tmp_path / "snippet.py").write_text(job.splitlines()[0] + "\n" + job.splitlines()[1] + "\n")
    monkeypatch.chdir(tmp_path)

    def run() -> list[tuple]:
        out = CliRunner().invoke(lint_command, [".", "--format", "json", "--no-cache"])
        return [(f["path"], f["severity"], f["column_name"]) for f in json.loads(out.output)["findings"]]

    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    assert run() == [
        ("job.py", "error", "customer_sk"),  # matches the default pattern *_sk
        ("job.py", "warning", "run_id"),  # *_id is not a default pattern: run ids are audit columns
        ("snippet.py", "warning", "customer_sk"),  # writes nothing: no table, no key-like names
    ]
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\nkey-patterns = ['run_*']\n")
    assert run() == [
        ("job.py", "warning", "customer_sk"),
        ("job.py", "error", "run_id"),
        ("snippet.py", "warning", "customer_sk"),
    ]
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\nkey-patterns = []\n")
    assert {s for _, s, _ in run()} == {"warning"}
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\nkey-patterns = 3\n")
    assert CliRunner().invoke(lint_command, ["."]).exit_code == 2


# ---------------------------------------------------------------- flow


def test_self_attributes_and_methods() -> None:
    code = """
    import time
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink

    class OrdersJob:
        KEYS = ["order_id"]

        def __init__(self, spark):
            self.spark = spark
            self.started = time.time()

        def stamp(self):
            return F.lit(self.started)

        def build(self, df):
            self.batch_tag = F.lit(self.started).cast("string")
            return df.withColumn("order_id", F.concat("src_id", self.batch_tag)).withColumn("ts", self.stamp())

        def run(self, df):
            UpsertSink("/lake/orders", keys=self.KEYS).write(self.build(df))
    """
    got = summary(lint_code(code))
    assert got == [("ND001", 11, 24, "key", "order_id")]


def test_sql_built_with_format_percent_join_and_fstrings() -> None:
    code = """
    KEYS = ["id", "day"]
    on = " AND ".join(f"t.{k} = s.{k}" for k in KEYS)
    table = "dw.facts"
    merge = "MERGE INTO {} t USING src s ON {} WHEN MATCHED THEN UPDATE SET t.seen = {}".format(table, on, "now()")
    spark.sql(merge)
    ins = "INSERT INTO %s SELECT id, day, %s AS tag FROM src" % (table, "uuid()")
    spark.sql(ins)
    cols = ", ".join(["id", "day", "rand() AS r"])
    spark.sql("SELECT " + cols + " FROM src").write.saveAsTable("dw.r")
    """
    findings = lint_code(code, key_patterns=())
    got = summary(findings)
    assert got == [
        ("ND001", 5, 105, "column", "seen"),
        ("ND003", 7, 70, "column", "tag"),
        ("ND002", 9, 33, "column", "r"),
    ]


def test_merge_condition_and_maps_held_in_variables() -> None:
    code = """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    cond = "t.account = s.account"
    updates = {"balance": "s.balance", "synced_at": "current_timestamp()"}
    src = batch.withColumn("account", F.uuid())
    (DeltaTable.forPath(spark, "/lake/acc").alias("t").merge(src.alias("s"), cond)
        .whenMatchedUpdate(set=updates).execute())
    """
    got = summary(lint_code(code, key_patterns=()))
    assert got == [("ND001", 5, 50, "column", "synced_at"), ("ND003", 6, 35, "key", "account")]


def test_pass_through_methods_keep_row_choices_and_look_only_uses() -> None:
    code = """
    from upsertsink import UpsertSink
    batch = df.limit(100).cache()
    batch2 = df.repartition(8).persist().limit(50).coalesce(1)
    ordered = df.orderBy("id").hint("broadcast").checkpoint().limit(10)
    df.limit(5).persist().show()
    UpsertSink("/t", keys=["id"]).write(batch.unionByName(batch2).unionByName(ordered))
    """
    assert summary(lint_code(code)) == [("ND008", 3, 12, "key", "id"), ("ND008", 4, 38, "key", "id")]


# ---------------------------------------------------------------- fewer false alarms


def test_rank_and_dense_rank_are_deterministic() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    w = Window.partitionBy("region").orderBy(F.col("sales").desc())
    top = df.withColumn("rnk", F.dense_rank().over(w)).filter("rnk <= 3")
    top2 = df.withColumn("r", F.rank().over(w)).filter(F.col("r") == 1)
    top.unionByName(top2).write.saveAsTable("dw.top")
    """
    assert lint_code(code, keys=("region", "product")) == []


def test_dedup_by_exactly_the_key_set_is_a_warning() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    from upsertsink import UpsertSink
    w = Window.partitionBy("id").orderBy(F.col("updated_at").desc())
    latest = df.withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    dedup = df.dropDuplicates(["id"])
    UpsertSink("/t", keys=["id"]).write(latest.unionByName(dedup))
    """
    findings = lint_code(code)
    got = [(f.rule, f.line, f.severity, f.column_name) for f in findings]
    # rn is dropped before the write: the numbering decides which row of each id survives, no column
    assert got == [("ND006", 6, "warning", "*"), ("ND007", 7, "warning", "*")]


def test_dedup_over_every_selected_column_and_limit_zero() -> None:
    code = """
    from upsertsink import UpsertSink
    pairs = df.select("id", "tag").dropDuplicates(["id", "tag"])
    schema_only = df.limit(0)
    UpsertSink("/t", keys=["id"]).write(pairs.unionByName(schema_only))
    """
    assert lint_code(code) == []


def test_dataframes_only_displayed_or_evaluated_give_nothing() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    baseline = test.withColumn("prediction", F.rand())
    auc = BinaryClassificationEvaluator().evaluate(baseline)
    preview = df.withColumn("id", F.monotonically_increasing_id()).limit(20)
    display(preview)
    df.withColumn("noise", F.randn())
    kept = df.withColumn("k", F.rand())
    """
    assert summary(lint_code(code, keys=("id", "k"))) == [("ND002", 9, 27, "key", "k")]


def test_random_ordering_before_a_limit_is_a_sample() -> None:
    code = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink
    sample = df.orderBy(F.rand()).limit(1000)
    top = df.orderBy(F.col("score").desc(), "id").limit(10)
    display(df.orderBy(F.rand()).limit(5))
    UpsertSink("/t", keys=["id"]).write(sample.unionByName(top))
    """
    findings = lint_code(code)
    assert summary(findings) == [("ND002", 4, 21, "key", "id")]
    assert "decides which rows are written" in findings[0].message


def test_rdd_zip_with_index_names_the_appended_column() -> None:
    code = """
    indexed = df.rdd.zipWithIndex().map(lambda p: (*p[0], p[1])).toDF(df.columns + ["row_num"])
    indexed.write.saveAsTable("dw.numbered")
    """
    assert summary(lint_code(code, keys=("row_num",))) == [("ND004", 2, 18, "key", "row_num")]


def test_replace_where_and_identity_columns_of_the_table_builder() -> None:
    code = """
    import datetime
    from delta.tables import DeltaTable, IdentityGenerator
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType
    (DeltaTable.createIfNotExists(spark).tableName("dw.dim")
        .addColumn("dim_id", dataType=LongType(), generatedAlwaysAs=IdentityGenerator()).execute())
    dim = src.withColumn("dim_id", F.uuid())
    dim.write.format("delta").mode("overwrite").option(
        "replaceWhere", f"day = '{datetime.date.today()}'"
    ).saveAsTable("dw.dim")
    """
    findings = lint_code(code, key_patterns=())
    assert summary(findings) == [("ND003", 8, 32, "key", "dim_id"), ("ND001", 10, 31, "key", "dim_id")]
    assert "identity column `dim_id`" in findings[0].message


def test_sequence_columns_from_newer_wins_merge_conditions() -> None:
    code = """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    src = df.withColumn("event_ts", F.current_timestamp())
    (DeltaTable.forName(spark, "dw.t").alias("t").merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll(condition="s.event_ts > t.event_ts").execute())
    src2 = df.withColumn("version", F.unix_timestamp())
    (DeltaTable.forName(spark, "dw.u").alias("t").merge(src2.alias("s"), "t.k = s.k")
        .whenMatchedUpdate(condition=F.col("s.version") >= F.col("t.version"), set={"v": "s.v"}).execute())
    spark.sql("MERGE INTO dw.x t USING y s ON t.k = s.k WHEN MATCHED AND s.seq_no > t.seq_no THEN UPDATE SET *")
    y = df.withColumn("seq_no", F.monotonically_increasing_id())
    y.createOrReplaceTempView("y")
    stale = df.withColumn("checked", F.current_date())
    DeltaTable.forName(spark, "dw.z").alias("t").merge(stale.alias("s"), "t.k = s.k").whenMatchedUpdateAll(
        condition="t.checked < s.checked - INTERVAL 1 DAY").execute()
    """
    got = summary(lint_code(code, key_patterns=()))
    assert got == [
        ("ND001", 4, 33, "sequence", "event_ts"),
        ("ND001", 7, 33, "sequence", "version"),
        ("ND004", 11, 29, "sequence", "seq_no"),
        ("ND001", 13, 34, "column", "checked"),  # compared with an expression, not itself: no sequence
    ]


def _reach(code: str) -> list[tuple]:
    return [(f.rule, f.line, f.severity, f.target, f.column_name) for f in lint_code(code, key_patterns=())]


def test_a_column_dropped_before_the_write_is_not_written() -> None:
    # the usual "latest row per key" idiom: rn numbers rows, the filter keeps rn = 1, rn is dropped. Before,
    # the finding said the numbering "reaches column `rn` (table ...)", a column the table never gets
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    w = Window.partitionBy("customer_id").orderBy(F.col("updated").desc())
    latest = spark.table("raw.c").withColumn("rn", F.row_number().over(w)).where("rn = 1").drop("rn")
    latest.write.mode("overwrite").saveAsTable("dim.customers")
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.severity, finding.column_name) == ("ND006", "warning", "*")
    assert "decides which rows are written (all columns) into table `dim.customers`" in finding.message
    assert "`rn`" not in finding.message


def test_a_column_dropped_before_a_merge_into_a_table_of_unknown_name_is_not_written() -> None:
    # the table's name is read from a conf: the MERGE is still followed for the columns dropped on the way
    code = """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F, Window
    table = spark.conf.get("job.target_table")
    w = Window.partitionBy("order_no").orderBy(F.col("event_ts").desc())
    latest = bronze.withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    stamped = bronze.withColumn("tmp_ts", F.current_timestamp()).drop("tmp_ts")
    (DeltaTable.forName(spark, table).alias("t")
        .merge(latest.unionByName(stamped).alias("s"), "t.order_no = s.order_no")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.line, finding.severity, finding.column_name) == ("ND006", 6, "warning", "*")
    assert "`rn`" not in finding.message


def test_a_column_kept_on_the_way_to_a_table_of_unknown_name_is_still_written() -> None:
    code = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e").withColumn("loaded_at", F.current_timestamp())
    out.write.mode("overwrite").saveAsTable(spark.conf.get("job.table"))
    """
    assert summary(lint_code(code, key_patterns=())) == [("ND001", 3, 52, "column", "loaded_at")]


def test_write_deltalake_is_judged_against_its_own_table_not_another_merge() -> None:
    # the head(50) rows go to the preview table only: that table has no key, the merge's key is another table's
    code = """
    import pandas as pd
    from deltalake import DeltaTable, write_deltalake
    dt = DeltaTable("s3://lake/fx")
    (dt.merge(source=updates, predicate="t.rate_date = s.rate_date", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute())
    pdf = pd.read_parquet("s3://lake/fx_export.parquet")
    write_deltalake("s3://lake/fx_preview", pdf.head(50), mode="overwrite")
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.line, finding.severity, finding.column_name) == ("ND008", 8, "warning", "*")
    assert "into table `s3://lake/fx_preview`" in finding.message
    assert "rate_date" not in finding.message


def test_a_keyless_table_of_known_name_does_not_get_the_keys_of_a_merge_into_a_table_of_unknown_name() -> None:
    code = """
    import os
    import pandas as pd
    from deltalake import DeltaTable, write_deltalake
    DeltaTable(os.environ["FX_TABLE"]).merge(
        source=updates, predicate="t.rate_date = s.rate_date", source_alias="s", target_alias="t"
    ).when_matched_update_all().execute()
    write_deltalake("s3://lake/fx_preview", pd.read_parquet("s3://lake/x.parquet").head(50), mode="overwrite")
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.line, finding.severity, finding.column_name) == ("ND008", 8, "warning", "*")
    # a key given with --key (or in the config) is a key of every table
    [finding] = lint_code(code, keys=("rate_date",), key_patterns=())
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND008", "error", "key", "rate_date"
    )


def test_a_sinks_delete_when_decides_the_rows_of_its_own_table() -> None:
    code = """
    from upsertsink import UpsertSink
    UpsertSink("/lake/suppliers", keys=["supplier_id"]).write(suppliers, batch_id=1)
    UpsertSink("/lake/products", keys=["product_id"], delete_when="gone_on < current_date()").write(p, batch_id=1)
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND001", "error", "key", "product_id"
    )
    assert "into table `/lake/products`" in finding.message


def test_sql_inserts_are_judged_against_their_own_table_not_another_statements_merge() -> None:
    code = '''
    spark.sql("""
    MERGE INTO silver.orders AS t USING updates AS s ON t.order_id = s.order_id
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *
    """)
    spark.sql("""INSERT OVERWRITE TABLE qa.order_spotcheck
    SELECT order_id, status FROM silver.orders WHERE rand() < 0.01""")
    spark.sql("INSERT INTO qa.sample_log SELECT * FROM raw.events TABLESAMPLE (1 PERCENT)")
    spark.sql("INSERT INTO silver.orders SELECT uuid() AS order_id, * FROM raw.more")
    '''
    found = lint_code(code, key_patterns=())
    assert [(f.rule, f.line, f.severity, f.target, f.column_name) for f in found] == [
        ("ND002", 7, "warning", "column", "*"),
        ("ND009", 8, "warning", "column", "*"),
        ("ND003", 9, "error", "key", "order_id"),  # the MERGE's key is silver.orders' key
    ]
    assert "into table `qa.order_spotcheck`" in found[0].message
    assert "into table `qa.sample_log`" in found[1].message


def test_a_column_of_a_pandas_frame_built_from_records_carries_only_its_own_sources() -> None:
    code = """
    import pandas as pd
    from deltalake import DeltaTable
    frame = pd.DataFrame([{"sku": r["sku"], "ts": r["ts"], "pulled_at": pd.Timestamp.now()} for r in ROWS])
    frame["day"] = frame["ts"].dt.date
    (DeltaTable("s3://lake/daily")
        .merge(source=frame, predicate="t.sku = s.sku AND t.day = s.day", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute())
    """
    assert [(f.rule, f.severity, f.target, f.column_name) for f in lint_code(code, key_patterns=())] == [
        ("ND001", "warning", "column", "pulled_at")
    ]
    # a column built from the clock's own column is still a key reached by the clock
    keyed = code.replace('frame["ts"].dt.date', 'frame["pulled_at"].dt.date')
    assert [(f.rule, f.severity, f.target, f.column_name) for f in lint_code(keyed, key_patterns=())] == [
        ("ND001", "error", "key", "day")
    ]
    # the same frame returned by a helper and passed into another as a parameter
    code = """
    import uuid
    import pandas as pd
    from deltalake import DeltaTable
    def to_frame(items):
        return pd.DataFrame([{"sku": it["sku"], "ts": it["ts"], "ref": str(uuid.uuid4())} for it in items])
    def merge_daily(frame):
        daily = frame.assign(day=frame["ts"].dt.strftime("%Y-%m-%d")).groupby(["sku", "day"], as_index=False).sum()
        DeltaTable("s3://lake/daily").merge(source=daily, predicate="t.sku = s.sku AND t.day = s.day",
            source_alias="s", target_alias="t").when_not_matched_insert_all().execute()
    merge_daily(to_frame(ITEMS))
    """
    assert [(f.rule, f.severity, f.target, f.column_name) for f in lint_code(code, key_patterns=())] == [
        ("ND003", "warning", "column", "ref")
    ]


def test_a_pipeline_table_is_judged_against_its_own_keys_and_a_flow_source_against_the_flows() -> None:
    code = """
    import dlt
    from pyspark.sql import functions as F

    @dlt.table(name="orders_sample")
    def orders_sample():
        return spark.read.table("raw.orders").sample(0.1)

    @dlt.table
    def orders_bronze():
        return spark.readStream.table("raw.orders").withColumn("order_id", F.expr("uuid()"))

    dlt.create_streaming_table("orders_silver")
    dlt.apply_changes(target="orders_silver", source="orders_bronze", keys=["order_id"], sequence_by="version")
    dlt.create_streaming_table("returns_silver")
    dlt.apply_changes(target="returns_silver", source="returns_bronze", keys=["return_id"],
                      sequence_by="version", apply_as_deletes=F.expr("expires_on < current_date()"))
    """
    got = [(f.rule, f.line, f.severity, f.target, f.column_name) for f in lint_code(code, key_patterns=())]
    assert got == [
        ("ND009", 7, "warning", "column", "*"),  # orders_sample has no key: the flows' keys are other tables'
        ("ND003", 11, "error", "key", "order_id"),  # orders_bronze is the source of the flow into orders_silver
        ("ND001", 17, "error", "key", "return_id"),  # the deletes decide returns_silver's rows, by its key
    ]


def test_a_dropped_column_is_still_written_where_a_path_keeps_it() -> None:
    code = """
    from pyspark.sql import functions as F
    scored = spark.table("raw.e").withColumn("score", F.rand())
    slim = scored.drop("score", "other")
    slim.unionByName(scored).write.saveAsTable("t1")
    slim.write.saveAsTable("t2")
    """
    # t1 gets score through scored; t2 never does
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.column_name) == ("ND002", "score")
    assert "(table `t1`)" in finding.message


def test_drop_forms_that_remove_columns_and_those_that_do_not() -> None:
    base = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e").withColumn("synced_at", F.current_timestamp()).{drop}
    out.write.mode("overwrite").saveAsTable("t")
    """
    removing = (
        "drop('synced_at')",
        "drop('other', 'SYNCED_AT')",
        "drop(columns=['synced_at'])",
        "drop(['synced_at'], axis=1)",
        "drop('synced_at', axis='columns')",
        "drop(F.col('synced_at'))",
    )
    for drop in removing:
        assert _reach(base.format(drop=drop)) == [], drop
    # pandas' rows by label, and names not known, leave the column in
    for drop in ("drop(index=['synced_at'])", "drop(['synced_at'], axis=0)", "drop(name)"):
        assert [c for *_, c in _reach(base.format(drop=drop))] == ["synced_at"], drop


def test_an_aggregation_writes_only_its_grouping_columns_and_named_aggregates() -> None:
    # before: every column above a groupBy().agg() reached the aggregate's table too, so a message named a
    # table the column never reaches (redteam stream_payments_foreach.py: `processed_at` into the stats table)
    base = """
    from pyspark.sql import functions as F
    scored = spark.table("raw.e").withColumn("score", F.rand()).withColumn("day", F.current_date())
    scored.write.saveAsTable("t1")
    scored.{agg}.write.saveAsTable("t2")
    """

    def tables(agg: str) -> dict[str | None, str]:
        return {f.column_name: f.message.split(":")[0].split("column ")[1] for f in lint_code(
            base.format(agg=agg), key_patterns=())}

    only_t1 = {"score": "`score` (table `t1`)", "day": "`day`"}  # a column into two tables names neither
    for agg in ('groupBy("day").agg(F.count("*").alias("n"))', 'groupBy("day").count()',
                'groupBy(F.col("day")).agg({"amount": "sum"})', 'agg(F.max("day").alias("day"))'):
        assert tables(agg) == only_t1, agg
    # an aggregate named like the column, a grouping or aggregate not known, or a plain count keeps it
    for agg in ('groupBy("day").agg(F.max("score").alias("score"))', 'groupby("day").agg("sum")',
                'groupBy(k).count()', 'count()'):
        assert tables(agg)["score"] == "`score`", agg


def test_a_renamed_column_is_written_under_its_new_name_only() -> None:
    # before: "it also reaches `tmp_id`", though tmp_id is renamed on the way to t1 and dropped before t2
    code = """
    from pyspark.sql import functions as F
    df = spark.table("raw.e").withColumn("tmp_id", F.monotonically_increasing_id())
    df.withColumnRenamed("tmp_id", "event_key").write.mode("overwrite").saveAsTable("t1")
    df.drop("tmp_id").write.mode("overwrite").saveAsTable("t2")
    """
    [finding] = lint_code(code)
    assert (finding.rule, finding.target, finding.column_name) == ("ND004", "key", "event_key")
    assert "(table `t1`)" in finding.message and "tmp_id" not in finding.message


def test_columns_renamed_by_a_dict_are_followed_under_their_new_names() -> None:
    # Spark 3.4's withColumnsRenamed({...}): before, the position-numbered key written as `order_id` was
    # only a column warning for `tmp_id`, and the key error was missed
    code = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink
    RENAMES = {{"tmp_id": "order_id", "cust": "customer"}}
    df = spark.table("raw.o").withColumn("tmp_id", F.monotonically_increasing_id())
    UpsertSink(spark, "silver.orders", keys=["order_id"]).write(df.withColumnsRenamed({arg}), batch_id=1)
    df.drop("tmp_id").write.mode("overwrite").saveAsTable("t2")
    """
    for arg in ('{"tmp_id": "order_id"}', "RENAMES"):
        [finding] = lint_code(code.format(arg=arg))
        assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
            "ND004", "error", "key", "order_id"), arg
        assert "tmp_id" not in finding.message, arg
    # a rename whose new name is not known drops nothing: the value is still followed as `tmp_id`
    [finding] = lint_code(code.format(arg="{'tmp_id': new_name}").replace("t2", "t3").replace(
        'df.drop("tmp_id")', "df"))
    assert (finding.rule, finding.column_name) == ("ND004", "tmp_id")


def test_a_column_added_again_after_a_drop_is_written() -> None:
    code = """
    from pyspark.sql import functions as F
    df2 = spark.table("raw.e").withColumn("ts", F.lit(1)).drop("ts").withColumn("ts", F.current_timestamp())
    df2.write.saveAsTable("t")
    """
    assert [(r, c) for r, _, _, _, c in _reach(code)] == [("ND001", "ts")]


def test_a_name_rebound_over_itself_reaches_the_write_only_through_its_last_binding() -> None:
    # ``out = out.drop("tmp_ts")``: the write sees the second binding only. Before, every binding of ``out``
    # reached the write, so the dropped columns were reported as written.
    code = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink
    out = spark.table("raw.e").withColumn("tmp_ts", F.current_timestamp()).withColumn("rid", F.rand())
    out = out.drop("tmp_ts", "rid")
    UpsertSink("/t", keys=["event_id"]).write(out)
    """
    assert _reach(code) == []


def test_a_column_replaced_by_a_later_with_column_is_not_written_with_its_first_value() -> None:
    # the key first numbered by position, then replaced by a hash of the row: the position never reaches
    # the table. In one chain and through a rebound name.
    for code in (
        """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink
        out = df.withColumn("event_id", F.monotonically_increasing_id())
        out = out.withColumn("event_id", F.sha2(F.concat_ws("|", "a", "b"), 256))
        UpsertSink("/t", keys=["event_id"]).write(out)
        """,
        """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink
        out = (df.withColumn("event_id", F.monotonically_increasing_id())
            .withColumns({"event_id": F.sha2(F.col("a"), 256)}))
        UpsertSink("/t", keys=["event_id"]).write(out)
        """,
    ):
        assert _reach(code) == [], code
    # a replacement computed from the replaced value still carries it
    derived = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink
    out = df.withColumn("event_id", F.monotonically_increasing_id())
    out = out.withColumn("event_id", F.col("event_id").cast("string"))
    UpsertSink("/t", keys=["event_id"]).write(out)
    """
    assert [(r, s, t, c) for r, _, s, t, c in _reach(derived)] == [("ND004", "error", "key", "event_id")]


def test_bindings_in_branches_and_loops_still_reach_the_write() -> None:
    # only straight-line rebinding narrows what reaches a use: a drop in one branch, a loop that rebinds the
    # name after its use, or a binding in another scope keep the earlier value
    branch = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e").withColumn("ts", F.current_timestamp())
    if flag:
        out = out.drop("ts")
    out.write.saveAsTable("t")
    """
    assert [c for *_, c in _reach(branch)] == ["ts"]
    loop = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e")
    for day in days:
        out.write.saveAsTable("t")
        out = spark.table("raw.e").withColumn("ts", F.current_timestamp())
    """
    assert [c for *_, c in _reach(loop)] == ["ts"]
    # a ``while`` loop too: it was not recorded as a loop, so a value bound later in the loop was lost
    for head in ("for day in days:", "while pending():"):
        rebound_later = f"""
        import uuid
        from pyspark.sql import functions as F
        run_id = "first"
        {head}
            spark.table("raw.e").withColumn("run_id", F.lit(run_id)).write.saveAsTable("t")
            run_id = str(uuid.uuid4())
        """
        assert [(r, c) for r, *_, c in _reach(rebound_later)] == [("ND003", "run_id")], head
    later_function = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e")

    def write():
        out.write.saveAsTable("t")

    out = spark.table("raw.e").withColumn("ts", F.current_timestamp())
    write()
    """
    assert [c for *_, c in _reach(later_function)] == ["ts"]
    straight = """
    from pyspark.sql import functions as F
    out = spark.table("raw.e").withColumn("ts", F.current_timestamp())
    out.write.saveAsTable("t")
    out = spark.table("raw.f")
    """
    assert [c for *_, c in _reach(straight)] == ["ts"]


def test_null_safe_equality_in_a_merge_condition_declares_keys() -> None:
    # ``t.k <=> s.k`` (SQL text, a MERGE statement) and ``F.col(...).eqNullSafe(...)`` join on k as ``=``
    # does; before, k was not a key and a uuid in it was only a column warning
    for cond in (
        '"t.event_ref <=> s.event_ref"',
        '"t.event_ref <=> s.event_ref AND t.day = s.day"',
        'F.col("t.event_ref").eqNullSafe(F.col("s.event_ref"))',
    ):
        code = f"""
        from pyspark.sql import functions as F
        from delta.tables import DeltaTable
        src = df.withColumn("event_ref", F.expr("uuid()"))
        (DeltaTable.forName(spark, "silver.events").alias("t")
            .merge(src.alias("s"), {cond}).whenNotMatchedInsertAll().execute())
        """
        assert [(r, s, t, c) for r, _, s, t, c in _reach(code)] == [("ND003", "error", "key", "event_ref")], (
            cond
        )
    statement = """
    from pyspark.sql import functions as F
    spark.table("raw.e").withColumn("event_ref", F.expr("uuid()")).createOrReplaceTempView("src")
    spark.sql("MERGE INTO silver.events t USING src s ON t.event_ref <=> s.event_ref WHEN NOT MATCHED THEN INSERT *")
    """
    assert [(r, s, t) for r, _, s, t, _ in _reach(statement)] == [("ND003", "error", "key")]


def test_the_condition_of_an_insert_all_clause_decides_which_keys_are_inserted() -> None:
    # whenNotMatchedInsertAll(condition=...) / delta-rs when_not_matched_insert_all(predicate=...): the
    # condition was never read, unlike whenNotMatchedInsert(condition=...) and SQL WHEN NOT MATCHED AND ...
    spark_form = """
    from delta.tables import DeltaTable
    (DeltaTable.forName(spark, "silver.events").alias("t")
        .merge(updates.alias("s"), "t.event_id = s.event_id")
        .whenNotMatchedInsertAll(condition="s.event_ts > current_timestamp() - INTERVAL 1 DAY")
        .execute())
    """
    assert [(r, line, s, t, c) for r, line, s, t, c in _reach(spark_form)] == [
        ("ND001", 5, "error", "key", "event_id")
    ]
    rs_form = """
    from deltalake import DeltaTable
    (DeltaTable("s3://lake/events").merge(pdf, predicate="t.event_id = s.event_id", source_alias="s",
        target_alias="t").when_not_matched_insert_all(predicate="rand() < 0.5").execute())
    """
    assert [(r, s, t) for r, _, s, t, _ in _reach(rs_form)] == [("ND002", "error", "key")]
    positional = spark_form.replace("condition=", "")
    assert [r for r, *_ in _reach(positional)] == ["ND001"]


def test_a_column_condition_held_in_a_name_declares_keys_and_sequences() -> None:
    # ``cond = F.col("t.k") == F.col("s.k")`` then ``merge(src, cond)``: before, no key came of it (a
    # random key was a column warning); the inline form gave the error
    code = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable
    same = (F.col("t.tenant") == F.col("s.tenant")) & (F.col("t.order_no") == F.col("s.order_no"))
    cond = same
    newer = F.col("s.version") > F.col("t.version")
    src = df.withColumn("order_no", F.rand()).withColumn("version", F.current_timestamp())
    (DeltaTable.forName(spark, "t").alias("t").merge(src.alias("s"), cond)
        .whenMatchedUpdateAll(condition=newer).whenNotMatchedInsertAll().execute())
    """
    assert [(r, s, t, c) for r, _, s, t, c in _reach(code)] == [
        ("ND002", "error", "key", "order_no"),
        ("ND001", "error", "sequence", "version"),
    ]


def test_a_spark_session_built_with_a_random_app_name_carries_no_value() -> None:
    # the app name is not data: values read from the session's conf used to be tainted by its uuid
    code = """
    import uuid
    from pyspark.sql import SparkSession, functions as F
    from delta.tables import DeltaTable
    spark = SparkSession.builder.appName(f"gold_{uuid.uuid4().hex[:8]}").getOrCreate()
    run_date = spark.conf.get("spark.job.run_date")
    src = spark.table("silver.orders").where(F.col("event_date") == run_date)
    (DeltaTable.forName(spark, "gold.orders").alias("t").merge(src.alias("s"), "t.order_id = s.order_id")
        .whenNotMatchedInsertAll().execute())
    """
    assert _reach(code) == []


def test_keys_and_tables_read_from_a_config_dict() -> None:
    # CFG["keys"] / CFG["table"]: before, no key came of a config dict, so a partition-dependent key was only
    # a column warning
    merge = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable
    CFG = {"table": "silver.orders", "keys": ["order_no"]}
    cond = " AND ".join(f"t.{k} = s.{k}" for k in CFG["keys"])
    out = df.withColumn("order_no", F.monotonically_increasing_id())
    DeltaTable.forName(spark, CFG["table"]).alias("t").merge(out.alias("s"), cond).whenNotMatchedInsertAll().execute()
    """
    [finding] = lint_code(merge, key_patterns=())
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND004",
        "error",
        "key",
        "order_no",
    )
    assert "(table `silver.orders`)" in finding.message
    sink = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink

    class Job:
        def __init__(self):
            self.cfg = {"path": "/lake/orders", "keys": ["order_no"], "keys_old": ["x"]}

        def run(self, df):
            out = df.withColumn("order_no", F.rand())
            UpsertSink(self.cfg["path"], keys=self.cfg["keys"]).write(out)
    """
    assert [(r, s, t, c) for r, _, s, t, c in _reach(sink)] == [("ND002", "error", "key", "order_no")]
    # a dict that may hold other keys ({**base, ...}) or an unknown entry gives no key
    unknown = sink.replace('{"path"', '{**BASE, "path"').replace('"keys": ["order_no"], ', "")
    assert [(s, t) for _, _, s, t, _ in _reach(unknown)] == [("warning", "column")]


def test_merge_with_schema_evolution_is_read_as_a_merge() -> None:
    # Databricks' MERGE WITH SCHEMA EVOLUTION INTO does not parse in sqlglot: the statement, its random key
    # included, was skipped without a word. It now gives what MERGE INTO gives, at the same positions
    plain = '''
    spark.sql("""
    MERGE INTO silver.events t
    USING (SELECT *, uuid() AS event_ref FROM bronze.events) s
    ON t.event_ref = s.event_ref
    WHEN NOT MATCHED THEN INSERT *
    """)
    '''
    evolving = plain.replace("MERGE INTO", "merge  with schema\tevolution INTO")
    want = [(f.rule, f.line, f.column, f.severity, f.target, f.column_name) for f in lint_code(plain)]
    assert want == [("ND003", 4, 18, "error", "key", "event_ref")]
    assert [
        (f.rule, f.line, f.column, f.severity, f.target, f.column_name) for f in lint_code(evolving)
    ] == want


# ---------------------------------------------------------------- keys passed into a helper of the module


def test_keys_and_table_passed_to_a_helper_of_the_module_are_that_write_s_keys() -> None:
    # ``def upsert(df, table, keys)`` builds its MERGE condition from its parameters: each call's
    # arguments declare that call's table and keys. Before, the condition was unknown text, so the
    # partition-dependent key was only a column warning.
    helpers = {
        "a joined list": """
        def upsert(df, table, keys):
            cond = " AND ".join(f"t.{k} = s.{k}" for k in keys)
            DeltaTable.forName(spark, table).alias("t").merge(df.alias("s"), cond).whenMatchedUpdateAll().execute()
        """,
        "an f-string key": """
        def upsert(df, table, key):
            DeltaTable.forName(spark, table).alias("t").merge(df.alias("s"), f"t.{key} = s.{key}").whenMatchedUpdateAll().execute()
        """,
        "a sink": """
        def upsert(df, table, keys):
            UpsertSink.for_table(table, keys=keys).write(df)
        """,
    }
    calls = {
        "a joined list": 'upsert(out, "silver.orders", ["order_no"])',
        "an f-string key": 'upsert(out, "silver.orders", "order_no")',
        "a sink": 'upsert(out, "silver.orders", keys=["order_no"])',
    }
    for name, helper in helpers.items():
        code = f"""
        from pyspark.sql import functions as F
        from delta.tables import DeltaTable
        from upsertsink import UpsertSink
        {helper.strip()}

        def main():
            out = spark.table("raw.orders").withColumn("order_no", F.monotonically_increasing_id())
            {calls[name]}
        """
        findings = lint_code(code, key_patterns=())
        assert [(f.rule, f.severity, f.target, f.column_name) for f in findings] == [
            ("ND004", "error", "key", "order_no")
        ], name
        assert "table `silver.orders`" in findings[0].message, name


def test_each_call_of_a_helper_judges_its_own_table_s_keys() -> None:
    # two calls, two tables, two keys; a sequence given as a parameter with a default
    code = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable

    def upsert(df, table, keys, seq="updated_at"):
        cond = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        (DeltaTable.forName(spark, table).alias("t").merge(df.alias("s"), cond)
            .whenMatchedUpdateAll(condition=f"s.{seq} > t.{seq}").whenNotMatchedInsertAll().execute())

    a = spark.read.table("bronze.a").withColumn("updated_at", F.current_timestamp())
    upsert(a, "silver.a", ["id"])
    b = spark.read.table("bronze.b").withColumn("bid", F.expr("uuid()"))
    upsert(b, "silver.b", keys=["bid"], seq="version")
    """
    findings = lint_code(code, key_patterns=())
    assert [(f.rule, f.severity, f.target, f.column_name) for f in findings] == [
        ("ND001", "error", "sequence", "updated_at"),
        ("ND003", "error", "key", "bid"),
    ]
    assert "table `silver.b`" in findings[1].message


def test_a_helper_whose_keys_come_from_unpacked_arguments_stays_unknown() -> None:
    # ``upsert(out, *args)`` / ``upsert(**cfg)``: which parameter gets what is not known
    for call in ("upsert(out, *ARGS)", "upsert(**CFG)"):
        code = f"""
        from pyspark.sql import functions as F
        from delta.tables import DeltaTable
        ARGS = ("silver.orders", ["order_no"])
        CFG = dict(df=None, table="silver.orders", keys=["order_no"])

        def upsert(df, table, keys):
            cond = " AND ".join(f"t.{{k}} = s.{{k}}" for k in keys)
            DeltaTable.forName(spark, table).alias("t").merge(df.alias("s"), cond).whenMatchedUpdateAll().execute()

        out = spark.table("raw.orders").withColumn("order_no", F.monotonically_increasing_id())
        {call}
        """
        assert [(f.rule, f.severity) for f in lint_code(code, key_patterns=())] == [("ND004", "warning")], (
            call
        )


def test_a_helper_that_builds_the_condition_from_its_arguments() -> None:
    # ``merge(..., on_clause(["order_no"]))``: the text the helper returns is built from this call's
    # arguments. Before, the parameter was unknown, so the text (and the key) was too.
    code = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable

    def on_clause(keys, t="t", s="s"):
        return " AND ".join(f"{t}.{k} = {s}.{k}" for k in keys)

    out = df.withColumn("order_no", F.monotonically_increasing_id())
    DeltaTable.forName(spark, "silver.orders").alias("t").merge(out.alias("s"), on_clause(["order_no"])).whenNotMatchedInsertAll().execute()
    """
    assert [(f.rule, f.severity, f.target, f.column_name) for f in lint_code(code, key_patterns=())] == [
        ("ND004", "error", "key", "order_no")
    ]


def test_helpers_that_call_themselves_are_read_without_end() -> None:
    # a helper evaluated with its call's arguments binds them again for each nested call: recursion (direct
    # or through another helper) must end as an unknown text, not as ND000
    code = """
    from pyspark.sql import functions as F

    def f(k):
        return f(k) + "x"

    def g(k):
        return h(k)

    def h(k):
        return g(k)

    spark.sql(f("a")).withColumn("ts", F.current_timestamp()).write.saveAsTable("t1")
    spark.sql(g("a")).write.saveAsTable("t2")
    """
    assert [(f.rule, f.column_name) for f in lint_code(code, key_patterns=())] == [("ND001", "ts")]


def test_a_row_choice_on_the_looked_up_side_of_a_left_join_decides_values_not_keys() -> None:
    # deduplicating a lookup table joined LEFT: every leg is written whichever carrier row survives, so the
    # choice changes the joined values (a warning), not the written keys. Before, it was a key error.
    base = """
    from upsertsink import UpsertSink
    carriers = spark.table("stg.carriers").dropDuplicates(["carrier_code"])
    legs = {join}
    UpsertSink("/lake/legs", keys=["shipment_id", "leg_no"]).write(legs)
    """
    for join in (
        'spark.table("stg.legs").join(carriers, "carrier_code", "left")',
        'spark.table("stg.legs").join(carriers, on="carrier_code", how="left_outer")',
        'carriers.join(spark.table("stg.legs"), "carrier_code", how="right")',
    ):
        assert [(r, s, t, c) for r, _, s, t, c in _reach(base.format(join=join))] == [
            ("ND007", "warning", "column", "*")
        ], join
    # inner, semi and anti joins keep or drop legs by the carriers that exist: the keys are decided
    for join in (
        'spark.table("stg.legs").join(carriers, "carrier_code")',
        'spark.table("stg.legs").join(carriers, "carrier_code", "left_anti")',
        'carriers.join(spark.table("stg.legs"), "carrier_code", "left")',
    ):
        assert [(r, s, t) for r, _, s, t, _ in _reach(base.format(join=join))] == [
            ("ND007", "error", "key")
        ], join


def test_fields_of_two_concatenated_f_strings_keep_their_own_values() -> None:
    # each literal numbered its unknown fields from __ph0__, so in ``f"{run}..." + f"{now}..."`` both fields
    # were one placeholder with one value: the uuid was lost and the clock said it reached run_id too
    code = """
    import uuid
    from datetime import datetime
    run = uuid.uuid4()
    now = datetime.now()
    spark.sql(f"SELECT '{run}' AS run_id, " + f"'{now}' AS loaded_at FROM src").write.saveAsTable("t")
    """
    findings = lint_code(code, key_patterns=())
    assert [(f.rule, f.column_name) for f in findings] == [("ND003", "run_id"), ("ND001", "loaded_at")]
    assert "also reaches" not in findings[1].message


def test_a_dbt_model_writes_what_it_returns_into_the_model_s_table() -> None:
    # what ``def model(dbt, session)`` returns is the model's table: a lookup deduplicated and LEFT-joined
    # there decides values (a warning), and a finding names the table (the file's stem, as dbt names it)
    code = """
    import pyspark.sql.functions as F

    def model(dbt, session):
        dbt.config(materialized="incremental", unique_key=["shipment_id", "leg_no"])
        legs = dbt.ref("stg_shipment_legs")
        carriers = dbt.ref("stg_carriers").dropDuplicates(["carrier_code"])
        return legs.join(carriers, "carrier_code", "left").withColumn("loaded_at", F.current_timestamp())
    """
    data = textwrap.dedent(code).encode()
    findings = check_bytes(
        "models/fct_shipments.py",
        data,
        [],
        [],
        options=CheckOptions(key_patterns=[], origin="/repo/models/fct_shipments.py"),
    ).findings
    assert [(f.rule, f.severity, f.target, f.column_name) for f in findings] == [
        ("ND007", "warning", "column", "*"),
        ("ND001", "warning", "column", "loaded_at"),
    ]
    assert "table `fct_shipments`" in findings[1].message


def test_a_row_choice_reaching_two_tables_is_judged_against_each_tables_own_keys() -> None:
    # Numbered per silver.orders' key, the choice only picks which row of each order survives there (a
    # warning); gold.daily groups the chosen rows by customer_id, so which customers are written can change
    # (an error naming gold.daily's key). The union of both tables' keys named order_id and silver.orders.
    code = """
    from pyspark.sql import functions as F, Window
    from delta.tables import DeltaTable
    w = Window.partitionBy("order_id").orderBy(F.col("updated_at").desc())
    latest = spark.table("bronze.orders").withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    (DeltaTable.forName(spark, "silver.orders").alias("t").merge(latest.alias("s"), "t.order_id = s.order_id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    daily = latest.groupBy("customer_id").agg(F.count("*").alias("n"))
    (DeltaTable.forName(spark, "gold.daily").alias("t").merge(daily.alias("s"), "t.customer_id = s.customer_id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    """
    findings = lint_code(code, key_patterns=())
    assert [(f.rule, f.line, f.severity, f.column_name) for f in findings] == [("ND006", 5, "error", "customer_id")]
    assert "into table `gold.daily`" in findings[0].message


def test_a_view_is_judged_against_the_keys_of_the_tables_whose_sql_reads_it() -> None:
    # A view (CREATE VIEW in SQL text, or a DataFrame registered as one) reaches the tables of the SQL
    # statements that read it, not every table of the module: numbered per silver.orders' key, its row
    # choice is a warning there, though another MERGE of the file writes gold.customers by customer_id.
    sql_view = '''
    spark.sql("""CREATE OR REPLACE TEMP VIEW order_updates AS SELECT * FROM bronze.orders
    QUALIFY ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY updated_at DESC) = 1""")
    spark.sql("""MERGE INTO silver.orders AS t USING order_updates AS s ON t.order_id = s.order_id
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")
    spark.sql("""MERGE INTO gold.customers AS t USING bronze.customers AS s ON t.customer_id = s.customer_id
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")
    '''
    findings = lint_code(sql_view, key_patterns=())
    assert [(f.rule, f.line, f.severity, f.column_name) for f in findings] == [("ND006", 3, "warning", "*")]
    assert "into table `silver.orders`" in findings[0].message
    frame_view = """
    from pyspark.sql import functions as F, Window
    w = Window.partitionBy("order_id").orderBy(F.col("updated_at").desc())
    latest = spark.table("bronze.orders").withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    latest.createOrReplaceTempView("order_updates")
    spark.sql("MERGE INTO {0} AS t USING order_updates AS s ON t.{1} = s.{1} WHEN MATCHED THEN UPDATE SET *")
    spark.sql("MERGE INTO {2} AS t USING bronze.x AS s ON t.{3} = s.{3} WHEN MATCHED THEN UPDATE SET *")
    """
    warned = lint_code(frame_view.format("silver.orders", "order_id", "gold.customers", "customer_id"), key_patterns=())
    assert [(f.rule, f.line, f.severity, f.column_name) for f in warned] == [("ND006", 4, "warning", "*")]
    # the same view merged into the table keyed by customer_id: which customers are written can change
    erred = lint_code(frame_view.format("gold.customers", "customer_id", "silver.orders", "order_id"), key_patterns=())
    assert [(f.rule, f.line, f.severity, f.column_name) for f in erred] == [("ND006", 4, "error", "customer_id")]
    assert "into table `gold.customers`" in erred[0].message
