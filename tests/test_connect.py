"""Spark Connect sessions (issue #21): spark_session(connect=True) and remote=..., the client extra, and
foreach_batch in a Connect streaming query (the function is pickled and runs on the server).

Every write feature also runs on Connect through the `engine` fixture (tests/conftest.py, CONNECT_MODULES),
and the fault suites in tests/reliability/test_connect_faults.py."""

from __future__ import annotations

import importlib

import pytest
from sink_helpers import read_rows, version

from upsertsink import UpsertSink, spark_session
from upsertsink.session import SparkNotInstalledError, connect_url, is_connect

pytestmark = pytest.mark.spark

SCHEMA = "id long, name string, seq long, op string"


def test_connect_true_gives_connect_sessions_on_one_local_server(connect):
    assert is_connect(connect)
    url = connect_url(connect)
    assert url is not None and url.startswith("sc://127.0.0.1:")
    other = spark_session("upsertsink-tests", "local[2]", connect=True)
    try:
        assert is_connect(other) and other.session_id != connect.session_id
        assert connect_url(other) == url  # the same server, a session of its own
        assert other.range(3).count() == 3
    finally:
        other.stop()


def test_remote_joins_a_running_server_and_writes(connect, tmp_path):
    joined = spark_session(remote=connect_url(connect))
    try:
        assert is_connect(joined) and joined.session_id != connect.session_id
        path = str(tmp_path / "t")
        UpsertSink(path, "id").write(joined.createDataFrame([(1, "a", 1, "U")], SCHEMA), batch_id=0)
        assert [r["id"] for r in read_rows(path)] == [1]
        # what one client's write set in its session for the commit is put back afterwards
        assert joined.conf.get("spark.databricks.delta.write.txnAppId", None) is None
    finally:
        joined.stop()


def test_connect_and_remote_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        spark_session(connect=True, remote="sc://127.0.0.1:1")


def test_a_missing_connect_client_names_the_extra(monkeypatch):
    real = importlib.import_module

    def no_grpc(name, *args, **kwargs):
        if name == "grpc":
            raise ImportError("No module named 'grpc'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_grpc)
    with pytest.raises(SparkNotInstalledError, match=r'upsertsink\[connect\]'):
        spark_session(remote="sc://127.0.0.1:1")


def test_foreach_batch_in_a_connect_streaming_query_writes_each_epoch_once(connect, tmp_path):
    """The sink's foreach_batch is pickled to the server and runs there on a Connect session of its own; a
    re-run of the last epoch (its commit removed from the checkpoint, as a crash before the commit leaves
    it) is skipped by the sink's marker."""
    src, ckpt, path = tmp_path / "in", tmp_path / "ckpt", str(tmp_path / "t")
    connect.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], SCHEMA).write.parquet(str(src / "p1"))
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="connect-stream")

    def run() -> None:
        query = (
            connect.readStream.schema(SCHEMA).option("recursiveFileLookup", "true").parquet(str(src))
            .writeStream.foreachBatch(sink.foreach_batch).option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()
        assert query.exception() is None

    run()
    assert sink.last_batch_id() == 0
    connect.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], SCHEMA).write.parquet(str(src / "p2"))
    run()
    assert sink.last_batch_id() == 1
    assert [(r["id"], r["name"]) for r in read_rows(path)] == [(1, "a"), (3, "c")]
    # the engine crashed after the sink committed epoch 1 but before the query recorded it: epoch 1 runs again
    (ckpt / "commits" / "1").unlink()
    (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)
    before = version(path)
    run()
    assert version(path) == before  # the replayed epoch was skipped: no commit
    assert sink.last_batch_id() == 1
    assert [(r["id"], r["name"]) for r in read_rows(path)] == [(1, "a"), (3, "c")]
