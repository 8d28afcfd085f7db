"""A row choice is judged against the table its own write goes to, not against another table of the file that
its DataFrame (or the table it reads) also reaches: a CTAS writes its own table, a writer's replaceWhere
decides the rows of that writer's table, a pandas ``iloc[:n]`` slice is followed to its ``write_deltalake``.
And SQL functions sqlglot renames (``string_agg`` read as ``listagg``) are found where the text spells them.
Each case came from the labelled corpus redteam5, where the choice was reported as a key error of another table.
"""

from __future__ import annotations

from lint_helpers import lint_code


def _rows(code: str) -> list[tuple[str, int, int, str, str | None, str | None]]:
    return [(f.rule, f.line, f.column, f.severity, f.target, f.column_name) for f in lint_code(code)]


def test_a_ctas_sample_decides_the_rows_of_the_table_it_creates_not_of_the_table_it_reads() -> None:
    code = """
    spark.sql("MERGE INTO dw.accounts AS t USING s ON t.account_no = s.account_no WHEN MATCHED THEN UPDATE SET *")
    spark.sql("CREATE OR REPLACE TABLE ops.qa AS SELECT * FROM dw.accounts TABLESAMPLE (1 PERCENT)")
    """
    # before: ND009 error key account_no, "into table `dw.accounts`" (the table the CTAS only reads)
    findings = lint_code(code)
    assert _rows(code) == [("ND009", 3, 72, "warning", "column", "*")]
    assert "into table `ops.qa`" in findings[0].message


def test_a_replace_where_on_one_write_decides_only_that_writes_table() -> None:
    code = """
    from datetime import date
    from upsertsink import UpsertSink
    members = spark.read.table("silver.members")
    UpsertSink("/lake/members", keys=["member_sk"]).write(members)
    (members.groupBy("segment").count()
        .write.format("delta").mode("overwrite")
        .option("replaceWhere", f"snapshot_date = '{date.today()}'")
        .saveAsTable("gold.segment_counts"))
    """
    # before: ND001 error key member_sk, "into table `/lake/members`"
    assert _rows(code) == [("ND001", 8, 49, "warning", "column", "*")]
    assert "into table `gold.segment_counts`" in lint_code(code)[0].message


def test_a_pandas_iloc_slice_is_followed_to_its_write_deltalake_table() -> None:
    code = """
    import pandas as pd
    from deltalake import write_deltalake
    from upsertsink import UpsertSink
    UpsertSink("/lake/a", keys=["k"]).write(spark.table("x"))
    a = pd.read_parquet("/in")
    write_deltalake("/lake/preview", a.iloc[:100])
    """
    # before: ND008 error key k, "into table `/lake/a`" (head(100) was already right)
    for pick in ("a.iloc[:100]", "a.head(100)"):
        got = lint_code(code.replace("a.iloc[:100]", pick))
        assert [(f.rule, f.severity, f.column_name) for f in got] == [("ND008", "warning", "*")], pick
        assert "into table `/lake/preview`" in got[0].message, pick


def test_sql_functions_are_reported_where_the_text_spells_them() -> None:
    code = """
    out = spark.sql("SELECT k, string_agg(v, ',') AS a, random() AS r, group_concat(v) AS g, now() AS n FROM t GROUP BY k")
    out.write.saveAsTable("x")
    """
    # before: string_agg and group_concat were reported at the start of the text (column 18) under sqlglot's name `listagg`
    assert [(f.rule, f.column, f.message.split(" ")[0]) for f in lint_code(code)] == [
        ("ND005", 28, "`string_agg`"),
        ("ND002", 53, "`random`"),
        ("ND005", 68, "`group_concat`"),
        ("ND001", 90, "`now`"),
    ]


_FEATURED = """
from delta.tables import DeltaTable
feed = spark.read.table("x")
(DeltaTable.forName(spark, "catalog.products").alias("t").merge(feed.alias("s"), "t.product_code = s.product_code")
    .whenMatchedUpdateAll().execute())
featured = feed.select("product_code", "title").limit(500)
featured.{write}
"""


def test_a_write_to_table_is_followed_like_save_as_table() -> None:
    # before: ND008 error key product_code "into table `catalog.products`", a table the limited rows never reach
    for write in ('writeTo("catalog.featured").append()', 'writeTo("catalog.featured").overwritePartitions()',
                  'writeTo("catalog.featured").createOrReplace()', 'write.saveAsTable("catalog.featured")'):
        [finding] = lint_code(_FEATURED.format(write=write))
        assert (finding.rule, finding.severity, finding.column_name) == ("ND008", "warning", "*"), write
        assert "into table `catalog.featured`" in finding.message, write


def test_rows_written_to_a_table_of_unknown_name_are_not_said_to_go_into_another_table() -> None:
    # judged against every key of the module (linter.md), but no table is named: before, the message said
    # "into table `catalog.products`", the merge's table, which these rows never reach
    [finding] = lint_code(_FEATURED.format(write='write.saveAsTable(spark.conf.get("job.featured_table"))'))
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND008", "error", "key", "product_code")
    assert "into table" not in finding.message and "catalog.products" not in finding.message
    # the same for a column: a random key written only to that table is judged as a key, no table named
    code = _FEATURED.format(write='write.saveAsTable(spark.conf.get("job.featured_table"))').replace(
        '.limit(500)', '.withColumn("product_code", F.expr("uuid()"))').replace(
        "from delta.tables", "from pyspark.sql import functions as F\nfrom delta.tables")
    [finding] = lint_code(code)
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND003", "error", "key", "product_code")
    assert "(table" not in finding.message and "catalog.products" not in finding.message


def test_tuple_records_are_followed_when_their_column_names_are_given() -> None:
    # before: nothing (only dict records were read)
    code = """
    import uuid
    from datetime import datetime
    import pandas as pd
    from deltalake import write_deltalake
    rows = []
    for c in ["a", "b"]:
        rows.append((c, str(uuid.uuid4())))
    write_deltalake("/lake/x", pd.DataFrame(rows, columns=["code", "token"]))
    log = spark.createDataFrame([("c", str(datetime.now()))], "campaign_code string, run_started string")
    log.write.mode("append").saveAsTable("gold.campaign_run_log")
    spark.createDataFrame([(1, datetime.now())], ["id", "ts"]).write.saveAsTable("t")
    spark.createDataFrame([(1, 2.5, datetime.now())], "id INT, amount DECIMAL(10,2), ts TIMESTAMP").write.saveAsTable("t2")
    """
    assert [(f.rule, f.line, f.column_name, f.table) for f in lint_code(code)] == [
        ("ND003", 8, "token", "/lake/x"),
        ("ND001", 10, "run_started", "gold.campaign_run_log"),
        ("ND001", 12, "ts", "t"),
        ("ND001", 13, "ts", "t2"),
    ]


def test_tuple_records_are_named_by_a_struct_type_a_to_df_or_as_spark_names_them() -> None:
    # before: nothing (tuple records were followed only with a list or DDL string of names beside them)
    code = """
    from datetime import datetime
    from pyspark.sql.types import StructType, StructField, StringType, TimestampType
    from upsertsink import UpsertSink
    SCHEMA = StructType([StructField("id", StringType()), StructField("loaded_at", TimestampType())])
    rows = [("a", datetime.now())]
    spark.createDataFrame(rows, SCHEMA).write.mode("overwrite").saveAsTable("t1")
    spark.createDataFrame(rows).toDF("id", "seen_at").write.mode("overwrite").saveAsTable("t2")
    spark.createDataFrame(rows).withColumnRenamed("_2", "ingested_at").write.mode("overwrite").saveAsTable("t3")
    UpsertSink(spark, "t4", keys=["id"], sequence_by="_2").write(spark.createDataFrame(rows), batch_id=7)
    """
    [f] = lint_code(code)
    assert (f.rule, f.line, f.severity, f.target, f.column_name) == ("ND001", 6, "error", "sequence", "_2")
    assert "it also reaches `ingested_at`, `loaded_at`, `seen_at`:" in f.message
    # a schema that is not known names nothing: its rows are not given Spark's default names
    unknown = code.replace("spark.createDataFrame(rows, SCHEMA)", "spark.createDataFrame(rows, load_schema())")
    [f] = lint_code(unknown)
    assert "it also reaches `ingested_at`, `seen_at`:" in f.message


def test_a_pandas_rename_of_columns_carries_a_value_to_its_new_name() -> None:
    # before: the uuid was a column warning for `tmp`; renamed to the merge key, it is a key error
    code = """
    import uuid
    import pandas as pd
    from deltalake import DeltaTable
    pdf = pd.DataFrame(rows)
    pdf["tmp"] = [str(uuid.uuid4()) for _ in range(len(pdf))]
    pdf = pdf.rename({rename})
    (DeltaTable("s3://lake/events")
        .merge(source=pdf, predicate="t.event_id = s.event_id", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute())
    """
    for rename in ('columns={"tmp": "event_id"}', '{"tmp": "event_id"}, axis=1',
                   '{"tmp": "event_id"}, axis="columns"'):
        [f] = lint_code(code.format(rename=rename))
        assert (f.rule, f.severity, f.target, f.column_name, f.table) == (
            "ND003", "error", "key", "event_id", "s3://lake/events"), rename
        assert "`tmp`" not in f.message, rename  # renamed away before the MERGE
    # renaming the index renames no column
    [f] = lint_code(code.format(rename='index={"tmp": "event_id"}'))
    assert (f.severity, f.column_name) == ("warning", "tmp")


def test_a_pandas_column_assignment_names_the_table_its_own_frame_goes_to() -> None:
    # before: the column was tied to whichever pandas slice the module read last (`/lake/top`)
    code = """
    import uuid
    import pandas as pd
    from deltalake import write_deltalake
    top = pd.read_parquet("/in/a").sort_values("id").iloc[:10]
    write_deltalake("/lake/top", top)
    other = pd.read_parquet("/in/b")
    other["token"] = [str(uuid.uuid4()) for _ in range(len(other))]
    write_deltalake("/lake/other", other)
    """
    [f] = lint_code(code)
    assert (f.rule, f.column_name, f.table) == ("ND003", "token", "/lake/other")


def test_a_pandas_groupby_with_options_keeps_only_its_groups_and_aggregates() -> None:
    # before: any keyword on groupby (as_index=False, by=) dropped nothing, so the column was said to reach
    # both tables and the message named neither
    code = """
    import uuid
    import pandas as pd
    from deltalake import write_deltalake
    pdf = pd.read_parquet("/in/a")
    pdf["batch_token"] = str(uuid.uuid4())
    write_deltalake("/lake/raw", pdf)
    daily = pdf.groupby({group}).agg(total=("amount", "sum"))
    write_deltalake("/lake/daily", daily, mode="overwrite")
    """
    for group in ('["day", "region"], as_index=False', 'by="day", sort=False', '"day"'):
        [f] = lint_code(code.format(group=group))
        assert (f.column_name, f.table) == ("batch_token", "/lake/raw"), group
    # grouped by the column itself: it reaches both tables
    [f] = lint_code(code.format(group='["day", "batch_token"], as_index=False'))
    assert f.table is None
