"""`upsertsink replay-check` and upsertsink.replay: same inputs, varied partitioning, diffed by key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from upsertsink import InvalidInputError
from upsertsink.cli import main
from upsertsink.replay import load_job, read_input, replay_check

JOBS = Path(__file__).parent / "jobs"


@pytest.fixture(scope="module")
def inputs(spark, tmp_path_factory):
    """orders as a Delta table, customers as parquet, csv and json (written once for the module)."""
    root = tmp_path_factory.mktemp("replay")
    orders = spark.createDataFrame(
        [(i, f"c{i % 7}", float(i % 13) + 0.25) for i in range(120)],
        "order_id long, customer string, amount double",
    )
    customers = spark.createDataFrame(
        [(f"c{i}", f"name {i}") for i in range(7)], "customer string, name string"
    )
    orders.coalesce(2).write.format("delta").save(str(root / "orders"))
    customers.coalesce(1).write.parquet(str(root / "customers_parquet"))
    customers.coalesce(1).write.option("header", "true").csv(str(root / "customers_csv"))
    customers.coalesce(1).write.json(str(root / "customers_json"))
    return root


@pytest.fixture
def in_jobs_dir(monkeypatch):
    monkeypatch.chdir(JOBS)  # replay-check puts the current directory on sys.path


def invoke(*args: str):
    return CliRunner().invoke(main, ["replay-check", *args], catch_exceptions=False)


def test_deterministic_job_passes_with_named_inputs(spark, inputs, in_jobs_dir):
    res = invoke(
        "replay_jobs:totals", "--key", "customer", "--runs", "3",
        "--input", f"orders={inputs / 'orders'}", "--input", f"customers={inputs / 'customers_csv'}",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "all runs equal" in res.stdout
    assert "run 3 (shuffle partitions 1, inputs in 1 partitions" in res.stdout


def test_inputs_are_read_by_format(spark, inputs):
    expected = sorted(tuple(r) for r in read_input(spark, str(inputs / "customers_parquet")).collect())
    assert len(expected) == 7
    for fmt in ("csv", "json"):
        got = read_input(spark, str(inputs / f"customers_{fmt}")).select("customer", "name").collect()
        assert sorted(tuple(r) for r in got) == expected, fmt
    assert read_input(spark, f"{inputs / 'orders'}@0").count() == 120
    with pytest.raises(InvalidInputError, match="needs a Delta table"):
        read_input(spark, f"{inputs / 'customers_csv'}@0")


def test_partition_dependent_key_is_caught(spark, inputs, in_jobs_dir):
    res = invoke(
        "replay_jobs:numbered", "-k", "row_id", "--input", f"orders={inputs / 'orders'}", "--format", "json"
    )
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["equal"] is False and data["diffs"][0]["only_in_left"] > 0
    assert [r["shuffle_partitions"] for r in data["runs"]] == [2, 7]
    assert [r["input_partitions"] for r in data["runs"]] == [None, 3]


def test_json_is_the_same_as_format_json(spark, inputs, in_jobs_dir):
    """`--json`, as on every command that prints JSON (issue #45); `--format json` stays."""
    args = ("replay_jobs:totals", "-k", "customer", "--input", f"orders={inputs / 'orders'}",
            "--input", f"customers={inputs / 'customers_parquet'}")
    by_flag, by_format = invoke(*args, "--json"), invoke(*args, "--format", "json")
    assert by_flag.exit_code == by_format.exit_code == 0, by_flag.output
    flag, fmt = json.loads(by_flag.stdout), json.loads(by_format.stdout)
    assert flag["equal"] is True and flag.keys() == fmt.keys()
    assert [r["shuffle_partitions"] for r in flag["runs"]] == [r["shuffle_partitions"] for r in fmt["runs"]]
    both = CliRunner().invoke(main, ["replay-check", *args, "--json", "--format", "text"])
    assert both.exit_code == 2 and "--json and --format text contradict each other" in both.stderr


def test_order_dependent_value_is_caught_by_the_api(spark, inputs, in_jobs_dir):
    orders = read_input(spark, str(inputs / "orders"))
    result = replay_check(load_job("replay_jobs:first_order"), spark, "customer", args=[orders])
    assert not result.equal
    d = result.diffs[0]
    assert d.changed > 0 and d.changed_columns == {"order_id": d.changed}
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # settings restored after the runs
    text = result.format_text()
    assert "DIFFERS from run 1" in text and "  changed        customer=" in text and "order_id: " in text


def test_errors_exit_2_with_one_line(spark, inputs, in_jobs_dir):
    cases = [
        (("nope_module:fn", "--key", "k"), "cannot import module 'nope_module'"),
        (("replay_jobs:missing", "--key", "k"), "has no attribute 'missing'"),
        (("replay_jobs", "--key", "k"), "must be MODULE:FUNCTION"),
        (("replay_jobs:totals", "-k", "k", "--input", f"orders={inputs / 'nope'}"), "does not exist"),
        (("replay_jobs:not_a_frame", "-k", "k", "--input", f"orders={inputs / 'orders'}"), "must return"),
        (
            ("replay_jobs:numbered", "-k", "nope", "--input", f"orders={inputs / 'orders'}"),
            "key column 'nope'",
        ),
    ]
    for args, words in cases:
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stderr.startswith("upsertsink: error: ") and words in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1
    with pytest.raises(InvalidInputError, match="runs must be"):
        replay_check(lambda s: None, spark, "k", runs=1)


def test_bad_module_exits_2_as_a_real_process(tmp_path):
    exe = Path(sys.executable).with_name("upsertsink")
    proc = subprocess.run(
        [str(exe), "replay-check", "no_such_job_module:run", "--key", "id"],
        cwd=tmp_path, capture_output=True, check=False, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("upsertsink: error: job 'no_such_job_module:run': cannot import")


def test_replay_check_as_a_real_process_prints_no_jvm_noise(inputs):
    exe = Path(sys.executable).with_name("upsertsink")
    proc = subprocess.run(
        [str(exe), "replay-check", "replay_jobs:numbered", "--key", "row_id", "--master", "local[2]",
         "--input", f"orders={inputs / 'orders'}", "--format", "json"],
        cwd=JOBS, capture_output=True, check=False, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["equal"] is False
    assert proc.stderr == ""  # no log4j profile, NativeCodeLoader, Ivy or "Setting default log level" lines
