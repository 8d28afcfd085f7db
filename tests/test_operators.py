"""Issue #44: what operators do to a sink's table between two runs of a job (RESTORE, marker retention, a
table re-created at the same path, clones, column renames) never loses or doubles a batch.

Each test plays the operator with the tool named in its parameter (deltalake's Python API, or Spark SQL on
the run's session) and writes with the engine of the ``engine`` fixture (embedded, classic Spark, Connect).
"""

from __future__ import annotations

import shutil
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from sink_helpers import read_rows

from upsertsink import TableNotWritableError, UpsertSink
from upsertsink.errors import BatchIdBehindMarkerError
from upsertsink.sidecar import tombstones
from upsertsink.table import files, lineage

CDC = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64(), "op": pa.string()}


def cdc(*quads):
    return [{"id": i, "name": n, "seq": s, "op": o} for i, n, s, o in quads]


def as_process_would(path: str | None = None) -> None:
    """Forget what this process keeps between writes (handles, markers, records, tombstones)."""
    files.forget_handles()
    lineage.forget()
    tombstones.forget_indexes()


def sink_for(path, **options):
    return UpsertSink(str(path), ["id"], sequence_by="seq", delete_when="op = 'D'", app_id="feed", **options)


# A six-batch change feed: inserts, updates, a delete, an out-of-order older update.
FEED = [
    cdc((1, "a", 10, "I"), (2, "b", 10, "I"), (3, "c", 10, "I")),
    cdc((1, "a2", 20, "U"), (4, "d", 20, "I")),
    cdc((2, "b", 30, "D"), (5, "e", 30, "I")),
    cdc((3, "c3", 40, "U"), (6, "f", 40, "I"), (1, "a-old", 15, "U")),
    cdc((4, "d", 50, "D"), (7, "g", 50, "I")),
    cdc((5, "e6", 60, "U"), (8, "h", 60, "I"), (1, "a6", 60, "U")),
]


def model(batches):
    best = {}
    for rows in batches:
        for r in rows:
            if r["id"] not in best or r["seq"] > best[r["id"]]["seq"]:
                best[r["id"]] = r
    return sorted((k, r["name"], r["seq"]) for k, r in best.items() if r["op"] != "D")


def state(path):
    return sorted((r["id"], r["name"], r["seq"]) for r in read_rows(str(path)))


def restore(request, tool: str, path, version: int) -> None:
    if tool == "deltalake":
        DeltaTable(str(path)).restore(version)
    else:
        request.getfixturevalue("spark").sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {version}")


# -- 1. RESTORE is an undo ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["deltalake", "spark"])
def test_batches_a_restore_undid_are_applied_again_when_resent(engine, tool, request, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    versions = [sink.write(engine.frame(rows, CDC), batch_id=i).version for i, rows in enumerate(FEED)]
    restore(request, tool, path, versions[2])  # undoes batches 3, 4 and 5
    assert state(path) == model(FEED[:3])
    for fresh in (False, True):  # this process, and a new one
        if fresh:
            as_process_would()
        assert sink.last_batch_id() == 2
        again = sink.write(engine.frame(FEED[1], CDC), batch_id=1)  # a batch the restore kept
        assert again.skipped and again.replay_check == "matched" and not again.reapplied
    for i in (3, 4, 5):
        result = sink.write(engine.frame(FEED[i], CDC), batch_id=i)
        assert not result.skipped and result.reapplied and not result.late, result
        assert sink.last_batch_id() == i
    assert state(path) == model(FEED)
    as_process_would()
    for i, rows in enumerate(FEED):  # every id is committed again: all replays
        result = sink.write(engine.frame(rows, CDC), batch_id=i)
        assert result.skipped and result.replay_check == "matched" and not result.reapplied
    assert state(path) == model(FEED)
    new = sink.write(engine.frame(cdc((9, "i", 70, "I")), CDC), batch_id=6)
    assert not new.skipped and not new.reapplied and sink.last_batch_id() == 6


@pytest.mark.parametrize("tool", ["deltalake", "spark"])
def test_a_delete_a_restore_undid_no_longer_keeps_a_corrected_row_out(engine, tool, request, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    kept = sink.write(engine.frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0).version
    sink.write(engine.frame(cdc((1, "", 10, "D")), CDC), batch_id=1)
    restore(request, tool, path, kept)
    # the producer corrects its feed: key 1 updated at a sequence below the undone delete
    corrected = sink.write(engine.frame(cdc((1, "a-fixed", 5, "U")), CDC), batch_id=2)
    assert corrected.stale == 0 and corrected.updated == 1
    assert state(path) == [(1, "a-fixed", 5), (2, "b", 1)]
    as_process_would()  # a new process: the undone delete (sequence 10) still does not act
    again = sink.write(engine.frame(cdc((1, "a6", 6, "U")), CDC), batch_id=3)
    assert again.stale == 0 and state(path) == [(1, "a6", 6), (2, "b", 1)]


def test_a_restore_that_undid_a_delete_is_undone_again_when_the_delete_is_resent(engine, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    kept = sink.write(engine.frame(cdc((1, "a", 1, "I")), CDC), batch_id=0).version
    sink.write(engine.frame(cdc((1, "", 10, "D")), CDC), batch_id=1)
    DeltaTable(str(path)).restore(kept)
    assert sink.write(engine.frame(cdc((1, "", 10, "D")), CDC), batch_id=1).reapplied
    assert state(path) == []
    late_old = sink.write(engine.frame(cdc((1, "older", 4, "U")), CDC), batch_id=2)
    assert late_old.stale == 1 and state(path) == []  # the re-sent delete is remembered again


def test_a_restore_to_a_version_whose_log_is_gone_refuses_naming_the_restore(tmp_path):
    """Where the log no longer says which batches the RESTORE kept, a replay below the marker is refused,
    not skipped, and the error names the RESTORE."""
    path = tmp_path / "t"
    sink = sink_for(path)
    for i, rows in enumerate(FEED[:4]):
        sink.write(pa.Table.from_pylist(rows, schema=pa.schema(list(CDC.items()))), batch_id=i)
    DeltaTable(str(path)).restore(1)
    for v in (0, 1, 2):  # log cleanup took the versions up to the one restored to
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    DeltaTable(str(path)).create_checkpoint()
    as_process_would()
    with pytest.raises(BatchIdBehindMarkerError, match=r"RESTORE.*version 4"):
        sink.write(pa.Table.from_pylist(FEED[0], schema=pa.schema(list(CDC.items()))), batch_id=0)


# -- 2. markers that expire --------------------------------------------------------------------------------


def test_a_marker_delta_expired_does_not_expire_the_sinks_record(engine, spark, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    for i, rows in enumerate(FEED[:3]):
        sink.write(engine.frame(rows, CDC), batch_id=i)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.setTransactionRetentionDuration' = "
              "'interval 1 seconds', 'delta.checkpointInterval' = '1')")
    time.sleep(1.5)
    spark.createDataFrame([(100, "other", 1, "I")], "id long, name string, seq long, op string") \
        .write.format("delta").mode("append").save(str(path))  # another writer's commit, and a checkpoint
    assert DeltaTable(str(path)).transaction_version("feed") is None  # Delta forgot the marker
    for fresh in (False, True):
        if fresh:
            as_process_would()
        assert sink.last_batch_id() == 2  # never backwards
        for i in (0, 1, 2):
            result = sink.write(engine.frame(FEED[i], CDC), batch_id=i)
            assert result.skipped and result.replay_check == "matched", result
    assert sink.write(engine.frame(FEED[3], CDC), batch_id=3).version is not None
    assert state(path) == sorted([*model(FEED[:4]), (100, "other", 1)])


# -- 3. a table is its identity, not its folder ------------------------------------------------------------


def test_a_table_recreated_at_the_same_path_starts_clean_in_the_same_process(engine, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    sink.write(engine.frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "", 50, "D"), (2, "", 50, "D")), CDC), batch_id=1)
    shutil.rmtree(path)
    first = sink.write(engine.frame(cdc((1, "new", 3, "I"), (2, "new", 3, "I")), CDC), batch_id=0)
    assert not first.skipped and first.stale == 0
    second = sink.write(engine.frame(cdc((3, "c", 1, "I")), CDC), batch_id=1)
    assert not second.skipped
    assert state(path) == [(1, "new", 3), (2, "new", 3), (3, "c", 1)]
    assert sink.last_batch_id() == 1


def test_a_catalog_table_replaced_starts_clean_in_the_same_process(spark, tmp_path):
    spark.sql("DROP TABLE IF EXISTS ops_replaced")
    sink = UpsertSink.for_table("ops_replaced", ["id"], sequence_by="seq", delete_when="op = 'D'", app_id="feed")
    frame = lambda *quads: spark.createDataFrame(cdc(*quads), "id long, name string, seq long, op string")
    sink.write(frame((1, "a", 1, "I"), (2, "b", 1, "I")), batch_id=0)
    sink.write(frame((1, "", 50, "D")), batch_id=1)
    spark.sql("CREATE OR REPLACE TABLE ops_replaced (id long, name string, seq long, op string) USING delta")
    first = sink.write(frame((1, "new", 3, "I")), batch_id=0)
    assert not first.skipped and first.stale == 0
    assert sorted(tuple(r) for r in spark.table("ops_replaced").select("id", "name", "seq").collect()) == [
        (1, "new", 3)]
    assert sink.last_batch_id() == 0
    spark.sql("DROP TABLE ops_replaced")


# -- 4. clones ---------------------------------------------------------------------------------------------


def _clone(spark, source, clone, version=None):
    at = f" VERSION AS OF {version}" if version is not None else ""
    spark.sql(f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{source}`{at}")


def test_the_embedded_engine_refuses_a_shallow_clone_it_cannot_write(spark, tmp_path):
    source, clone = tmp_path / "src", tmp_path / "clone"
    sink = sink_for(source)
    for i, rows in enumerate(FEED[:3]):
        sink.write(spark.createDataFrame(pa.Table.from_pylist(rows, schema=pa.schema(list(CDC.items())))), i)
    _clone(spark, source, clone)
    before = DeltaTable(str(clone)).version()
    with pytest.raises(TableNotWritableError, match="clone") as caught:
        sink_for(clone, max_retries=3).write(pa.Table.from_pylist(FEED[3], schema=pa.schema(list(CDC.items()))), 3)
    assert "sending it again is safe" not in str(caught.value)
    assert DeltaTable(str(clone)).version() == before


def test_a_clone_keeps_the_deletes_and_batches_of_its_source(spark, tmp_path):
    source, clone = tmp_path / "src", tmp_path / "clone"
    sink = sink_for(source)
    frame = lambda rows: spark.createDataFrame(pa.Table.from_pylist(rows, schema=pa.schema(list(CDC.items()))))
    sink.write(frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I"))), batch_id=0)
    at = sink.write(frame(cdc((2, "", 10, "D"))), batch_id=1).version
    sink.write(frame(cdc((1, "", 20, "D"))), batch_id=2)  # after the cloned version: not the clone's
    _clone(spark, source, clone, at)
    on_clone = sink_for(clone)
    late = on_clone.write(frame(cdc((2, "older", 5, "U"), (1, "older", 5, "U"))), batch_id=7)
    assert late.stale == 1
    assert state(clone) == [(1, "older", 5)]
    assert sink.write(frame(cdc((2, "older", 5, "U"))), batch_id=8).stale == 1  # the source still holds it
    replay = on_clone.write(frame(cdc((2, "", 10, "D"))), batch_id=1)
    assert replay.skipped and replay.replay_check == "matched"
    assert on_clone.last_batch_id() == 7


# -- 5. column-mapping renames -----------------------------------------------------------------------------


def _map_columns(spark, path):
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
              "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')")


def test_a_renamed_sequence_column_keeps_every_recorded_delete(spark, tmp_path):
    path = tmp_path / "t"
    frame = lambda rows, seq="seq": spark.createDataFrame(
        [(r["id"], r["name"], r["seq"], r["op"]) for r in rows], f"id long, name string, {seq} long, op string")
    sink = sink_for(path)
    sink.write(frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I"))), batch_id=0)
    sink.write(frame(cdc((1, "", 10, "D"))), batch_id=1)
    _map_columns(spark, path)
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN seq TO ts")
    renamed = UpsertSink(str(path), ["id"], sequence_by="ts", delete_when="op = 'D'", app_id="feed")
    for fresh in (False, True):
        if fresh:
            as_process_would()
        late = renamed.write(frame(cdc((1, "older", 5, "U")), seq="ts"), batch_id=2 + fresh)
        assert late.stale == 1
    rows = sorted((r["id"], r["name"], r["ts"]) for r in spark.read.format("delta").load(str(path)).collect())
    assert rows == [(2, "b", 1)]
    # the replay check follows the rename: batch 1 sent again with the column's new name
    replay = renamed.write(frame(cdc((1, "", 10, "D")), seq="ts"), batch_id=1)
    assert replay.skipped and replay.replay_check == "matched"


def test_a_renamed_key_column_keeps_every_recorded_delete(spark, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    schema = "id long, name string, seq long, op string"
    sink.write(spark.createDataFrame([(1, "a", 1, "I"), (2, "b", 1, "I")], schema), batch_id=0)
    sink.write(spark.createDataFrame([(1, "", 10, "D")], schema), batch_id=1)
    _map_columns(spark, path)
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN id TO customer_id")
    renamed = UpsertSink(str(path), ["customer_id"], sequence_by="seq", delete_when="op = 'D'", app_id="feed")
    late = renamed.write(spark.createDataFrame([(1, "older", 5, "U")], "customer_id long, name string, seq long, op string"), 2)
    assert late.stale == 1
    assert sorted(r["customer_id"] for r in spark.read.format("delta").load(str(path)).collect()) == [2]


# -- history tables (SCD type 2) under the same operations ---------------------------------------------------

H_SCHEMA = {"id": pa.int64(), "seq": pa.int64(), "addr": pa.string(), "op": pa.string()}


def ev(id_, seq, addr, op="U"):
    return {"id": id_, "seq": seq, "addr": addr, "op": op}


def history_sink(path, **options):
    return UpsertSink(str(path), ["id"], sequence_by="seq", delete_when="op = 'D'", scd_type=2,
                      track_history_except=["op"], app_id="hist", **options)


def versions(path):
    return [(r["id"], r["__START_AT"], r["__END_AT"], r["addr"]) for r in read_rows(str(path), ["id", "__START_AT"])]


def test_a_history_batch_a_restore_undid_no_longer_counts_and_is_applied_again(engine, tmp_path):
    path = tmp_path / "h"
    sink = history_sink(path)
    kept = sink.write(engine.frame([ev(1, 10, "a"), ev(2, 10, "b")], H_SCHEMA), batch_id=0).version
    sink.write(engine.frame([ev(1, 20, "a2"), ev(2, 30, "", "D")], H_SCHEMA), batch_id=1)
    DeltaTable(str(path)).restore(kept)
    assert versions(path) == [(1, 10, None, "a"), (2, 10, None, "b")]
    # a late event of key 1: the undone event at 20 must not come back with it
    sink.write(engine.frame([ev(1, 5, "a0")], H_SCHEMA), batch_id=2)
    assert versions(path) == [(1, 5, 10, "a0"), (1, 10, None, "a"), (2, 10, None, "b")]
    as_process_would()
    again = sink.write(engine.frame([ev(1, 20, "a2"), ev(2, 30, "", "D")], H_SCHEMA), batch_id=1)
    assert again.reapplied and not again.skipped
    assert versions(path) == [(1, 5, 10, "a0"), (1, 10, 20, "a"), (1, 20, None, "a2"), (2, 10, 30, "b")]


def test_a_history_table_recreated_at_the_same_path_starts_clean(engine, tmp_path):
    path = tmp_path / "h"
    sink = history_sink(path)
    sink.write(engine.frame([ev(1, 10, "a"), ev(1, 20, "b")], H_SCHEMA), batch_id=0)
    shutil.rmtree(path)
    sink.write(engine.frame([ev(1, 15, "new")], H_SCHEMA), batch_id=0)
    assert versions(path) == [(1, 15, None, "new")]


def test_a_renamed_history_column_keeps_the_logged_events(spark, tmp_path):
    path = tmp_path / "h"
    sink = history_sink(path)
    schema = "id long, seq long, addr string, op string"
    sink.write(spark.createDataFrame([(1, 10, "a", "U"), (1, 20, "b", "U")], schema), batch_id=0)
    _map_columns(spark, path)
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN addr TO address")
    as_process_would()
    renamed = UpsertSink(str(path), ["id"], sequence_by="seq", delete_when="op = 'D'", scd_type=2,
                         track_history_except=["op"], app_id="hist")
    renamed.write(spark.createDataFrame([(1, 15, "between", "U")], "id long, seq long, address string, op string"), 1)
    rows = sorted((r["id"], r["__START_AT"], r["__END_AT"], r["address"])
                  for r in spark.read.format("delta").load(str(path)).collect())
    assert rows == [(1, 10, 15, "a"), (1, 15, 20, "between"), (1, 20, None, "b")]


def test_a_clone_whose_source_cannot_be_read_is_refused_until_adopted(spark, tmp_path):
    from click.testing import CliRunner

    from upsertsink.cli import main

    source, clone = tmp_path / "src", tmp_path / "clone"
    frame = lambda rows: spark.createDataFrame(pa.Table.from_pylist(rows, schema=pa.schema(list(CDC.items()))))
    sink_for(source).write(frame(cdc((1, "a", 1, "I"), (2, "", 5, "D"))), batch_id=0)
    _clone(spark, source, clone)
    shutil.rmtree(source / "_delta_log")  # the source's log is gone (its data files, the clone's too, stay)
    on_clone = sink_for(clone)
    with pytest.raises(TableNotWritableError, match="--adopt-clone"):
        on_clone.write(frame(cdc((3, "c", 1, "I"))), batch_id=1)
    assert DeltaTable(str(clone)).version() == 0
    done = CliRunner().invoke(main, ["maintain", str(clone), "--adopt-clone"])
    assert done.exit_code == 0, done.output
    assert "clone adopted" in done.output
    assert not on_clone.write(frame(cdc((3, "c", 1, "I"))), batch_id=1).skipped
    assert state(clone) == [(1, "a", 1), (3, "c", 1)]


# -- what held before issue #44 and must keep holding --------------------------------------------------------


def test_an_overwrite_by_another_job_keeps_old_ids_skipped_and_new_ones_applied(engine, spark, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    for i, rows in enumerate(FEED[:3]):
        sink.write(engine.frame(rows, CDC), batch_id=i)
    spark.createDataFrame([(50, "other", 1, "I")], "id long, name string, seq long, op string") \
        .write.format("delta").mode("overwrite").save(str(path))
    assert sink.write(engine.frame(FEED[1], CDC), batch_id=1).skipped
    assert not sink.write(engine.frame(FEED[3], CDC), batch_id=3).skipped
    assert state(path) == sorted([(50, "other", 1), *model([FEED[3]])])


def test_an_external_delete_is_not_undone_by_a_rerun(engine, spark, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    for i, rows in enumerate(FEED[:2]):
        sink.write(engine.frame(rows, CDC), batch_id=i)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")
    for i, rows in enumerate(FEED[:2]):
        assert sink.write(engine.frame(rows, CDC), batch_id=i).skipped
    assert 1 not in [r[0] for r in state(path)]


def test_a_copied_table_keeps_its_record_and_deletes(engine, tmp_path):
    path, copy = tmp_path / "t", tmp_path / "copy"
    sink = sink_for(path)
    sink.write(engine.frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "", 10, "D")), CDC), batch_id=1)
    shutil.copytree(path, copy)
    on_copy = sink_for(copy)
    assert on_copy.write(engine.frame(cdc((1, "", 10, "D")), CDC), batch_id=1).skipped
    assert on_copy.write(engine.frame(cdc((1, "older", 5, "U")), CDC), batch_id=2).stale == 1
    assert state(copy) == [(2, "b", 1)]


def test_after_log_cleanup_a_batch_whose_commit_is_gone_is_refused_then_applied_late(engine, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    for i, rows in enumerate(FEED[:4]):
        sink.write(engine.frame(rows, CDC), batch_id=i)
    DeltaTable(str(path)).create_checkpoint()
    for v in (0, 1):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    as_process_would()
    with pytest.raises(BatchIdBehindMarkerError, match="no longer holds that commit"):
        sink.write(engine.frame(FEED[0], CDC), batch_id=0)
    assert sink.write(engine.frame(FEED[3], CDC), batch_id=3).skipped  # its commit is there: a replay
    late = sink_for(path, late_batches="apply").write(engine.frame(FEED[0], CDC), batch_id=0)
    assert late.late and not late.skipped
    assert state(path) == model(FEED[:4])


def test_a_restore_of_a_table_known_by_name_only_is_an_undo_too(spark):
    """Spark-only mode (the table's files not read): the lineage comes from DESCRIBE HISTORY."""
    spark.sql("DROP TABLE IF EXISTS ops_named_restore")
    spark.sql("DROP TABLE IF EXISTS ops_named_restore__upsertsink_tombstones")
    sink = UpsertSink.for_table("ops_named_restore", ["id"], sequence_by="seq", delete_when="op = 'D'",
                                app_id="feed", file_access=False)
    frame = lambda rows: spark.createDataFrame(cdc(*rows), "id long, name string, seq long, op string")
    kept = sink.write(frame([(1, "a", 1, "I"), (2, "b", 1, "I")]), batch_id=0).version
    sink.write(frame([(1, "", 10, "D"), (3, "c", 10, "I")]), batch_id=1)
    spark.sql(f"RESTORE TABLE ops_named_restore TO VERSION AS OF {kept}")
    assert sink.last_batch_id() == 0
    corrected = sink.write(frame([(1, "a5", 5, "U")]), batch_id=2)  # the undone delete does not act
    assert corrected.stale == 0 and corrected.updated == 1
    again = sink.write(frame([(1, "", 10, "D"), (3, "c", 10, "I")]), batch_id=1)
    assert again.reapplied and not again.skipped
    rows = sorted(tuple(r) for r in spark.table("ops_named_restore").select("id", "name", "seq").collect())
    assert rows == [(2, "b", 1), (3, "c", 10)]
    spark.sql("DROP TABLE ops_named_restore")
    spark.sql("DROP TABLE IF EXISTS ops_named_restore__upsertsink_tombstones")
