"""Columns a query's outer projection leaves out are not written: a numbering kept only to choose rows
(``SELECT a, b FROM (SELECT *, row_number() OVER (...) AS rn ...) WHERE rn = 1``, ``SELECT * EXCEPT (rn)``,
``.filter("rn = 1").select("a", "b")``) decides which rows are written, as ``.drop("rn")`` does."""

from __future__ import annotations

from lint_helpers import lint_code

_VIEW = '''
spark.sql("""
CREATE OR REPLACE TEMP VIEW latest AS
SELECT user_id, event_ts
FROM (
  SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY event_ts DESC) AS rn
  FROM bronze.events
) WHERE rn = 1
""")
spark.sql("MERGE INTO silver.last_event t USING latest s ON t.user_id = s.user_id "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
'''


def _rows(findings: list) -> list[tuple[str, int, str, str | None, str | None]]:
    return [(f.rule, f.line, f.severity, f.target, f.column_name) for f in findings]


def _got(code: str) -> list[tuple[str, int, str, str | None, str | None]]:
    return _rows(lint_code(code, key_patterns=()))


def test_a_numbering_the_outer_select_leaves_out_decides_rows() -> None:
    # before: "it reaches column `rn` (table `silver.last_event`)", though the outer SELECT does not project rn
    findings = lint_code(_VIEW, key_patterns=())
    assert _rows(findings) == [("ND006", 6, "warning", "column", "*")]
    [finding] = findings
    assert "decides which rows are written (all columns) into table `silver.last_event`" in finding.message
    assert "`rn`" not in finding.message


def test_a_numbering_the_outer_select_projects_is_still_written() -> None:
    for outer in ("SELECT *", "SELECT user_id, event_ts, rn", "SELECT user_id, event_ts, e.*"):
        code = _VIEW.replace("SELECT user_id, event_ts\n", outer + "\n").replace(") WHERE", ") e WHERE")
        assert ("ND006", 6, "warning", "column", "rn") in _got(code), outer


def test_a_value_read_by_an_outer_expression_reaches_that_expression() -> None:
    # x is not written; y = x + 1 is, and carries its randomness
    code = '''
    spark.sql("""
    INSERT INTO silver.scores
    SELECT id, x + 1 AS y FROM (SELECT id, rand() AS x FROM bronze.scores)
    """)
    '''
    assert _got(code) == [("ND002", 4, "warning", "column", "y")]


def test_star_except_leaves_the_listed_columns_out() -> None:
    # before: a column named `* EXCEPT (rn)`
    code = '''
    from delta.tables import DeltaTable
    latest = spark.sql("""
    SELECT * EXCEPT (rn)
    FROM (
      SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY event_ts DESC) AS rn
      FROM bronze.events
    ) WHERE rn = 1
    """)
    (DeltaTable.forName(spark, "silver.last_event").alias("t")
        .merge(latest.alias("s"), "t.user_id = s.user_id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    '''
    findings = lint_code(code, key_patterns=())
    assert _rows(findings) == [("ND006", 6, "warning", "column", "*")]
    [finding] = findings
    assert "decides which rows are written (all columns) into table `silver.last_event`" in finding.message
    # a star that leaves out other columns still writes rn
    kept = code.replace("EXCEPT (rn)", "EXCEPT (event_ts)")
    assert [(f.line, f.column_name) for f in lint_code(kept, key_patterns=())] == [(6, "rn")]


def test_an_ordering_before_a_sql_limit_decides_rows() -> None:
    # ORDER BY rand() LIMIT n is a random sample, as orderBy(F.rand()).limit(n) is; it gave nothing
    code = '''
    spark.sql("INSERT INTO silver.x SELECT id, v FROM bronze.x ORDER BY rand() LIMIT 10")
    spark.sql("INSERT INTO silver.y SELECT id, v FROM bronze.y ORDER BY id LIMIT 10")
    spark.sql("INSERT INTO silver.z SELECT id, v FROM (SELECT id, v, rand() AS r FROM bronze.z) ORDER BY r LIMIT 10")
    '''
    findings = lint_code(code, key_patterns=())
    assert [(f.rule, f.line, f.severity, f.column_name) for f in findings] == [
        ("ND002", 2, "warning", "*"),
        ("ND002", 4, "warning", "*"),
    ]
    assert all("decides which rows are written (all columns)" in f.message for f in findings)


_SELECTED = """
from delta.tables import DeltaTable
from pyspark.sql import Window, functions as F
w = Window.partitionBy("user_id").orderBy(F.col("event_ts").desc())
latest = spark.table("bronze.events").withColumn("rn", F.row_number().over(w)).filter("rn = 1").select({})
(DeltaTable.forName(spark, "silver.last_event").alias("t")
    .merge(latest.alias("s"), "t.user_id = s.user_id")
    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
"""


def test_a_select_that_leaves_the_numbering_out_drops_it() -> None:
    # .filter("rn = 1").select("user_id", "event_ts") writes no rn, as .drop("rn") does; it reached column rn
    # ... and so does one whose expressions are all given known names (it kept rn before)
    for selected in ('"user_id", "event_ts"', '["user_id", "event_ts"]', 'F.col("user_id"), "event_ts"',
                     'F.col("user_id").alias("u"), F.col("event_ts").cast("date").name("day")'):
        assert _got(_SELECTED.format(selected)) == [("ND006", 5, "warning", "column", "*")], selected
    # a select that keeps rn, or whose columns are not all known by name, keeps it (an unnamed expression
    # is not read as naming its output)
    for selected in ('"user_id", "rn"', '"*"', 'F.upper("user_id"), "event_ts"', "*COLS",
                     'F.col("user_id").alias(name), "event_ts"', 'F.col("rn").alias("rn")'):
        assert _got(_SELECTED.format(selected)) == [("ND006", 5, "warning", "column", "rn")], selected
