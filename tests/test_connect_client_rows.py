"""A Spark Connect batch built on the client (``createDataFrame`` of pandas, Arrow or rows, below pyspark's
cache threshold) carries its rows in the client's plan. The Spark engine prepares it there in Arrow, as the
embedded engine does, with no Spark job and no round trip, and sends only the MERGE source. These tests hold
that path to the same answers as the server paths: the same fingerprint for every type, the same deletes, a
fall-back to Spark where Arrow and Spark SQL might not agree."""

from __future__ import annotations

import datetime as dt
import decimal

import pandas as pd
import pyarrow as pa
import pytest
from sink_helpers import read_rows, version

from upsertsink import InvalidInputError, ReplayDivergenceError, UpsertSink
from upsertsink.engines import spark as spark_engine

pytestmark = pytest.mark.spark


@pytest.fixture
def no_spark_preparation(monkeypatch):
    """The batch may reach Spark only as the MERGE source: no statistics job, no collect, no checkpoint."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("a batch the client holds was prepared through Spark")

    monkeypatch.setattr(spark_engine.SparkEngine, "_stats", refuse)
    monkeypatch.setattr(spark_engine.SparkEngine, "_collect_small", refuse)
    monkeypatch.setattr(spark_engine.SparkEngine, "_batch", refuse)


def cdc(path: str, **kw) -> UpsertSink:
    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="client", **kw)


def rows_of(path: str) -> dict[int, tuple]:
    return {r["id"]: (r["name"], r["seq"]) for r in read_rows(path)}


def test_a_batch_built_on_the_client_is_prepared_there_and_written_exactly_once(connect, tmp_path, no_spark_preparation):
    path = str(tmp_path / "t")
    s = cdc(path)
    s.write(connect.createDataFrame(pd.DataFrame({
        "id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "seq": [5, 5, 5, 5], "op": ["U"] * 4,
    })), batch_id=0)
    batch = pa.table({"id": [1, 2, 3, 5, 5], "name": ["old", "gone", "new", "e1", "e2"], "seq": [4, 6, 6, 1, 2],
                      "op": ["U", "D", "U", "U", "U"]})
    result = s.write(connect.createDataFrame(batch), batch_id=1)
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    assert rows_of(path) == {1: ("a", 5), 3: ("new", 6), 4: ("d", 5), 5: ("e2", 2)}  # stale 1 kept out, 5 by seq
    before = version(path)
    again = s.write(connect.createDataFrame(batch.take([4, 3, 2, 1, 0])), batch_id=1)  # the same rows reordered
    assert again.skipped and again.replay_check == "matched" and version(path) == before
    changed = batch.set_column(1, "name", pa.array(["old", "gone", "NEW", "e1", "e2"]))
    with pytest.raises(ReplayDivergenceError, match="different content"):
        s.write(connect.createDataFrame(changed), batch_id=1)
    # the delete is remembered: an older insert of key 2 sent later stays out
    late = s.write(connect.createDataFrame([(2, "back", 5, "U")], "id long, name string, seq long, op string"),
                   batch_id=2)
    assert late.stale == 1 and 2 not in rows_of(path) and version(path) == before + 1


EVERY_TYPE = "id long, i int, small smallint, name string, x double, ok boolean, day date, at timestamp, " \
             "local timestamp_ntz, amount decimal(12,3), raw binary, seq long"


def every_type_rows(name: str = "n"):
    return [
        (i, i * 7, i % 3, f"{name}{i}" if i % 4 else None, i / 3 if i % 5 else float("nan"), i % 2 == 0,
         dt.date(2026, 1, 1 + i % 28), dt.datetime(2026, 11, 26, 10, i % 60, tzinfo=dt.UTC),
         dt.datetime(2026, 11, 26, 11, i % 60), decimal.Decimal(f"{i}.125"), bytes([i % 256, 1]), 1)
        for i in range(30)
    ]


def test_every_path_gives_a_batch_the_same_fingerprint(connect, spark, tmp_path, monkeypatch):
    """Written from the client's rows, the batch replays as matched through the Connect server path, classic
    Spark and the embedded engine; and the other way round."""
    path = str(tmp_path / "t")
    s = UpsertSink(path, "id", sequence_by="seq", app_id="types")
    client = connect.createDataFrame(every_type_rows(), EVERY_TYPE)
    assert spark_engine._client_rows(client) is not None
    assert not s.write(client, batch_id=0).skipped
    with monkeypatch.context() as m:  # the server path: kept there, statistics from its Python workers
        m.setattr(spark_engine, "_client_rows", lambda df: None)
        m.setattr(spark_engine, "CONNECT_LOCAL_ROWS", 0)
        assert s.write(connect.createDataFrame(every_type_rows(), EVERY_TYPE), batch_id=0).replay_check == "matched"
    assert s.write(spark.createDataFrame(every_type_rows(), EVERY_TYPE), batch_id=0).replay_check == "matched"
    arrow = spark.createDataFrame(every_type_rows(), EVERY_TYPE).toArrow()
    assert s.write(arrow, batch_id=0).replay_check == "matched"
    # and a batch first written by classic Spark replays as matched from the client's rows
    s.write(spark.createDataFrame(every_type_rows("m"), EVERY_TYPE), batch_id=1)
    again = connect.createDataFrame(every_type_rows("m"), EVERY_TYPE)
    assert spark_engine._client_rows(again) is not None
    assert s.write(again, batch_id=1).replay_check == "matched"
    assert len(read_rows(path)) == 30


def test_a_predicate_arrow_and_spark_might_read_differently_goes_through_spark(connect, tmp_path):
    path = str(tmp_path / "t")
    s = UpsertSink(path, "id", sequence_by="seq", delete_when="lower(op) = 'd'", app_id="fn")
    s.write(connect.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], "id long, name string, seq long, op string"),
            batch_id=0)
    result = s.write(connect.createDataFrame([(1, "a", 2, "d")], "id long, name string, seq long, op string"),
                     batch_id=1)
    assert result.deleted == 1 and rows_of(path) == {2: ("b", 1)}
    bad = UpsertSink(path, "id", sequence_by="seq", delete_when="name", app_id="bad")
    with pytest.raises(InvalidInputError, match="delete_when 'name'"):
        bad.write(connect.createDataFrame([(3, "c", 1, "U")], "id long, name string, seq long, op string"), batch_id=0)
    assert rows_of(path) == {2: ("b", 1)}


def test_a_nested_column_keeps_the_spark_path(connect, tmp_path):
    frame = connect.createDataFrame([(1, {"a": 1}, 1)], "id long, tags map<string,int>, seq long")
    assert spark_engine._client_rows(frame) is None
    path = str(tmp_path / "t")
    UpsertSink(path, "id", sequence_by="seq").write(frame, batch_id=0)
    assert read_rows(path)[0]["tags"] == [("a", 1)]  # Arrow gives a map as its (key, value) pairs


def test_braces_in_names_and_values_reach_the_merge_as_they_are(connect, tmp_path):
    """Over Connect the MERGE text is formatted by pyspark (its source travels with the statement): braces in
    a column name, a key and a delete literal must not be read as placeholders."""
    path = str(tmp_path / "t")
    s = UpsertSink(path, "k", sequence_by="seq", delete_when="op = '{D}'", app_id="braces")
    schema = "k string, `v{1}` string, seq long, op string"
    s.write(connect.createDataFrame([("{a}", "x", 1, "U"), ("}{", "y", 1, "U"), ("b", "z", 1, "U")], schema),
            batch_id=0)
    s.write(connect.createDataFrame([("{a}", "x2", 2, "U"), ("}{", "y", 2, "{D}")], schema).repartition(2),
            batch_id=1)
    rows = {r["k"]: r["v{1}"] for r in read_rows(path, order_by="k")}
    assert rows == {"{a}": "x2", "b": "z"}
