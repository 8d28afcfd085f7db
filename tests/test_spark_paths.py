"""The Spark engine prepares small batches on the driver and large ones in one distributed pass; both paths must
behave alike. Here every batch goes through the distributed pass (LOCAL_ROWS = 0) and is checked against the
same write through the driver path and the embedded engine."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from sink_helpers import read_rows

import upsertsink.engines.spark as spark_engine
from upsertsink import DuplicateKeyError, InvalidInputError, SchemaMismatchError, UpsertSink
from upsertsink.engines.base import WriteRequest
from upsertsink.engines.embedded import EmbeddedEngine

CDC = pa.schema([("id", pa.int64()), ("name", pa.string()), ("seq", pa.int64()), ("op", pa.string())])


@pytest.fixture(params=["driver", "distributed"])
def path_kind(request, monkeypatch):
    if request.param == "distributed":
        monkeypatch.setattr(spark_engine, "LOCAL_ROWS", 0)
    return request.param


def _cdc(*rows):
    return pa.Table.from_pylist([dict(zip(CDC.names, r, strict=True)) for r in rows], schema=CDC)


def test_both_paths_write_the_same_table_as_the_embedded_engine(spark, tmp_path, path_kind):
    batches = [
        _cdc((1, "a", 1, "U"), (2, "b", 1, "U"), (2, "b", 1, "U"), (3, "c", 1, "U"), (3, "c2", 2, "U")),
        _cdc((1, "gone", 5, "D"), (4, "d", 5, "U"), (2, "old", 0, "U")),
        _cdc((1, "back?", 3, "U"), (5, "e", 6, "U")),
    ]
    on_spark, embedded = str(tmp_path / "s"), str(tmp_path / "e")
    for i, b in enumerate(batches):
        UpsertSink(on_spark, "id", sequence_by="seq", delete_when="op = 'D'").write(spark.createDataFrame(b), i)
        UpsertSink(embedded, "id", sequence_by="seq", delete_when="op = 'D'").write(b, i)
    assert read_rows(on_spark) == read_rows(embedded)
    assert [r["id"] for r in read_rows(on_spark)] == [2, 3, 4, 5]
    again = UpsertSink(on_spark, "id", sequence_by="seq", delete_when="op = 'D'").write(batches[2], batch_id=2)
    assert again.replay_check == "matched"  # the embedded engine verifies what the Spark path committed


def test_both_paths_give_the_embedded_fingerprint(spark, path_kind):
    batch = _cdc((1, "a", 1, "U"), (2, None, 2, "D"))
    request = WriteRequest("/unused", ("id",), "seq", None, "a", 0)
    ours = spark_engine.SparkEngine(spark.createDataFrame(batch)).fingerprint(request, None, [])
    assert ours == EmbeddedEngine(batch).fingerprint(request, None, [])


def test_both_paths_refuse_bad_batches_alike(spark, tmp_path, path_kind):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(spark.createDataFrame(_cdc((1, "a", 1, "U"))), batch_id=0)
    with pytest.raises(DuplicateKeyError, match=r"id=2"):
        sink.write(spark.createDataFrame(_cdc((2, "x", 1, "U"), (2, "y", 1, "U"))), batch_id=1)
    with pytest.raises(InvalidInputError, match="'id' has 1 null"):
        sink.write(spark.createDataFrame(_cdc((None, "x", 1, "U"))), batch_id=1)
    floats = pa.table({"id": pa.array([3.0, math.nan]), "seq": pa.array([1, 2], pa.int64())})
    with pytest.raises(InvalidInputError, match="NaN"):
        UpsertSink(str(tmp_path / "f"), "id", sequence_by="seq").write(spark.createDataFrame(floats), batch_id=0)
    narrow = str(tmp_path / "n")
    UpsertSink(narrow, "id").write(pa.table({"id": pa.array([1], pa.int64()), "n": pa.array([1], pa.int32())}), 0)
    with pytest.raises(SchemaMismatchError, match="'n'"):
        UpsertSink(narrow, "id").write(spark.createDataFrame(pa.table({"id": [2], "n": [2**40]})), batch_id=1)
    assert [r["id"] for r in read_rows(path)] == [1]


def test_a_batch_spark_plans_as_large_is_not_collected_to_the_driver(spark):
    """Collecting up to LOCAL_ROWS rows of a large batch only to find it too large reads the source twice: a
    batch whose plan Spark estimates above LOCAL_MAX_ESTIMATE_BYTES runs no job here."""
    from upsertsink.engines.spark import SparkEngine

    sc = spark.sparkContext
    tracker = sc.statusTracker()
    big = spark.range(2_000_000_000)  # estimated at 16 GB
    sc.setJobGroup("upsertsink-probe-big", "probe")
    try:
        assert SparkEngine(big)._collect_small(big) is None
        assert tracker.getJobIdsForGroup("upsertsink-probe-big") == []
        small = spark.range(10)
        sc.setJobGroup("upsertsink-probe-small", "probe")
        assert SparkEngine(small)._collect_small(small).num_rows == 10
        assert tracker.getJobIdsForGroup("upsertsink-probe-small") != []  # the probe does see jobs
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


def test_settings_changed_between_writes_reach_the_commit_session(spark):
    """The commit session is kept between writes and re-copies the user's settings only when they changed."""
    from upsertsink.engines.spark_merge import child_session

    key = "spark.upsertsink.test.setting"
    try:
        spark.conf.set(key, "1")
        first = child_session(spark)
        assert first.conf.get(key) == "1"
        spark.conf.set(key, "2")
        again = child_session(spark)
        assert again is first and again.conf.get(key) == "2"
        assert child_session(spark).conf.get(key) == "2"
    finally:
        spark.conf.unset(key)
