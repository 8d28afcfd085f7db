"""Test helpers for users' own jobs: replay equality and keyed frame equality.

With the pytest plugin's session-scoped ``spark`` fixture a job's replay test is two lines::

    def test_orders_job_is_deterministic(spark):
        assert_replay_equal(build_orders, spark.read.parquet("tests/data/orders"), keys="order_id")

Failures show the same report as ``upsertsink diff``: the counts, then each differing key with the
columns that differ as ``left -> right``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["assert_frame_equal_by_key", "assert_replay_equal"]


def assert_frame_equal_by_key(
    left: Any,
    right: Any,
    keys: str | Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    ignore_columns: Sequence[str] | None = None,
    tolerance: float | None = None,
    limit: int = 10,
) -> None:
    """Assert two tables/frames hold the same rows by key (any order); the error shows the differing rows.

    Accepts everything ``upsertsink.diff`` accepts: Delta paths (``PATH@N``), parquet/csv/json files,
    Spark/pandas DataFrames, pyarrow Tables.
    """
    __tracebackhide__ = True
    from upsertsink.diffing import diff, render
    from upsertsink.errors import require_embedded

    require_embedded("assert_frame_equal_by_key")
    result = diff(
        left, right, keys, columns=columns, ignore_columns=ignore_columns, tolerance=tolerance,
        sample_size=max(limit, 1),
    )  # fmt: skip
    if not result.equal:
        key_text = ", ".join([keys] if isinstance(keys, str) else list(keys))
        raise AssertionError(f"frames differ by key ({key_text}):\n{render(result, limit)}")


def assert_replay_equal(
    job: Callable[..., Any],
    *inputs: Any,
    keys: str | Sequence[str],
    runs: int = 2,
    spark: Any = None,
    limit: int = 10,
    **diff_options: Any,
) -> None:
    """Run ``job(spark, *inputs)`` ``runs`` times with varied partitioning and row order; assert equal by key.

    Inputs are Spark DataFrames (or Delta/parquet/csv/json paths, read once). The session is ``spark``, or
    the first input's, or the active one. Extra keyword arguments go to ``diff`` (e.g. ``tolerance``).
    """
    __tracebackhide__ = True
    from upsertsink import io
    from upsertsink.errors import InvalidInputError
    from upsertsink.session import require_spark

    require_spark("assert_replay_equal", delta=False)
    from upsertsink.replay import read_input, replay_check

    if spark is None:
        spark = next((i.sparkSession for i in inputs if io.is_spark_frame(i)), None)
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is None:
        raise InvalidInputError(
            "assert_replay_equal needs a SparkSession: pass spark=... (e.g. the `spark` fixture)"
        )
    args = [read_input(spark, i) if isinstance(i, str) else i for i in inputs]
    result = replay_check(job, spark, keys, args=args, runs=runs, **diff_options)
    if not result.equal:
        raise AssertionError(f"the job is not replay-safe:\n{result.format_text(limit)}")
