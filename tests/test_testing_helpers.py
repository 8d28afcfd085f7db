"""upsertsink.testing: assert_frame_equal_by_key, assert_replay_equal and the pytest plugin's `spark`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

from upsertsink.testing import assert_frame_equal_by_key, assert_replay_equal


def revenue(spark, orders):
    return orders.groupBy("customer").agg(F.sum("amount").alias("revenue"))


def numbered(spark, orders):
    return orders.withColumn("row_id", F.monotonically_increasing_id())


@pytest.fixture
def orders(spark):
    rows = [(i, f"c{i % 5}", i % 11) for i in range(60)]
    return spark.createDataFrame(rows, "order_id long, customer string, amount long")


def test_frame_equal_by_key_ignores_order_and_shows_differing_rows(spark, tmp_path):
    left = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    assert_frame_equal_by_key(left, left.iloc[::-1], keys="id")
    right = spark.createDataFrame([(3, "c"), (2, "B"), (4, "d")], "id long, name string")
    with pytest.raises(AssertionError) as err:
        assert_frame_equal_by_key(left, right, keys="id")
    text = str(err.value)
    assert "frames differ by key (id)" in text
    assert "1 only in left, 1 only in right, 1 changed" in text
    assert "  changed        id=2\n                 name: 'b' -> 'B'" in text
    assert "  only in left   id=1: name='a'" in text and "  only in right  id=4: name='d'" in text
    path = str(tmp_path / "t")
    write_deltalake(path, pa.Table.from_pandas(left, preserve_index=False))
    assert_frame_equal_by_key(path, left.iloc[::-1], keys=["id"])


def test_replay_equal_passes_for_a_deterministic_job(spark, orders):
    assert_replay_equal(revenue, orders, keys="customer")


def test_replay_equal_fails_readably_for_a_partition_dependent_key(spark, orders):
    with pytest.raises(AssertionError) as err:
        assert_replay_equal(numbered, orders, keys="row_id")
    text = str(err.value)
    assert "the job is not replay-safe" in text
    assert "run 2 (shuffle partitions 7, inputs in 3 partitions" in text and "DIFFERS from run 1" in text
    assert "  changed        row_id=0\n" in text and "order_id: " in text  # rows moved to other ids


USER_TEST = """
from pyspark.sql import functions as F
from upsertsink.testing import assert_replay_equal


def revenue(spark, orders):
    return orders.groupBy("customer").agg(F.sum("amount").alias("revenue"))


def numbered(spark, orders):
    return orders.withColumn("row_id", F.monotonically_increasing_id())


def test_revenue_is_replay_safe(spark):
    assert_replay_equal(revenue, spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "customer string, amount long"), keys="customer")


def test_row_ids_are_not(spark):
    assert_replay_equal(numbered, spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "customer string, amount long"), keys="row_id")
"""


def test_plugin_spark_fixture_lets_users_test_jobs_in_two_lines(tmp_path):
    """A user's project with no conftest: the `spark` fixture comes from the installed plugin."""
    (tmp_path / "test_user_job.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user_job.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "test_row_ids_are_not" in out and "the job is not replay-safe" in out
