"""A large batch over Spark Connect stays on the server (issue #21): prepared, fingerprinted and merged there, with
only its statistics and key rows brought to the client. The threshold is lowered so that small frames take that
path, and collecting the batch to the client is made to fail, so every test here runs the server path."""

from __future__ import annotations

import pytest
from sink_helpers import read_rows, version

from upsertsink import ReplayDivergenceError, UpsertSink
from upsertsink.engines import spark as spark_engine

pytestmark = pytest.mark.spark

SCHEMA = "id long, name string, seq long, op string"


@pytest.fixture
def on_server(monkeypatch):
    """Every Connect local relation counts as large; a collect of the batch to the client fails the test."""
    monkeypatch.setattr(spark_engine, "CONNECT_LOCAL_ROWS", 0)
    monkeypatch.setattr(spark_engine, "_client_rows", lambda df: None)  # not prepared from the client's rows

    def no_collect(self, df):
        raise AssertionError("a batch kept on the server was collected to the client")

    monkeypatch.setattr(spark_engine.SparkEngine, "_collect_small", no_collect)


def frame(connect, rows):
    return connect.createDataFrame(rows, SCHEMA).repartition(3)  # several partitions: stats summed over them


def sink(path: str, **kw) -> UpsertSink:
    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="big", **kw)


def table(path: str) -> dict[int, tuple[str, int]]:
    return {r["id"]: (r["name"], r["seq"]) for r in read_rows(path)}


def base(n: int = 40, seq: int = 1):
    return [(i, f"n{i}", seq, "U") for i in range(n)]


def test_a_large_connect_batch_is_written_and_its_replay_skipped_after_the_content_check(connect, tmp_path, on_server):
    path = str(tmp_path / "t")
    s = sink(path)
    first = s.write(connect.createDataFrame(base(), SCHEMA), batch_id=0)
    assert not first.skipped and first.inserted == 40
    batch = [(i, f"m{i}", 2, "U") for i in range(30, 60)]
    result = s.write(frame(connect, batch), batch_id=1)
    assert (result.inserted, result.updated, result.deleted) == (20, 10, 0)
    before = version(path)
    again = s.write(frame(connect, list(reversed(batch))), batch_id=1)  # the same rows, in another order
    assert again.skipped and again.replay_check == "matched"
    assert version(path) == before
    assert table(path)[35] == ("m35", 2) and table(path)[5] == ("n5", 1) and len(table(path)) == 60


def test_a_divergent_replay_of_a_large_connect_batch_is_refused(connect, tmp_path, on_server):
    path = str(tmp_path / "t")
    s = sink(path)
    s.write(frame(connect, base()), batch_id=0)
    s.write(frame(connect, [(i, "x", 2, "U") for i in range(10)]), batch_id=1)
    before = version(path)
    with pytest.raises(ReplayDivergenceError, match="different content"):
        s.write(frame(connect, [(i, "y" if i == 3 else "x", 2, "U") for i in range(10)]), batch_id=1)
    assert version(path) == before and table(path)[3] == ("x", 2)


def test_the_fingerprint_is_the_same_on_the_server_path_and_the_client_path(connect, tmp_path, monkeypatch):
    """A batch written while kept on the server replays as matched through the client path, and the other way
    round: one fingerprint algorithm (upsertsink-row-hash64-v3) on both."""
    path = str(tmp_path / "t")
    s = sink(path)
    rows = [(i, f"n{i}", 1, "D" if i % 7 == 0 else "U") for i in range(50)]
    with monkeypatch.context() as m:
        m.setattr(spark_engine, "CONNECT_LOCAL_ROWS", 0)
        s.write(frame(connect, rows), batch_id=0)
    assert s.write(frame(connect, rows), batch_id=0).replay_check == "matched"  # collected to the client
    s.write(frame(connect, [(i, "z", 2, "U") for i in range(5)]), batch_id=1)  # collected to the client
    with monkeypatch.context() as m:
        m.setattr(spark_engine, "CONNECT_LOCAL_ROWS", 0)
        assert s.write(frame(connect, [(i, "z", 2, "U") for i in range(5)]), batch_id=1).replay_check == "matched"


def test_sequence_guard_on_a_large_connect_batch(connect, tmp_path, on_server):
    path = str(tmp_path / "t")
    s = sink(path)
    s.write(frame(connect, [(1, "a", 5, "U"), (2, "b", 5, "U"), (3, "c", 5, "U")]), batch_id=0)
    s.write(frame(connect, [(1, "older", 4, "U"), (2, "equal", 5, "U"), (3, "newer", 6, "U")]), batch_id=1)
    assert table(path) == {1: ("a", 5), 2: ("b", 5), 3: ("newer", 6)}


def test_deletes_in_a_large_connect_batch_are_remembered(connect, tmp_path, on_server):
    """A delete stops an older insert of its key sent later (stale: applied as the delete), in the same kind
    of large batch; a newer insert brings the key back."""
    path = str(tmp_path / "t")
    s = sink(path)
    s.write(frame(connect, base(20)), batch_id=0)
    deleted = s.write(frame(connect, [(3, "n3", 5, "D"), (4, "n4", 5, "D"), (30, "new", 5, "U")]), batch_id=1)
    assert deleted.deleted == 2
    late = s.write(frame(connect, [(3, "back", 4, "U"), (4, "back", 6, "U"), (5, "u5", 4, "U")]), batch_id=2)
    assert late.stale == 1
    rows = table(path)
    assert 3 not in rows and rows[4] == ("back", 6) and rows[5] == ("u5", 4) and rows[30] == ("new", 5)
    # replays of both batches are skipped and change nothing
    assert s.write(frame(connect, [(3, "n3", 5, "D"), (4, "n4", 5, "D"), (30, "new", 5, "U")]), batch_id=1).skipped
    assert s.write(frame(connect, [(3, "back", 4, "U"), (4, "back", 6, "U"), (5, "u5", 4, "U")]), batch_id=2).skipped
    # a later batch (and another sink on the same table) still knows the delete
    s.write(frame(connect, [(3, "again", 5, "U")]), batch_id=3)
    assert 3 not in table(path)
    UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="other").write(
        frame(connect, [(3, "other", 2, "U")]), batch_id=0
    )
    assert 3 not in table(path)


def test_duplicate_keys_in_a_large_connect_batch_resolve_by_sequence(connect, tmp_path, on_server):
    path = str(tmp_path / "t")
    s = sink(path)
    s.write(frame(connect, base(10)), batch_id=0)
    rows = [(1, "low", 2, "U"), (1, "high", 3, "U"), (2, "x", 2, "U"), (2, "x", 2, "U"), (4, "gone", 3, "D"),
            (4, "early", 2, "U")]
    result = s.write(frame(connect, rows), batch_id=1)
    assert result.rows == 3
    got = table(path)
    assert got[1] == ("high", 3) and got[2] == ("x", 2) and 4 not in got
    s.write(frame(connect, [(4, "older", 2, "U")]), batch_id=2)
    assert 4 not in table(path)


def test_a_batch_cached_on_the_server_by_pyspark_is_kept_there(connect, tmp_path, monkeypatch):
    """pyspark uploads a local relation over ``localRelationCacheThreshold`` bytes as artifacts: such a batch
    is never collected back, whatever its row count."""
    def no_collect(self, df):
        raise AssertionError("a batch kept on the server was collected to the client")

    monkeypatch.setattr(spark_engine.SparkEngine, "_collect_small", no_collect)
    key = "spark.sql.session.localRelationCacheThreshold"
    old = connect.conf.get(key)
    connect.conf.set(key, "1")
    try:
        path = str(tmp_path / "t")
        s = sink(path)
        s.write(connect.createDataFrame(base(10), SCHEMA), batch_id=0)
        rows = [(1, "u", 2, "U"), (2, "d", 2, "D")]
        assert s.write(connect.createDataFrame(rows, SCHEMA), batch_id=1).deleted == 1
        assert s.write(connect.createDataFrame(rows, SCHEMA), batch_id=1).replay_check == "matched"
        s.write(connect.createDataFrame([(2, "old", 1, "U")], SCHEMA), batch_id=2)
        got = table(path)
        assert got[1] == ("u", 2) and 2 not in got and len(got) == 9
    finally:
        connect.conf.set(key, old)


def test_the_relation_the_client_sent_is_planned_on_the_server_once(connect, tmp_path, on_server, monkeypatch):
    # Each question about a relation the client sent makes the server turn it into a scan again (about 0.25 s
    # for 200k rows): the sink asks its lazy checkpoint instead, never the frame as sent.
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    sent = connect.createDataFrame(base(), SCHEMA)
    asked = []
    schema = ConnectFrame.schema

    def spy(self):
        asked.append(self._plan is sent._plan)
        return schema.fget(self)

    monkeypatch.setattr(ConnectFrame, "schema", property(spy))
    result = sink(str(tmp_path / "t")).write(sent, batch_id=0)
    assert result.inserted == 40
    assert asked and not any(asked), "the frame as sent was analyzed on the server"
