"""Merge engines (issue #47) under crashes and concurrent writers: ``aggregate`` counts every batch once and
``partial_update``'s two streams converge, whatever kills or races them; compared with the reference models
(tests/merge_engine_models.py).

Writers run in child processes (merge_engine_writer.py) and die at a named crash point (UPSERTSINK_FAULT);
every batch is then sent again from the first. Skipped until ``UpsertSink`` takes ``merge_engine``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from merge_engine_models import (
    AGGREGATE_SCHEMA,
    AGGREGATES,
    PARTIAL_GROUPS,
    PARTIAL_SCHEMA,
    PARTIAL_STREAMS,
    aggregate,
    aggregate_feed,
    partial_update,
    partial_update_feeds,
    rows,
)

from upsertsink import UpsertSink, UpsertSinkError, WriteFailedError
from upsertsink.faults import FAULT_EXIT_CODE

WRITER = Path(__file__).resolve().parent / "merge_engine_writer.py"
ARROW = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_()}
AGG_OPTIONS = {"merge_engine": "aggregate", "aggregates": AGGREGATES, "sequence_by": "seq"}
# racing writers of one app id may lose a batch's every retry and commit the next one: its re-send then applies late
AGG_RACE = {**AGG_OPTIONS, "late_batches": "apply"}
PU_OPTIONS = {"merge_engine": "partial_update", "sequence_groups": PARTIAL_GROUPS}
PU_COLUMNS = [c for c in PARTIAL_SCHEMA if c not in ("note", "seq")]
NARROW = {s: ["id", *cols] for s, cols in PARTIAL_STREAMS.items()}


def arrow(rows_: list[dict], schema: dict[str, str], columns=None) -> pa.Table:
    return pa.Table.from_pylist(rows_, schema=pa.schema([(c, ARROW[t]) for c, t in schema.items()
                                                         if columns is None or c in columns]))


def save(path: Path, batches, schema, columns=None) -> Path:
    path.write_text(json.dumps({"schema": schema, "columns": columns, "batches": batches}))
    return path


def run_writer(path, feed_file, options, *, app_id="feed", fault=None, order=None, start_at=None, engine="embedded",
               result=None, timeout=600) -> subprocess.Popen | subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_FAULT")}
    if fault:
        env["UPSERTSINK_FAULT"] = fault
    cmd = [sys.executable, str(WRITER), "--path", str(path), "--feed", str(feed_file), "--options",
           json.dumps(options), "--app-id", app_id, "--engine", engine]
    if order is not None:
        cmd += ["--order", ",".join(map(str, order))]
    if result is not None:
        cmd += ["--result", str(result)]
    if start_at is not None:
        cmd += ["--start-at", str(start_at)]
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def table(path, columns) -> list[tuple]:
    got = pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT * FROM t").read_all()).to_pylist()
    assert len({r["id"] for r in got}) == len(got), f"duplicate keys in {path}"
    return rows({(r["id"],): r for r in got}, columns)


def outcomes(proc_stdout: str) -> list[dict]:
    return [json.loads(line) for line in proc_stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def agg_feed(tmp_path_factory):
    data = aggregate_feed(seed=17, batches=8, keys=6, size=(3, 10))
    return data, save(tmp_path_factory.mktemp("agg") / "feed.json", data, AGGREGATE_SCHEMA)


@pytest.fixture(scope="module")
def pu_feeds(tmp_path_factory):
    """The two streams' feeds (whole groups: any order converges); the pay stream ends with its first batch
    again under a new id, which changes no row (a marker-only commit)."""
    feeds = partial_update_feeds(seed=23, batches=5, keys=6, partial_nulls=False, note=False)
    feeds["pay"].append(feeds["pay"][0])
    folder = tmp_path_factory.mktemp("pu")
    files = {s: save(folder / f"{s}.json", f, PARTIAL_SCHEMA, NARROW[s]) for s, f in feeds.items()}
    return feeds, files


def create_wide(path) -> None:
    schema = pa.schema([(c, ARROW[PARTIAL_SCHEMA[c]]) for c in PU_COLUMNS])
    write_deltalake(str(path), pa.Table.from_pylist([], schema=schema))


AGG_COLS = list(AGGREGATE_SCHEMA)


def agg_model(batches):
    return rows(aggregate(batches, ["id"], AGGREGATES, "seq"), AGG_COLS)


def pu_model(feeds):
    return rows(partial_update([b for f in feeds.values() for b in f], ["id"], sequence_groups=PARTIAL_GROUPS,
                               columns=PU_COLUMNS), PU_COLUMNS)


# ---------------------------------------------------------------- crash points

AGG_POINTS = [("prepared", 2), ("table-created", 1), ("before-commit", 1), ("before-commit", 4),
              ("data-committed", 3), ("data-committed", 7)]  # 8 batches: the first creates the table


@pytest.mark.parametrize(("point", "nth"), AGG_POINTS, ids=[f"{p}@{n}" for p, n in AGG_POINTS])
def test_an_aggregate_writer_killed_at_each_step_counts_every_batch_once_after_a_resend(agg_feed, tmp_path, point, nth):
    data, feed_file = agg_feed
    path = tmp_path / "t"
    crashed = run_writer(path, feed_file, AGG_OPTIONS, fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    resent = run_writer(path, feed_file, AGG_OPTIONS)
    assert resent.returncode == 0 and all(o["outcome"] in ("written", "skipped") for o in outcomes(resent.stdout)), (
        resent.stdout[-3000:])
    assert table(path, AGG_COLS) == agg_model(data)
    assert UpsertSink(str(path), ["id"], app_id="feed", **AGG_OPTIONS).last_batch_id() == len(data) - 1


@pytest.mark.parametrize(("point", "nth"), AGG_POINTS[2:], ids=[f"{p}@{n}" for p, n in AGG_POINTS[2:]])
def test_an_error_at_each_step_of_an_aggregate_write_is_an_upsertsink_error_and_a_resend_counts_once(
    agg_feed, tmp_path, monkeypatch, point, nth
):
    from upsertsink import faults

    data, _ = agg_feed
    path = str(tmp_path / "t")
    monkeypatch.setattr(faults, "_counts", {})
    monkeypatch.setenv("UPSERTSINK_FAULT", f"{point}@{nth}")
    monkeypatch.setenv("UPSERTSINK_FAULT_MODE", "raise")
    sink = UpsertSink(path, ["id"], app_id="feed", **AGG_OPTIONS)
    failed = None
    for i, batch in enumerate(data):
        try:
            sink.write(arrow(batch, AGGREGATE_SCHEMA), batch_id=i)
        except UpsertSinkError as err:
            failed = err
            break
    assert isinstance(failed, WriteFailedError), f"point {point}@{nth} was not reached"
    monkeypatch.delenv("UPSERTSINK_FAULT")
    for i, batch in enumerate(data):
        sink.write(arrow(batch, AGGREGATE_SCHEMA), batch_id=i)
    assert table(path, AGG_COLS) == agg_model(data)


PU_POINTS = [("prepared", 2), ("before-commit", 3), ("data-committed", 2), ("marker-only-before", 1),
             ("marker-only-committed", 1)]


@pytest.mark.parametrize(("point", "nth"), PU_POINTS, ids=[f"{p}@{n}" for p, n in PU_POINTS])
def test_a_partial_update_stream_killed_at_each_step_converges_with_the_other_stream(pu_feeds, tmp_path, point, nth):
    feeds, files = pu_feeds
    path = tmp_path / "t"
    create_wide(path)
    crashed = run_writer(path, files["pay"], PU_OPTIONS, app_id="pay", fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    other = run_writer(path, files["ship"], PU_OPTIONS, app_id="ship")
    resent = run_writer(path, files["pay"], PU_OPTIONS, app_id="pay")
    for proc in (other, resent):
        assert proc.returncode == 0 and all(o["outcome"] in ("written", "skipped") for o in outcomes(proc.stdout)), (
            proc.stdout[-3000:])
    assert table(path, PU_COLUMNS) == pu_model(feeds)
    assert UpsertSink(str(path), ["id"], app_id="pay", **PU_OPTIONS).last_batch_id() == len(feeds["pay"]) - 1


@pytest.mark.spark
@pytest.mark.parametrize("point", ["before-commit", "data-committed"])
def test_a_spark_aggregate_writer_killed_counts_every_batch_once_after_a_resend(spark, agg_feed, tmp_path, point):
    data, feed_file = agg_feed
    path = tmp_path / "t"
    crashed = run_writer(path, feed_file, AGG_OPTIONS, fault=f"{point}@3", engine="spark")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@3 was not reached: {crashed.stderr[-2000:]}"
    sink = UpsertSink(str(path), ["id"], app_id="feed", **AGG_OPTIONS)
    for i, batch in enumerate(data):  # the re-send, on the test session's Spark
        sink.write(spark.createDataFrame(arrow(batch, AGGREGATE_SCHEMA)), batch_id=i)
    assert table(path, AGG_COLS) == agg_model(data)


# ---------------------------------------------------------------- concurrent writers


def race(path, jobs: list[tuple[Path, dict, str]]) -> list[list[dict]]:
    """Start one writer per (feed file, options, app id) at the same moment; wait; return their outcomes."""
    start = time.time() + 8  # the writers' imports take a few seconds on a busy machine
    procs = [run_writer(path, f, o, app_id=a, start_at=start) for f, o, a in jobs]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        got = outcomes(out)
        assert all(o["outcome"] in ("written", "skipped", "conflict") for o in got), out[-3000:]
        results.append(got)
    return results


def test_concurrent_aggregate_writers_with_their_own_app_ids_count_every_batch_once(agg_feed, tmp_path):
    data, _ = agg_feed
    path = tmp_path / "t"
    # the first batch creates the table; then two streams add to the same keys at once
    UpsertSink(str(path), ["id"], app_id="seed", **AGG_OPTIONS).write(arrow(data[0], AGGREGATE_SCHEMA), batch_id=0)
    halves = {"even": [b for i, b in enumerate(data[1:]) if i % 2 == 0], "odd": [b for i, b in enumerate(data[1:]) if i % 2]}
    files = {a: save(tmp_path / f"{a}.json", f, AGGREGATE_SCHEMA) for a, f in halves.items()}
    race(path, [(files[a], AGG_RACE, a) for a in halves])
    for app in halves:  # batches that lost every race are sent again; the rest are replays
        run_writer(path, files[app], AGG_RACE, app_id=app)
    assert table(path, AGG_COLS) == agg_model(data)


def test_two_aggregate_writers_sharing_an_app_id_apply_each_batch_once(agg_feed, tmp_path):
    data, feed_file = agg_feed
    path = tmp_path / "t"
    UpsertSink(str(path), ["id"], app_id="shared", **AGG_OPTIONS).write(arrow(data[0], AGGREGATE_SCHEMA), batch_id=0)
    results = race(path, [(feed_file, AGG_RACE, "shared"), (feed_file, AGG_RACE, "shared")])
    written = [o["batch"] for got in results for o in got if o["outcome"] == "written"]
    assert len(written) == len(set(written)), f"a batch was applied twice: {written}"
    run_writer(path, feed_file, AGG_RACE, app_id="shared")
    assert table(path, AGG_COLS) == agg_model(data)


def test_two_partial_update_streams_racing_converge(pu_feeds, tmp_path):
    feeds, files = pu_feeds
    path = tmp_path / "t"
    create_wide(path)
    race(path, [(files[s], PU_OPTIONS, s) for s in feeds])
    for s in feeds:
        run_writer(path, files[s], PU_OPTIONS, app_id=s)
    assert table(path, PU_COLUMNS) == pu_model(feeds)
