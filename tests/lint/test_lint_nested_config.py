"""Keys and tables read from nested config dicts (``CFG["orders"]["keys"]``)."""

from __future__ import annotations

from lint_helpers import lint_code


def test_keys_and_table_of_a_two_level_config_dict_given_to_a_helper() -> None:
    # CFG["orders"]["keys"]: only one subscript level was resolved, so the key was lost and the random key
    # was a column warning with no table
    code = """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    CFG = {"orders": {"table": "silver.orders", "keys": ["order_no"]}}
    def merge_into(df, table, keys):
        cond = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        (DeltaTable.forName(spark, table).alias("t")
            .merge(df.alias("s"), cond)
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    src = spark.read.table("bronze.orders")
    out = src.withColumn("order_no", F.expr("uuid()"))
    merge_into(out, CFG["orders"]["table"], CFG["orders"]["keys"])
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.severity, finding.line, finding.target, finding.column_name) == (
        "ND003",
        "error",
        11,
        "key",
        "order_no",
    )
    assert "(table `silver.orders`)" in finding.message


def test_nested_config_entries_at_any_depth_with_integer_subscripts() -> None:
    code = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable
    CFG = {"jobs": [{"sink": {"table": "silver.orders", "keys": ["order_no"]}}]}
    JOB = CFG["jobs"][0]
    cond = " AND ".join(f"t.{k} = s.{k}" for k in JOB["sink"]["keys"])
    out = df.withColumn("order_no", F.monotonically_increasing_id())
    (DeltaTable.forName(spark, JOB["sink"]["table"]).alias("t").merge(out.alias("s"), cond)
        .whenNotMatchedInsertAll().execute())
    """
    [finding] = lint_code(code, key_patterns=())
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND004",
        "error",
        "key",
        "order_no",
    )
    assert "(table `silver.orders`)" in finding.message
    # a subscript that is not a constant, an index out of range, or a dict that may hold other entries: no key
    for old, new in (
        ('CFG["jobs"][0]', 'CFG["jobs"][i]'),
        ('CFG["jobs"][0]', 'CFG["jobs"][1]'),
        ('{"sink": {', '{"sink": {**BASE, '),
    ):
        unknown = code.replace(old, new)
        assert [(f.severity, f.target) for f in lint_code(unknown, key_patterns=())] == [
            ("warning", "column")
        ]
