"""Cases from the labelled corpus redteam7 (class-based jobs, shared helpers, pandas services, notebooks),
where the linter disagreed with labels written from docs/rules.md and docs/linter.md before it ran."""

from __future__ import annotations

from lint_helpers import lint_code


def test_a_plain_dict_item_is_not_a_dataframe_column() -> None:
    # before: timing a step into a metrics dict was "ND001 reaches column `seconds`" (rules.md: clock reads
    # timing a step are not reported)
    code = """
    import time
    class BaseJob:
        def __init__(self):
            self.metrics: dict = {}
        def run(self, work):
            started = time.monotonic()
            work()
            self.metrics["seconds"] = round(time.monotonic() - started, 1)
    def run(work):
        stats = dict()
        t = time.monotonic()
        work()
        stats["seconds"] = time.monotonic() - t
        return stats
    """
    assert lint_code(code) == []
    # a dict filled item by item and made a record is still followed to its column
    record = """
    from datetime import datetime
    import pandas as pd
    from deltalake import write_deltalake
    rows = []
    for it in items:
        rec = {}
        rec["id"] = it["id"]
        rec["loaded_at"] = datetime.now()
        rows.append(rec)
    write_deltalake("/lake/t", pd.DataFrame(rows))
    """
    [f] = lint_code(record)
    assert (f.rule, f.column_name) == ("ND001", "loaded_at")


def test_a_grouped_aggregation_that_is_only_shown_is_a_look() -> None:
    # before: ND009 "decides which rows are written" for a debug sample counted per group and shown
    code = """
    features = spark.table("ml.features")
    features.write.mode("overwrite").saveAsTable("ml.features_copy")
    features.sample(0.05).groupBy("n_tickets").count().show()
    s = features.sample(0.05)
    s.groupBy("n").agg(F.count("*")).show()
    features.limit(10).groupBy("k").pivot("p").sum("v").show()
    display(features.sample(0.1).groupBy("k").count())
    """
    assert lint_code(code) == []
    # an aggregation that is written still decides the written rows
    [f] = lint_code(code + 'spark.table("x").sample(0.1).groupBy("k").count().write.saveAsTable("y")\n')
    assert (f.rule, f.line, f.column_name) == ("ND009", 9, "*")


def test_a_column_dropped_later_in_its_own_chain_is_not_written() -> None:
    # before: "... into table `/t`; it also reaches `rn`", and "reaches column `rn`" when no write was known
    helper = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    def latest(df):
        w = Window.partitionBy("id").orderBy(F.col("updated_at").desc())
        return df.withColumn("rn", F.row_number().over(w)).filter(F.col("rn") == 1).drop("rn")
    """
    [f] = lint_code(helper)
    assert (f.rule, f.column_name) == ("ND006", "*")
    [f] = lint_code(helper + """
    from upsertsink import UpsertSink
    def load(df):
        UpsertSink("/t", ["id", "day"]).write(df)
    load(latest(spark.read.table("raw.t")))
    """)
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND006", "error", "key", "id")
    assert "`rn`" not in f.message
    # kept in the chain: the numbering is a column
    [f] = lint_code(helper.replace('.drop("rn")', ""))
    assert (f.rule, f.column_name) == ("ND006", "rn")
