"""`--table NAME` on the CLI (issue #21): write, status, maintain, diff and replay-check on Delta tables named in
Spark's catalog. The commands run in-process (CliRunner) and find the tables through the test run's active
SparkSession, whose catalog lives in memory; one test runs the installed command in new processes on a
persistent (Derby-backed Hive) metastore configured in spark-defaults.conf."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from upsertsink.cli import main

pytestmark = pytest.mark.spark

JOBS = Path(__file__).parent / "jobs"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def error_of(res) -> str:
    """The one error line on stderr."""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("upsertsink: error: "), res.stderr
    return lines[0]


@pytest.fixture
def batches(tmp_path):
    """Two batches as parquet files: b0 inserts ids 1 and 2, b1 updates 2 and inserts 3."""
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), tmp_path / "b0.parquet")
    pq.write_table(pa.table({"id": [2, 3], "name": ["B", "c"]}), tmp_path / "b1.parquet")
    return tmp_path


def test_write_by_name_twice_skips_the_replay_and_status_shows_the_batch(spark, schema, batches, tmp_path):
    name = f"{schema}.orders"
    args = ("write", str(batches / "b0.parquet"), "--table", name, "--key", "id", "--batch-id", "0")
    first = cli(*args, "--json")
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    assert (out["table"], out["inserted"], out["skipped"], out["engine"]) == (name, 2, False, "spark")
    assert out["target"].startswith(str(tmp_path / "warehouse"))  # the managed table's location
    assert spark.catalog.tableExists(name)  # created under its name
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert f"batch 0 already committed for upsertsink:{name}: skipped (table {name} stays at version 1)" in again.stdout
    second = cli("write", str(batches / "b1.parquet"), "--table", name, "--key", "id", "--batch-id", "1")
    assert second.exit_code == 0, second.output
    assert f"batch 1 -> {name} version 2: 1 inserted, 1 updated, 0 deleted" in second.stdout
    assert sorted((r["id"], r["name"]) for r in spark.table(name).collect()) == [(1, "a"), (2, "B"), (3, "c")]

    st = cli("status", "--table", name, "--json")
    assert st.exit_code == 0, st.output
    info = json.loads(st.stdout)
    assert (info["table"], info["version"], info["batches"]) == (name, 2, {f"upsertsink:{name}": 1})
    assert info["location"] == out["target"]
    text = cli("status", "--table", name)
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith(f"{name}  version 2\n")
    assert f"app upsertsink:{name}: last batch id 1" in text.stdout
    old = cli("status", "--table", f"{name}@1", "--json")  # NAME@N: the table as it was at version N
    assert old.exit_code == 0, old.output
    assert (json.loads(old.stdout)["version"], json.loads(old.stdout)["batches"]) == (1, {f"upsertsink:{name}": 0})
    assert "has no version 9 (latest is 2)" in error_of(cli("status", "--table", f"{name}@9"))

    maintained = cli("maintain", "--table", name, "--json")
    assert maintained.exit_code == 0, maintained.output
    assert isinstance(json.loads(maintained.stdout), dict)


def test_an_external_table_is_written_at_its_location_and_a_table_name_with_the_spark_engine(spark, schema, batches,
                                                                                             tmp_path):
    where = tmp_path / "external"
    spark.sql(f"CREATE TABLE {schema}.ext (id BIGINT, name STRING) USING delta LOCATION '{where}'")
    res = cli("write", str(batches / "b0.parquet"), "--table", f"{schema}.ext", "--key", "id", "--engine", "spark",
              "--batch-id", "0", "--app-id", "nightly", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["target"], out["app_id"], out["inserted"]) == (str(where), "nightly", 2)
    st = cli("status", "--table", f"{schema}.ext", "--json")  # the same table by path and by name
    by_path = cli("status", str(where), "--json")
    assert json.loads(st.stdout)["batches"] == json.loads(by_path.stdout)["batches"] == {"nightly": 0}


def test_diff_of_two_named_tables(spark, schema, batches):
    a, b = f"{schema}.a", f"{schema}.b"
    for name in (a, b):
        assert cli("write", str(batches / "b0.parquet"), "--table", name, "--key", "id", "--batch-id", "0").exit_code == 0
    equal = cli("diff", "--table", a, "--table", b, "--key", "id")
    assert equal.exit_code == 0, equal.output
    assert f"left:  table {a} (2 rows)" in equal.stdout and f"right: table {b} (2 rows)" in equal.stdout
    assert cli("write", str(batches / "b1.parquet"), "--table", b, "--key", "id", "--batch-id", "1").exit_code == 0
    different = cli("diff", "--table", a, "--table", b, "--key", "id", "--format", "json")
    assert different.exit_code == 1, different.output
    data = json.loads(different.stdout)
    assert (data["equal"], data["only_in_right"], data["changed"]) == (False, 1, 1)
    assert (data["left"], data["right"]) == (f"table {a}", f"table {b}")
    # NAME@N is the table at version N (version 1: the first batch; version 0 is the empty table created by name)
    assert cli("diff", "--table", f"{b}@1", "--table", a, "--key", "id").exit_code == 0
    # a path argument and a name: the path is LEFT, the name RIGHT
    location = json.loads(cli("status", "--table", b, "--json").stdout)["location"]
    mixed = cli("diff", f"{location}@1", "--table", b, "--key", "id")
    assert mixed.exit_code == 1, mixed.output
    assert f"left:  {location}@1 (2 rows)" in mixed.stdout and f"right: table {b} (3 rows)" in mixed.stdout
    assert cli("diff", location, "--table", b, "--key", "id", "--engine", "spark").exit_code == 0


def test_diff_needs_exactly_two_inputs_and_known_tables(spark, schema, batches):
    a = f"{schema}.a"
    assert cli("write", str(batches / "b0.parquet"), "--table", a, "--key", "id").exit_code == 0
    for args in [("--table", a), ("--table", a, "--table", a, "--table", a), ("x", "y", "--table", a)]:
        res = cli("diff", *args, "--key", "id")
        assert res.exit_code == 2
        assert "diff compares two inputs" in error_of(res)
    missing = cli("diff", "--table", a, "--table", f"{schema}.nope", "--key", "id")
    assert missing.exit_code == 2
    assert f"table {schema}.nope does not exist in Spark's catalog" in error_of(missing)
    bad = cli("diff", "--table", a, "--table", f"{a}@x", "--key", "id")
    assert bad.exit_code == 2 and "the version after '@' must be a number" in error_of(bad)


def test_replay_check_reads_inputs_by_name(spark, schema, monkeypatch):
    monkeypatch.chdir(JOBS)  # replay-check puts the current directory on sys.path
    spark.createDataFrame([(i, f"c{i % 5}", float(i % 7)) for i in range(60)],
                          "order_id long, customer string, amount double").write.format("delta").saveAsTable(
        f"{schema}.orders")
    spark.createDataFrame([(f"c{i}", f"name {i}") for i in range(5)], "customer string, name string").write.format(
        "delta").saveAsTable(f"{schema}.people")
    # --table NAME names the input after the table (orders); --table INPUT=NAME chooses it
    ok = cli("replay-check", "replay_jobs:totals", "--key", "customer",
             "--table", f"{schema}.orders", "--table", f"customers={schema}.people@0")
    assert ok.exit_code == 0, ok.output
    assert "all runs equal" in ok.stdout
    broken = cli("replay-check", "replay_jobs:numbered", "--key", "row_id", "--table", f"{schema}.orders")
    assert broken.exit_code == 1, broken.output
    missing = cli("replay-check", "replay_jobs:numbered", "--key", "row_id", "--table", f"orders={schema}.nope")
    assert missing.exit_code == 2 and f"table {schema}.nope does not exist" in error_of(missing)
    twice = cli("replay-check", "replay_jobs:numbered", "--key", "row_id", "--table", f"{schema}.orders",
                "--input", "orders=/somewhere")
    assert twice.exit_code == 2 and "input 'orders' is given twice" in error_of(twice)


def test_usage_errors_exit_2_with_a_clear_message(spark, schema, batches, tmp_path):
    src = str(batches / "b0.parquet")
    name = f"{schema}.t"
    cases = [
        (("write", src, "--target", str(tmp_path / "t"), "--table", name, "--key", "id"),
         "give --target PATH or --table NAME, not both"),
        (("write", src, "--key", "id"), "give --target PATH or --table NAME"),
        (("write", src, "--table", name, "--key", "id", "--engine", "embedded"),
         "--engine embedded cannot write a table by name"),
        (("write", src, "--table", "a..b", "--key", "id"), "not a catalog table name"),
        (("status", str(tmp_path / "t"), "--table", name), "give PATH or --table NAME, not both"),
        (("status",), "give PATH or --table NAME"),
        (("status", "--table", name), f"table {name} does not exist in Spark's catalog"),
        (("maintain", "--table", name), f"table {name} does not exist in Spark's catalog"),
    ]
    for args, needle in cases:
        res = cli(*args)
        assert res.exit_code == 2, (args, res.output)
        assert needle in error_of(res), args
    assert not spark.catalog.tableExists(name)  # nothing was created by the refused writes


def test_a_new_process_finds_tables_in_the_metastore_of_spark_defaults(batches, tmp_path):
    """The installed command in two processes (two JVMs): the table the first writes by name, the second finds
    in the persistent metastore that $SPARK_CONF_DIR/spark-defaults.conf names, and skips the replay."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.sql.catalogImplementation hive\n"
        f"spark.sql.warehouse.dir {tmp_path / 'warehouse'}\n"
        f"spark.hadoop.javax.jdo.option.ConnectionURL jdbc:derby:;databaseName={tmp_path / 'metastore_db'};create=true\n"
    )
    command = str(Path(sys.executable).with_name("upsertsink"))
    env = {**os.environ, "SPARK_CONF_DIR": str(conf), "NO_COLOR": "1"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([command, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
                              check=False)

    args = ("write", str(batches / "b0.parquet"), "--table", "default.orders", "--key", "id", "--batch-id", "0",
            "--json")
    first = run(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["target"].startswith(str(tmp_path / "warehouse"))
    again = run(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["skipped"] is True
