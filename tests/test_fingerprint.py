"""One fingerprint on both engines: a batch committed by one engine is verified by content when the other replays it."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from upsertsink import ReplayDivergenceError, UpsertSink
from upsertsink import fingerprint as fp
from upsertsink.engines.base import WriteRequest
from upsertsink.engines.embedded import EmbeddedEngine
from upsertsink.engines.spark import SparkEngine

UTC = datetime.UTC
MIXED = pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "small": pa.array([1, -2, None, 127], pa.int32()),
    "ratio": pa.array([0.5, -0.0, float("nan"), None], pa.float64()),
    "name": pa.array(["a", "", None, "ünï'code"], pa.string()),
    "raw": pa.array([b"\x00\x01", b"", None, b"x"], pa.binary()),
    "price": pa.array([Decimal("1.50"), Decimal("-2.25"), None, Decimal("0.00")], pa.decimal128(10, 2)),
    "day": pa.array([datetime.date(2026, 1, 1), None, datetime.date(1970, 1, 1), datetime.date(2099, 12, 31)]),
    "at": pa.array([datetime.datetime(2026, 1, 1, 10, 0, 0, 123456, tzinfo=UTC), None,
                    datetime.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime.datetime(2026, 6, 1, tzinfo=UTC)],
                   pa.timestamp("us", tz="UTC")),
    "ok": pa.array([True, False, None, True]),
    "tags": pa.array([["a", "b"], [], None, ["c"]], pa.list_(pa.string())),
})


def _request() -> WriteRequest:
    return WriteRequest(target="/unused", keys=("id",), sequence=None, delete_when=None, app_id="a", batch_id=0)


def test_both_engines_give_the_same_fingerprint_for_every_column_type(spark):
    embedded = EmbeddedEngine(MIXED).fingerprint(_request(), None, [])
    on_spark = SparkEngine(spark.createDataFrame(MIXED)).fingerprint(_request(), None, [])
    assert embedded == on_spark and embedded.algorithm == fp.ALGORITHM and embedded.rows == 4


def test_the_fingerprint_ignores_row_order_and_integer_width_but_not_content():
    base = fp.fingerprint(MIXED)
    assert fp.fingerprint(MIXED.take([3, 1, 0, 2])) == base
    wider = MIXED.set_column(1, "small", MIXED["small"].cast(pa.int64()))
    assert fp.fingerprint(wider) == base
    changed = MIXED.set_column(3, "name", pa.array(["a", "", None, "other"]))
    assert fp.fingerprint(changed) != base


def test_a_replay_on_the_other_engine_is_checked_by_content(spark, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    batch = MIXED.drop_columns(["tags"])
    sink.write(batch, batch_id=0)  # committed by the embedded engine
    again = sink.write(spark.createDataFrame(batch), batch_id=0)
    assert again.skipped and again.replay_check == "matched"
    changed = batch.set_column(3, "name", pa.array(["a", "", None, "other"]))
    with pytest.raises(ReplayDivergenceError, match="different content"):
        sink.write(spark.createDataFrame(changed), batch_id=0)
    sink.write(spark.createDataFrame(batch.slice(0, 2).set_column(0, "id", pa.array([7, 8]))), batch_id=1)
    assert sink.write(batch.slice(0, 2).set_column(0, "id", pa.array([7, 8])), batch_id=1).replay_check == "matched"


def test_fingerprints_of_the_earlier_per_engine_algorithms_are_compared_by_row_count(tmp_path):
    path = str(tmp_path / "t")
    batch = pa.table({"id": [1, 2], "v": ["a", "b"]})
    meta = {"upsertsink": 1, "app_id": "old-job", "batch_id": 3, "engine": "embedded",
            "algorithm": "arrow-pandas-hash64-v2", "rows": 2, "fingerprint": "0" * 32}
    write_deltalake(path, batch, commit_properties=CommitProperties(
        custom_metadata={"userMetadata": json.dumps(meta)}, app_transactions=[Transaction("old-job", 3)]))
    sink = UpsertSink(path, "id", app_id="old-job")
    assert sink.write(batch, batch_id=3).replay_check == "rows-only"
    with pytest.raises(ReplayDivergenceError):
        sink.write(batch.slice(0, 1), batch_id=3)
    assert DeltaTable(path).version() == 0


def test_the_v3_fingerprint_of_a_fixed_batch_never_changes():
    """Fingerprints are stored in commits and recomputed by later versions: a change to the hashing code must
    not change a value (this one was computed by the code that introduced v3, and again after every
    speed-up of it)."""
    utc = datetime.UTC
    table = pa.table({
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "f": pa.array([float("nan"), -0.0, None, 1.5]),
        "s": pa.array(["a", None, "ü", "a"]),
        "d": pa.array([datetime.date(2024, 2, 29), None, datetime.date(1970, 1, 1), datetime.date(1969, 12, 31)]),
        "ts": pa.array([datetime.datetime(2024, 1, 1, 12, tzinfo=utc), None, datetime.datetime(1999, 12, 31, tzinfo=utc),
                        datetime.datetime(1960, 1, 1, tzinfo=utc)], pa.timestamp("us", "UTC")),
        "b": pa.array([True, False, None, True]),
        "n": pa.array([[1], [], None, [2, 3]]),
    })
    assert fp.fingerprint(table) == fp.Fingerprint("upsertsink-row-hash64-v3", 4, "e2b807b3ec7e65b62dfdce9ba7c5a025")
