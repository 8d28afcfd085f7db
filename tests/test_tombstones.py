"""Tombstones as the sink keeps them now (issues #20 and #22): files per key set, an in-memory index read
incrementally, compaction that cannot lose a delete, and `upsertsink maintain`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from sink_helpers import read_rows

from upsertsink import UpsertSink, faults
from upsertsink.faults import FAULT_EXIT_CODE
from upsertsink.sidecar import folder, tombstones
from upsertsink.sidecar.tombstones import TOMBSTONE_ROOT, TombstoneStore, forget_indexes
from upsertsink.table.maintenance import maintain

CDC = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64(), "op": pa.string()}
CLI = str(Path(sys.executable).with_name("upsertsink"))


def cdc(*quads):
    return [{"id": i, "name": n, "seq": s, "op": o} for i, n, s, o in quads]


def cdc_sink(path: str, **kw) -> UpsertSink:
    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", **kw)


def scope_files(path: str) -> dict[str, list[str]]:
    root = Path(path) / TOMBSTONE_ROOT
    if not root.is_dir():
        return {}
    return {d.name: sorted(f.name for f in d.iterdir() if f.suffix == ".parquet") for d in root.iterdir()}


def remembered(path: str, keys=("id",), sequence="seq") -> list[tuple]:
    forget_indexes()  # as a new process reads them
    rows = TombstoneStore(path, tuple(keys), sequence, None).read().to_pylist()
    return sorted(tuple(r.values()) for r in rows)


@pytest.fixture(autouse=True)
def _fresh_index():
    forget_indexes()
    yield
    forget_indexes()


# -- issue #22: tombstones belong to the key set that recorded them --------------------------------------------


ORDERS = {"id": pa.int64(), "order_no": pa.int64(), "code": pa.string(), "seq": pa.int64(), "op": pa.string()}


def orders(*rows):
    return [dict(zip(["id", "order_no", "code", "seq", "op"], r, strict=True)) for r in rows]


def test_a_second_sink_with_other_keys_is_not_suppressed_by_the_first_ones_deletes(engine, tmp_path):
    """The measured loss: A (keys id) deletes id=5; B (keys order_no) inserts order_no=5: B's row was dropped."""
    path = str(tmp_path / "t")
    a = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="a")
    b = UpsertSink(path, "order_no", sequence_by="seq", delete_when="op = 'D'", app_id="b")
    a.write(engine.frame(orders((5, 100, "x", 1, "U"), (6, 101, "y", 1, "U")), ORDERS), batch_id=0)
    a.write(engine.frame(orders((5, 100, "x", 2, "D")), ORDERS), batch_id=1)
    result = b.write(engine.frame(orders((7, 5, "z", 1, "U")), ORDERS), batch_id=0)
    assert (result.inserted, result.stale) == (1, 0)
    assert sorted(r["order_no"] for r in read_rows(path)) == [5, 101]
    assert len(scope_files(path)) == 1  # only A recorded a delete; B's scope has none


def test_a_second_sink_keyed_on_a_string_column_writes(engine, tmp_path):
    """Keyed on a string where the first sink's key is an integer: every write used to fail casting 'x'."""
    path = str(tmp_path / "t")
    a = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="a")
    b = UpsertSink(path, "code", sequence_by="seq", delete_when="op = 'D'", app_id="b")
    a.write(engine.frame(orders((5, 100, "x", 1, "U"), (6, 101, "y", 1, "U")), ORDERS), batch_id=0)
    a.write(engine.frame(orders((5, 100, "x", 2, "D")), ORDERS), batch_id=1)
    b.write(engine.frame(orders((8, 102, "w", 3, "U")), ORDERS), batch_id=0)
    b.write(engine.frame(orders((8, 102, "w", 4, "D")), ORDERS), batch_id=1)
    assert len(scope_files(path)) == 2
    assert b.write(engine.frame(orders((8, 102, "w", 3, "U")), ORDERS), batch_id=2).stale == 1  # its own delete
    assert sorted(r["code"] for r in read_rows(path)) == ["y"]


def test_one_sinks_short_retention_never_purges_another_sinks_tombstones(engine, tmp_path):
    """The measured loss: A kept tombstones forever, B with a retention purged them on its next write."""
    path = str(tmp_path / "t")
    keep = cdc_sink(path, app_id="a", tombstone_retention=None)
    short = cdc_sink(path, app_id="b", tombstone_retention=timedelta(milliseconds=50))
    keep.write(engine.frame(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), CDC), batch_id=0)
    keep.write(engine.frame(cdc((1, "a", 5, "D")), CDC), batch_id=1)
    short.write(engine.frame(cdc((2, "b", 6, "D")), CDC), batch_id=0)
    time.sleep(0.2)
    short.write(engine.frame(cdc((3, "c", 7, "U")), CDC), batch_id=1)
    short.maintain()  # compaction drops what expired: B's tombstone, never A's
    assert remembered(path) == [(1, 5)]
    late = short.write(engine.frame(cdc((1, "old", 3, "U"), (2, "old", 3, "U")), CDC), batch_id=2)
    assert late.stale == 1 and sorted(r["id"] for r in read_rows(path)) == [2, 3]  # 1 stays deleted


# -- issue #20: what a write costs in bookkeeping ----------------------------------------------------------


def test_a_batch_that_meets_no_tombstone_reads_no_file_and_one_that_deletes_nothing_writes_none(
    engine, tmp_path, monkeypatch
):
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    sink.write(engine.frame(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "a", 2, "D")), CDC), batch_id=1)
    files = scope_files(path)
    reads = []
    original = folder.Folder.read
    monkeypatch.setattr(folder.Folder, "read", lambda self, name: reads.append(name) or original(self, name))
    sink.write(engine.frame(cdc((3, "c", 3, "U")), CDC), batch_id=2)  # no delete, no key ever deleted
    sink.write(engine.frame(cdc((1, "a", 2, "D"), (4, "d", 3, "U")), CDC), batch_id=3)  # its delete is known
    assert reads == [] and scope_files(path) == files


def test_tombstone_files_stay_bounded_and_no_delete_is_lost(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(tombstones, "COMPACT_AT_FILES", 4)
    path = str(tmp_path / "t")
    sink = cdc_sink(path, tombstone_retention=None)
    sink.write(engine.frame(cdc(*[(k, "v", 1, "U") for k in range(30)]), CDC), batch_id=0)
    for b in range(1, 16):
        sink.write(engine.frame(cdc((b, "v", 10 + b, "D"), (b + 1, "v", 10 + b, "U")), CDC), batch_id=b)
        assert all(len(files) < 4 for files in scope_files(path).values())
    assert remembered(path) == [(b, 10 + b) for b in range(1, 16)]
    stale = sink.write(engine.frame(cdc(*[(b, "old", 5, "U") for b in range(1, 16)]), CDC), batch_id=99)
    assert stale.stale == 15 and stale.inserted == 0


def test_tombstones_of_upsertsink_0_1_are_read_from_its_table(engine, tmp_path):
    path = str(tmp_path / "t")
    cdc_sink(path).write(engine.frame(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), CDC), batch_id=0)
    write_deltalake(os.path.join(path, "_upsertsink_tombstones"), pa.table({
        "k0": pa.array([1], pa.int64()), "sequence": pa.array([9], pa.int64()),
        "deleted_at_us": pa.array([int(time.time() * 1e6)], pa.int64()), "batch_id": pa.array([0], pa.int64())}))
    result = cdc_sink(path).write(engine.frame(cdc((1, "older", 4, "U")), CDC), batch_id=1)
    assert result.stale == 1 and [r["id"] for r in read_rows(path)] == [2]
    assert remembered(path) == [(1, 9)]


# -- maintenance ---------------------------------------------------------------------------------------------


def _many_deletes(path: str, batches: int = 8) -> UpsertSink:
    sink = cdc_sink(path, tombstone_retention=None)
    table = pa.Table.from_pylist(cdc(*[(k, "v", 1, "U") for k in range(20)]), schema=pa.schema(CDC))
    sink.write(table, batch_id=0)
    for b in range(1, batches + 1):
        sink.write(pa.Table.from_pylist(cdc((b, "v", 10 + b, "D")), schema=pa.schema(CDC)), batch_id=b)
    return sink


def test_maintain_compacts_every_key_set_and_checkpoints_when_due(tmp_path):
    path = str(tmp_path / "t")
    sink = _many_deletes(path)
    (scope, files), = scope_files(path).items()
    assert len(files) == 8
    report = sink.maintain()
    assert report.tombstones[0]["files_before"] == 8 and report.tombstones[0]["files_after"] == 1
    assert report.tombstones[0]["tombstones"] == 8 and report.tombstones[0]["keys"] == ["id"]
    assert len(scope_files(path)[scope]) == 1
    assert remembered(path) == [(b, 10 + b) for b in range(1, 9)]
    assert report.checkpoint_written is None  # 9 commits: not due
    for v in os.listdir(os.path.join(path, "_delta_log")):  # a table whose writer never checkpointed
        if "checkpoint" in v:
            os.remove(os.path.join(path, "_delta_log", v))
    for b in range(9, 110):
        sink.write(pa.Table.from_pylist(cdc((100 + b, "v", 100 + b, "U")), schema=pa.schema(CDC)), batch_id=b)
    for v in os.listdir(os.path.join(path, "_delta_log")):
        if "checkpoint" in v:
            os.remove(os.path.join(path, "_delta_log", v))
    assert maintain(path).checkpoint_written == DeltaTable(path).version()


def test_maintain_killed_after_compacting_loses_nothing_and_a_rerun_finishes(tmp_path):
    path = str(tmp_path / "t")
    _many_deletes(path)
    env = {**os.environ, "UPSERTSINK_FAULT": "tombstones-compacted"}
    killed = subprocess.run([CLI, "maintain", path], env=env, capture_output=True, text=True, check=False)
    assert killed.returncode == FAULT_EXIT_CODE
    (files,) = scope_files(path).values()
    assert len(files) == 9  # the compacted file is written; the 8 it replaces are still there
    assert remembered(path) == [(b, 10 + b) for b in range(1, 9)]
    done = subprocess.run([CLI, "maintain", path, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tombstones"][0]["files_after"] == 1 and report["tombstones"][0]["tombstones"] == 8
    assert remembered(path) == [(b, 10 + b) for b in range(1, 9)]


def test_a_delete_recorded_while_maintain_compacts_is_kept(tmp_path):
    path = str(tmp_path / "t")
    sink = _many_deletes(path)
    racer = pa.Table.from_pylist(cdc((15, "v", 99, "D")), schema=pa.schema(CDC))
    with faults.hook("tombstones-compacted", lambda: sink.write(racer, batch_id=50)):
        maintain(path)
    assert remembered(path) == [*[(b, 10 + b) for b in range(1, 9)], (15, 99)]
    assert len(next(iter(scope_files(path).values()))) == 2  # the compacted file and the racer's


def test_the_maintain_command_reports_and_refuses_a_path_that_is_not_a_table(tmp_path):
    path = str(tmp_path / "t")
    _many_deletes(path, batches=3)
    text = subprocess.run([CLI, "maintain", path], capture_output=True, text=True, check=False)
    assert text.returncode == 0, text.stderr
    assert "3 file(s) -> 1, 3 kept" in text.stdout and "keys ['id']" in text.stdout
    bad = subprocess.run([CLI, "maintain", str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "is not a Delta table" in bad.stderr


def test_an_empty_file_left_by_a_failed_tombstone_write_is_skipped_and_compacted_away(tmp_path):
    """Object storage once closed a failed upload as an empty object: readers must not fail on it forever."""
    path = str(tmp_path / "t")
    sink = cdc_sink(path)
    sink.write(pa.Table.from_pylist(cdc((1, "a", 1, "U"), (2, "b", 1, "U")), schema=pa.schema(CDC)), batch_id=0)
    sink.write(pa.Table.from_pylist(cdc((1, "a", 2, "D")), schema=pa.schema(CDC)), batch_id=1)
    (scope,) = scope_files(path)
    empty = os.path.join(path, TOMBSTONE_ROOT, scope, "t-00000000000000000001-failed.parquet")
    open(empty, "wb").close()
    forget_indexes()
    # the delete of key 1 is still remembered: an older insert sent again stays out
    result = sink.write(pa.Table.from_pylist(cdc((1, "a", 1, "U"), (3, "c", 1, "U")), schema=pa.schema(CDC)), batch_id=2)
    assert result.stale == 1 and [r["id"] for r in read_rows(path)] == [2, 3]
    report = TombstoneStore(path, ("id",), "seq", None).compact()
    assert not os.path.exists(empty) and report["tombstones"] == 1


def test_a_batch_of_more_than_a_thousand_keys_meets_the_deletes_among_them(tmp_path):
    # a large batch is matched against the index in one pass, a small one key by key: both find the same rows
    path = str(tmp_path / "t")
    s = cdc_sink(path)
    s.write(pa.Table.from_pylist(cdc(*[(i, "a", 1, "U") for i in range(3000)]), pa.schema(CDC)), batch_id=0)
    s.write(pa.Table.from_pylist(cdc(*[(i, "a", 2, "D") for i in range(0, 3000, 7)]), pa.schema(CDC)), batch_id=1)
    stale = cdc(*[(i, "old", 1, "U") for i in range(2000)])  # older than the deletes: kept out
    s.write(pa.Table.from_pylist(stale, pa.schema(CDC)), batch_id=2)
    rows = {r["id"]: r["name"] for r in read_rows(path)}
    assert not any(i in rows for i in range(0, 3000, 7))
    assert len(rows) == 3000 - len(range(0, 3000, 7)) and set(rows.values()) == {"a"}
    small = cdc(*[(7, "old", 1, "U"), (14, "new", 3, "U")])
    s.write(pa.Table.from_pylist(small, pa.schema(CDC)), batch_id=3)
    rows = {r["id"]: r["name"] for r in read_rows(path)}
    assert 7 not in rows and rows[14] == "new"


@pytest.mark.parametrize("b_deletes_too", [False, True], ids=["b-records-nothing", "b-records-a-delete"])
def test_a_delete_recorded_while_a_writer_reads_the_tombstones_is_not_resurrected(tmp_path, monkeypatch, b_deletes_too):
    # Writer A records and commits the delete of key 2 just after writer B has read the tombstones of its batch
    # (an upsert of key 2, older than the delete, into a table without key 2): B's insert must not outlive it.
    path = str(tmp_path / "t")
    a, b = cdc_sink(path, app_id="a"), cdc_sink(path, app_id="b")
    a.write(pa.Table.from_pylist(cdc((1, "x", 1, "D"), (3, "c", 1, "U")), pa.schema(CDC)), batch_id=0)
    matching, raced = TombstoneStore.matching, []

    def between(store, *args, **kw):
        found = matching(store, *args, **kw)
        if not raced:  # B's read: A records and commits its delete now
            raced.append(1)
            a.write(pa.Table.from_pylist(cdc((2, None, 10, "D")), pa.schema(CDC)), batch_id=1)
        return found

    monkeypatch.setattr(TombstoneStore, "matching", between)
    rows = [(2, "old", 5, "U"), *([(9, None, 5, "D")] if b_deletes_too else [])]
    b.write(pa.Table.from_pylist(cdc(*rows), pa.schema(CDC)), batch_id=0)
    assert raced
    assert sorted(r["id"] for r in read_rows(path)) == [3]
