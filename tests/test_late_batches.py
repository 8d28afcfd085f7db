"""Issue #19: a batch id behind an app's marker is a replay (skipped, checked) or a batch never committed
(refused, or applied with late_batches="apply"); never a silent skip. Both engines."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from sink_helpers import read_rows, version

from upsertsink import (
    BatchIdBehindMarkerError,
    InvalidInputError,
    ReplayDivergenceError,
    UpsertSink,
    faults,
)
from upsertsink.errors import DivergentBatchBehindMarkerError
from upsertsink.table import files, lineage, records

SCHEMA = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64()}
CDC = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64(), "op": pa.string()}


def rows(*triples):
    return [{"id": i, "name": n, "seq": s} for i, n, s in triples]


def cdc(*quads):
    return [{"id": i, "name": n, "seq": s, "op": o} for i, n, s, o in quads]


@pytest.fixture(autouse=True)
def _fresh_ledger_cache():
    """Each test reads records from its table's log, as a new process would."""
    lineage.forget()
    yield
    lineage.forget()


# -- refused -----------------------------------------------------------------------------------------------


def test_the_readme_tour_case_a_reused_app_id_is_refused_not_skipped(engine, tmp_path):
    """Batch ids 42 and 43, then the same sink handed to a stream whose epochs start at 0 (the measured case)."""
    path = str(tmp_path / "orders")
    sink = UpsertSink(path, ["id"], sequence_by="seq")
    sink.write(engine.frame(rows((1, "a", 1)), SCHEMA), batch_id=42)
    sink.write(engine.frame(rows((2, "b", 1)), SCHEMA), batch_id=43)
    before = version(path)
    with pytest.raises(BatchIdBehindMarkerError) as caught:
        sink.foreach_batch(engine.frame(rows((3, "c", 2)), SCHEMA), 0)
    message = str(caught.value)
    assert "batch 0" in message and repr(sink.app_id) in message and "last batch id 43" in message
    assert "never committed" in message and "app_id" in message and "late_batches='apply'" in message
    assert isinstance(caught.value, ValueError)
    assert version(path) == before and [r["id"] for r in read_rows(path)] == [1, 2]
    # the stream with its own app id writes every epoch
    stream_sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="orders-stream")
    for epoch in range(3):
        assert not stream_sink.write(engine.frame(rows((10 + epoch, "s", 1)), SCHEMA), batch_id=epoch).skipped
    assert [r["id"] for r in read_rows(path)] == [1, 2, 10, 11, 12]


def test_a_stream_restarted_with_a_new_checkpoint_is_refused_loudly(engine, tmp_path):
    """Epochs start again at 0 with new data: each id below the marker differs from what was committed."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="stream")
    for epoch in range(4):
        sink.write(engine.frame(rows((epoch, f"old{epoch}", 1)), SCHEMA), batch_id=epoch)
    before = version(path)
    with pytest.raises(BatchIdBehindMarkerError) as caught:  # new checkpoint, epoch 0 again, new data
        sink.write(engine.frame(rows((100, "new", 2)), SCHEMA), batch_id=0)
    assert isinstance(caught.value, ReplayDivergenceError)  # it is also a replay that differs
    assert isinstance(caught.value, DivergentBatchBehindMarkerError)
    assert "reuses app id" in str(caught.value)
    assert version(path) == before and 100 not in [r["id"] for r in read_rows(path)]


def test_a_gap_below_the_marker_is_refused_and_committed_neighbours_are_replays(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq")
    for b in (1, 2, 5):
        sink.write(engine.frame(rows((b, "x", b)), SCHEMA), batch_id=b)
    for b in (1, 2, 5):
        again = sink.write(engine.frame(rows((b, "x", b)), SCHEMA), batch_id=b)
        assert again.skipped and again.replay_check == "matched" and not again.late
    for b in (0, 3, 4):
        with pytest.raises(BatchIdBehindMarkerError, match=f"batch {b} .*committed ids: \\[1-2, 5\\]"):
            sink.write(engine.frame(rows((b, "x", b)), SCHEMA), batch_id=b)


def test_late_batches_option_is_checked_at_construction(tmp_path):
    with pytest.raises(InvalidInputError, match="late_batches='apply' needs sequence_by"):
        UpsertSink(str(tmp_path / "t"), "id", late_batches="apply")
    with pytest.raises(InvalidInputError, match="late_batches must be one of 'refuse', 'apply'"):
        UpsertSink(str(tmp_path / "t"), "id", sequence_by="seq", late_batches="skip")
    assert UpsertSink(str(tmp_path / "t"), "id").late_batches == "refuse"


# -- applied late ------------------------------------------------------------------------------------------


def test_a_backfill_is_applied_under_the_sequence_rules_and_its_replay_is_checked(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", delete_when="op = 'D'", late_batches="apply")
    sink.write(engine.frame(cdc((1, "new", 10, "U"), (2, "b", 10, "U")), CDC), batch_id=10)
    # batch 3 of a backfill: an older version of key 1 (must not win), a new key, an old delete of key 2
    late = sink.write(engine.frame(cdc((1, "old", 3, "U"), (3, "c", 3, "U"), (2, "gone", 3, "D")), CDC), 3)
    assert late.late and not late.skipped and late.inserted == 1 and late.deleted == 0
    assert late.version == version(path)
    assert read_rows(path) == cdc((1, "new", 10, "U"), (2, "b", 10, "U"), (3, "c", 3, "U"))
    assert sink.last_batch_id() == 10  # the marker is a high-water mark: a late batch does not move it
    again = sink.write(engine.frame(cdc((1, "old", 3, "U"), (3, "c", 3, "U"), (2, "gone", 3, "D")), CDC), 3)
    assert again.skipped and again.replay_check == "matched" and not again.late
    with pytest.raises(ReplayDivergenceError, match="batch 3"):
        sink.write(engine.frame(cdc((3, "changed", 3, "U")), CDC), batch_id=3)
    # a sink that refuses late batches sees the backfilled id as committed
    refusing = UpsertSink(path, ["id"], sequence_by="seq", delete_when="op = 'D'")
    assert refusing.write(engine.frame(cdc((1, "old", 3, "U"), (3, "c", 3, "U"), (2, "gone", 3, "D")), CDC), 3).skipped
    assert not sink.write(engine.frame(cdc((4, "d", 11, "U")), CDC), batch_id=11).late


def test_a_late_batch_that_changes_no_row_still_records_its_id(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", late_batches="apply")
    sink.write(engine.frame(rows((1, "a", 5)), SCHEMA), batch_id=7)
    late = sink.write(engine.frame(rows((1, "older", 2)), SCHEMA), batch_id=2)  # stale: no row changes
    assert late.late and (late.inserted, late.updated) == (0, 0)
    assert late.version == version(path) == 1
    lineage.forget()
    assert sink.write(engine.frame(rows((1, "older", 2)), SCHEMA), batch_id=2).replay_check == "matched"


def test_late_and_in_order_commits_of_one_app_racing_are_both_recorded(engine, tmp_path):
    """A late batch and the next in-order batch of the same app commit concurrently (their markers are
    different transaction identifiers, so Delta lets both through): the record must hold both."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="job", late_batches="apply")
    other = UpsertSink(path, ["id"], sequence_by="seq", app_id="job", late_batches="apply")
    sink.write(engine.frame(rows((1, "a", 1)), SCHEMA), batch_id=5)
    race = faults.hook("before-commit", lambda: other.write(engine.frame(rows((6, "f", 6)), SCHEMA), batch_id=6))
    with race:
        assert sink.write(engine.frame(rows((2, "b", 2)), SCHEMA), batch_id=2).late
    lineage.forget()
    for b, r in ((2, rows((2, "b", 2))), (5, rows((1, "a", 1))), (6, rows((6, "f", 6)))):
        again = UpsertSink(path, ["id"], sequence_by="seq", app_id="job").write(engine.frame(r, SCHEMA), b)
        assert again.skipped and again.replay_check == "matched", b
    with pytest.raises(BatchIdBehindMarkerError):
        UpsertSink(path, ["id"], sequence_by="seq", app_id="job").write(engine.frame(rows((3, "c", 3)), SCHEMA), 3)


def test_two_late_batches_racing_are_both_applied_and_recorded(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="job", late_batches="apply")
    other = UpsertSink(path, ["id"], sequence_by="seq", app_id="job", late_batches="apply")
    sink.write(engine.frame(rows((9, "z", 9)), SCHEMA), batch_id=9)
    race = faults.hook("before-commit", lambda: other.write(engine.frame(rows((3, "c", 3)), SCHEMA), batch_id=3))
    with race:
        result = sink.write(engine.frame(rows((2, "b", 2)), SCHEMA), batch_id=2)
    assert result.late and result.attempts >= 2  # lost the race on the late chain's marker, then retried
    assert [r["id"] for r in read_rows(path)] == [2, 3, 9]
    lineage.forget()
    state = lineage.app_state(files.open_snapshot(path), "job")
    assert state.record.ranges == ((2, 3), (9, 9)) and state.late_counter == 1


def test_a_writer_overtaken_by_a_later_batch_of_its_app_does_not_lose_its_batch(engine, tmp_path):
    """Same app id, batch 5 in flight while another writer commits batch 6: Delta (Spark) skips a MERGE whose
    txn version is below the table's, silently. The sink notices; batch 5 is refused or applied late."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="job")
    other = UpsertSink(path, ["id"], sequence_by="seq", app_id="job")
    sink.write(engine.frame(rows((1, "a", 1)), SCHEMA), batch_id=4)
    race = faults.hook("before-commit", lambda: other.write(engine.frame(rows((6, "f", 6)), SCHEMA), batch_id=6))
    with race, pytest.raises(BatchIdBehindMarkerError, match="batch 5"):
        sink.write(engine.frame(rows((5, "e", 5)), SCHEMA), batch_id=5)
    assert [r["id"] for r in read_rows(path)] == [1, 6]
    late = UpsertSink(path, ["id"], sequence_by="seq", app_id="job", late_batches="apply")
    with faults.hook("before-commit", lambda: other.write(engine.frame(rows((8, "h", 8)), SCHEMA), batch_id=8)):
        assert late.write(engine.frame(rows((7, "g", 7)), SCHEMA), batch_id=7).late
    assert [r["id"] for r in read_rows(path)] == [1, 6, 7, 8]


# -- exact after log cleanup -------------------------------------------------------------------------------


def _clean_log(path: str, keep_from: int) -> None:
    """What Delta's log cleanup does: a checkpoint, then the commits before it removed."""
    DeltaTable(path).create_checkpoint()
    for v in range(keep_from):
        name = os.path.join(path, "_delta_log", f"{v:020d}.json")
        if os.path.exists(name):
            os.remove(name)


def test_never_committed_stays_exact_after_log_cleanup(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="app")
    for b in (42, 43):
        sink.write(engine.frame(rows((b, "x", 1)), SCHEMA), batch_id=b)
    other = UpsertSink(path, ["id"], sequence_by="seq", app_id="other")
    for b in range(25):  # other apps' commits push the early ones out of the log's head
        other.write(engine.frame(rows((1000 + b, "o", 1)), SCHEMA), batch_id=b)
    sink.write(engine.frame(rows((44, "x", 1)), SCHEMA), batch_id=44)
    _clean_log(path, version(path))
    lineage.forget()
    with pytest.raises(BatchIdBehindMarkerError, match="never committed"):
        sink.write(engine.frame(rows((7, "new", 1)), SCHEMA), batch_id=0)
    assert sink.write(engine.frame(rows((44, "x", 1)), SCHEMA), batch_id=44).replay_check == "matched"


def test_a_restarted_stream_after_log_cleanup_is_refused_and_a_backfill_applies(engine, tmp_path):
    """The measured loss: early commits cleaned, a stream restarted with epochs from 0 was skipped."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="stream")
    for epoch in range(6):
        sink.write(engine.frame(rows((epoch, "v1", epoch)), SCHEMA), batch_id=epoch)
    _clean_log(path, 5)
    lineage.forget()
    restarted = engine.frame(rows((0, "v2", 100)), SCHEMA)
    with pytest.raises(BatchIdBehindMarkerError, match="log no longer holds that commit"):
        sink.write(restarted, batch_id=0)
    assert read_rows(path)[0]["name"] == "v1"
    backfill = UpsertSink(path, ["id"], sequence_by="seq", app_id="stream", late_batches="apply")
    result = backfill.write(restarted, batch_id=0)
    assert result.late and result.updated == 1 and read_rows(path)[0]["name"] == "v2"
    assert backfill.write(restarted, batch_id=0).replay_check == "matched"


# -- tables written before records existed -------------------------------------------------------------


def _legacy_commit(path: str, ids_rows: list[int], app: str, batch: int, mode: str = "append") -> None:
    meta = {"upsertsink": 1, "app_id": app, "batch_id": batch, "engine": "embedded",
            "algorithm": "upsertsink-row-hash64-v3", "rows": len(ids_rows), "fingerprint": "0" * 16}
    data = pa.table({"id": pa.array(ids_rows, pa.int64()), "name": ["x"] * len(ids_rows),
                     "seq": pa.array([1] * len(ids_rows), pa.int64())})
    write_deltalake(path, data, mode=mode, commit_properties=CommitProperties(
        custom_metadata={"userMetadata": json.dumps(meta)}, app_transactions=[Transaction(app, batch)]))


def test_a_table_written_before_records_existed_is_read_from_its_log(tmp_path):
    path = str(tmp_path / "t")
    _legacy_commit(path, [1], "app", 0, mode="error")
    _legacy_commit(path, [2], "app", 1)
    _legacy_commit(path, [3], "app", 4)
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="app")
    with pytest.raises(BatchIdBehindMarkerError, match="never committed .*0-1, 4"):
        sink.write(pa.Table.from_pylist(rows((9, "x", 1)), schema=pa.schema(SCHEMA)), batch_id=2)
    sink.write(pa.Table.from_pylist(rows((5, "x", 1)), schema=pa.schema(SCHEMA)), batch_id=5)
    lineage.forget()
    state = lineage.app_state(files.open_snapshot(path), "app")
    assert state.record == records.Record(((0, 1), (4, 5)), 0)  # the new commit carries the rebuilt record


def test_a_legacy_table_whose_log_was_cleaned_refuses_unknown_ids_with_the_reason(tmp_path):
    path = str(tmp_path / "t")
    _legacy_commit(path, [1], "app", 0, mode="error")
    for b in range(1, 6):
        _legacy_commit(path, [b + 1], "app", b * 2)
    _clean_log(path, 3)
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="app")
    with pytest.raises(BatchIdBehindMarkerError, match="may never have been committed.*log cleanup"):
        sink.write(pa.Table.from_pylist(rows((9, "x", 1)), schema=pa.schema(SCHEMA)), batch_id=1)
    late = UpsertSink(path, ["id"], sequence_by="seq", app_id="app", late_batches="apply")
    assert late.write(pa.Table.from_pylist(rows((9, "x", 1)), schema=pa.schema(SCHEMA)), batch_id=1).late


# -- the record's own rules ------------------------------------------------------------------------------


def test_record_ranges_merge_and_stay_bounded():
    r = records.Record()
    for b in (5, 6, 7, 1, 3, 2):
        r = r.add(b)
    assert r.ranges == ((1, 3), (5, 7)) and 4 not in r and 6 in r
    assert r.verdict(4) == records.NEVER and r.verdict(6) == records.COMMITTED
    assert records.Record.decode({"batches": [[1, 3], [5, 7]]}) == r
    sparse = records.Record()
    for b in range(0, 2 * (records.MAX_RANGES + 10), 2):
        sparse = sparse.add(b)
    assert len(sparse.ranges) == records.MAX_RANGES
    assert sparse.verdict(1) == records.UNKNOWN and sparse.verdict(sparse.ranges[-1][0] - 1) == records.NEVER
