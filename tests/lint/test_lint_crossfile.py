"""Flow between files of the linted tree: helpers, constants, keys from a config module, %run, the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths

HELPERS = """\
import uuid
from datetime import datetime

from pyspark.sql import functions as F

KEYS = ["order_id", "line_no"]
SEQUENCE = "version"
RUN_ID = str(uuid.uuid4())


def batch_ts():
    return datetime.now()


def add_surrogate(df):
    return df.withColumn("order_sk", F.monotonically_increasing_id())


def clean(df):
    return df.withColumn("name", F.trim("name"))
"""
JOB = """\
from pyspark.sql import functions as F

from jobs.lib import helpers
from jobs.lib.helpers import KEYS, RUN_ID, SEQUENCE, batch_ts
from upsertsink import UpsertSink

orders = spark.table("raw.orders").transform(helpers.clean)
orders = helpers.add_surrogate(orders)
orders = orders.withColumn("line_no", F.lit(str(batch_ts())))
orders = orders.withColumn("run_id", F.lit(RUN_ID))
UpsertSink("/lake/orders", keys=KEYS, sequence_by=SEQUENCE).write(orders)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    lib = tmp_path / "jobs" / "lib"
    lib.mkdir(parents=True)
    (tmp_path / "jobs" / "__init__.py").write_text("")
    (lib / "__init__.py").write_text("")
    (lib / "helpers.py").write_text(HELPERS)
    (tmp_path / "jobs" / "orders.py").write_text(JOB)
    return tmp_path


def settings_for(root: Path) -> Settings:
    s = Settings()
    s.root = root
    return s


def by_file(result, name: str) -> list[tuple]:
    return [
        (f.line, f.column, f.rule, f.severity, f.target, f.column_name)
        for f in result.findings
        if f.path.endswith(name)
    ]


def test_helpers_constants_and_keys_from_another_module(tree: Path, monkeypatch) -> None:
    monkeypatch.chdir(tree)
    result = lint_paths([tree], settings_for(tree), use_cache=False)
    assert by_file(result, "jobs/orders.py") == [
        (8, 10, "ND004", "error", "key", "order_sk"),  # written by the helper, a key-like name
        (9, 49, "ND001", "error", "key", "line_no"),  # KEYS imported from the helper module
        (10, 44, "ND003", "warning", "column", "run_id"),
    ]
    msgs = {f.column_name: f.message for f in result.findings if f.path.endswith("orders.py")}
    assert "`helpers.add_surrogate`" in msgs["order_sk"] and "helpers.py:16" in msgs["order_sk"]
    assert "`batch_ts`" in msgs["line_no"] and "helpers.py:12" in msgs["line_no"]
    # the helper itself: the write it makes is a warning there (its own file does not know the keys)
    assert by_file(result, "jobs/lib/helpers.py") == [(16, 38, "ND004", "warning", "column", "order_sk")]


def test_without_the_helper_on_disk_nothing_is_invented(tree: Path, monkeypatch) -> None:
    # a helper that is only *named* (not in the project) gives nothing; a helper in the project that is
    # not among the files given is read for its exports (tests/lint/test_lint_partial.py)
    (tree / "jobs" / "lib" / "helpers.py").unlink()
    monkeypatch.chdir(tree)
    result = lint_paths([tree / "jobs" / "orders.py"], settings_for(tree), use_cache=False)
    assert result.findings == []


def test_relative_import_and_function_level_keys(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sinks.py").write_text(
        "from upsertsink import UpsertSink\n\n"
        "def upsert_customers(df):\n"
        "    UpsertSink('/lake/customers', keys=['customer_ref']).write(df)\n"
    )
    (pkg / "job.py").write_text(
        "from pyspark.sql import functions as F\n"
        "from .sinks import upsert_customers\n"
        "df2 = df.withColumn('customer_ref', F.uuid())\n"
        "upsert_customers(df2)\n"
    )
    monkeypatch.chdir(tmp_path)
    result = lint_paths([tmp_path], settings_for(tmp_path), use_cache=False)
    assert by_file(result, "pipeline/job.py") == [(3, 37, "ND003", "error", "key", "customer_ref")]


def test_cache_rechecks_importers_when_a_helper_changes(tree: Path, monkeypatch) -> None:
    monkeypatch.chdir(tree)
    s = settings_for(tree)
    first = lint_paths([tree], s)
    assert len(first.findings) == 4
    warm = lint_paths([tree], s)
    assert warm.stats.parsed == 0 and warm.stats.cache_hits == 4 and warm.findings == first.findings
    # the helper stops using the clock: the job (unchanged bytes) must be checked again
    helpers = tree / "jobs" / "lib" / "helpers.py"
    helpers.write_text(HELPERS.replace("return datetime.now()", 'return "2024-01-01"'))
    again = lint_paths([tree], s)
    assert (9, 49, "ND001", "error", "key", "line_no") not in by_file(again, "jobs/orders.py")
    assert again.stats.parsed == 2  # the helper and its importer, not the empty __init__ files
    cache_files = list((tree / ".upsertsink_cache").glob("lint-*.json"))
    entries = json.loads(cache_files[0].read_text())["entries"]
    row = next(r for e in entries.values() for r in e["findings"])
    assert set(row) >= {"line", "column", "end_line", "end_column", "rule", "severity", "message", "target"}


def test_sql_file_read_by_the_job_is_a_cache_dependency(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "merge.sql").write_text(
        "MERGE INTO dw.orders t USING staged s\n"
        "ON t.order_id = s.order_id AND s.rn = 1\n"
        "WHEN MATCHED THEN UPDATE SET t.touched_at = current_timestamp()\n"
        "WHEN NOT MATCHED THEN INSERT *\n"
    )
    (tmp_path / "job.py").write_text(
        "from pathlib import Path\n"
        "MERGE_SQL = (Path(__file__).parent / 'sql' / 'merge.sql').read_text()\n"
        "spark.sql(MERGE_SQL)\n"
        "with open('sql/merge.sql') as fh:\n"
        "    again = fh.read()\n"
        "staged = src.withColumn('order_id', F.monotonically_increasing_id())\n"
    )
    monkeypatch.chdir(tmp_path)
    s = settings_for(tmp_path)
    result = lint_paths([tmp_path], s)
    got = [(f.line, f.column, f.rule, f.target, f.column_name) for f in result.findings]
    # the SQL file's finding is reported where the job reads it; its keys (not rn = 1) are the job's keys
    assert got == [(2, 13, "ND001", "column", "touched_at"), (6, 37, "ND004", "key", "order_id")]
    assert "`sql/merge.sql` (line 3)" in result.findings[0].message
    assert lint_paths([tmp_path], s).stats.cache_hits == 1
    (tmp_path / "sql" / "merge.sql").write_text(
        "MERGE INTO dw.orders t USING staged s ON t.order_id = s.order_id\nWHEN MATCHED THEN UPDATE SET *\n"
    )
    changed = lint_paths([tmp_path], s)
    assert changed.stats.cache_hits == 0
    assert [(f.rule, f.column_name) for f in changed.findings] == [("ND004", "order_id")]


def test_sql_files_outside_the_project_are_not_read(tmp_path: Path, monkeypatch) -> None:
    outside = tmp_path / "outside.sql"
    outside.write_text("SELECT rand() AS r FROM t\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(f"spark.sql(open({str(outside)!r}).read()).write.saveAsTable('t')\n")
    monkeypatch.chdir(project)
    assert lint_paths([project], settings_for(project), use_cache=False).findings == []


def test_a_sql_file_created_where_the_job_looks_is_seen_by_the_cache(tmp_path: Path, monkeypatch) -> None:
    # the job names a .sql file that is not there yet: nothing to say about it, but the result depends on
    # its absence, and the next run after it appears (the job unchanged) must read it
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.py").write_text("spark.sql(open('sql/merge.sql').read())\n")
    monkeypatch.chdir(tmp_path)
    s = settings_for(tmp_path)
    assert lint_paths([tmp_path], s).findings == []
    assert lint_paths([tmp_path], s).stats.cache_hits == 1
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "merge.sql").write_text(
        "MERGE INTO dw.orders t USING staged s ON t.order_id = s.order_id\n"
        "WHEN MATCHED THEN UPDATE SET t.touched_at = current_timestamp()\n"
    )
    seen = lint_paths([tmp_path], s)
    assert seen.stats.cache_hits == 0
    assert [(f.rule, f.column_name) for f in seen.findings] == [("ND001", "touched_at")]
    # a nearer file of the same name (the job's own folder is looked in first) takes over in its turn
    (tmp_path / "jobs" / "sql").mkdir()
    (tmp_path / "jobs" / "sql" / "merge.sql").write_text("MERGE INTO dw.orders t USING s ON t.id = s.id\n")
    nearer = lint_paths([tmp_path], s)
    assert nearer.stats.cache_hits == 0 and nearer.findings == []


DELTA_HELPERS = """\
from delta.tables import DeltaTable
from upsertsink import UpsertSink


def upsert(spark, df, table, keys):
    cond = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    (DeltaTable.forName(spark, table).alias("t").merge(df.alias("s"), cond)
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def upsert_one(df, path, key):
    DeltaTable.forPath(spark, path).alias("t").merge(df.alias("s"), f"t.{key} = s.{key}").execute()


def sink(df, target, keys, batch_id):
    UpsertSink(target, keys=keys).write(df, batch_id=batch_id)
"""


def test_keys_and_table_given_to_another_files_helper_are_keys_of_that_table(tmp_path: Path, monkeypatch) -> None:
    common = tmp_path / "common"
    common.mkdir()
    (common / "__init__.py").write_text("")
    (common / "delta_utils.py").write_text(DELTA_HELPERS)
    (tmp_path / "job.py").write_text(
        "from pyspark.sql import functions as F\n"
        "from common.delta_utils import sink, upsert\n"
        "from common import delta_utils\n"
        "orders = spark.table('raw.orders').withColumn('order_no', F.expr('uuid()'))\n"
        "upsert(spark, orders, 'silver.orders', ['order_no', 'line'])\n"
        "events = spark.table('raw.events').withColumn('event_ref', F.monotonically_increasing_id())\n"
        "delta_utils.upsert_one(events, key='event_ref', path='/lake/events')\n"
        "audit = spark.table('raw.a').withColumn('run', F.rand())\n"
        "sink(audit, '/lake/audit', keys=['run'], batch_id=3)\n"
        "other = spark.table('raw.b').withColumn('note', F.current_timestamp())\n"
        "other.write.mode('overwrite').saveAsTable('gold.notes')\n"
    )
    monkeypatch.chdir(tmp_path)
    result = lint_paths([tmp_path], settings_for(tmp_path), use_cache=False)
    assert [x[2:] for x in by_file(result, "job.py")] == [
        ("ND003", "error", "key", "order_no"),  # ['order_no', 'line'] joined into the helper's condition
        ("ND004", "error", "key", "event_ref"),  # a single key given by keyword
        ("ND002", "error", "key", "run"),  # an UpsertSink's keys given by the caller
        ("ND001", "warning", "column", "note"),  # another table: none of those keys is its
    ]
    msgs = {f.column_name: f.message for f in result.findings if f.path.endswith("job.py")}
    assert "(table `silver.orders`)" in msgs["order_no"]
    assert "(table `/lake/events`)" in msgs["event_ref"]


def test_a_merge_condition_given_whole_to_another_files_helper_declares_that_tables_keys(
    tmp_path: Path, monkeypatch
) -> None:
    common = tmp_path / "common"
    common.mkdir()
    (common / "__init__.py").write_text("")
    (common / "merge.py").write_text(
        "from delta.tables import DeltaTable\n\n\n"
        "def merge_into(spark, df, table, condition):\n"
        "    (DeltaTable.forName(spark, table).alias('t').merge(df.alias('s'), condition)\n"
        "        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())\n"
    )
    (tmp_path / "job.py").write_text(
        "from pyspark.sql import functions as F\n"
        "from common.merge import merge_into\n"
        "orders = spark.table('raw.orders').withColumn('order_no', F.expr('uuid()'))\n"
        "merge_into(spark, orders, 'silver.orders', 't.order_no = s.order_no AND t.line = s.line')\n"
        "notes = spark.table('raw.b').withColumn('note', F.current_timestamp())\n"
        "merge_into(spark, notes, condition='t.id = s.id', table='gold.notes')\n"
    )
    monkeypatch.chdir(tmp_path)
    result = lint_paths([tmp_path], settings_for(tmp_path), use_cache=False)
    assert [x[2:] for x in by_file(result, "job.py")] == [
        ("ND003", "error", "key", "order_no"),  # a key of silver.orders, by the condition given here
        ("ND001", "warning", "column", "note"),  # gold.notes is keyed by id
    ]
    msgs = {f.column_name: f.message for f in result.findings if f.path.endswith("job.py")}
    assert "(table `silver.orders`)" in msgs["order_no"]
