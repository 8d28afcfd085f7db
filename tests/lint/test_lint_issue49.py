"""Issue #49: keys named at run time, clocks that only stamp, dropped columns (tests/lint/fixtures/issue49).

The fixture tree is labelled as the corpus is (``# expect: RULE SEVERITY TARGET COLUMN``) and linted as one
project: exactly the labelled findings. The tests below name each pattern of the issue on its own snippet,
so that a regression says which one it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_helpers import labelled, lint_code, lint_tree, reported

TREE = Path(__file__).resolve().parent / "fixtures" / "issue49"


@pytest.fixture(scope="module")
def linted(tmp_path_factory) -> dict:
    return lint_tree(TREE, tmp_path_factory.mktemp("issue49"))


def test_the_fixture_tree_gives_exactly_its_labels(linted: dict) -> None:
    want, have = labelled(TREE), reported(linted)
    missed = sorted(want - have, key=str)
    extra = sorted(have - want, key=str)
    assert not missed and not extra, f"missed: {missed}\nunexpected: {extra}"


def test_the_fixture_tree_has_every_kind_of_label(linted: dict) -> None:
    labels = labelled(TREE)
    assert {label[5] for label in labels} == {"key", "sequence", "column", "write"}
    assert any(label[6].startswith("{") for label in labels)  # a name that stays an expression


# ---- 1. names known at run time
def test_a_surrogate_key_named_by_a_parameter_that_is_the_merge_key_is_an_error() -> None:
    [f] = lint_code(
        """
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        def merge_with_key(spark, target, updates, key_col):
            staged = updates.withColumn(key_col, F.monotonically_increasing_id())
            cond = f"t.{key_col} = s.{key_col}"
            DeltaTable.forName(spark, target).alias("t").merge(staged.alias("s"), cond).whenNotMatchedInsertAll().execute()
        """
    )
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND004", "error", "key", "{key_col}")
    assert "merge key named by `key_col`" in f.message


def test_a_name_given_by_the_only_call_is_followed_to_its_value() -> None:
    [f] = lint_code(
        """
        from pyspark.sql import functions as F

        def stamp(df, column):
            return df.withColumn(column, F.current_timestamp())

        stamp(spark.read.table("raw.orders"), "loaded_at").write.saveAsTable("silver.orders")
        """
    )
    assert (f.rule, f.target, f.column_name) == ("ND001", "column", "loaded_at")


def test_calls_giving_different_names_leave_the_name_an_expression() -> None:
    [f] = lint_code(
        """
        from pyspark.sql import functions as F

        def stamp(df, column):
            return df.withColumn(column, F.current_timestamp())

        stamp(spark.read.table("raw.a"), "loaded_at").write.saveAsTable("silver.a")
        stamp(spark.read.table("raw.b"), "seen_at").write.saveAsTable("silver.b")
        """
    )
    assert (f.rule, f.column_name) == ("ND001", "{column}")
    assert "column named by `column`" in f.message


def test_attributes_set_from_the_constructor_name_columns_and_keys() -> None:
    findings = lint_code(
        """
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        class Dim:
            def __init__(self, table, keys, valid_to_col="valid_to"):
                self.table, self.keys, self.valid_to_col = table, keys, valid_to_col

            def expire(self, changes):
                cond = " AND ".join(f"t.{k} = s.{k}" for k in self.keys)
                (DeltaTable.forName(spark, self.table).alias("t").merge(changes.alias("s"), cond)
                    .whenMatchedUpdate(set={self.valid_to_col: F.current_timestamp()}).execute())

        Dim("gold.dim_store", ["store_id"], valid_to_col="end_ts").expire(spark.read.table("raw.stores"))
        """
    )
    assert [(f.rule, f.target, f.column_name, f.table) for f in findings] == [
        ("ND001", "column", "end_ts", "gold.dim_store")
    ]


def test_enum_members_and_class_constants_name_columns() -> None:
    findings = lint_code(
        """
        from enum import Enum
        from pyspark.sql import functions as F

        class Col(str, Enum):
            row_id = "row_id"

        class Audit:
            LOADED = "loaded_at"

        out = df.withColumn(Col.row_id.value, F.expr("uuid()")).withColumn(Audit.LOADED, F.current_date())
        out.write.saveAsTable("silver.rows")
        """
    )
    assert sorted((f.rule, f.column_name) for f in findings) == [("ND001", "loaded_at"), ("ND003", "row_id")]


def test_an_enum_member_of_another_file_names_a_column(tmp_path: Path) -> None:
    (tmp_path / "cols.py").write_text(
        "from enum import Enum\n\nclass ResultCol(str, Enum):\n    calculated_at = 'calculated_at'\n"
    )
    (tmp_path / "job.py").write_text(
        "from pyspark.sql import functions as F\nfrom cols import ResultCol\n\n"
        "df.withColumn(ResultCol.calculated_at, F.current_timestamp()).write.saveAsTable('gold.results')\n"
    )
    doc = lint_tree(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    assert [(f["path"], f["rule"], f["column_name"]) for f in doc["findings"]] == [
        ("job.py", "ND001", "calculated_at")
    ]


# ---- 2. only conditions decide rows
def clock_findings(code: str) -> list:
    """The wall-clock findings of a foreachBatch function (its MERGE's marker finding left out)."""
    return [f for f in lint_code(code) if f.rule == "ND001"]


def test_a_clock_only_in_set_clauses_and_null_tests_is_a_column_finding() -> None:
    [f] = clock_findings(
        '''
        from datetime import datetime

        def upsert(batch_df, batch_id):
            now = datetime.now().isoformat()
            batch_df.sparkSession.sql(f"""
                MERGE INTO silver.accounts t USING updates s
                ON t.account_id = s.account_id AND t.resolved_ts IS NULL
                WHEN MATCHED THEN UPDATE SET t.resolved_ts = '{now}'
            """)
        ''',
    )
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND001", "warning", "column", "resolved_ts")


def test_a_clock_compared_in_a_condition_still_decides_rows() -> None:
    [f] = clock_findings(
        '''
        from datetime import datetime

        def upsert(batch_df, batch_id):
            now = datetime.now().isoformat()
            batch_df.sparkSession.sql(f"""
                MERGE INTO silver.accounts t USING updates s
                ON t.account_id = s.account_id AND t.resolved_ts > '{now}'
                WHEN MATCHED THEN DELETE
            """)
        ''',
    )
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND001", "error", "key", "account_id")


def test_a_sql_update_writes_its_set_columns() -> None:
    [f] = lint_code(
        """
        from datetime import datetime
        now = datetime.now()
        spark.sql(f"UPDATE silver.jobs SET processed_ts = '{now}' WHERE processed_ts IS NULL")
        """
    )
    assert (f.rule, f.target, f.column_name, f.table) == ("ND001", "column", "processed_ts", "silver.jobs")


def test_a_dedup_whose_groups_share_the_sequence_is_not_a_sequence_error() -> None:
    findings = lint_code(
        """
        import dlt
        from pyspark.sql import functions as F

        @dlt.view
        def clicks():
            return (spark.readStream.table("raw.clicks").withColumn("day", F.to_date("ts"))
                    .dropDuplicates(["day", "session"]))

        dlt.create_streaming_table("silver_clicks")
        dlt.apply_changes(target="silver_clicks", source="clicks", keys=KEYS, sequence_by=F.to_date("ts"))
        """
    )
    assert [(f.rule, f.severity, f.target) for f in findings] == [("ND007", "warning", "column")]


# ---- 3. dropped is dropped
def test_a_column_dropped_by_a_window_aggregation_is_not_written() -> None:
    assert not lint_code(
        """
        from pyspark.sql import functions as F

        views = (spark.readStream.table("raw.pages").withColumn("inserted_at", F.current_timestamp())
                 .groupBy(F.window("event_time", "5 minutes"), "page").agg(F.count("*").alias("views")))
        views.writeStream.toTable("gold.page_views")
        """
    )


def test_the_other_side_of_a_semi_join_is_not_written() -> None:
    assert not lint_code(
        """
        from pyspark.sql import functions as F

        scored = spark.read.table("raw.scores").withColumn("score", F.rand())
        users = spark.read.table("raw.users").join(scored, "user_id", "left_semi")
        users.write.saveAsTable("gold.users")
        """
    )


def test_a_collected_array_only_counted_in_a_filter_gives_nothing() -> None:
    assert not lint_code(
        """
        from pyspark.sql import functions as F

        cats = spark.read.table("raw.p").groupBy("user_id").agg(F.collect_list("category").alias("cats"))
        risky = (spark.read.table("raw.u").join(cats, "user_id")
                 .filter(F.size(F.array_intersect("cats", F.array(F.lit("crypto")))) >= 1)
                 .select("user_id", "email"))
        risky.write.saveAsTable("gold.risky")
        """
    )


# ---- 4. f-string names in loops
def test_f_string_names_in_a_loop_over_a_literal_list_are_expanded() -> None:
    [f] = lint_code(
        """
        from pyspark.sql import functions as F

        for c in ["A", "B"]:
            df = df.withColumn(f"{c}_CLEAN", F.when(F.col(c) > F.current_date(), None).otherwise(F.col(c)))
        df.write.saveAsTable("silver.t")
        """
    )
    assert (f.rule, f.column_name) == ("ND001", "A_CLEAN")
    assert "it also reaches `B_CLEAN`" in f.message
