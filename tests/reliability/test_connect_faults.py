"""Spark Connect under faults: the client killed at each step of the protocol, the server killed while a stream
writes, and several Connect clients writing one table at once. Each run is compared with the model.

The clients are writer processes (writer.py --engine connect) joined to a Connect server: the test run's own
(the ``connect`` fixture serves it from the run's JVM) or, where the server is killed, a server process of its
own started by connect_server.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch, model, run_writer, table_state

from upsertsink import UpsertSink
from upsertsink.faults import FAULT_EXIT_CODE
from upsertsink.session import connect_url

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent
# The Spark engine's points (test_crash_points.SPARK_POINTS); Delta's MERGE commits the marker itself when no
# row changes, so the marker-only steps belong to the embedded engine.
CONNECT_POINTS = [("prepared", 1), ("prepared", 2), ("tombstones-recorded", 1), ("before-commit", 1),
                  ("before-commit", 3), ("table-created", 1), ("data-committed", 2), ("data-committed", 5)]


def _sink(path: str) -> UpsertSink:
    return UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed")


@pytest.mark.parametrize(("point", "nth"), CONNECT_POINTS, ids=[f"{p}@{n}" for p, n in CONNECT_POINTS])
def test_connect_client_killed_at_each_step_converges_after_a_resend(connect, short_feed, tmp_path, point, nth):
    data, feed_file = short_feed
    path = str(tmp_path / "t")
    url = connect_url(connect)
    crashed = run_writer(path, feed_file, engine="connect", remote=url, fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    sink = _sink(path)
    for i, rows in enumerate(data):  # the re-send, from the test's own Connect session
        sink.write(connect.createDataFrame(arrow_batch(rows)), batch_id=i)
    assert table_state(path) == model(data)
    assert sink.last_batch_id() == len(data) - 1


# The large-batch path (the batch kept on the server, engines/spark.py _keep_on_server): its own prepare, the
# statistics job that ships the key rows, the tombstones joined into the MERGE source.
LARGE_POINTS = [("prepared", 2), ("tombstones-recorded", 1), ("before-commit", 3), ("data-committed", 2)]


@pytest.mark.parametrize(("point", "nth"), LARGE_POINTS, ids=[f"{p}@{n}" for p, n in LARGE_POINTS])
def test_connect_large_batch_path_killed_at_each_step_converges_after_a_resend(
    connect, short_feed, tmp_path, point, nth, monkeypatch
):
    from upsertsink.engines import spark as spark_engine

    data, feed_file = short_feed
    path = str(tmp_path / "t")
    crashed = run_writer(
        path, feed_file, engine="connect", remote=connect_url(connect), fault=f"{point}@{nth}", connect_large=True
    )
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    monkeypatch.setattr(spark_engine, "CONNECT_LOCAL_ROWS", 0)  # the re-send takes the same path
    sink = _sink(path)
    for i, rows in enumerate(data):
        sink.write(connect.createDataFrame(arrow_batch(rows)), batch_id=i)
    assert table_state(path) == model(data)
    assert sink.last_batch_id() == len(data) - 1


def _start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    """A Connect server in a process of its own (connect_server.py), and its URL once it listens."""
    ready = folder / f"server-{time.monotonic_ns()}.url"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "connect_server.py"), str(ready)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the Connect server did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    return proc, ready.read_text().strip()


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)  # the server's JVM and Python workers with it
    proc.wait(60)


@pytest.mark.parametrize("after", [2, 5])
def test_connect_server_killed_while_a_stream_writes_converges_after_a_resend(short_feed, tmp_path, after):
    """The server dies (SIGKILL, its JVM with it) while a client streams the feed: the write in flight fails,
    or the client retries the connection until it is stopped; a new server and a re-send of every batch give
    the model. The short feed (8 batches) leaves batches after the kill for both points: the 24-batch feed
    made the two runs the suite's slowest (389 and 426 s in CI), each batch written twice on a cold server."""
    data, feed_file = short_feed
    path = str(tmp_path / "t")
    results = tmp_path / "results.jsonl"
    server, url = _start_server(tmp_path)
    try:
        client = subprocess.Popen(
            [sys.executable, str(HERE / "writer.py"), "--path", path, "--feed", str(feed_file), "--engine",
             "connect", "--remote", url, "--app-id", "feed", "--result", str(results)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 300
        while (not results.exists() or len(results.read_text().splitlines()) < after) and client.poll() is None:
            assert time.monotonic() < deadline, "the writer made no progress"
            time.sleep(0.05)
        time.sleep(0.3 * after)  # into the next write
        _kill(server)
        try:
            client.wait(15)  # its write in flight fails ...
        except subprocess.TimeoutExpired:
            client.kill()  # ... or the Connect client keeps retrying the connection (minutes): stop it
            client.wait(30)
    finally:
        _kill(server)
    done = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(d["outcome"] in ("written", "skipped", "error", "raw") for d in done)
    assert sum(d["outcome"] == "written" for d in done) >= after
    server, url = _start_server(tmp_path)
    try:
        resent = run_writer(path, feed_file, engine="connect", remote=url)
        assert resent.returncode == 0, resent.stderr[-2000:]
        outcomes = [json.loads(line) for line in resent.stdout.splitlines() if line.startswith("{")]
        assert all(o["outcome"] in ("written", "skipped") for o in outcomes), outcomes
        assert sum(o["outcome"] == "skipped" for o in outcomes) >= after  # what was committed is a replay
    finally:
        _kill(server)
    assert table_state(path) == model(data)
    assert _sink(path).last_batch_id() == len(data) - 1


def test_connect_clients_racing_on_one_table_converge_to_the_model(connect, feed, tmp_path):
    """Three Connect clients (processes, one session each) send the whole feed at once under one app id, and
    a fourth under another: every batch is applied once per app id, and the table equals the model."""
    data, feed_file = feed
    path = str(tmp_path / "t")
    url = connect_url(connect)
    start = time.time() + 8  # the clients connect first, then write together
    env = os.environ.copy()
    procs = []
    for n, app in enumerate(["feed", "feed", "feed", "other"]):
        out = tmp_path / f"r{n}.jsonl"
        procs.append((subprocess.Popen(
            [sys.executable, str(HERE / "writer.py"), "--path", path, "--feed", str(feed_file), "--engine", "connect",
             "--remote", url, "--app-id", app, "--result", str(out), "--start-at", str(start)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        ), out))
    for proc, _ in procs:
        assert proc.wait(900) == 0, proc.stderr.read().decode()[-2000:]
    per_app: dict[str, list[dict]] = {"feed": [], "other": []}
    for n, (_, out) in enumerate(procs):
        per_app["other" if n == 3 else "feed"] += [json.loads(line) for line in out.read_text().splitlines()]
    raw = [d for ds in per_app.values() for d in ds if d["outcome"] in ("raw", "error")]
    assert not raw, raw
    # a ConcurrentWriteError (gave up after its retries) is allowed: that batch is re-sent below
    for app in ("feed", "other"):
        sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id=app)
        for i, rows in enumerate(data):
            sink.write(arrow_batch(rows), batch_id=i)
    written = [d["batch"] for d in per_app["feed"] if d["outcome"] == "written"]
    assert len(written) == len(set(written))  # no batch id applied twice under one app id
    assert table_state(path) == model(data)
