"""Issue 24, the parts that hold today: shell and magic lines of Databricks exports skipped like magics
(lint/check/notebooks.py), declarative pipelines (item 3: CDC flows' keys and sequences, pipeline functions as
batch functions), and guards that the fixes still pending (tests/lint/fixtures/issue24) must keep."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from issue24_helpers import FIXTURES, at, brief, lint_fixture, lint_text, text
from upsertsink.lint.check.notebooks import convert_databricks
from upsertsink.lint.command.cli import lint_command

# ------------------------------------------------------------- shell lines in Databricks exports


def test_shell_lines_in_a_databricks_export_are_skipped_like_magics() -> None:
    # before: ND000 at line 6 ("!pip install"), nothing else in the file checked
    source = text("shell_lines_export.py")
    line, col = at(source, "F.monotonically_increasing_id()")
    assert brief(lint_fixture("shell_lines_export.py")) == [("ND004", "error", line, col, "key", "order_key")]


def test_shell_lines_become_no_ops_and_keep_their_line_numbers() -> None:
    source = text("shell_lines_export.py")
    conv = convert_databricks(source)
    raw, out = source.split("\n"), conv.text.split("\n")
    assert len(out) == len(raw)
    changed = {i + 1: (a, b) for i, (a, b) in enumerate(zip(raw, out, strict=True)) if a != b}
    assert changed == {
        6: ("!pip install -q delta-spark==3.1.0", "pass"),
        7: ("!ls /dbfs/mnt/landing", "pass"),
        8: ("files = !ls /dbfs/mnt/landing", "files = None"),
        10: ('    !echo "nothing landed"', "    pass"),
    }


def test_percent_and_bang_inside_expressions_and_strings_are_left_alone() -> None:
    source = (
        "# Databricks notebook source\n"
        "!pip install -q pyyaml\n"
        "ratio = (total\n"
        "         %width)\n"
        "same = (a\n"
        "        != b)\n"
        'query = """\n'
        "%s\n"
        "!important\n"
        '"""\n'
    )
    conv = convert_databricks(source)
    out = conv.text.split("\n")
    assert out[1] == "pass"
    assert out[2:] == source.split("\n")[2:]
    assert lint_text("nb.py", source) == []


def test_a_real_syntax_error_next_to_shell_lines_is_still_reported() -> None:
    source = "# Databricks notebook source\n!pip install -q pyyaml\n\n# COMMAND ----------\n\ndef broken(:\n    pass\n"
    [finding] = lint_text("nb.py", source)
    assert (finding.rule, finding.line) == ("ND000", 6)


def test_cells_with_a_magic_written_without_the_magic_prefix() -> None:
    source = (
        "# Databricks notebook source\n"
        "%sh\n"
        "ls -la /dbfs/tmp\n"
        'echo "done" )))\n'
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "%sql\n"
        "CREATE OR REPLACE TABLE dw.daily AS\n"
        "SELECT to_date(ts) AS day, now() AS computed_on FROM dw.clicks\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "%run ./setup\n"
    )
    conv = convert_databricks(source)
    assert conv.text.split("\n")[1:4] == ["", "", ""]
    assert conv.runs == ["./setup"]
    line, col = at(source, "now()")
    assert brief(lint_text("nb.py", source)) == [("ND001", "warning", line, col, "column", "computed_on")]


def test_magic_lines_of_other_languages_stay_comments() -> None:
    source = text("shell_lines_export.py")
    conv = convert_databricks(source)
    for i, line in enumerate(source.split("\n")):
        if line.startswith("# MAGIC"):
            assert conv.text.split("\n")[i] == line


def test_a_databricks_export_with_shell_lines_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "ingest.py").write_text(text("shell_lines_export.py"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        lint_command, ["nb", "--format", "json", "--no-cache"], catch_exceptions=False
    )
    doc = json.loads(result.output)
    assert [(f["rule"], f["column_name"]) for f in doc["findings"]] == [("ND004", "order_key")]
    assert result.exit_code == 1


# ------------------------------------------------------------- 4. display-only SQL and evaluators


def test_a_quick_look_sql_cell_in_a_databricks_export_writes_nothing() -> None:
    # today: ND008 warning column * at the quick look's LIMIT 10 (and at the INSERT's LIMIT 100, which is right)
    source = text("quicklook_export.py")
    insert_line, _ = at(source, "LIMIT 100")
    assert [(f.rule, f.line) for f in lint_fixture("quicklook_export.py")] == [("ND008", insert_line)]


def test_quick_look_sql_cells_in_a_jupyter_notebook_write_nothing() -> None:
    # today: ND008 warning in cell 3 (line 2) and cell 4 (line 5)
    assert brief(lint_fixture("quicklook.ipynb")) == []


def test_a_select_cell_read_back_through_sqldf_is_written() -> None:
    # Databricks keeps the last SQL cell's result as the DataFrame _sqldf: then the SELECT is not a quick look
    source = (
        "# Databricks notebook source\n"
        "# MAGIC %sql\n"
        "# MAGIC SELECT order_id, amount FROM dw.orders LIMIT 10\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "_sqldf.write.mode('append').saveAsTable('dw.orders_sample')\n"
    )
    assert [(f.rule, f.line) for f in lint_text("sqldf.py", source)] == [("ND008", 3)]


def test_a_select_statement_thrown_away_in_python_writes_nothing() -> None:
    source = (
        "from pyspark.sql import functions as F\n"
        "spark.sql('SELECT id, rand() AS r FROM t LIMIT 10')\n"
        "top = spark.sql('SELECT id, rand() AS r FROM t LIMIT 10')\n"
        "top.write.saveAsTable('dw.top')\n"
    )
    assert sorted({(f.rule, f.line) for f in lint_text("job.py", source)}) == [("ND002", 3), ("ND008", 3)]


def test_an_evaluator_fed_through_a_helper_decides_no_written_rows() -> None:
    # today: ND008 warning column * at test_df.limit(1000) (line 14)
    assert brief(lint_fixture("evaluate_helper.py")) == []


HELPERS = """\
def save(df, table):
    out = df.withColumn("n", F.lit(1))
    out.write.saveAsTable(table)


def score(model, df):
    return model.transform(df)


save(spark.table("a").limit(10), "dw.a")
scored = score(model, spark.table("b").limit(10))
scored.write.saveAsTable("dw.b")
sample = spark.table("c").limit(10)
preview = sample.select("x")
display(preview)
"""


def test_a_helper_that_writes_or_returns_what_it_is_given_keeps_the_row_choice() -> None:
    # followed into the helper: a write (line 10) and a returned DataFrame written (line 11) stay reported;
    # a limit only handed on through names to display() (line 13) writes nothing
    assert [(f.rule, f.line) for f in lint_text("helpers.py", HELPERS)] == [("ND008", 10), ("ND008", 11)]


# ------------------------------------------------------------- 4. values outside DataFrames


def test_python_records_written_with_write_deltalake() -> None:
    # today: nothing
    source = text("records_arrow.py")
    assert brief(lint_fixture("records_arrow.py")) == [
        ("ND003", "warning", *at(source, "uuid.uuid4()"), "column", "event_id"),
        ("ND001", "warning", *at(source, "datetime.now("), "column", "loaded_at"),
    ]


def test_python_records_merged_on_a_generated_key() -> None:
    # today: nothing
    source = text("records_pandas_merge.py")
    assert brief(lint_fixture("records_pandas_merge.py", key_patterns=())) == [
        ("ND003", "error", *at(source, "uuid.uuid4()"), "key", "check_key"),
        ("ND001", "warning", *at(source, "datetime.now()"), "column", "checked_at"),
    ]


def test_a_widget_default_from_the_wall_clock_reaches_a_column() -> None:
    # today: nothing
    source = text("widget_default.py")
    assert brief(lint_fixture("widget_default.py")) == [
        ("ND001", "warning", *at(source, "datetime.now()"), "column", "run_ts")
    ]


RECORDS = """\
import uuid
from datetime import datetime

import pandas as pd

clean = [{"id": r["id"], "v": r["v"] * 2} for r in rows]
spark.createDataFrame(clean).write.saveAsTable("dw.clean")
shown = pd.DataFrame([{"at": datetime.now()}])
print(shown)
rows_out = [dict(run_id=str(uuid.uuid4()), n=1)]
spark.createDataFrame(rows_out).write.saveAsTable("dw.runs")
"""


def test_records_are_followed_only_where_a_source_reaches_a_written_field() -> None:
    # deterministic records are clean, records only printed write nothing, dict(...) records count too
    assert [(f.rule, f.line, f.column_name) for f in lint_text("records.py", RECORDS)] == [
        ("ND003", 10, "run_id")
    ]


WIDGETS = """\
# Databricks notebook source
from datetime import datetime

from pyspark.sql import functions as F

dbutils.widgets.dropdown("env", "dev", ["dev", "prod"])
env = dbutils.widgets.get("env")
other = dbutils.widgets.get("missing")
cfg = {"a": datetime.now()}
x = cfg.get("a")
out = spark.table("t").withColumn("env", F.lit(env)).withColumn("o", F.lit(other))
out.withColumn("x", F.lit(x)).write.saveAsTable("dw.t")
"""


def test_constant_widget_defaults_and_other_gets_carry_nothing_of_a_widget() -> None:
    # a constant default is clean; a dict's .get is not a widget read (its own value is followed as before)
    got = [(f.rule, f.line, f.column_name) for f in lint_text("widgets.py", WIDGETS)]
    assert got == [("ND001", 9, "x")]


def test_pandas_head_and_iloc_on_an_unordered_frame_choose_the_written_rows() -> None:
    # today: nothing. Mirrors Spark's limit(): ND008 warning column "*" at the method, no keys known.
    source = text("pandas_head.py")
    assert brief(lint_fixture("pandas_head.py")) == [
        ("ND008", "warning", *at(source, "head(500)"), "column", "*"),
        ("ND008", "warning", *at(source, "iloc[:200]"), "column", "*"),
    ]


def test_a_frame_built_from_pandas_dataframe_imported_by_name_is_followed() -> None:
    # before: nothing (only ``pd.DataFrame(...)`` was read as pandas: records and head(n) alike)
    source = text("pandas_imported_name.py")
    assert brief(lint_fixture("pandas_imported_name.py")) == [
        ("ND003", "warning", *at(source, "uuid.uuid4()"), "column", "event_id"),
        ("ND001", "warning", *at(source, "datetime.now("), "column", "loaded_at"),
        ("ND008", "warning", *at(source, "head(500)"), "column", "*"),
    ]


def test_a_dataframe_name_not_from_pandas_is_not_a_pandas_frame() -> None:
    source = (
        "import uuid\n"
        "from mylib import DataFrame\n"
        "records = [{'event_id': str(uuid.uuid4())}]\n"
        "write_deltalake('/lake/e', DataFrame(records).head(5))\n"
    )
    assert lint_text("own_frame.py", source) == []


def test_records_accumulated_with_extend_and_plus_equals_are_followed() -> None:
    # before: only ND001 (``+=`` binds the list); ``extend`` of a generator of dicts was not read
    source = text("records_extend.py")
    assert brief(lint_fixture("records_extend.py")) == [
        ("ND003", "warning", *at(source, "uuid.uuid4()"), "column", "check_id"),
        ("ND001", "warning", *at(source, "datetime.now("), "column", "checked_at"),
    ]


def test_pandas_tail_and_head_of_a_column_subset_choose_the_written_rows() -> None:
    # before: nothing. tail(n) is head(n) from the other end; pdf[cols] keeps every row in the frame's order
    source = text("pandas_tail_subset.py")
    assert brief(lint_fixture("pandas_tail_subset.py")) == [
        ("ND008", "warning", *at(source, "tail(100)"), "column", "*"),
        ("ND008", "warning", *at(source, "head()"), "column", "*"),
    ]
    assert "tail() without sort_values" in lint_fixture("pandas_tail_subset.py")[0].message


def test_spark_tail_only_looks() -> None:
    source = (
        "from pyspark.sql import functions as F\n"
        "df = spark.table('t').withColumn('ts', F.current_timestamp())\n"
        "print(df.limit(10).tail(2))\n"
    )
    assert lint_text("spark_tail.py", source) == []


PANDAS_LOOKS = """\
import pandas as pd

pdf = pd.read_parquet("/lake/orders")
pdf.head()
pdf.iloc[:5]
print(pdf.head(20))
by_index = pdf.sort_index().iloc[:100]
rows = spark.table("dw.orders").head(5)
spark.createDataFrame(rows).write.saveAsTable("dw.first_orders")
write_deltalake("/lake/by_index", by_index)
"""


def test_pandas_picks_that_are_only_shown_sorted_or_spark_actions_are_clean() -> None:
    # a notebook shows pdf.head() / pdf.iloc[:5] alone on a line; print() only looks; sort_index orders;
    # Spark's head(5) is an action on a DataFrame that is not pandas
    assert lint_text("pandas_looks.py", PANDAS_LOOKS) == []


FETCHED = """\
import uuid

import pandas as pd
from deltalake import write_deltalake
from pyspark.sql import functions as F

records = [{"event_id": str(uuid.uuid4())} for _ in range(3)]
pdf = pd.DataFrame(records)
write_deltalake("/lake/e", pdf.head(100))
df = spark.table("t").withColumn("ts", F.current_timestamp())
local = df.toPandas()
write_deltalake("/lake/t", local)
shown = spark.table("t").withColumn("seen", F.current_timestamp())
n = shown.count()
print(n)
"""


def test_rows_fetched_to_the_driver_and_written_are_followed() -> None:
    # head()/toPandas() only look unless what they return is kept and written (count() printed: only looks)
    got = [(f.rule, f.line, f.column_name) for f in lint_text("fetched.py", FETCHED)]
    assert got == [("ND003", 7, "event_id"), ("ND008", 9, "*"), ("ND001", 10, "ts")]


def test_a_widget_defined_in_a_run_notebook_reaches_the_notebook_that_reads_it(tmp_path: Path) -> None:
    # before: nothing (widgets were followed within one notebook only)
    from upsertsink.lint.run.config import Settings
    from upsertsink.lint.run.runner import lint_paths

    folder = tmp_path / "nb"
    shutil.copytree(FIXTURES / "run_widgets", folder)
    settings = Settings()
    settings.root = tmp_path
    found = lint_paths([folder], settings, use_cache=False).findings
    source = (folder / "load_events.py").read_text(encoding="utf-8")
    assert [(Path(f.path).name, f.rule, f.line, f.column, f.target, f.column_name) for f in found] == [
        ("load_events.py", "ND001", *at(source, 'dbutils.widgets.get("run_ts")'), "column", "run_ts")
    ]
    assert "setup.py:9" in found[0].message and "datetime.now()" in found[0].message
    # the notebook alone knows nothing of the widget's default: no finding, as before
    assert lint_fixture("run_widgets/load_events.py") == []


# ------------------------------------------------------------- guards the pending fixes must keep


def test_an_insert_with_limit_in_a_databricks_sql_cell_is_still_reported() -> None:
    source = text("quicklook_export.py")
    line, _col = at(source, "LIMIT 100")
    got = [(f.rule, f.line) for f in lint_fixture("quicklook_export.py")]
    assert ("ND008", line) in got


def test_display_of_a_limit_is_not_a_written_row_choice() -> None:
    source = text("evaluate_helper.py")
    line, _col = at(source, "display(")
    assert all(f.line != line for f in lint_fixture("evaluate_helper.py"))


def test_an_overwrite_in_a_pipeline_table_function_is_not_an_append() -> None:
    source = text("pipeline_tables.py")
    line, _col = at(source, 'mode("overwrite")')
    assert all(f.line != line for f in lint_fixture("pipeline_tables.py"))


def test_a_sorted_pandas_head_is_not_a_row_choice() -> None:
    source = text("pandas_head.py")
    line, _col = at(source, "sort_values")
    assert all(f.line != line for f in lint_fixture("pandas_head.py"))


def test_every_fixture_is_read() -> None:
    for path in sorted(FIXTURES.iterdir()):
        if path.suffix in (".py", ".ipynb"):
            assert all(f.rule != "ND000" for f in lint_fixture(path.name)), path.name


# ------------------------------------------------------------- hidden state: one answer per code


def test_row_number_column_over_a_window_ordered_by_the_key_is_clean_in_every_form() -> None:
    # docs/rules.md ND006: an ordering that includes a merge key cannot tie -> not reported.
    # Before the staged analysis the bare `rn` form gave ND006 warning column rn (its taint was computed
    # while collecting, before the UpsertSink's keys were known); `rn.alias("rn")` and `--key id` were clean.
    source = text("hidden_state_select.py")
    bare = lint_text("job.py", source)
    aliased = lint_text("job.py", source.replace('"region", rn)', "\"region\", rn.alias('rn'))"))
    with_key = lint_text("job.py", source, keys=("id",))
    assert brief(bare) == brief(aliased) == brief(with_key) == []


def test_limit_after_an_ordering_by_a_tie_free_row_number_is_clean_in_every_form() -> None:
    # Before the staged analysis: ND006 error key id without --key (the limit extractor computed the
    # ordering's taint while collecting); clean with --key id.
    source = text("hidden_state_limit.py")
    assert brief(lint_text("job.py", source)) == brief(lint_text("job.py", source, keys=("id",))) == []


# ------------------------------------------------------------- 2. keys per target table


def _by_source_line(name: str, source: str) -> set[tuple]:
    lines = source.split("\n")
    return {
        (f.rule, f.severity, f.target, f.column_name, lines[f.line - 1].strip())
        for f in lint_text(name, source, key_patterns=())
    }


@pytest.mark.parametrize(
    ("combined", "halves"),
    [
        ("two_merges.py", ("customers_merge.py", "orders_merge.py")),
        ("two_merges_window.py", ("latest_orders_merge.py",)),
    ],
)
def test_each_write_is_judged_against_its_own_tables_keys(combined: str, halves: tuple[str, ...]) -> None:
    # Before keys per table, two_merges.py gave ND007 *error* key order_id (the orders MERGE's key) on the
    # customers dedup by id; alone, customers_merge.py gives ND007 warning column "*". two_merges_window.py
    # gave ND006 error key order_id; alone, latest_orders_merge.py gives ND006 warning column rn.
    want: set[tuple] = set()
    for half in halves:
        want |= _by_source_line(half, text(half))
    assert _by_source_line(combined, text(combined)) == want


def test_a_finding_names_the_table_its_write_goes_to() -> None:
    # Before: "it decides which rows are written (merge key `order_id`)", the other MERGE's key and no table.
    [finding] = lint_fixture("two_merges.py", key_patterns=())
    assert (finding.rule, finding.severity, finding.target, finding.column_name) == (
        "ND007",
        "warning",
        "column",
        "*",
    )
    assert "it decides which rows are written (all columns) into table `/mnt/dw/customers`" in finding.message


def test_key_findings_name_the_table_whose_key_it_is() -> None:
    source = """
        from delta.tables import DeltaTable
        import pyspark.sql.functions as F

        orders = spark.table("raw.orders").withColumn("order_id", F.expr("uuid()"))
        (DeltaTable.forPath(spark, "/mnt/dw/orders").alias("t")
            .merge(orders.alias("s"), "t.order_id = s.order_id").whenNotMatchedInsertAll().execute())
        events = spark.table("raw.events").withColumn("order_id", F.expr("uuid()"))
        events.write.mode("overwrite").saveAsTable("audit.events")
    """
    findings = lint_text("job.py", textwrap.dedent(source), key_patterns=())
    assert [(f.line, f.severity, f.target, f.column_name) for f in findings] == [
        (5, "error", "key", "order_id"),
        (8, "warning", "column", "order_id"),  # written to audit.events, a table without that key
    ]
    assert "it reaches merge key `order_id` (table `/mnt/dw/orders`)" in findings[0].message


def test_the_json_output_names_the_table_in_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\nkey-patterns = []\n")
    shutil.copy(FIXTURES / "two_merges.py", tmp_path / "two_merges.py")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(lint_command, [".", "--format", "json", "--no-cache"], catch_exceptions=False)
    doc = json.loads(result.output)
    assert [(f["rule"], f["severity"], f["column_name"]) for f in doc["findings"]] == [
        ("ND007", "warning", "*")
    ]
    assert "`/mnt/dw/customers`" in doc["findings"][0]["message"]
    assert "table" not in doc["findings"][0]  # the JSON shape stays the documented one


# ------------------------------------------------------------- 3. declarative pipelines


def test_apply_changes_sequence_by_the_wall_clock_is_an_error() -> None:
    # before: nothing (apply_changes was not read)
    source = text("pipeline_apply_changes.py")
    line, col = at(source, "F.current_timestamp()")
    got = [
        (f.rule, f.severity, f.line, f.column, f.target) for f in lint_fixture("pipeline_apply_changes.py")
    ]
    assert got == [("ND001", "error", line, col, "sequence")]


def test_auto_cdc_sequence_column_computed_from_the_wall_clock_is_an_error() -> None:
    # before: ND001 warning column ingested_at
    source = text("pipeline_auto_cdc.py")
    line, col = at(source, "F.current_timestamp()")
    assert brief(lint_fixture("pipeline_auto_cdc.py")) == [
        ("ND001", "error", line, col, "sequence", "ingested_at")
    ]


def test_an_scd_type_2_flow_with_a_nondeterministic_sequence_rewrites_history() -> None:
    # before: the type 1 wording ("the newer-wins check compares values..."); type 2 keeps every version,
    # opened and closed at its sequence value, so a replay rewrites the history rows
    source = text("pipeline_scd2.py")
    found = lint_fixture("pipeline_scd2.py")
    assert brief(found) == [
        ("ND001", "error", *at(source, "F.current_timestamp()"), "sequence", "F.current_timestamp()"),
        ("ND001", "error", *at(source, "now()"), "sequence", "now()"),
    ]
    for f in found:
        assert "of an SCD type 2 pipeline flow (`stored_as_scd_type=2`)" in f.message
        assert "rewrites history on every replay" in f.message
        assert "`__START_AT`" in f.message


def test_a_type_1_flow_keeps_the_newer_wins_wording() -> None:
    found = lint_fixture("pipeline_apply_changes.py")
    assert [f.severity for f in found] == ["error"]
    assert "rewrites history" not in found[0].message and "newer-wins" in found[0].message


def test_pipelines_api_keys_generated_in_the_source_view_are_errors() -> None:
    # before: ND003 warning column order_ref, ND004 warning column line_ref
    source = text("pipeline_dp_keys.py")
    uuid_at, mono_at = at(source, "uuid()"), at(source, "F.monotonically_increasing_id()")
    findings = lint_fixture("pipeline_dp_keys.py", key_patterns=())
    assert brief(findings) == [
        ("ND003", "error", *uuid_at, "key", "order_ref"),
        ("ND004", "error", *mono_at, "key", "line_ref"),
    ]
    assert "key of the pipeline flow into `orders` `order_ref`" in findings[0].message


def test_pipeline_table_functions_are_batch_functions_for_the_write_rules() -> None:
    # before: nothing. The same functions taking a batch_id parameter give exactly these two findings (the
    # write rules report at the method's name: `merge`, not the dot before it); the overwrite in
    # @dp.table region_snapshot stays clean.
    source = text("pipeline_tables.py")
    append_at = at(source, "saveAsTable(", 1)
    merge_at = at(source, "merge(")
    findings = lint_fixture("pipeline_tables.py")
    got = [(f.rule, f.severity, f.line, f.column) for f in findings]
    assert got == [
        ("ND011", "error", append_at[0], append_at[1]),
        ("ND013", "warning", merge_at[0], merge_at[1]),
    ]
    append, merge = findings
    assert "in the pipeline function `daily_totals` (run again on every update)" in append.message
    assert "txnAppId/txnVersion writer options" not in append.message  # there is no epoch id to give them
    assert append.fix is None
    assert "`@dp.append_flow(target=...)`" in append.message
    assert "in the pipeline function `store_totals` (run again on every update)" in merge.message
    assert "create_auto_cdc_flow" in merge.message


_CLOCK_VIEW = (
    "import dlt\n"
    "from pyspark.sql import functions as F\n\n"
    "@dlt.view\n"
    "def feed():\n"
    '    return spark.readStream.table("raw.cdc").withColumn("seq", F.current_timestamp())\n\n'
)


@pytest.mark.parametrize(
    "flow",
    [
        'dlt.apply_changes(target="t", source="feed", keys=["id"], sequence_by="seq")',
        'dlt.apply_changes("t", "feed", ["id"], F.col("seq"))',
        'dlt.create_auto_cdc_flow(target="t", source="feed", keys=[F.col("id")], sequence_by=F.expr("seq"))',
        'dlt.apply_changes(target="t", source="feed", keys=["id"], sequence_by=F.struct("seq", "op_id"))',
    ],
)
def test_the_sequence_column_of_a_flow_in_every_form(flow: str) -> None:
    source = _CLOCK_VIEW + flow + "\n"
    line, col = at(source, "F.current_timestamp()")
    assert brief(lint_text("pipeline.py", source)) == [("ND001", "error", line, col, "sequence", "seq")]


def test_a_flow_imported_by_name_and_a_sequence_in_sql_text() -> None:
    source = (
        "from dlt import apply_changes\n"
        'apply_changes(target="t", source="feed", keys=["id"], sequence_by="coalesce(v, current_timestamp())")\n'
    )
    line, col = at(source, "current_timestamp()")
    assert brief(lint_text("pipeline.py", source)) == [
        ("ND001", "error", line, col, "sequence", "coalesce(v, current_timestamp())")
    ]


def test_an_unrelated_apply_changes_method_declares_nothing() -> None:
    source = _CLOCK_VIEW.replace("@dlt.view\n", "") + (
        'store.apply_changes(target="t", source="feed", keys=["id"], sequence_by="seq")\n'
    )
    assert [(f.rule, f.severity, f.target) for f in lint_text("job.py", source)] == [
        ("ND001", "warning", "column")
    ]


def test_a_random_apply_as_deletes_decides_which_keys_are_written() -> None:
    source = (
        "from pyspark import pipelines as dp\n"
        "from pyspark.sql import functions as F\n"
        'dp.create_auto_cdc_flow(target="t", source="s", keys=["id"], sequence_by="v",\n'
        "                        apply_as_deletes=F.rand() < 0.01)\n"
    )
    line, col = at(source, "F.rand()")
    assert brief(lint_text("pipeline.py", source)) == [("ND002", "error", line, col, "key", "id")]


def test_snapshot_flows_declare_keys() -> None:
    source = (
        "import dlt\n"
        "from pyspark.sql import functions as F\n\n"
        "@dlt.view\n"
        "def snap():\n"
        '    return spark.read.table("raw.dim").withColumn("rid", F.expr("uuid()"))\n\n'
        'dlt.create_auto_cdc_from_snapshot_flow(target="dim", source="snap", keys=["rid"])\n'
    )
    line, col = at(source, "uuid()")
    assert brief(lint_text("pipeline.py", source, key_patterns=())) == [
        ("ND003", "error", line, col, "key", "rid")
    ]


def test_a_pipeline_table_stores_data_so_key_patterns_apply() -> None:
    body = (
        "from pyspark.sql import functions as F\n\n"
        "@dp.table\n"
        "def dim_customer():\n"
        '    return spark.read.table("raw.customers").withColumn("customer_sk", F.monotonically_increasing_id())\n'
    )
    line, col = at(body, "F.monotonically")
    as_table = lint_text("pipeline.py", "from pyspark import pipelines as dp\n" + body)
    assert brief(as_table) == [("ND004", "error", line + 1, col, "key", "customer_sk")]
    plain = lint_text("helpers.py", body.replace("@dp.table\n", ""))  # a transformation, not a table
    assert [(f.severity, f.target) for f in plain] == [("warning", "column")]


def test_a_view_and_the_helpers_of_a_pipeline_function_are_batch_functions_too() -> None:
    source = (
        "from pyspark import pipelines as dp\n\n"
        "def log(df):\n"
        '    df.write.insertInto("audit.log")\n\n'
        '@dp.temporary_view(name="feed")\n'
        "def feed():\n"
        '    df = spark.read.table("raw.x")\n'
        "    log(df)\n"
        "    return df\n"
    )
    [finding] = lint_text("pipeline.py", source)
    assert (finding.rule, finding.line) == ("ND011", 4)
    assert "`log`, called from the pipeline function `feed`" in finding.message


def test_a_sink_write_in_a_pipeline_function_is_not_nd014() -> None:
    # a pipeline function has no batch id to pass: ND014's advice could not be followed
    source = (
        "import dlt\n"
        "from upsertsink import UpsertSink\n"
        'sink = UpsertSink("/lake/t", keys=["id"])\n\n'
        "@dlt.table\n"
        "def t():\n"
        '    df = spark.read.table("raw.x")\n'
        "    sink.write(df)\n"
        "    return df\n"
    )
    assert lint_text("pipeline.py", source) == []


def test_pipeline_files_are_not_skipped_by_the_prefilter() -> None:
    from upsertsink.lint.rules.hooks import has_trigger

    assert has_trigger(b"dlt.apply_changes(target='t', source='s', keys=['id'], sequence_by='v')")
    assert has_trigger(b"dp.create_auto_cdc_flow(target='t', source='s', keys=['id'], sequence_by='v')")
    assert has_trigger(b"import dlt\n@dlt.table\ndef t():\n    df.write.insertInto('x')\n")
    assert has_trigger(b"from pyspark import pipelines as dp\n")


# ------------------------------------------------------------- the house: one table, one extractor per fact


def test_every_fact_the_api_table_names_has_its_extractor_and_none_is_unused() -> None:
    from upsertsink.lint.base.spark_api import FACTS
    from upsertsink.lint.flow.collect import EXTRACTORS

    assert set(FACTS.values()) == set(EXTRACTORS)


def test_rules_are_one_per_file_and_named_by_their_code() -> None:
    from upsertsink.lint.rules import ALL_RULES

    rules = Path(__file__).resolve().parents[2] / "lint" / "rules"
    files = sorted(p.stem for p in rules.glob("nd[0-9][0-9][0-9]_*.py"))
    assert [f[:5].upper() for f in files] == [r.code for r in ALL_RULES]


def test_every_module_of_the_linter_imports_on_its_own() -> None:
    """No import cycle that only works in one order: each module is imported first in a fresh interpreter."""
    import subprocess
    import sys

    lint = Path(__file__).resolve().parents[2] / "lint"
    names = sorted(
        "upsertsink.lint." + p.relative_to(lint).with_suffix("").as_posix().replace("/", ".")
        for p in lint.rglob("*.py")
        if p.name != "__init__.py" and p.name != "__main__.py"
    )
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    failed = []
    for name in names:
        if name in ("upsertsink.lint.server.lsp",):  # needs the server extra (pygls) only when it starts
            continue
        proc = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            failed.append((name, proc.stderr.strip().splitlines()[-1:]))
    assert failed == []
