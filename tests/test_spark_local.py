"""Small Spark batches on the driver (engines/spark_local.py): a bare parquet scan is read by pyarrow without a
Spark job, exactly as Spark reads it, or not at all; and the MERGE source written for a batch on a local
master is removed when the write ends, whether it succeeded or not."""

from __future__ import annotations

import datetime as dt
import decimal
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sink_helpers import read_rows

from upsertsink import UpsertSink, faults
from upsertsink.engines import spark_local
from upsertsink.engines.base import WriteRequest
from upsertsink.engines.embedded import EmbeddedEngine
from upsertsink.engines.spark import SparkEngine

REQUEST = WriteRequest("/unused", ("id",), "seq", None, "a", 0)

MANY_TYPES = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "seq": pa.array([1, 1, 2], pa.int64()),
    "i8": pa.array([1, None, -3], pa.int8()),
    "i16": pa.array([300, 2, None], pa.int16()),
    "i32": pa.array([None, 70000, -1], pa.int32()),
    "u8": pa.array([255, 0, None], pa.uint8()),
    "f32": pa.array([1.5, None, -0.0], pa.float32()),
    "f64": pa.array([float("nan"), 2.25, None], pa.float64()),
    "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.10")], pa.decimal128(10, 2)),
    "s": pa.array(["a", None, "ü"], pa.string()),
    "b": pa.array([b"\x00", b"x", None], pa.binary()),
    "flag": pa.array([True, None, False], pa.bool_()),
    "day": pa.array([dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)], pa.date32()),
    "ts": pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), None, dt.datetime(1999, 12, 31, tzinfo=dt.UTC)],
                   pa.timestamp("us", "UTC")),
    "ntz": pa.array([dt.datetime(2024, 1, 1, 12), dt.datetime(2000, 1, 1), None], pa.timestamp("us")),
    "tags": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
    "pt": pa.array([{"x": 1, "y": "a"}, None, {"x": None, "y": "c"}], pa.struct([("x", pa.int32()), ("y", pa.string())])),
    "m": pa.array([[("k", 1)], None, [("a", 2), ("b", 3)]], pa.map_(pa.string(), pa.int64())),
})


def _jobs(spark, group: str, work) -> tuple[object, list[int]]:
    sc = spark.sparkContext
    sc.setJobGroup(group, "probe")
    try:
        out = work()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, list(sc.statusTracker().getJobIdsForGroup(group))


def test_a_parquet_batch_is_read_without_a_job_and_fingerprints_as_spark_collects_it(spark, tmp_path, monkeypatch):
    path = tmp_path / "batch.parquet"
    pq.write_table(MANY_TYPES, path)
    df = spark.read.parquet(str(path))  # Spark's schema inference may run a job of its own
    direct, jobs = _jobs(spark, "plain-read", lambda: SparkEngine(df).fingerprint(REQUEST, None, []))
    assert jobs == []  # read by pyarrow from the file Spark lists
    monkeypatch.setattr(spark_local, "read_plain_parquet", lambda *a, **k: None)
    collected, jobs = _jobs(spark, "collect", lambda: SparkEngine(df).fingerprint(REQUEST, None, []))
    assert jobs != []  # the probe sees a collect
    assert direct == collected
    simple = MANY_TYPES.select(["id", "seq", "i16", "i32", "f64", "dec", "s", "b", "flag", "day", "ts"])
    assert direct != EmbeddedEngine(simple).fingerprint(REQUEST, None, [])  # the probe tells content apart
    pq.write_table(simple, path)
    assert SparkEngine(spark.read.parquet(str(path))).fingerprint(REQUEST, None, []) == \
        EmbeddedEngine(simple).fingerprint(REQUEST, None, [])


def test_a_choice_of_columns_is_still_read_without_a_job(spark, tmp_path):
    from pyspark.sql import functions as F

    path = tmp_path / "batch.parquet"
    pq.write_table(MANY_TYPES, path)
    chosen = spark.read.parquet(str(path)).select("seq", "s", "id")
    from pyspark.sql.pandas.types import to_arrow_schema

    direct, jobs = _jobs(spark, "chosen", lambda: spark_local.read_plain_parquet(
        chosen, to_arrow_schema(chosen.schema, timezone="UTC"), 1000))
    assert jobs == [] and direct.column_names == ["seq", "s", "id"]
    assert direct.equals(chosen.toArrow())
    renamed = spark.read.parquet(str(path)).select(F.col("id").alias("seq"), F.col("seq").alias("id"))
    assert spark_local.read_plain_parquet(renamed, to_arrow_schema(renamed.schema, timezone="UTC"), 1000) is None


def test_a_narrower_float_than_the_file_holds_goes_through_spark(spark, tmp_path):
    from pyspark.sql.pandas.types import to_arrow_schema

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "f": pa.array([0.1], pa.float64())}), path)
    narrowed = spark.read.schema("id long, f float").parquet(str(path))  # a cast pyarrow would do lossily
    assert spark_local.read_plain_parquet(narrowed, to_arrow_schema(narrowed.schema, timezone="UTC"), 10) is None
    wide = spark.read.parquet(str(path))
    assert spark_local.read_plain_parquet(wide, to_arrow_schema(wide.schema, timezone="UTC"), 10) is not None


def _legacy(tmp_path):
    table = pa.table({"id": [1, 2], "seq": [1, 1]})
    table = table.replace_schema_metadata({b"org.apache.spark.legacyDateTime": b""})
    pq.write_table(table, tmp_path / "legacy.parquet")
    return tmp_path / "legacy.parquet"


@pytest.mark.parametrize("case", ["filtered", "partitioned", "int96", "uint64", "missing-column", "legacy", "delta"])
def test_what_spark_could_read_differently_goes_through_spark(spark, tmp_path, case):
    base = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "seq": pa.array([1, 1, 1], pa.int64()),
                     "part": ["a", "a", "b"], "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * 3, pa.timestamp("us", "UTC")),
                     "big": pa.array([1, 2, 2**63 + 5], pa.uint64())})
    plain = tmp_path / "plain.parquet"
    pq.write_table(base.drop_columns(["big"]), plain)
    if case == "filtered":
        df = spark.read.parquet(str(plain)).filter("id > 1")
    elif case == "partitioned":
        pq.write_to_dataset(base.drop_columns(["big"]), tmp_path / "parts", partition_cols=["part"])
        df = spark.read.parquet(str(tmp_path / "parts"))
    elif case == "int96":
        pq.write_table(base.drop_columns(["big"]), tmp_path / "i96.parquet", use_deprecated_int96_timestamps=True)
        df = spark.read.parquet(str(tmp_path / "i96.parquet"))
    elif case == "uint64":  # Spark reads it as decimal(20,0)
        pq.write_table(base, tmp_path / "u64.parquet")
        df = spark.read.parquet(str(tmp_path / "u64.parquet"))
    elif case == "missing-column":
        df = spark.read.schema("id long, seq long, extra string").parquet(str(plain))
    elif case == "legacy":
        df = spark.read.parquet(str(_legacy(tmp_path)))
    else:
        spark.read.parquet(str(plain)).write.format("delta").save(str(tmp_path / "d"))
        df = spark.read.format("delta").load(str(tmp_path / "d"))
    from pyspark.sql.pandas.types import to_arrow_schema

    assert spark_local.read_plain_parquet(df, to_arrow_schema(df.schema, timezone="UTC"), 1000) is None
    target = str(tmp_path / "t")
    UpsertSink(target, "id", sequence_by="seq").write(df, batch_id=0)
    want = sorted(r["id"] for r in df.select("id").collect())
    assert [r["id"] for r in read_rows(target)] == want
    assert UpsertSink(target, "id", sequence_by="seq").write(df, batch_id=0).replay_check == "matched"


def test_a_plain_parquet_batch_is_written_and_replayed_like_any_other(spark, tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(MANY_TYPES, path)
    target = str(tmp_path / "t")
    sink = UpsertSink(target, "id", sequence_by="seq")
    sink.write(spark.read.parquet(str(path)), batch_id=0)
    assert sorted(r["id"] for r in read_rows(target)) == [1, 2, 3]
    cols = [c for c in MANY_TYPES.column_names if c != "m"]  # maps cannot be compared by a set operation
    stored, sent = spark.read.format("delta").load(target).select(*cols), spark.read.parquet(str(path)).select(*cols)
    assert stored.exceptAll(sent).count() == 0 and sent.exceptAll(stored).count() == 0
    assert {r["id"]: r["m"] for r in spark.read.format("delta").load(target).collect()} == {1: {"k": 1}, 2: None, 3: {"a": 2, "b": 3}}
    assert sink.write(spark.read.parquet(str(path)), batch_id=0).replay_check == "matched"
    changed = MANY_TYPES.set_column(9, "s", pa.array(["a", "changed", "ü"]))
    pq.write_table(changed, path)
    from upsertsink import ReplayDivergenceError

    with pytest.raises(ReplayDivergenceError):
        sink.write(spark.read.parquet(str(path)), batch_id=0)


def test_the_merge_source_files_are_removed_when_the_write_ends(spark, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    target = str(tmp_path / "t")
    sink = UpsertSink(target, "id", sequence_by="seq")
    first = pa.table({"id": pa.array([1, 2], pa.int64()), "seq": pa.array([1, 1], pa.int64())})
    sink.write(spark.createDataFrame(first), batch_id=0)
    seen = []
    second = pa.table({"id": pa.array([2, 3], pa.int64()), "seq": pa.array([2, 2], pa.int64())})
    with faults.hook("before-commit", lambda: seen.extend(scratch.iterdir())):
        sink.write(spark.createDataFrame(second), batch_id=1)
    assert seen and all(p.name.startswith("upsertsink-batch-") for p in seen)  # the MERGE read a file there
    assert list(scratch.iterdir()) == []
    monkeypatch.setenv("UPSERTSINK_FAULT", "before-commit")
    monkeypatch.setenv("UPSERTSINK_FAULT_MODE", "raise")
    with pytest.raises(Exception, match="injected fault"):
        sink.write(spark.createDataFrame(pa.table({"id": pa.array([4], pa.int64()), "seq": pa.array([3], pa.int64())})), 2)
    assert list(scratch.iterdir()) == []
    assert [r["id"] for r in read_rows(target)] == [1, 2, 3]


def test_a_killed_writers_scratch_folder_is_removed_by_the_next_write(spark, tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (scratch / f"upsertsink-batch-{gone}-x1").mkdir()
    (scratch / f"upsertsink-batch-{gone}-x1" / "batch-0.parquet").write_bytes(b"left by a killed writer")
    alive = scratch / f"upsertsink-batch-{os.getppid()}-x2"
    alive.mkdir()
    target = str(tmp_path / "t")
    sink = UpsertSink(target, "id", sequence_by="seq")
    sink.write(spark.createDataFrame(pa.table({"id": pa.array([1], pa.int64()), "seq": pa.array([1], pa.int64())})), 0)
    sink.write(spark.createDataFrame(pa.table({"id": pa.array([2], pa.int64()), "seq": pa.array([1], pa.int64())})), 1)
    assert sorted(p.name for p in scratch.iterdir()) == [alive.name]  # a running writer's folder stays
