"""Issue #7, failure by failure: each test reproduces one measured failure of the crash-safety issue."""

from __future__ import annotations

import math
import os
from datetime import datetime

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction
from sink_helpers import read_rows, version

from upsertsink import (
    BatchIdBehindMarkerError,
    InvalidInputError,
    NotADeltaTableError,
    ReplayDivergenceError,
    SchemaMismatchError,
    UpsertSink,
    UpsertSinkError,
    faults,
)
from upsertsink.sidecar.tombstones import TombstoneStore

CDC = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64(), "op": pa.string()}


def cdc(*quads):
    return [{"id": i, "name": n, "seq": s, "op": o} for i, n, s, o in quads]


def cdc_sink(path: str, **kw) -> UpsertSink:
    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", **kw)


def ids(path: str) -> list[int]:
    return [r["id"] for r in read_rows(path)]


# -- lost deletes -----------------------------------------------------------------------------------------


def test_a_tombstone_left_by_a_killed_attempt_does_not_suppress_the_batch_own_delete(engine, tmp_path):
    """The measured cause: killed after the tombstone commit, before the data commit; the re-send must delete."""
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    sink.write(engine.frame(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), CDC), batch_id=0)
    # what the killed attempt of batch 1 left behind: its delete of key 1 remembered, the data not committed
    TombstoneStore(path, ("id",), "seq", None).record(pa.table({"k0": [1], "sequence": [5]}), 1, None)
    result = sink.write(engine.frame(cdc((1, "a", 5, "D"), (3, "c", 5, "U")), CDC), batch_id=1)
    assert (result.deleted, result.stale, result.inserted) == (1, 0, 1)
    assert ids(path) == [2, 3]


def test_a_commit_race_inside_one_write_keeps_the_batch_delete(tmp_path):
    """A concurrent commit forces a second attempt; it finds its own tombstone and must still delete."""
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    sink.write(pa.Table.from_pylist(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), schema=pa.schema(CDC)), batch_id=0)
    other = cdc_sink(path, app_id="other")

    def race() -> None:  # another writer updates key 2, rewriting the one file the MERGE reads
        other.write(pa.Table.from_pylist(cdc((2, "B", 2, "U")), schema=pa.schema(CDC)), batch_id=0)

    with faults.hook("before-commit", race):
        result = sink.write(pa.Table.from_pylist(cdc((1, "a", 5, "D")), schema=pa.schema(CDC)), batch_id=1)
    assert result.deleted == 1 and not result.skipped
    assert read_rows(path) == [{"id": 2, "name": "B", "seq": 2, "op": "U"}]


def test_an_older_row_that_a_racing_writer_let_in_is_removed_again(engine, tmp_path):
    """A delete of an absent key changes no file, so the racing insert commits: the writer repairs it."""
    path = str(tmp_path / "t")
    sink = cdc_sink(path, app_id="inserts")
    sink.write(engine.frame(cdc((9, "z", 1, "U")), CDC), batch_id=0)
    deleter = cdc_sink(path, app_id="deletes")

    def race() -> None:  # after our tombstone read, a delete of key 1 (newer than our row) lands first
        deleter.write(engine.frame(cdc((1, "gone", 10, "D")), CDC), batch_id=0)

    with faults.hook("before-commit", race):
        result = sink.write(engine.frame(cdc((1, "old", 5, "U")), CDC), batch_id=1)
    assert ids(path) == [9]  # key 1's newest event is the delete at 10
    assert result.deleted == 1


def test_a_resend_repairs_when_the_writer_died_before_its_repair(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    sink = cdc_sink(path, app_id="inserts")
    table = lambda rows: pa.Table.from_pylist(rows, schema=pa.schema(CDC))
    sink.write(table(cdc((9, "z", 1, "U"))), batch_id=0)
    deleter = cdc_sink(path, app_id="deletes")
    monkeypatch.setattr(faults, "_counts", {})
    monkeypatch.setenv("UPSERTSINK_FAULT", "repair-before")
    monkeypatch.setenv("UPSERTSINK_FAULT_MODE", "raise")
    race = faults.hook("before-commit", lambda: deleter.write(table(cdc((1, "gone", 10, "D"))), batch_id=0))
    with race, pytest.raises(UpsertSinkError):
        sink.write(table(cdc((1, "old", 5, "U"))), batch_id=1)
    assert ids(path) == [1, 9]  # the writer died between its commit and its repair
    monkeypatch.delenv("UPSERTSINK_FAULT")
    again = sink.write(table(cdc((1, "old", 5, "U"))), batch_id=1)
    assert again.skipped and again.replay_check == "matched"
    assert ids(path) == [9]


@pytest.mark.parametrize("spark_pruning", ["always", "default"])
def test_two_writers_inserting_the_same_new_key_leave_one_row(engine, tmp_path, spark_pruning, monkeypatch):
    """A key beyond every file is inserted unread; a racing insert of that key must still conflict.

    The file-pruning condition once covered only the files holding batch keys (``FALSE`` when none did), so the
    commit's read predicate left the new key out, the conflict check let both inserts in: a duplicate key.
    Spark prunes only large tables by default (its MERGE then reads the whole table); both ways are checked.
    """
    from upsertsink.engines import spark_merge

    if spark_pruning == "always":
        monkeypatch.setattr(spark_merge, "SPARK_PRUNE_MIN_SKIPPED_ROWS", 0)
    path = str(tmp_path / "t")
    schema = {"id": pa.int64(), "name": pa.string()}
    first, second = UpsertSink(path, "id", app_id="first"), UpsertSink(path, "id", app_id="second")
    first.write(engine.frame([{"id": i, "name": "old"} for i in range(100)], schema), batch_id=0)

    def race():
        second.write(pa.Table.from_pylist([{"id": 500, "name": "second"}], schema=pa.schema(schema)), batch_id=0)

    with faults.hook("before-commit", race):
        first.write(engine.frame([{"id": 500, "name": "first"}, {"id": 7, "name": "x"}], schema), batch_id=1)
    rows = read_rows(path)
    assert len(rows) == 100 + 1 and len({r["id"] for r in rows}) == len(rows)
    assert {r["name"] for r in rows if r["id"] == 500} == {"first"}


# -- new tables -------------------------------------------------------------------------------------------


def test_a_first_batch_with_a_delete_creates_the_table_in_one_commit(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    first = sink.write(engine.frame(cdc((1, "a", 1, "U"), (2, "b", 2, "D")), CDC), batch_id=0)
    assert (first.inserted, first.version) == (1, 0) and version(path) == 0
    assert DeltaTable(path).transaction_version(sink.app_id) == 0
    sink.write(engine.frame(cdc((2, "b", 1, "U"), (3, "c", 3, "U")), CDC), batch_id=1)  # key 2's delete is newer
    assert ids(path) == [1, 3]


def test_a_folder_holding_only_the_sinks_helper_data_is_a_new_table(engine, tmp_path):
    path = str(tmp_path / "t")
    TombstoneStore(path, ("id",), "seq", None).record(pa.table({"k0": [7], "sequence": [9]}), 0, None)
    assert sorted(os.listdir(path)) == ["_upsertsink"]
    cdc_sink(path).write(engine.frame(cdc((1, "a", 1, "U"), (7, "old", 3, "U")), CDC), batch_id=0)
    assert ids(path) == [1]  # key 7 was deleted at 9 before: the older row stays out


def test_a_folder_with_other_data_is_still_refused(engine, tmp_path):
    path = tmp_path / "t"
    path.mkdir()
    (path / "data.csv").write_text("id\n1\n")
    with pytest.raises(NotADeltaTableError, match="data.csv"):
        cdc_sink(str(path)).write(engine.frame(cdc((1, "a", 1, "U")), CDC), batch_id=0)


# -- bad input that got through ------------------------------------------------------------------------


def test_nan_sequence_and_nan_key_are_refused_naming_the_column(engine, tmp_path):
    path = str(tmp_path / "t")
    schema = {"id": pa.float64(), "name": pa.string(), "seq": pa.float64()}
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(engine.frame([{"id": 1.0, "name": "a", "seq": 1.0}], schema), batch_id=0)
    with pytest.raises(InvalidInputError, match=r"sequence_by column 'seq' has 1 NaN"):
        sink.write(engine.frame([{"id": 2.0, "name": "b", "seq": math.nan}], schema), batch_id=1)
    with pytest.raises(InvalidInputError, match=r"key column 'id' has 1 NaN"):
        sink.write(engine.frame([{"id": math.nan, "name": "b", "seq": 2.0}], schema), batch_id=1)
    assert version(path) == 0 and read_rows(path) == [{"id": 1.0, "name": "a", "seq": 1.0}]


def test_zero_and_negative_zero_float_keys_are_one_key_on_both_engines(engine, tmp_path):
    path = str(tmp_path / "t")
    schema = {"id": pa.float64(), "name": pa.string(), "seq": pa.int64()}
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(engine.frame([{"id": 0.0, "name": "a", "seq": 1}, {"id": -0.0, "name": "b", "seq": 2}], schema), 0)
    rows = read_rows(path)
    assert rows == [{"id": 0.0, "name": "b", "seq": 2}] and math.copysign(1, rows[0]["id"]) == 1.0


def test_a_target_that_is_a_file_is_refused(engine, tmp_path):
    path = tmp_path / "t.parquet"
    path.write_bytes(b"not a table")
    with pytest.raises(NotADeltaTableError, match="is a file"):
        cdc_sink(str(path)).write(engine.frame(cdc((1, "a", 1, "U")), CDC), batch_id=0)


def test_a_batch_id_beyond_a_delta_version_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="2\\*\\*63-1"):
        cdc_sink(str(tmp_path / "t")).write(pa.Table.from_pylist(cdc((1, "a", 1, "U")), schema=pa.schema(CDC)), 2**63)


def test_a_narrowing_cast_that_overflows_is_refused_naming_the_column(engine, tmp_path):
    path = str(tmp_path / "t")
    small = {"id": pa.int64(), "n": pa.int32()}
    UpsertSink(path, "id").write(engine.frame([{"id": 1, "n": 1}], small), batch_id=0)
    wide = {"id": pa.int64(), "n": pa.int64()}
    with pytest.raises(SchemaMismatchError, match="'n'"):
        UpsertSink(path, "id").write(engine.frame([{"id": 2, "n": 2**40}], wide), batch_id=1)
    assert version(path) == 0
    UpsertSink(path, "id").write(engine.frame([{"id": 2, "n": 7}], wide), batch_id=1)  # values that fit are cast
    assert read_rows(path) == [{"id": 1, "n": 1}, {"id": 2, "n": 7}]


def test_a_nondeterministic_delete_when_is_refused():
    with pytest.raises(InvalidInputError, match=r"rand\(\)"):
        UpsertSink("/tmp/never", "id", delete_when="rand() > 0.5")
    with pytest.raises(InvalidInputError, match="evaluate alike"):
        UpsertSink("/tmp/never", "id", delete_when="a / b > 1")


def test_pandas_nanosecond_timestamps_make_a_table_both_engines_read(spark, tmp_path):
    path = str(tmp_path / "t")
    frame = pd.DataFrame({"id": [1, 2], "at": pd.to_datetime(["2026-01-01 10:00:00.123456789", "2026-01-02 00:00:00.000000000"])})
    UpsertSink(path, "id").write(frame, batch_id=0)
    assert "timestampNanos" not in (DeltaTable(path).protocol().reader_features or [])
    seen = spark.read.format("delta").load(path).orderBy("id").collect()
    assert seen[0]["at"] == datetime(2026, 1, 1, 10, 0, 0, 123456)  # truncated to microseconds, as Spark does
    UpsertSink(path, "id").write(frame.assign(id=[3, 4]), batch_id=1)  # the next write casts alike
    assert spark.read.format("delta").load(path).count() == 4


# -- the replay check no longer depends on what others committed ---------------------------------------------


def _commits_of_another_app(path: str, n: int) -> None:
    table = DeltaTable(path)
    schema = pa.schema(table.schema().to_arrow())
    for i in range(n):
        props = CommitProperties(app_transactions=[Transaction("other-app", i)])
        table.create_write_transaction([], mode="append", schema=schema, commit_properties=props)
        table.update_incremental()


def test_a_divergent_replay_is_refused_after_many_commits_of_other_apps(tmp_path):
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    batch = pa.Table.from_pylist(cdc((1, "a", 1, "U")), schema=pa.schema(CDC))
    sink.write(batch, batch_id=0)
    _commits_of_another_app(path, 520)
    assert sink.write(batch, batch_id=0).replay_check == "matched"
    with pytest.raises(ReplayDivergenceError, match="batch 0"):
        sink.write(pa.Table.from_pylist(cdc((1, "changed", 1, "U")), schema=pa.schema(CDC)), batch_id=0)


def test_a_divergent_replay_of_an_older_batch_is_refused_while_its_commit_is_in_the_log(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    batches = [cdc((i, f"n{i}", i, "U")) for i in range(4)]
    for i, rows in enumerate(batches):
        sink.write(engine.frame(rows, CDC), batch_id=i)
    again = sink.write(engine.frame(batches[1], CDC), batch_id=1)
    assert again.skipped and again.replay_check == "matched"
    with pytest.raises(ReplayDivergenceError, match="batch 1"):
        sink.write(engine.frame(cdc((1, "other", 1, "U")), CDC), batch_id=1)
    assert version(path) == 3


def test_when_the_log_no_longer_holds_the_commit_the_result_says_so(tmp_path):
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    for i in range(3):
        sink.write(pa.Table.from_pylist(cdc((i, f"n{i}", i, "U")), schema=pa.schema(CDC)), batch_id=i)
    DeltaTable(path).create_checkpoint()
    for v in (0, 1):  # what log cleanup does to commits older than the retention
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    # batch 0 was committed, but its commit (and fingerprint) is gone: a replay cannot be told from a new batch
    # reusing the id, so it is refused rather than skipped unchecked (issue #19)
    with pytest.raises(BatchIdBehindMarkerError, match="log no longer holds that commit"):
        sink.write(pa.Table.from_pylist(cdc((0, "whatever", 0, "U")), schema=pa.schema(CDC)), batch_id=0)
    assert sink.write(pa.Table.from_pylist(cdc((2, "n2", 2, "U")), schema=pa.schema(CDC)), 2).replay_check == "matched"
    assert read_rows(path)[0] == {"id": 0, "name": "n0", "seq": 0, "op": "U"}


def test_writers_racing_to_create_the_table_store_each_key_once(tmp_path):
    """Four writers create one table at the same moment, twenty times. delta-rs retried a create that lost
    the race for version 0 as an append at version 1 (a blind append conflicts with nothing), so keys that
    several first batches held were stored twice (seen in the four-writer stress run)."""
    import threading

    for round_ in range(20):
        path = str(tmp_path / f"t{round_}")
        start = threading.Barrier(4)
        errors: list[BaseException] = []

        def create(w: int, path: str = path, start: threading.Barrier = start, errors: list = errors) -> None:
            sink = cdc_sink(path, app_id=f"writer-{w}")
            batch = pa.Table.from_pylist(cdc((1, f"w{w}", 1, "U"), (2 + w, "own", 1, "U")), schema=pa.schema(CDC))
            start.wait()
            try:
                sink.write(batch, batch_id=0)
            except BaseException as err:  # noqa: BLE001 - collected and asserted below
                errors.append(err)

        threads = [threading.Thread(target=create, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert sorted(ids(path)) == [1, 2, 3, 4, 5], f"round {round_}: {read_rows(path)}"


def test_a_create_whose_log_is_not_written_yet_is_a_new_table_to_the_next_writer(engine, tmp_path):
    # Found by the four-writer stress run: one writer's create had written its data file but not its log when
    # another writer opened the folder and refused it as "not a Delta table" (NotADeltaTableError, not retried).
    # The sink marks a create before it writes; data files beside that mark are a create's, not foreign data.
    path = tmp_path / "t"
    first = cdc_sink(str(path))
    first.write(engine.frame(cdc((1, "a", 1, "U")), CDC), batch_id=0)
    log_dir = path / "_delta_log"
    assert (path / "_upsertsink" / "creating").exists()
    import shutil

    shutil.rmtree(log_dir)  # the state of the folder between the create's data file and its log
    assert any(n.startswith("part-") for n in os.listdir(path))
    cdc_sink(str(path)).write(engine.frame(cdc((2, "b", 1, "U")), CDC), batch_id=0)
    assert ids(path) == [2]  # the interrupted create's file is referenced by no log: it is not in the table


def test_a_create_whose_data_file_is_still_being_staged_is_a_new_table_to_the_next_writer(engine, tmp_path):
    # Found by CI's four-writer stress run: delta-rs (object_store's local file system) writes a data file as
    # "<name>#1" and renames it into place, so a racing writer can see the staged name in the folder before
    # any log exists; it refused the folder as "not a Delta table" (NotADeltaTableError, not retried).
    path = tmp_path / "t"
    cdc_sink(str(path)).write(engine.frame(cdc((1, "a", 1, "U")), CDC), batch_id=0)
    import shutil

    shutil.rmtree(path / "_delta_log")
    (data,) = [n for n in os.listdir(path) if n.startswith("part-")]
    os.rename(path / data, path / f"{data}#1")  # the folder while the create's data file is staged
    cdc_sink(str(path)).write(engine.frame(cdc((2, "b", 1, "U")), CDC), batch_id=0)
    assert ids(path) == [2]


def test_a_parquet_dataset_without_the_sinks_mark_is_still_refused(engine, tmp_path):
    path = tmp_path / "t"
    path.mkdir()
    (path / "part-00000-0a1b2c3d-0000-4000-8000-000000000000-c000.snappy.parquet").write_bytes(b"PAR1")
    with pytest.raises(NotADeltaTableError, match="part-00000"):
        cdc_sink(str(path)).write(engine.frame(cdc((1, "a", 1, "U")), CDC), batch_id=0)
