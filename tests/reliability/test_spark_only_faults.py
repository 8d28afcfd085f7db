"""Spark-only mode under faults: a Connect client writing a table by name (``for_table(file_access=False)``) is
killed at the protocol's steps around the tombstone record and the data commit; a re-send from the test's own
session converges to the model (nothing lost, doubled or resurrected) and the marker is right."""

from __future__ import annotations

import pytest
from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch, change_feed, model, run_writer, save_feed

from upsertsink import UpsertSink
from upsertsink.faults import FAULT_EXIT_CODE
from upsertsink.session import connect_url

pytestmark = pytest.mark.spark

# The feed's first batch deletes keys, so each point is reached within the first batches.
POINTS = [("tombstones-recorded", 1), ("before-commit", 2), ("data-committed", 2), ("tombstones-recorded", 2)]


@pytest.fixture(scope="module")
def tiny_feed(tmp_path_factory):
    data = change_feed(seed=11, batches=4)
    return data, save_feed(data, tmp_path_factory.mktemp("tiny") / "feed.json")


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_spark_only_client_killed_at_a_step_converges_after_a_resend(connect, tiny_feed, schema, point, nth):
    data, feed_file = tiny_feed
    name = f"{schema}.feed"
    crashed = run_writer(name, feed_file, engine="connect", remote=connect_url(connect), fault=f"{point}@{nth}",
                         spark_only=True)
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    sink = UpsertSink.for_table(name, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed",
                                file_access=False)
    for i, rows in enumerate(data):  # the re-send
        sink.write(connect.createDataFrame(arrow_batch(rows)), batch_id=i)
    rows = connect.table(name).select("id", "val", "seq").collect()
    state = {r["id"]: (r["val"], r["seq"]) for r in rows}
    assert len(state) == len(rows)  # no key twice
    assert state == model(data)
    assert sink.last_batch_id() == len(data) - 1


def test_spark_only_writers_racing_on_one_named_table_converge_to_the_model(spark, connect, schema):
    """Three threads, each with its own sink, send a feed at once into a table that does not exist yet (created
    by the race): two under one app id (one on the classic session, one on a Spark Connect session) and one
    under another (classic): every batch id has one commit per app id, no delete is resurrected, the markers
    are right and the table equals the model."""
    import threading

    from upsertsink.errors import ConcurrentWriteError
    from upsertsink.table.commit_log import decode_metadata

    data = change_feed(seed=23, batches=5, keys=12, size=(4, 8))
    name = f"{schema}.raced"
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def sink(app: str) -> UpsertSink:
        return UpsertSink.for_table(name, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id=app,
                                    file_access=False)

    def run(app: str, session) -> None:
        mine = sink(app)
        barrier.wait()
        for i, rows in enumerate(data):
            try:
                mine.write(session.createDataFrame(arrow_batch(rows)), batch_id=i)
            except ConcurrentWriteError:
                pass  # gave up after its retries: re-sent below
            except BaseException as err:  # noqa: BLE001 - reported by the assertion below
                errors.append(err)

    threads = [threading.Thread(target=run, args=job) for job in (("feed", spark), ("feed", connect), ("other", spark))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    assert not errors, errors
    for app in ("feed", "other"):  # the re-send: whatever a writer gave up on lands now, the rest is a replay
        again = sink(app)
        for i, rows in enumerate(data):
            again.write(spark.createDataFrame(arrow_batch(rows)), batch_id=i)
        assert again.last_batch_id() == len(data) - 1
    commits: dict[tuple[str, int], int] = {}
    for row in spark.sql(f"DESCRIBE HISTORY {name}").collect():
        meta = decode_metadata(row.asDict())
        if meta and meta.get("batch_id") is not None and not meta.get("repair_of_batch"):
            commits[(meta["app_id"], meta["batch_id"])] = commits.get((meta["app_id"], meta["batch_id"]), 0) + 1
    assert commits == {(app, i): 1 for app in ("feed", "other") for i in range(len(data))}
    rows = spark.table(name).select("id", "val", "seq").collect()
    state = {r["id"]: (r["val"], r["seq"]) for r in rows}
    assert len(state) == len(rows)  # no key twice
    assert state == model(data)


def test_spark_only_connect_clients_in_two_processes_apply_each_batch_once(connect, tiny_feed, schema, tmp_path):
    """Two Connect clients (processes, a session each) send the same feed under one app id into one named table
    at once, by name only (--spark-only): each batch id is committed once, and the table equals the model."""
    import json
    import os
    import subprocess
    import sys
    import time

    from harness import HERE

    data, feed_file = tiny_feed
    name = f"{schema}.clients"
    start = time.time() + 6  # the clients connect first, then write together
    procs = []
    for n in range(2):
        out = tmp_path / f"r{n}.jsonl"
        procs.append((subprocess.Popen(
            [sys.executable, str(HERE / "writer.py"), "--path", name, "--feed", str(feed_file), "--engine", "connect",
             "--remote", connect_url(connect), "--spark-only", "--result", str(out), "--start-at", str(start)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
        ), out))
    for proc, _ in procs:
        assert proc.wait(600) == 0, proc.stderr.read().decode()[-2000:]
    done = [json.loads(line) for _, out in procs for line in out.read_text().splitlines()]
    assert not [d for d in done if d["outcome"] in ("raw", "error")], done
    written = [d["batch"] for d in done if d["outcome"] == "written"]
    assert len(written) == len(set(written))  # no batch id applied twice
    sink = UpsertSink.for_table(name, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed",
                                file_access=False)
    for i, rows in enumerate(data):  # whatever a client gave up on (ConcurrentWriteError) lands now
        sink.write(connect.createDataFrame(arrow_batch(rows)), batch_id=i)
    assert sink.last_batch_id() == len(data) - 1
    state = {r["id"]: (r["val"], r["seq"]) for r in connect.table(name).select("id", "val", "seq").collect()}
    assert state == model(data)
