"""History tables (SCD type 2) under faults: a writer killed at every step of a history write, then a re-send;
concurrent writers (one app id sending the whole feed in shuffled orders, and one app id each); every run is
compared with the history model of the feed (harness.history_model)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest
from harness import WRITER, history_model, history_state, record_of, run_writer, save_feed

from upsertsink.faults import FAULT_EXIT_CODE

ALLOWED = {"written", "skipped"}
# (point, which time it is reached): every step of a history write
POINTS = [
    ("prepared", 1), ("prepared", 4),
    ("events-recorded", 1), ("events-recorded", 3),
    ("before-commit", 1), ("before-commit", 5),
    ("table-created", 1),
    ("data-committed", 3),
    ("events-promoted", 1), ("events-promoted", 4),
    ("events-compacted", 1), ("events-compacted", 2),  # the log is compacted every 3 files in these runs
]


def _outcomes(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _converged(path: str, data: list[list[dict]], resent: subprocess.CompletedProcess) -> None:
    assert resent.returncode == 0, resent.stderr[-2000:]
    bad = [o for o in _outcomes(resent.stdout) if o["outcome"] not in ALLOWED]
    assert not bad, bad[:3]
    assert history_state(path) == history_model(data)
    assert record_of(path, "feed") == ((0, len(data) - 1),)


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_history_writer_killed_at_each_step_converges_after_a_resend(feed, tmp_path, point, nth):
    data, feed_file = feed
    path = str(tmp_path / "t")
    crashed = run_writer(path, feed_file, fault=f"{point}@{nth}", scd2=True)
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    _converged(path, data, run_writer(path, feed_file, scd2=True))


@pytest.mark.spark
@pytest.mark.parametrize("point", ["events-recorded", "data-committed", "events-promoted"])
def test_spark_history_writer_killed_converges_after_a_resend(short_feed, tmp_path, point):
    data, feed_file = short_feed
    path = str(tmp_path / "t")
    crashed = run_writer(path, feed_file, engine="spark", fault=f"{point}@2", scd2=True)
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point} was not reached: {crashed.stderr[-2000:]}"
    _converged(path, data, run_writer(path, feed_file, engine="spark", scd2=True))


def _concurrent(tmp_path, data, engines: list[str], shared: bool) -> str:
    """Writers at once on a new history table: with ``shared``, one app id and each the whole feed in its own
    shuffled order (late batches applied); else one app id each and a quarter of the feed each. Then every
    writer's share is sent again (what lost every race lands now)."""
    path = str(tmp_path / "t")
    go = time.time() + (25 if "spark" in engines else 2)
    procs, shares = [], []
    for w, engine in enumerate(engines):
        share = list(range(len(data))) if shared else list(range(w, len(data), len(engines)))
        if shared:
            random.Random(w).shuffle(share)
        feed_file = save_feed(data, tmp_path / f"feed-{w}.json")
        app_id = "feed" if shared else f"writer-{w}"
        shares.append((feed_file, app_id, share))
        cmd = [sys.executable, str(WRITER), "--path", path, "--feed", str(feed_file), "--engine", engine,
               "--app-id", app_id, "--start-at", str(go), "--order", ",".join(map(str, share)), "--scd2",
               "--late-batches", "apply"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_FAULT")}
        env["UPSERTSINK_COMPACT_HISTORY_AT"] = "3"  # writers compact while others read
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err[-2000:]
        bad = [o for o in _outcomes(out) if o["outcome"] not in (*ALLOWED, "conflict")]
        assert not bad, bad[:3]
    for feed_file, app_id, share in shares:
        again = run_writer(path, feed_file, app_id=app_id, order=share, scd2=True, late_batches="apply")
        assert again.returncode == 0 and all(o["outcome"] in ALLOWED for o in _outcomes(again.stdout)), again.stdout
    return path


@pytest.mark.parametrize("shared", [True, False], ids=["one-app-id-shuffled", "own-app-ids"])
def test_four_concurrent_history_writers_give_the_history_of_every_event(feed, tmp_path, shared):
    data, _ = feed
    path = _concurrent(tmp_path, data, ["embedded"] * 4, shared)
    assert history_state(path) == history_model(data)
    if shared:
        assert record_of(path, "feed") == ((0, len(data) - 1),)


@pytest.mark.spark
def test_spark_and_embedded_history_writers_at_once_give_the_history_of_every_event(short_feed, tmp_path):
    data, _ = short_feed
    path = _concurrent(tmp_path, data, ["spark", "embedded", "embedded"], shared=False)
    assert history_state(path) == history_model(data)
