"""The public API surface, and the diff on tables Spark created with column mapping."""

from __future__ import annotations

import pyarrow as pa

import upsertsink
from upsertsink import UpsertSink


def test_public_names_and_diff_stays_a_function_after_submodule_imports():
    import upsertsink.diffing  # importing the package must not shadow upsertsink.diff
    import upsertsink.diffing.compare
    import upsertsink.sink

    for name in ("UpsertSink", "WriteResult", "diff", "spark_session", "UpsertSinkError", "ReplayDivergenceError"):
        assert hasattr(upsertsink, name), name
    assert callable(upsertsink.diff) and upsertsink.diff is upsertsink.diffing.diff
    assert upsertsink.DiffResult is upsertsink.diffing.DiffResult
    assert issubclass(upsertsink.errors.InvalidInputError, ValueError)


def test_embedded_diff_reads_column_mapped_tables_spark_created(spark, tmp_path):
    path = str(tmp_path / "t")
    schema = pa.schema([("order id", pa.int64()), ("status", pa.string())])
    rows = [{"order id": 1, "status": "paid"}, {"order id": 2, "status": "new"}]
    UpsertSink(path, "order id").write(spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema)), batch_id=0)
    same = pa.Table.from_pylist(list(reversed(rows)), schema=schema)
    assert upsertsink.diff(path, same, "order id", engine="embedded").equal
    other = pa.Table.from_pylist([{"order id": 1, "status": "paid"}, {"order id": 2, "status": "shipped"}], schema=schema)
    d = upsertsink.diff(path, other, "order id", engine="embedded")
    assert (d.equal, d.changed, d.changed_columns) == (False, 1, {"status": 1})
