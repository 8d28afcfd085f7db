"""Data flow: aliases, shadowing, helpers, f-strings, UDFs, SQL positions, keys from sinks and merges."""

from __future__ import annotations

from lint_helpers import lint_code, summary


def test_import_aliases_resolve() -> None:
    code = """
    import pyspark.sql.functions as fn
    from pyspark.sql import functions as F
    from pyspark.sql.functions import current_timestamp as ts_now
    import datetime as dt
    from datetime import datetime
    a = df.withColumn("a", fn.rand())
    b = df.withColumn("b", F.uuid())
    c = df.withColumn("c", ts_now())
    d = df.withColumn("d", F.lit(dt.datetime.utcnow()))
    e = df.withColumn("e", F.lit(datetime.now()))
    """
    got = summary(lint_code(code))
    assert got == [
        ("ND002", 7, 24, "column", "a"),
        ("ND003", 8, 24, "column", "b"),
        ("ND001", 9, 24, "column", "c"),
        ("ND001", 10, 30, "column", "d"),
        ("ND001", 11, 30, "column", "e"),
    ]


def test_not_fooled_by_local_definitions_parameters_and_columns() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.functions import rand

    def uuid():
        return "fixed"

    def build(df, rand):
        return df.withColumn("k", rand())

    out = df.withColumn("k", F.lit(uuid()))
    out = out.withColumn("k2", F.col("rand") + F.col("current_timestamp"))
    out = out.select(df.rand.alias("k3"), df["uuid"].alias("k4"))
    """
    assert lint_code(code, keys=("k", "k2", "k3", "k4")) == []


def test_module_level_rebinding_shadows_import() -> None:
    code = """
    from pyspark.sql.functions import rand
    rand = lambda: 4
    out = df.withColumn("k", rand())
    """
    assert lint_code(code, keys=("k",)) == []


def test_helper_return_value_and_module_constant() -> None:
    code = """
    import uuid
    from pyspark.sql import functions as F

    RUN = str(uuid.uuid4())

    def run_tag(prefix):
        return f"{prefix}-{RUN}"

    out = df.withColumn("tag", F.lit(run_tag("x")))
    """
    assert summary(lint_code(code)) == [("ND003", 5, 11, "column", "tag")]


def test_fstring_and_str_into_sql_text() -> None:
    code = """
    import datetime
    today = str(datetime.date.today())
    out = spark.sql(f"SELECT id, '{today}' AS load_date FROM src")
    """
    assert summary(lint_code(code)) == [("ND001", 3, 13, "column", "load_date")]


def test_key_built_from_tainted_column_is_an_error() -> None:
    code = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink
    df2 = df.withColumn("salt", F.monotonically_increasing_id())
    df3 = df2.withColumn("id", F.sha2(F.concat_ws("|", F.col("name"), F.col("salt")), 256))
    df4 = df3.selectExpr("*", "sha2(concat_ws('|', id, other), 256) AS id2")
    UpsertSink("/t", ["id2"]).write(df4)
    """
    findings = lint_code(code)
    assert summary(findings) == [("ND004", 4, 29, "key", "id2")]
    assert findings[0].severity == "error"
    assert "`salt`" in findings[0].message and "`id`" in findings[0].message


def test_sql_positions_in_triple_quoted_multiline_string() -> None:
    code = '''
    out = spark.sql("""
        SELECT
            id,
            rand() AS noise,
            monotonically_increasing_id() AS row_id
        FROM src
    """)
    '''
    findings = lint_code(code, keys=("row_id",))
    assert summary(findings) == [("ND002", 5, 9, "column", "noise"), ("ND004", 6, 9, "key", "row_id")]
    assert (findings[1].end_line, findings[1].end_column) == (6, 36)


def test_sql_positions_with_escapes_and_implicit_concatenation() -> None:
    code = """
    out = df.selectExpr(
        "id",
        "concat('a\\\\tb', "  "uuid()) AS k",
    )
    """
    # line 4 is:     "concat('a\\tb', "  "uuid()) AS k",  -- the uuid starts after the second quote
    findings = lint_code(code, keys=("k",))
    assert summary(findings) == [("ND003", 4, 26, "key", "k")]


def test_sql_bare_keywords_and_expr() -> None:
    code = """
    from pyspark.sql import functions as F
    out = df.withColumn("day", F.expr("date_format(current_date, 'yyyy')"))
    out2 = df.filter("ts > current_timestamp - INTERVAL 1 DAY")
    """
    findings = lint_code(code, keys=("id",))
    assert summary(findings) == [("ND001", 3, 48, "column", "day"), ("ND001", 4, 24, "key", "id")]


def test_unix_timestamp_only_without_arguments() -> None:
    code = """
    from pyspark.sql import functions as F
    a = df.withColumn("a", F.unix_timestamp())
    b = df.withColumn("b", F.unix_timestamp("ts"))
    c = df.selectExpr("unix_timestamp() AS c", "unix_timestamp(ts) AS d")
    """
    assert [(r, line, col) for r, line, col, _, _ in summary(lint_code(code))] == [
        ("ND001", 3, 24),
        ("ND001", 5, 20),
    ]


def test_udf_decorated_wrapped_and_registered() -> None:
    code = """
    import random
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    def pick(x):
        return x + random.choice("abc")

    pick_udf = F.udf(pick, StringType())
    out = df.withColumn("k", pick_udf(F.col("a")))
    """
    findings = lint_code(code, keys=("k",))
    assert summary(findings) == [("ND010", 7, 16, "key", "k")]
    assert "UDF `pick_udf`" in findings[0].message


def test_when_otherwise_and_alias_in_select() -> None:
    code = """
    from pyspark.sql import functions as F
    out = df.select(
        "id",
        F.when(F.col("x") > 0, F.rand()).otherwise(F.lit(0)).alias("score"),
    )
    """
    assert summary(lint_code(code)) == [("ND002", 5, 28, "column", "score")]


def test_pandas_column_assignment() -> None:
    code = """
    import uuid
    pdf["event_id"] = [str(uuid.uuid4()) for _ in range(len(pdf))]
    """
    assert summary(lint_code(code, keys=("event_id",))) == [("ND003", 3, 24, "key", "event_id")]


def test_not_reported_when_never_reaching_data() -> None:
    code = """
    import logging
    import time
    from pyspark.sql import functions as F
    start = time.time()
    df.select(F.current_timestamp()).show()
    df.sample(0.1).show()
    logging.info("took %s", time.time() - start)
    print(F.rand())
    """
    assert lint_code(code, keys=("id",)) == []


def test_keys_from_upsertsink_positional_string_and_constants() -> None:
    code = """
    from pyspark.sql import functions as F
    import upsertsink as us
    KEYS = ("order_id", "line")
    SEQ = "version"
    df2 = df.withColumn("line", F.spark_partition_id()).withColumn("version", F.current_timestamp())
    us.UpsertSink("/t", KEYS, sequence_by=SEQ).write(df2)
    """
    got = summary(lint_code(code))
    assert got == [("ND004", 6, 29, "key", "line"), ("ND001", 6, 75, "sequence", "version")]


def test_keys_from_delta_spark_merge_condition() -> None:
    code = """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    src = df.withColumn("id", F.uuid())
    (DeltaTable.forPath(spark, "/t").alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"ts": "current_timestamp()"})
        .whenNotMatchedInsertAll()
        .execute())
    """
    got = summary(lint_code(code))
    assert got == [("ND003", 4, 27, "key", "id"), ("ND001", 7, 36, "column", "ts")]


def test_keys_from_deltalake_merge_predicate_and_updates() -> None:
    code = """
    import time
    from deltalake import DeltaTable
    dt = DeltaTable("/t")
    (dt.merge(source=data, predicate="target.k = source.k", source_alias="source", target_alias="target")
       .when_matched_update(updates={"k": "source.k", "seen": "now()"})
       .execute())
    data["k"] = time.time_ns()
    """
    got = summary(lint_code(code))
    assert got == [("ND001", 6, 60, "column", "seen"), ("ND001", 8, 13, "key", "k")]


def test_window_tie_heuristic_with_keys_and_sequence() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window as W
    tie = W.partitionBy("id").orderBy(F.desc("updated_at"))
    ok = W.partitionBy("id").orderBy(F.desc("updated_at"), "event_id")
    a = df.withColumn("rn", F.row_number().over(tie))
    b = df.withColumn("rn2", F.row_number().over(ok))
    c = df.withColumn("prev", F.lag("v").over(W.partitionBy("id").orderBy("version")))
    """
    got = summary(lint_code(code, sequence=("version",)))
    assert got == [("ND006", 6, 25, "column", "rn")]


def test_a_constant_second_sort_column_breaks_no_tie() -> None:
    # ``orderBy(F.col("updated_at").desc(), F.lit(0))``: the constant is the same on every row, so two rows
    # with the same updated_at still tie. Before, F.lit(0) counted as a second column, a tie-breaker.
    for extra in ("F.lit(0)", "F.lit('x').desc()", "lit(1)"):
        code = f"""
        from pyspark.sql import functions as F
        from pyspark.sql.functions import lit
        from pyspark.sql.window import Window
        w = Window.partitionBy("id").orderBy(F.col("updated_at").desc(), {extra})
        a = df.withColumn("rn", F.row_number().over(w))
        """
        assert summary(lint_code(code)) == [("ND006", 6, 25, "column", "rn")], extra
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    w = Window.partitionBy("id").orderBy(F.col("updated_at").desc(), F.col("event_id"), F.lit(0))
    a = df.withColumn("rn", F.row_number().over(w))
    """
    assert lint_code(code) == []


def test_an_ordering_unpacked_from_a_comprehension_over_a_constant_list() -> None:
    # ``orderBy(*[F.col(c).desc() for c in ORDER_COLS])``: the columns are ORDER_COLS. Before, the unpacked
    # list was one unknown column, so a two-column ordering was taken to tie.
    base = """
    from pyspark.sql import Window, functions as F
    ORDER_COLS = {cols}
    w = Window.partitionBy("id").orderBy(*[F.col(c).desc() for c in ORDER_COLS])
    a = df.withColumn("rn", F.row_number().over(w))
    """
    assert lint_code(base.format(cols='["updated_at", "ingest_seq"]')) == []
    assert summary(lint_code(base.format(cols='["updated_at"]'))) == [("ND006", 5, 25, "column", "rn")]
    filtered = base.replace("for c in ORDER_COLS]", "for c in ORDER_COLS if c]")
    assert summary(lint_code(filtered.format(cols='["updated_at", "ingest_seq"]'))) == [
        ("ND006", 5, 25, "column", "rn")
    ]


def test_a_window_ordered_by_a_nondeterministic_value_is_decided_by_it() -> None:
    # ``row_number()`` over ``orderBy(monotonically_increasing_id())`` numbers rows by a partition-dependent
    # id: that id's rule (ND004) is what reaches the column, not a tie (ND006). Before, the id in the
    # window was not followed at all and the numbering was reported as a tie.
    code = """
    from pyspark.sql import Window, functions as F
    w = Window.orderBy(F.monotonically_increasing_id())
    out = df.withColumn("row_key", F.row_number().over(w))
    """
    assert summary(lint_code(code, keys=("row_key",))) == [("ND004", 3, 20, "key", "row_key")]
    by_rand = """
    from pyspark.sql import Window, functions as F
    out = df.withColumn("pick", F.row_number().over(Window.partitionBy("id").orderBy(F.rand())))
    """
    assert [f.rule for f in lint_code(by_rand)] == ["ND002"]


def test_limit_with_order_through_variable() -> None:
    code = """
    ordered = df.orderBy("id")
    top = ordered.limit(10)
    other = df.limit(10)
    """
    assert summary(lint_code(code, keys=("id",))) == [("ND008", 4, 12, "key", "id")]


def test_noqa_on_line_and_file() -> None:
    code = """
    from pyspark.sql import functions as F
    a = df.withColumn("a", F.rand())  # noqa
    b = df.withColumn("b", F.rand())  # noqa: ND001, ND002
    c = df.withColumn("c", F.rand())  # noqa: ND001
    """
    assert summary(lint_code(code)) == [("ND002", 5, 24, "column", "c")]
    assert lint_code("# upsertsink: noqa\n" + code) == []


def test_noqa_at_the_end_of_a_multiline_sql_string() -> None:
    code = '''
    out = spark.sql("""
        SELECT rand() AS r FROM t
    """)  # noqa: ND002
    '''
    assert lint_code(code) == []


def test_message_says_what_where_why_and_how() -> None:
    code = """
    from pyspark.sql import functions as F
    df2 = df.withColumn("id", F.monotonically_increasing_id())
    """
    [finding] = lint_code(code, keys=("id",))
    assert "`F.monotonically_increasing_id()`" in finding.message
    assert "merge key `id`" in finding.message
    assert "replay" in finding.message
    assert "sha2(concat_ws(" in finding.message


def test_order_dependent_aggregate_ok_over_tie_free_window() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window
    w1 = Window.partitionBy("k").orderBy("ts", "seq")
    w2 = Window.partitionBy("k").orderBy("ts")
    a = df.withColumn("f1", F.first("v").over(w1))
    b = df.withColumn("f2", F.last("v").over(w2))
    """
    assert summary(lint_code(code)) == [("ND005", 7, 25, "column", "f2")]


def test_random_seeded_generators() -> None:
    code = """
    import random
    import numpy as np
    from pyspark.sql import functions as F
    rng = np.random.default_rng(42)
    a = df.withColumn("a", F.lit(float(rng.random())))
    r = random.Random()
    b = df.withColumn("b", F.lit(r.random()))
    c = df.withColumn("c", F.lit(float(np.random.rand())))
    """
    got = summary(lint_code(code))
    assert got == [("ND002", 7, 5, "column", "b"), ("ND002", 9, 36, "column", "c")]


def test_udf_registered_for_sql() -> None:
    code = """
    import uuid
    def make_id(x):
        return str(uuid.uuid4())
    spark.udf.register("mk", make_id)
    out = spark.sql("SELECT mk(name) AS id FROM t")
    """
    assert summary(lint_code(code, keys=("id",))) == [("ND010", 4, 16, "key", "id")]


def test_renamed_and_attribute_columns_carry_taint() -> None:
    code = """
    from pyspark.sql import functions as F
    df2 = df.withColumn("tmp", F.rand()).withColumnRenamed("tmp", "id")
    df3 = df2.select(df2.id.alias("key2"))
    """
    assert summary(lint_code(code, keys=("key2",))) == [("ND002", 3, 28, "key", "key2")]


def test_udf_marked_nondeterministic_is_still_followed() -> None:
    code = """
    import time
    from pyspark.sql.functions import udf
    my = udf(lambda x: x + str(time.time()), "string").asNondeterministic()
    out = df.withColumn("id", my("a"))
    """
    assert summary(lint_code(code, keys=("id",))) == [("ND010", 4, 28, "key", "id")]


def test_upsertsink_delete_when_decides_rows() -> None:
    code = """
    from upsertsink import UpsertSink
    import datetime
    cut = datetime.date.today().isoformat()
    UpsertSink("/t", "id", delete_when=f"event_date < '{cut}'").write(df)
    """
    findings = lint_code(code)
    assert summary(findings) == [("ND001", 4, 7, "key", "id")]
    assert "decides which rows are written" in findings[0].message


def test_display_and_print_are_look_only() -> None:
    code = """
    display(df.limit(10))
    print(df.sample(0.5).limit(3).collect())
    display(df.dropDuplicates(["id"]).select("id"))
    kept = df.limit(10)
    """
    assert summary(lint_code(code, keys=("id",))) == [("ND008", 5, 11, "key", "id")]


def test_now_strings_and_python_clock_variants() -> None:
    code = """
    import pandas as pd
    import numpy as np
    from time import time
    from datetime import datetime, timezone
    pdf["a"] = pd.Timestamp("now")
    pdf["b"] = np.datetime64("today")
    pdf["c"] = time()
    pdf["d"] = datetime.now(timezone.utc)
    pdf["e"] = pd.Timestamp("2024-01-01")
    """
    got = [(rule, line, col) for rule, line, col, _, _ in summary(lint_code(code))]
    assert got == [("ND001", 6, 12), ("ND001", 7, 12), ("ND001", 8, 12), ("ND001", 9, 12)]


def test_arguments_flow_into_helper_writes() -> None:
    code = """
    from datetime import datetime
    from pyspark.sql import functions as F

    def add_audit(df, ts, source="x"):
        return df.withColumn("loaded_at", F.lit(ts)).withColumn("src", F.lit(source))

    out = add_audit(raw, datetime.now())
    out2 = add_audit(raw, ts="2024-01-01", source="fixed")
    """
    assert summary(lint_code(code)) == [("ND001", 8, 22, "column", "loaded_at")]


def test_sql_merge_statement_keys_using_subquery_and_set() -> None:
    code = '''
    spark.sql("""
    MERGE INTO tgt t USING (SELECT *, uuid() AS id FROM src) s
    ON t.id = s.id
    WHEN MATCHED THEN UPDATE SET t.seen = current_timestamp()
    WHEN NOT MATCHED THEN INSERT *
    """)
    '''
    assert summary(lint_code(code)) == [("ND003", 3, 35, "key", "id"), ("ND001", 5, 39, "column", "seen")]


def test_column_merge_condition_gives_keys() -> None:
    code = """
    from pyspark.sql import functions as F
    from delta.tables import DeltaTable
    src = df.withColumn("id", F.rand())
    DeltaTable.forPath(spark, p).alias("t").merge(src.alias("s"), F.col("t.id") == F.col("s.id")).execute()
    """
    assert summary(lint_code(code)) == [("ND002", 4, 27, "key", "id")]


def test_dict_aggregation_with_order_dependent_function() -> None:
    code = """
    out = df.groupBy("k").agg({"v": "first", "w": "max"})
    """
    findings = lint_code(code)
    assert summary(findings) == [("ND005", 2, 33, "column", "first(v)")]


def test_sorted_or_counted_collections_are_deterministic() -> None:
    code = """
    from pyspark.sql import functions as F
    a = df.groupBy("k").agg(F.sort_array(F.collect_set("v")).alias("vs"))
    b = df.groupBy("k").agg(F.size(F.collect_list("v")).alias("n"))
    c = df.groupBy("k").agg(F.array_sort(F.collect_list(F.first("v"))).alias("x"))
    d = df.groupBy("k").agg(F.expr("sort_array(collect_set(v))").alias("vs2"))
    e = df.groupBy("k").agg(F.expr("concat_ws(',', collect_list(v))").alias("joined"))
    """
    got = [(rule, line, col, name) for rule, line, col, _, name in summary(lint_code(code))]
    assert got == [("ND005", 5, 53, "x"), ("ND005", 7, 48, "joined")]


def test_with_columns_dict_variable_assign_lambda_loc_and_expr_alias() -> None:
    code = """
    import time
    import uuid
    from pyspark.sql import functions as F
    cols = {"id": F.uuid(), "x": F.lit(1)}
    a = df.withColumns(cols)
    b = pdf.assign(rid=lambda d: [uuid.uuid4() for _ in range(len(d))])
    pdf.loc[:, "ts"] = time.time()
    c = df.select(F.expr("uuid() AS eid"))
    """
    assert summary(lint_code(code, keys=("id", "rid", "eid"))) == [
        ("ND003", 5, 15, "key", "id"),
        ("ND003", 7, 31, "key", "rid"),
        ("ND001", 8, 20, "column", "ts"),
        ("ND003", 9, 23, "key", "eid"),
    ]


def test_optional_import_fallback_keeps_the_import() -> None:
    code = """
    try:
        from pyspark.sql import functions as F
    except ImportError:
        F = None
    out = df.withColumn("k", F.rand())
    """
    assert summary(lint_code(code)) == [("ND002", 6, 26, "column", "k")]


def test_module_functions_named_like_dataframe_methods() -> None:
    code = """
    import random
    import numpy as np
    np.random.seed(1)
    picked = random.sample(range(10), 3)
    masked = np.where(np.random.rand(5) > 0.5, 1, 0)
    """
    assert lint_code(code, keys=("id",)) == []


def test_window_built_by_a_helper() -> None:
    code = """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    def latest_first(col):
        return Window.partitionBy("id").orderBy(F.col(col).desc())

    out = df.withColumn("rn", F.row_number().over(latest_first("ts")))
    """
    assert summary(lint_code(code)) == [("ND006", 8, 27, "column", "rn")]


def test_string_methods_carry_values() -> None:
    code = """
    import uuid
    from pyspark.sql import functions as F
    a = "{}-{}".format("x", uuid.uuid4())
    b = str(uuid.uuid1()).replace("-", "")
    c = "-".join(["x", str(uuid.uuid4())])
    out = df.withColumn("a", F.lit(a)).withColumn("b", F.lit(b)).withColumn("c", F.lit(c))
    """
    got = [(rule, line, name) for rule, line, _, _, name in summary(lint_code(code))]
    assert got == [("ND003", 4, "a"), ("ND003", 5, "b"), ("ND003", 6, "c")]


def test_upsertsink_imported_under_another_name_is_still_the_sink() -> None:
    module_alias = """
    from pyspark.sql import functions as F
    from upsertsink import UpsertSink as Sink
    df2 = df.withColumn("ref", F.monotonically_increasing_id())
    Sink("/t", ["ref"]).write(df2)
    """
    function_alias = """
    from pyspark.sql import functions as F
    def load(df):
        from upsertsink import UpsertSink as Sink
        df2 = df.withColumn("ref", F.monotonically_increasing_id())
        Sink("/t", ["ref"]).write(df2)
    """
    for code in (module_alias, function_alias):
        findings = lint_code(code)
        assert [(f.rule, f.target, f.column_name, f.severity) for f in findings] == [
            ("ND004", "key", "ref", "error")
        ]
