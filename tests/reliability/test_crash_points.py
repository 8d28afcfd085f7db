"""Every step of the write protocol is a crash point: kill the writer there, re-send, compare with the model.

The writer runs in a child process and dies with os._exit at the named point (UPSERTSINK_FAULT); then every
batch of the feed is sent again from the first. The table must equal the model of the feed (the table an
uninterrupted run gives), with the right last batch id, and must stay writable. The same points are also
hit with an injected exception instead of a death, in process: the caller sees an UpsertSinkError and a
re-send converges.
"""

from __future__ import annotations

import pytest
from harness import (
    DELETE_WHEN,
    KEYS,
    SEQUENCE,
    arrow_batch,
    late_order,
    model,
    record_of,
    run_writer,
    table_state,
)

from upsertsink import UpsertSink, UpsertSinkError, WriteFailedError
from upsertsink.faults import FAULT_EXIT_CODE

# (point, which time it is reached) -- every single-writer step; the repair steps need a race (test_races.py)
SINGLE_WRITER_POINTS = [
    ("prepared", 1), ("prepared", 4),
    ("tombstones-recorded", 1), ("tombstones-recorded", 3),
    ("before-commit", 1), ("before-commit", 5),
    ("table-created", 1),
    ("data-committed", 3),
    ("marker-only-before", 1), ("marker-only-committed", 1),
]


def _sink(path: str) -> UpsertSink:
    return UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed")


def _uninterrupted(path: str, feed: list[list[dict]]) -> dict:
    sink = _sink(path)
    for i, rows in enumerate(feed):
        sink.write(arrow_batch(rows), batch_id=i)
    return table_state(path)


# A writer compacts its tombstones (every 3 files in these runs): killed after the compacted file is written,
# before the files it replaces are deleted.
KILL_POINTS = [*SINGLE_WRITER_POINTS, ("tombstones-compacted", 1), ("tombstones-compacted", 3)]


@pytest.mark.parametrize(("point", "nth"), KILL_POINTS, ids=[f"{p}@{n}" for p, n in KILL_POINTS])
def test_embedded_writer_killed_at_each_step_converges_after_a_resend(feed, tmp_path, point, nth):
    data, feed_file = feed
    path = str(tmp_path / "t")
    crashed = run_writer(path, feed_file, fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    resent = run_writer(path, feed_file)
    assert resent.returncode == 0, resent.stderr[-3000:]
    assert table_state(path) == model(data) == _uninterrupted(str(tmp_path / "reference"), data)
    assert _sink(path).last_batch_id() == len(data) - 1


@pytest.mark.parametrize(("point", "nth"), SINGLE_WRITER_POINTS, ids=[f"{p}@{n}" for p, n in SINGLE_WRITER_POINTS])
def test_an_error_raised_at_each_step_is_an_upsertsink_error_and_a_resend_converges(
    feed, tmp_path, monkeypatch, point, nth
):
    from upsertsink import faults

    data, _ = feed
    path = str(tmp_path / "t")
    monkeypatch.setattr(faults, "_counts", {})
    monkeypatch.setenv("UPSERTSINK_FAULT", f"{point}@{nth}")
    monkeypatch.setenv("UPSERTSINK_FAULT_MODE", "raise")
    sink = _sink(path)
    failed = None
    for i, rows in enumerate(data):
        try:
            sink.write(arrow_batch(rows), batch_id=i)
        except UpsertSinkError as err:
            failed = err
            break
    assert isinstance(failed, WriteFailedError), f"point {point}@{nth} was not reached"
    monkeypatch.delenv("UPSERTSINK_FAULT")
    for i, rows in enumerate(data):
        sink.write(arrow_batch(rows), batch_id=i)
    assert table_state(path) == model(data)
    assert sink.last_batch_id() == len(data) - 1


SPARK_POINTS = [("prepared", 2), ("tombstones-recorded", 1), ("before-commit", 3), ("table-created", 1),
                ("data-committed", 2)]


@pytest.mark.spark
@pytest.mark.parametrize(("point", "nth"), SPARK_POINTS, ids=[f"{p}@{n}" for p, n in SPARK_POINTS])
def test_spark_writer_killed_at_each_step_converges_after_a_resend(spark, short_feed, tmp_path, point, nth):
    data, feed_file = short_feed
    path = str(tmp_path / "t")
    crashed = run_writer(path, feed_file, engine="spark", fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    sink = _sink(path)
    for i, rows in enumerate(data):  # the re-send, on the test session's Spark
        sink.write(spark.createDataFrame(arrow_batch(rows)), batch_id=i)
    assert table_state(path) == model(data)
    assert sink.last_batch_id() == len(data) - 1


# A feed sent with a third of its batches late (after later ones), late_batches="apply": the late commits move
# the late chain's marker and carry the record; a kill at any step, then the same sends again, must converge
# to the model with every batch id recorded once.
LATE_POINTS = [("prepared", 20), ("tombstones-recorded", 12), ("before-commit", 18), ("data-committed", 17),
               ("marker-only-before", 1), ("marker-only-committed", 1)]


@pytest.mark.parametrize(("point", "nth"), LATE_POINTS, ids=[f"{p}@{n}" for p, n in LATE_POINTS])
def test_embedded_writer_killed_during_late_batches_converges_after_a_resend(feed, tmp_path, point, nth):
    data, feed_file = feed
    order = late_order(len(data), seed=3)
    path = str(tmp_path / "t")
    crashed = run_writer(path, feed_file, fault=f"{point}@{nth}", order=order, late_batches="apply")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    resent = run_writer(path, feed_file, order=order, late_batches="apply")
    assert resent.returncode == 0 and '"outcome": "error"' not in resent.stdout, resent.stdout[-3000:]
    assert table_state(path) == model(data)
    assert record_of(path, "feed") == ((0, len(data) - 1),)
    again = run_writer(path, feed_file, order=order)  # every id is now a replay, even for a refusing sink
    assert again.stdout.count('"outcome": "skipped"') == len(data), again.stdout[-2000:]


@pytest.mark.spark
@pytest.mark.parametrize("point", ["before-commit", "data-committed"])
def test_spark_writer_killed_during_a_late_batch_converges_after_a_resend(spark, short_feed, tmp_path, point):
    data, feed_file = short_feed
    order = [0, 1, 4, 5, 2, 3, 6, 7]
    path = str(tmp_path / "t")
    nth = 5  # the fifth commit attempt is batch 2's, the first late one
    crashed = run_writer(path, feed_file, engine="spark", fault=f"{point}@{nth}", order=order, late_batches="apply")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed", late_batches="apply")
    for i in order:
        sink.write(spark.createDataFrame(arrow_batch(data[i])), batch_id=i)
    assert table_state(path) == model(data)
    assert record_of(path, "feed") == ((0, len(data) - 1),)
