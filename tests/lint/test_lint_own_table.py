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
