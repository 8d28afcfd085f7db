"""Issue #22: what production tables do to the sink. Permanent conditions are errors that name their cause and
are never retried; maps, decimals and odd paths mean the same on both engines. Each case failed before."""

from __future__ import annotations

import decimal
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from sink_helpers import read_rows, version

from upsertsink import (
    BatchIdBehindMarkerError,
    ConcurrentWriteError,
    ConstraintViolationError,
    InvalidInputError,
    SchemaMismatchError,
    TableNotWritableError,
    UnsupportedTableFeatureError,
    UpsertSink,
    WriteFailedError,
    diff,
)

KV = {"id": pa.int64(), "v": pa.int64()}


# -- bad input and tables that refuse: clear errors, never retried --------------------------------------------


def test_columns_that_differ_only_in_case_are_bad_input(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", schema_evolution=True)
    sink.write(engine.frame([{"id": 1, "v": 1}], KV), batch_id=1)
    with pytest.raises(SchemaMismatchError, match=r"only in case: \['v', 'V'\]"):
        sink.write(engine.frame([{"id": 2, "v": 1, "V": 2}], {**KV, "V": pa.int64()}), batch_id=2)
    with pytest.raises(SchemaMismatchError, match=r"'V'.*'v'.*only in case") as caught:
        sink.write(engine.frame([{"id": 2, "V": 2}], {"id": pa.int64(), "V": pa.int64()}), batch_id=2)
    assert isinstance(caught.value, ValueError) and not isinstance(caught.value, WriteFailedError)
    assert version(path) == 0 and read_rows(path) == [{"id": 1, "v": 1}]


def _add_check(engine, path: str) -> None:
    if engine.name == "spark":
        engine.spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT v_positive CHECK (v > 0)")
    else:
        DeltaTable(path).alter.add_constraint({"v_positive": "v > 0"})


def test_a_check_constraint_violation_names_the_constraint_and_a_key_and_is_not_retried(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", max_retries=3)
    sink.write(engine.frame([{"id": 1, "v": 1}], KV), batch_id=1)
    _add_check(engine, path)
    before = version(path)
    with pytest.raises(ConstraintViolationError) as caught:
        sink.write(engine.frame([{"id": 2, "v": 5}, {"id": 7, "v": -1}], KV), batch_id=2)
    message = str(caught.value)
    assert "v_positive" in message and "id=7" in message and "fails the same way" in message
    assert isinstance(caught.value, ValueError) and "sending it again is safe" not in message
    assert version(path) == before and read_rows(path) == [{"id": 1, "v": 1}]
    assert sink.write(engine.frame([{"id": 2, "v": 5}], KV), batch_id=2).inserted == 1  # the fixed batch goes in


def test_a_not_null_constraint_violation_names_the_column(engine, tmp_path):
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64(), nullable=False)])
    write_deltalake(path, pa.table({"id": [1], "v": [1]}, schema=schema))
    sink = UpsertSink(path, "id")
    with pytest.raises(ConstraintViolationError, match=r"NOT NULL column 'v'.*id=3"):
        sink.write(engine.frame([{"id": 3, "v": None}], KV), batch_id=1)
    assert version(path) == 0


def test_an_append_only_table_is_refused_up_front(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame([{"id": 1, "v": 1}], KV), batch_id=1)
    DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "true"})
    with pytest.raises(TableNotWritableError, match="append-only") as caught:
        sink.write(engine.frame([{"id": 1, "v": 2}], KV), batch_id=2)
    assert isinstance(caught.value, ValueError)
    assert read_rows(path) == [{"id": 1, "v": 1}]
    # a replay of a committed batch is still skipped and checked
    assert sink.write(engine.frame([{"id": 1, "v": 1}], KV), batch_id=1).skipped


@pytest.mark.parametrize("feature, ddl", [
    ("type widening", "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"),
    ("row tracking", "TBLPROPERTIES ('delta.enableRowTracking' = 'true')"),
    ("liquid clustering", "CLUSTER BY (id)"),
])
def test_a_table_feature_the_embedded_engine_cannot_write_is_named_once_not_retried(spark, tmp_path, feature, ddl):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, v BIGINT) USING delta {ddl}")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 1)")
    before = version(path)
    sink = UpsertSink(path, "id")
    with pytest.raises(UnsupportedTableFeatureError) as caught:
        sink.write(pa.table({"id": [2], "v": [2]}), batch_id=1)
    message = str(caught.value)
    assert feature in message and "Spark engine" in message and not isinstance(caught.value, ConcurrentWriteError)
    assert version(path) == before
    # the Spark engine writes the same table
    result = sink.write(spark.createDataFrame(pa.table({"id": [2], "v": [2]}).to_pandas()), batch_id=1)
    assert result.inserted == 1


def test_an_unsupported_feature_in_delta_rs_error_text_is_not_a_conflict():
    from upsertsink.table.checks import unsupported_feature

    err = Exception("Transaction failed: Unsupported table features required: [TypeWidening]")
    found = unsupported_feature(err, "/tmp/x")
    assert isinstance(found, UnsupportedTableFeatureError) and "TypeWidening" in str(found)
    assert unsupported_feature(Exception("version 3 already exists"), "/tmp/x") is None


# -- maps ------------------------------------------------------------------------------------------------------

MAPS = {"id": pa.int64(), "seq": pa.int64(), "tags": pa.map_(pa.string(), pa.int64()),
        "nested": pa.struct([("attrs", pa.map_(pa.string(), pa.string()))])}


def _map_rows(seq: int, a: int, b: int) -> list[dict]:
    return [
        {"id": 1, "seq": seq, "tags": [("a", a)], "nested": {"attrs": [("x", "1")]}},
        {"id": 2, "seq": seq, "tags": [("b", b), ("c", 3)], "nested": {"attrs": None}},
    ]


def test_map_columns_are_written_replayed_and_left_alone_when_unchanged(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(engine.frame(_map_rows(1, 1, 2), MAPS), batch_id=1)
    replay = sink.write(engine.frame(_map_rows(1, 1, 2), MAPS), batch_id=1)
    assert replay.skipped and replay.replay_check == "matched"
    resend = sink.write(engine.frame(_map_rows(1, 1, 2), MAPS), batch_id=2)  # same rows, new id: nothing changes
    assert (resend.inserted, resend.updated, resend.deleted) == (0, 0, 0)
    newer = sink.write(engine.frame(_map_rows(2, 9, 2), MAPS), batch_id=3)
    assert newer.updated == 2
    got = {r["id"]: r["tags"] for r in read_rows(path)}
    assert got == {1: [("a", 9)], 2: [("b", 2), ("c", 3)]}


def test_the_diff_compares_map_columns(engine, tmp_path):
    left, right = str(tmp_path / "l"), str(tmp_path / "r")
    UpsertSink(left, "id").write(engine.frame(_map_rows(1, 1, 2), MAPS), batch_id=1)
    UpsertSink(right, "id").write(engine.frame(_map_rows(1, 5, 2), MAPS), batch_id=1)
    result = diff(left, right, keys=["id"], engine=engine.name)
    assert not result.equal and result.changed == 1 and result.changed_columns.get("tags") == 1
    assert diff(left, left, keys=["id"], engine=engine.name).equal


# -- one meaning for every type on both engines ------------------------------------------------------------------

DEC = {"id": pa.int64(), "d": pa.decimal128(10, 2)}


def test_a_value_with_more_decimal_places_than_the_column_is_refused_on_both_engines(engine, tmp_path):
    value, dtype = decimal.Decimal("1.005"), pa.decimal128(10, 3)
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame([{"id": 1, "d": decimal.Decimal("1.00")}], DEC), batch_id=1)
    with pytest.raises(SchemaMismatchError, match=r"column 'd'.*1 value.*never rounds"):
        sink.write(engine.frame([{"id": 2, "d": value}], {"id": pa.int64(), "d": dtype}), batch_id=2)
    # values that fit the scale exactly are cast, on both engines
    exact = decimal.Decimal("2.500")
    sink.write(engine.frame([{"id": 2, "d": exact}], {"id": pa.int64(), "d": dtype}), batch_id=2)
    assert [r["d"] for r in read_rows(path)] == [decimal.Decimal("1.00"), decimal.Decimal("2.50")]


# -- paths are taken literally ---------------------------------------------------------------------------------


CDC = {"id": pa.int64(), "v": pa.int64(), "seq": pa.int64(), "op": pa.string()}


def _cdc(*rows: tuple) -> list[dict]:
    return [dict(zip(CDC, r, strict=True)) for r in rows]


# a '%' that does not start an escape (two hex digits) is an ordinary character to both engines
@pytest.mark.parametrize("name", ["hash#tag", "sp ace ü", "q?mark", "100%", "50%off", "%"])
def test_odd_folder_names_are_taken_literally(engine, tmp_path, name):
    path = str(tmp_path / name)
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'")
    sink.write(engine.frame(_cdc((1, 1, 1, "U"), (3, 3, 1, "U")), CDC), batch_id=1)
    assert sink.write(engine.frame(_cdc((2, 1, 1, "U")), CDC), batch_id=2).inserted == 1
    assert sink.write(engine.frame(_cdc((2, 1, 1, "U")), CDC), batch_id=2).replay_check == "matched"
    with pytest.raises(BatchIdBehindMarkerError):  # the record of committed ids is read from the log
        sink.write(engine.frame(_cdc((4, 1, 1, "U")), CDC), batch_id=0)
    # a delete under sequence_by records a tombstone in the folder; a stale row of that key is then dropped
    assert sink.write(engine.frame(_cdc((3, 0, 5, "D")), CDC), batch_id=3).deleted == 1
    assert os.listdir(os.path.join(path, "_upsertsink", "tombstones"))
    stale = sink.write(engine.frame(_cdc((3, 9, 4, "U")), CDC), batch_id=4)
    assert (stale.inserted, stale.stale) == (0, 1)
    assert sink.write(engine.frame(_cdc((3, 0, 5, "D")), CDC), batch_id=3).replay_check == "matched"
    assert sink.last_batch_id() == 4
    report = sink.maintain()
    assert report.version == version(path) and [s["tombstones"] for s in report.tombstones] == [1]
    assert os.path.isdir(os.path.join(path, "_delta_log"))
    assert sorted(os.listdir(tmp_path)) == [name]  # nothing written under another name
    assert [r["id"] for r in read_rows(path)] == [1, 2]
    if engine.name == "spark":  # Spark reads the folder the embedded reader did
        assert sorted(r["id"] for r in engine.spark.read.format("delta").load(path).collect()) == [1, 2]


@pytest.mark.parametrize("name", ["hash#tag", "q?mark", "sp ace ü"])
def test_a_file_uri_is_taken_literally(engine, tmp_path, name):
    """deltalake parses a file URI as a URL ('#' ends the path: it wrote the table into 'hash'), Spark and the
    sink's own files take it literally: the sink escapes '#' and '?' for deltalake."""
    uri = f"file://{tmp_path}/{name}"
    sink = UpsertSink(uri, "id", sequence_by="seq", delete_when="op = 'D'")
    sink.write(engine.frame(_cdc((1, 1, 1, "U"), (3, 3, 1, "U")), CDC), batch_id=1)
    assert sink.write(engine.frame(_cdc((1, 1, 1, "U"), (3, 3, 1, "U")), CDC), batch_id=1).replay_check == "matched"
    assert sink.write(engine.frame(_cdc((3, 0, 5, "D")), CDC), batch_id=2).deleted == 1
    assert sink.write(engine.frame(_cdc((3, 9, 4, "U")), CDC), batch_id=3).stale == 1
    assert sink.last_batch_id() == 3
    assert sorted(os.listdir(tmp_path)) == [name]
    assert os.listdir(os.path.join(tmp_path, name, "_upsertsink", "tombstones"))
    assert [r["id"] for r in read_rows(str(tmp_path / name))] == [1]


def test_a_kept_table_handle_is_recognised_under_an_odd_folder_name(tmp_path):
    """deltalake names a table by its percent-encoded file URI: the commit files under it are found, so the
    handle is kept between writes (it was reopened on every write)."""
    from upsertsink.table import commit_log

    path = str(tmp_path / "hash#tag ü 100%")
    UpsertSink(path, "id").write(pa.table({"id": [1]}), batch_id=1)
    uri = DeltaTable(path).table_uri
    assert "%23" in uri and commit_log.commit_file_stamp(uri, 0, None) is not None


# '%' and two hex digits: deltalake (delta-rs 1.6) reads the table's log under the name decoded once more
@pytest.mark.parametrize("name", ["pct%41enc", "a%2Fb", "sp%20ace", "p%41/t"])
def test_a_local_folder_with_a_percent_escape_is_refused_with_the_reason(tmp_path, name):
    path = str(tmp_path / name)
    with pytest.raises(InvalidInputError, match=r"%..'.*URL-decodes"):
        UpsertSink(path, "id")
    assert os.listdir(tmp_path) == []


def test_a_percent_escape_behind_a_symbolic_link_is_refused(tmp_path):
    real = tmp_path / "pct%41enc"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(InvalidInputError, match=r"'%41'.*URL-decodes"):
        UpsertSink(str(tmp_path / "link"), "id")
    assert os.listdir(real) == []


# -- identity and generated columns: Delta fills them, the batch need not carry them ---------------------------

IDENTITY_CDC = "id BIGINT GENERATED ALWAYS AS IDENTITY, k STRING, v BIGINT, seq BIGINT, op STRING"
KVSO = "k STRING, v BIGINT, seq BIGINT, op STRING"


def _spark_rows(spark, path: str) -> list[dict]:
    return [r.asDict() for r in spark.read.format("delta").load(path).orderBy("k").collect()]


def test_a_batch_without_the_identity_column_is_inserted_updated_and_replayed_on_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` ({IDENTITY_CDC}) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` (k, v, seq, op) VALUES ('a', 1, 1, 'U')")
    sink = UpsertSink(path, "k", sequence_by="seq", delete_when="op = 'D'")

    def batch(*rows):
        return spark.createDataFrame(list(rows), KVSO)

    first = sink.write(batch(("a", 2, 2, "U"), ("b", 3, 2, "U")), batch_id=1)
    assert (first.inserted, first.updated) == (1, 1)
    ids = {r["k"]: r["id"] for r in _spark_rows(spark, path)}
    assert ids["a"] == 1 and ids["b"] not in (None, 1)  # kept on update, filled by Delta on insert
    replay = sink.write(batch(("a", 2, 2, "U"), ("b", 3, 2, "U")), batch_id=1)
    assert replay.skipped and replay.replay_check == "matched"
    second = sink.write(batch(("b", 4, 3, "U"), ("c", 5, 3, "U"), ("a", 0, 4, "D")), batch_id=2)
    assert (second.inserted, second.updated, second.deleted) == (1, 1, 1)
    assert sink.write(batch(("a", 9, 3, "U"), ("b", 4, 3, "U")), batch_id=3).stale == 1  # tombstone; no-op row
    rows = _spark_rows(spark, path)
    assert [(r["k"], r["v"]) for r in rows] == [("b", 4), ("c", 5)]
    assert rows[0]["id"] == ids["b"] and rows[1]["id"] not in (None, 1, ids["b"])
    # the embedded engine cannot write identity columns (delta-rs 1.6): one clear error, not the missing column
    with pytest.raises(UnsupportedTableFeatureError, match="identity columns"):
        sink.write(pa.table({"k": ["d"], "v": [1], "seq": [5], "op": ["U"]}), batch_id=4)


@pytest.mark.parametrize("keys", ["k", "id"])
def test_a_batch_carrying_a_generated_always_identity_column_is_refused_naming_it(spark, tmp_path, keys):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` ({IDENTITY_CDC}) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` (k, v, seq, op) VALUES ('a', 1, 1, 'U')")
    before = version(path)
    with pytest.raises(InvalidInputError, match=r"'id'.*GENERATED ALWAYS AS IDENTITY") as caught:
        UpsertSink(path, keys).write(spark.createDataFrame([(7, "b", 2, 1, "U")], f"id BIGINT, {KVSO}"), batch_id=1)
    assert not isinstance(caught.value, WriteFailedError)
    assert version(path) == before


def test_a_generated_by_default_identity_is_filled_when_missing_and_kept_on_update(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH 100), "
              "k STRING, v BIGINT) USING delta")
    sink = UpsertSink(path, "k")
    sink.write(spark.createDataFrame([("a", 1)], "k STRING, v BIGINT"), batch_id=1)
    with_ids = spark.createDataFrame([(7, "a", 2), (8, "b", 3)], "id BIGINT, k STRING, v BIGINT")
    result = sink.write(with_ids, batch_id=2)
    assert (result.inserted, result.updated) == (1, 1)
    assert sink.write(with_ids, batch_id=2).replay_check == "matched"
    got = [(r["k"], r["id"], r["v"]) for r in _spark_rows(spark, path)]
    assert got == [("a", 100, 2), ("b", 8, 3)]  # an identity is never updated; an insert takes the batch's


def test_a_batch_without_a_generated_column_is_written_on_both_engines(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (k STRING, v BIGINT, g BIGINT GENERATED ALWAYS AS (v * 2), "
              "seq BIGINT, op STRING) USING delta")
    sink = UpsertSink(path, "k", sequence_by="seq", delete_when="op = 'D'")
    schema = {"k": pa.string(), "v": pa.int64(), "seq": pa.int64(), "op": pa.string()}
    rows = [{"k": "a", "v": 1, "seq": 1, "op": "U"}, {"k": "b", "v": 2, "seq": 1, "op": "U"}]
    assert sink.write(engine.frame(rows, schema), batch_id=1).inserted == 2
    assert sink.write(engine.frame(rows, schema), batch_id=1).replay_check == "matched"
    later = [{"k": "a", "v": 5, "seq": 2, "op": "U"}, {"k": "b", "v": 0, "seq": 2, "op": "D"}]
    result = sink.write(engine.frame(later, schema), batch_id=2)
    assert (result.updated, result.deleted) == (1, 1)
    # a batch that carries the generated column (its right values) still goes in, as before
    carried = engine.frame([{"k": "c", "v": 3, "g": 6, "seq": 3, "op": "U"}], {**schema, "g": pa.int64()})
    assert sink.write(carried, batch_id=3).inserted == 1
    assert [(r["k"], r["v"], r["g"]) for r in _spark_rows(spark, path)] == [("a", 5, 10), ("c", 3, 6)]


# -- replays after the schema changed --------------------------------------------------------------------------


def test_a_batch_committed_before_a_column_was_added_is_skipped_and_matched_when_sent_again(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", schema_evolution=True)
    first = [{"id": 1, "v": 1}]
    sink.write(engine.frame(first, KV), batch_id=1)
    sink.write(engine.frame([{"id": 2, "v": 1, "extra": "x"}], {**KV, "extra": pa.string()}), batch_id=2)
    replay = sink.write(engine.frame(first, KV), batch_id=1)
    assert replay.skipped and replay.replay_check == "matched"
    assert replay.version == version(path) == 1


def test_a_batch_whose_all_null_column_was_given_a_type_later_replays_as_a_match(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", schema_evolution=True)
    sink.write(engine.frame([{"id": 1, "v": 1}], KV), batch_id=1)
    with_nulls = [{"id": 2, "v": 1, "extra": None}]
    sink.write(engine.frame(with_nulls, {**KV, "extra": pa.null()}), batch_id=2)
    sink.write(engine.frame([{"id": 3, "v": 1, "extra": "x"}], {**KV, "extra": pa.string()}), batch_id=3)
    replay = sink.write(engine.frame(with_nulls, {**KV, "extra": pa.null()}), batch_id=2)
    assert replay.skipped and replay.replay_check == "matched"
    assert [r["extra"] for r in read_rows(path)] == [None, None, "x"]


def test_a_delete_is_remembered_across_a_write_that_adds_a_column(engine, tmp_path):
    """deltalake gives a table a new ``metaData.id`` when a MERGE adds a column; the table is the same table:
    its deletes and its record of batches still hold (the first CI run of the operators issue lost both)."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", schema_evolution=True)
    kso = {"id": pa.int64(), "seq": pa.int64(), "op": pa.string()}
    sink.write(engine.frame([{"id": 1, "seq": 1, "op": "I"}, {"id": 2, "seq": 1, "op": "I"}], kso), batch_id=1)
    sink.write(engine.frame([{"id": 1, "seq": 5, "op": "D"}], kso), batch_id=2)
    sink.write(engine.frame([{"id": 3, "seq": 1, "op": "I", "extra": "x"}], {**kso, "extra": pa.string()}), batch_id=3)
    late = sink.write(engine.frame([{"id": 1, "seq": 3, "op": "I", "extra": "y"}], {**kso, "extra": pa.string()}),
                      batch_id=4)
    assert (late.inserted, late.stale) == (0, 1)
    assert [r["id"] for r in read_rows(path)] == [2, 3]
    assert UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'").write(
        engine.frame([{"id": 1, "seq": 5, "op": "D"}], kso), batch_id=2).replay_check == "matched"


# -- timestamps ----------------------------------------------------------------------------------------------------


def test_a_timestamp_ntz_key_created_by_spark_stays_ntz_when_the_embedded_engine_writes(spark, tmp_path):
    import datetime

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "k")
    sink.write(spark.sql("SELECT timestamp_ntz'2024-01-01 10:00:00' AS k, 1L AS v"), batch_id=1)
    naive = pa.table({"k": pa.array([datetime.datetime(2024, 1, 2, 10)], pa.timestamp("us")), "v": [2]})
    sink.write(naive, batch_id=2)
    assert sink.write(naive, batch_id=2).replay_check == "matched"
    assert pa.schema(DeltaTable(path).schema().to_arrow()).field("k").type == pa.timestamp("us")
    assert [r["k"] for r in read_rows(path, "k")] == [datetime.datetime(2024, 1, 1, 10), datetime.datetime(2024, 1, 2, 10)]
    got = spark.read.format("delta").load(path).orderBy("k").collect()
    assert [r["k"] for r in got] == [datetime.datetime(2024, 1, 1, 10), datetime.datetime(2024, 1, 2, 10)]


def test_timestamps_at_the_ends_of_the_range_are_written_and_replayed(engine, tmp_path):
    import datetime

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    ends = [datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)]
    rows = [{"id": i, "ts": t} for i, t in enumerate(ends)]
    schema = {"id": pa.int64(), "ts": pa.timestamp("us")}
    sink.write(engine.frame(rows, schema), batch_id=1)
    assert sink.write(engine.frame(rows, schema), batch_id=1).replay_check == "matched"
    # read back with deltalake on both: spark_session() writes timestamps as TIMESTAMP_MICROS, not INT96, which
    # deltalake's readers turned into nanoseconds, wrapping dates outside 1677-2262
    # (Spark's timestamp is zoned: read back in UTC; the embedded engine keeps a naive one as timestamp_ntz)
    def naive() -> list:
        return [r["ts"].replace(tzinfo=None) for r in read_rows(path)]

    assert naive() == ends
    sink.write(engine.frame([{"id": 2, "ts": ends[1]}], schema), batch_id=2)
    UpsertSink(path, "id").write(pa.table({"id": [3], "ts": pa.array([ends[0]], pa.timestamp("us"))}), batch_id=3)
    assert naive() == [*ends, ends[1], ends[0]]  # the embedded engine goes on in a table Spark wrote
