"""Spark-only mode (issue #21, item 2): a table named in the catalog written through Spark SQL on its name only,
as under a governed catalog that hides the table's files. A fixture makes every deltalake, pyarrow-file and os
access to the table's and the tombstone table's folders raise: the protocol's guarantees still hold."""

from __future__ import annotations

import builtins
import os

import pytest
from sink_helpers import named_cdc_sink as _cdc

from upsertsink import ReplayDivergenceError, UpsertSinkError
from upsertsink.errors import BatchIdBehindMarkerError

pytestmark = pytest.mark.spark

SCHEMA = "id long, v string, seq long, op string"


class FileAccess(AssertionError):
    """The test's stand-in for a governed catalog's refusal."""


@pytest.fixture
def no_files(monkeypatch, tmp_path):
    """Any read or write of the folders under tmp_path from this process (deltalake, pyarrow files, os) raises."""
    import deltalake
    import pyarrow.parquet as pq

    from upsertsink import pruning
    from upsertsink.engines import spark_merge
    from upsertsink.sidecar import folder

    guarded = str(tmp_path)

    def refuse(*a, **k):
        raise FileAccess(f"file access in Spark-only mode: {a[:2]}")

    class NoTable:
        def __init__(self, *a, **k):
            refuse(*a)

        is_deltatable = staticmethod(refuse)

    monkeypatch.setattr(deltalake, "DeltaTable", NoTable)
    monkeypatch.setattr(deltalake, "write_deltalake", refuse)
    from upsertsink.table import commit_log, files, status

    for module, name in ((files, "open_snapshot"), (commit_log, "read_commit_info"), (commit_log, "find_write"),
                         (files, "latest_version"), (files, "table_exists"), (files, "last_batch_id"),
                         (status, "status")):
        monkeypatch.setattr(module, name, refuse)
    for name in ("names", "list", "read", "write", "delete"):
        monkeypatch.setattr(folder.Folder, name, refuse)
    monkeypatch.setattr(pruning, "file_ranges", refuse)
    monkeypatch.setattr(spark_merge, "file_ranges", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)

    def guard(fn):
        def inner(path, *a, **k):
            if isinstance(path, (str, os.PathLike)) and str(os.fspath(path)).startswith(guarded):
                refuse(path)
            return fn(path, *a, **k)
        return inner

    for name in ("listdir", "scandir", "stat", "lstat"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))
    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    yield


@pytest.fixture(params=["spark", "connect"])
def session(request):
    return request.getfixturevalue(request.param)


def test_spark_only_mode_keeps_every_guarantee_without_touching_the_files(session, schema, no_files):
    name = f"{schema}.orders"
    sink = _cdc(name)  # file_access=None: the files cannot be read here, so Spark-only mode is chosen
    assert sink.last_batch_id() is None
    first = sink.write(session.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], SCHEMA), batch_id=0)
    assert (first.inserted, first.skipped, sink.spark_only) == (2, False, True)
    assert session.catalog.tableExists(name)
    batch = session.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], SCHEMA)
    assert sink.write(batch, batch_id=1).deleted == 1
    replay = sink.write(batch, batch_id=1)
    assert (replay.skipped, replay.replay_check) == (True, "matched")
    with pytest.raises(ReplayDivergenceError, match=name):
        sink.write(session.createDataFrame([(3, "other", 2, "U")], SCHEMA), batch_id=1)
    stale = sink.write(session.createDataFrame([(2, "old", 1, "U")], SCHEMA), batch_id=2)
    assert stale.stale == 1  # the delete is remembered in the companion table
    assert sorted((r["id"], r["v"]) for r in session.table(name).collect()) == [(1, "a"), (3, "c")]
    assert session.catalog.tableExists(f"{schema}.orders__upsertsink_tombstones")
    assert sink.last_batch_id() == 2
    fresh = _cdc(name, file_access=False)  # a restarted job
    assert fresh.last_batch_id() == 2
    assert fresh.write(batch, batch_id=1).skipped  # a replay found through the history by name
    fresh.write(session.createDataFrame([(4, "d", 5, "U")], SCHEMA), batch_id=5)
    with pytest.raises(BatchIdBehindMarkerError, match=name):  # never committed, below the marker: refused
        fresh.write(session.createDataFrame([(5, "e", 5, "U")], SCHEMA), batch_id=4)
    older = fresh.write(session.createDataFrame([(1, "stale", 0, "U")], SCHEMA), batch_id=6)
    assert older.inserted + older.updated == 0  # the sequence guard
    assert sorted((r["id"], r["v"]) for r in session.table(name).collect()) == [(1, "a"), (3, "c"), (4, "d")]
    assert fresh.last_batch_id() == 6


def test_a_history_sink_is_refused_in_spark_only_mode_naming_the_table(spark, schema, no_files):
    name = f"{schema}.customers"
    sink = _cdc(name, scd_type=2, track_history_except=["op"], file_access=False)
    with pytest.raises(UpsertSinkError, match=f"table {name}: a history sink"):
        sink.write(spark.createDataFrame([(1, "Elm", 10, "U")], SCHEMA), batch_id=0)
    assert not spark.catalog.tableExists(name)  # refused before anything was created


def test_the_companion_table_name_keeps_catalog_and_schema_and_quotes():
    from upsertsink.table.named import tombstone_table_name

    assert tombstone_table_name("main.sales.orders") == "`main`.`sales`.`orders__upsertsink_tombstones`"
    assert tombstone_table_name("s.`my t`") == "`s`.`my t__upsertsink_tombstones`"
    assert tombstone_table_name("t") == "`t__upsertsink_tombstones`"


def test_a_delete_recorded_while_a_writer_reads_the_tombstones_is_not_resurrected(spark, schema, no_files, monkeypatch):
    """Writer A records and commits the delete of key 2 just after writer B has read the tombstones of its batch
    (an upsert of key 2, older than the delete, into a table without key 2): B's insert must not outlive it."""
    from upsertsink.table.named import NamedTombstoneStore

    name = f"{schema}.race"
    a, b = _cdc(name, app_id="a", file_access=False), _cdc(name, app_id="b", file_access=False)
    a.write(spark.createDataFrame([(1, "x", 1, "D"), (3, "c", 1, "U")], SCHEMA), batch_id=0)  # companion exists
    matching, raced = NamedTombstoneStore.matching_batch, []

    def between(store, *args):
        found = matching(store, *args)
        if not raced:  # B's read: A records and commits its delete now
            raced.append(1)
            a.write(spark.createDataFrame([(2, None, 10, "D")], SCHEMA), batch_id=1)
        return found

    monkeypatch.setattr(NamedTombstoneStore, "matching_batch", between)
    b.write(spark.createDataFrame([(2, "old", 5, "U")], SCHEMA), batch_id=0)
    assert raced
    assert sorted(r["id"] for r in spark.table(name).collect()) == [3]


def test_a_lost_race_to_create_a_table_is_retried_until_the_catalog_shows_it(monkeypatch):
    """Writers creating one table at once: Delta refuses the losers (ProtocolChanged) before the catalog shows the
    winner's name; they look again instead of failing. Any other error is raised."""
    from upsertsink.table import catalog

    class Refused(Exception):
        def __init__(self, condition):
            super().__init__(condition)
            self.condition = condition

        def getCondition(self):
            return self.condition

    class Writer:
        def __init__(self, errors):
            self.errors, self.calls = list(errors), 0

        def saveAsTable(self, name):
            self.calls += 1
            if self.errors:
                raise self.errors.pop(0)

    class Catalog:
        seen = iter([False, True])

        def tableExists(self, name):
            return next(self.seen)

    class Spark:
        catalog = Catalog()

    monkeypatch.setattr("time.sleep", lambda s: None)
    writer = Writer([Refused("DELTA_PROTOCOL_CHANGED"), Refused("DELTA_PROTOCOL_CHANGED")])
    catalog.save_new_table(Spark(), "s.t", writer)  # the second refusal finds the winner's table
    assert writer.calls == 2
    with pytest.raises(Refused):
        catalog.save_new_table(Spark(), "s.t", Writer([Refused("INSUFFICIENT_PERMISSIONS")]))


def test_an_external_table_by_name_and_the_cli_in_spark_only_mode(spark, schema, no_files, tmp_path):
    """An external table (CREATE TABLE ... LOCATION) written by name only keeps the guarantees; `status --table`
    reads its history through Spark (the files cannot be read here); `diff --table` needs the files and says so,
    naming the table."""
    import json

    from click.testing import CliRunner

    from upsertsink.cli import main

    name = f"{schema}.ext"
    spark.sql(f"CREATE TABLE {name} ({SCHEMA}) USING delta LOCATION '{tmp_path / 'external' / 'ext'}'")
    sink = _cdc(name, file_access=False)
    sink.write(spark.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], SCHEMA), batch_id=0)
    batch = spark.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], SCHEMA)
    assert sink.write(batch, batch_id=1).deleted == 1
    assert sink.write(batch, batch_id=1).skipped
    assert sink.write(spark.createDataFrame([(2, "old", 1, "U")], SCHEMA), batch_id=2).stale == 1
    assert sorted((r["id"], r["v"]) for r in spark.table(name).collect()) == [(1, "a"), (3, "c")]
    kind = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}["Type"]
    assert kind == "EXTERNAL"
    assert _cdc(name, file_access=False).last_batch_id() == 2

    def cli(*args):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    status = cli("status", "--table", name, "--json")
    assert status.exit_code == 0, status.output
    info = json.loads(status.stdout)
    assert (info["spark_only"], info["batches"], info["version"]) == (True, {f"upsertsink:{name}": 2}, 3)
    assert [c["batch_id"] for c in info["commits"]] == [2, 1, 0, None]  # version 0: the CREATE TABLE
    at = json.loads(cli("status", "--table", f"{name}@1", "--json").stdout)
    assert (at["version"], at["latest_version"], at["batches"]) == (1, 3, {f"upsertsink:{name}": 0})
    assert "app upsertsink:" in cli("status", "--table", name, "--spark-only").stdout
    diff = cli("diff", "--table", name, "--table", name, "--key", "id")
    assert diff.exit_code != 0
    assert f"table {name}: diff --table reads the table's files" in diff.stderr
    # the sink kept DESCRIBE DETAIL and the schema between its writes: another's ALTER makes it look again
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS (note string)")
    noted = spark.createDataFrame([(5, "e", 9, "U", "hi")], f"{SCHEMA}, note string")
    assert sink.write(noted, batch_id=3).inserted == 1  # no new column: `note` is the table's now
    assert spark.table(name).where("id = 5").collect()[0]["note"] == "hi"


def test_replay_check_reads_its_inputs_by_name_where_the_files_cannot_be_read(spark, schema, no_files, monkeypatch):
    """`replay-check --table` reads the job's inputs through Spark on their names (at a version with NAME@N):
    it needs no access to the tables' files. A version the table does not have is one error naming it."""
    from pathlib import Path

    from click.testing import CliRunner

    from upsertsink.cli import main

    monkeypatch.chdir(Path(__file__).parent / "jobs")  # replay-check puts the current directory on sys.path
    orders, people = f"{schema}.orders", f"{schema}.people"
    spark.createDataFrame([(i, f"c{i % 5}", float(i % 7)) for i in range(60)],
                          "order_id long, customer string, amount double").write.format("delta").saveAsTable(orders)
    spark.createDataFrame([(f"c{i}", f"name {i}") for i in range(5)], "customer string, name string").write.format(
        "delta").saveAsTable(people)
    spark.createDataFrame([("c9", "late")], "customer string, name string").write.format("delta").mode(
        "append").saveAsTable(people)

    def cli(*args):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    ok = cli("replay-check", "replay_jobs:totals", "--key", "customer", "--table", orders,
             "--table", f"customers={people}@0", "--format", "json")
    assert ok.exit_code == 0, ok.output
    broken = cli("replay-check", "replay_jobs:numbered", "--key", "row_id", "--table", orders)
    assert broken.exit_code == 1, broken.output
    missing = cli("replay-check", "replay_jobs:totals", "--key", "customer", "--table", orders,
                  "--table", f"customers={people}@7")
    assert missing.exit_code == 2
    assert f"reading version 7 of table {people} failed" in missing.stderr
