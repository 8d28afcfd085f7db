"""Tables named in Spark's catalog (issue #21): UpsertSink.for_table on classic Spark and Spark Connect, managed
and external tables, created by name on the first write, and a persistent Hive metastore across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest
from sink_helpers import named_cdc_sink as _cdc
from sink_helpers import read_rows

from upsertsink import InvalidInputError, NotADeltaTableError, UpsertSink, UpsertSinkError

pytestmark = pytest.mark.spark

SCHEMA = "id long, v string, seq long, op string"


@pytest.fixture(params=["spark", "connect"])
def session(request):
    return request.getfixturevalue(request.param)


def test_the_first_write_creates_a_managed_table_by_name_and_replays_are_skipped(session, schema, tmp_path):
    name = f"{schema}.orders"
    sink = _cdc(name)
    assert sink.last_batch_id() is None  # no table yet: nothing committed
    first = sink.write(session.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], SCHEMA), batch_id=0)
    assert (first.inserted, first.skipped) == (2, False)
    assert session.catalog.tableExists(name)
    assert sink.target is not None and sink.target.startswith(str(tmp_path / "warehouse"))
    batch = session.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], SCHEMA)
    assert sink.write(batch, batch_id=1).deleted == 1
    assert sink.write(batch, batch_id=1).skipped
    stale = sink.write(session.createDataFrame([(2, "old", 1, "U")], SCHEMA), batch_id=2)
    assert stale.stale == 1  # the delete is remembered: an older row of key 2 does not come back
    assert sorted(r["id"] for r in session.table(name).collect()) == [1, 3]
    assert sink.last_batch_id() == 2
    assert _cdc(name).last_batch_id() == 2  # a new sink (a restarted job) finds the marker by name
    assert sink.app_id == f"upsertsink:{name}"


def test_an_external_table_is_written_at_its_own_location(spark, connect, schema, tmp_path):
    where = tmp_path / "external"
    spark.sql(f"CREATE TABLE {schema}.ext (id BIGINT, v STRING, seq BIGINT, op STRING) USING delta LOCATION '{where}'")
    sink = _cdc(f"{schema}.ext")
    sink.write(spark.createDataFrame([(1, "a", 1, "U")], SCHEMA), batch_id=0)
    sink.write(connect.createDataFrame([(1, "A", 2, "U"), (2, "b", 2, "U")], SCHEMA), batch_id=1)
    assert [(r["id"], r["v"]) for r in read_rows(str(where))] == [(1, "A"), (2, "b")]
    assert sink.target == str(where)


def test_a_pandas_or_arrow_batch_goes_through_the_active_session(spark, schema):
    sink = _cdc(f"{schema}.t")
    spark.sql("SELECT 1").collect()  # the run's session is the active one
    result = sink.write(pa.table({"id": [1], "v": ["a"], "seq": [1], "op": ["U"]}), batch_id=0)
    assert (result.engine, result.inserted) == ("spark", 1)


def test_without_a_session_a_named_table_is_a_clear_error(monkeypatch):
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    monkeypatch.setattr(ConnectSession, "getActiveSession", classmethod(lambda cls: None))
    sink = _cdc("default.nothing_here")
    with pytest.raises(UpsertSinkError, match="needs a Spark session"):
        sink.write(pa.table({"id": [1], "v": ["a"], "seq": [1], "op": ["U"]}), batch_id=0)


def test_bad_names_and_tables_that_are_not_delta_are_refused(spark, schema, tmp_path):
    for bad in ["", "a.b.c.d", "orders; DROP TABLE x", "a..b", 5]:
        with pytest.raises(InvalidInputError, match="not a catalog table name"):
            UpsertSink.for_table(bad, keys="id")
    spark.sql(f"CREATE TABLE {schema}.pq (id BIGINT) USING parquet")
    with pytest.raises(NotADeltaTableError, match=f"{schema}.pq"):
        _cdc(f"{schema}.pq").write(spark.createDataFrame([(1, "a", 1, "U")], SCHEMA), batch_id=0)
    assert UpsertSink.for_table(f"{schema}.`odd name`", keys="id").table_name == f"{schema}.`odd name`"


_HIVE_JOB = textwrap.dedent('''
    import json, sys
    from upsertsink import UpsertSink, spark_session
    root, step = sys.argv[1], sys.argv[2]
    spark = spark_session("catalog-test", "local[1]", **{
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": f"{root}/warehouse",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root}/metastore_db;create=true",
    })
    sink = UpsertSink.for_table("default.orders", keys="id", sequence_by="seq", delete_when="op = 'D'")
    out = {"before": sink.last_batch_id()}
    schema = "id long, v string, seq long, op string"
    if step == "1":
        spark.sql(f"CREATE TABLE default.ext (id BIGINT, v STRING, seq BIGINT, op STRING) USING delta "
                  f"LOCATION '{root}/ext'")
        sink.write(spark.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], schema), batch_id=0)
        ext = UpsertSink.for_table("default.ext", keys="id")
        ext.write(spark.createDataFrame([(7, "x", 1, "U")], schema), batch_id=0)
    else:
        replay = sink.write(spark.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], schema), batch_id=0)
        out["replay_skipped"] = replay.skipped
        sink.write(spark.createDataFrame([(2, None, 2, "D")], schema), batch_id=1)
        ext = UpsertSink.for_table("default.ext", keys="id")
        out["ext_replay"] = ext.write(spark.createDataFrame([(7, "x", 1, "U")], schema), batch_id=0).skipped
        out["rows"] = sorted(r["id"] for r in spark.table("default.orders").collect())
    out["after"] = sink.last_batch_id()
    out["tables"] = sorted(t.name for t in spark.catalog.listTables("default"))
    print("RESULT " + json.dumps(out))
''')


def test_a_persistent_hive_metastore_finds_the_table_by_name_in_a_new_process(tmp_path):
    """Two processes (two JVMs) on one Derby-backed Hive metastore: the second finds the managed and the
    external table by name, skips the replay and goes on."""
    def run(step: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _HIVE_JOB, str(tmp_path), step], capture_output=True,
                              text=True, timeout=600, cwd=tmp_path, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
        return json.loads(line.removeprefix("RESULT "))

    first = run("1")
    assert (first["before"], first["after"], first["tables"]) == (None, 0, ["ext", "orders"])
    second = run("2")
    assert second["before"] == 0 and second["replay_skipped"] and second["ext_replay"]
    assert (second["rows"], second["after"]) == ([1], 1)


def test_a_history_table_by_name_is_created_with_its_version_columns(session, schema):
    name = f"{schema}.customers"
    sink = _cdc(name, scd_type=2, track_history_except=["op"])
    sink.write(session.createDataFrame([(1, "Elm", 10, "U"), (1, "Pine", 30, "U")], SCHEMA), batch_id=0)
    sink.write(session.createDataFrame([(1, "Maple", 20, "U")], SCHEMA), batch_id=1)
    rows = session.sql(f"SELECT v, __START_AT, __END_AT FROM {name} ORDER BY __START_AT").collect()
    assert [tuple(r) for r in rows] == [("Elm", 10, 20), ("Maple", 20, 30), ("Pine", 30, None)]
    assert dict(session.table(name).dtypes)["__END_AT"] == "bigint"
    assert sink.write(session.createDataFrame([(1, "Maple", 20, "U")], SCHEMA), batch_id=1).skipped
