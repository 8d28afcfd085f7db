"""Delta tables on S3 (moto's server on 127.0.0.1), written by both engines, alone and at the same time."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path

import boto3
import feed as F
import pyarrow as pa
import pytest
from clusterlib import (
    JOBS,
    ROOT,
    embedded_writer,
    finish,
    lc,
    records,
    spark_writer,
    start_together,
    submit,
    writer_args,
)
from deltalake import DeltaTable

from upsertsink import InvalidInputError, UpsertSink
from upsertsink.table.commit_log import decode_metadata

ALLOWED = {"committed", "skipped", "retrying", "gave up"}


def commits_per_batch(path: str, options: dict[str, str]) -> Counter:
    found: Counter = Counter()
    for commit in DeltaTable(path, storage_options=options).history():
        meta = decode_metadata(commit)
        if meta and meta.get("batch_id") is not None:  # repair commits carry no batch id
            found[(meta.get("app_id"), meta["batch_id"])] += 1
    return found


def test_the_server_decides_racing_conditional_puts_atomically(cluster):
    """16 clients create one key with If-None-Match: * at once: exactly one succeeds (as on S3)."""
    s3 = boto3.client("s3", endpoint_url=cluster.s3_endpoint, aws_access_key_id="k",
                      aws_secret_access_key="s", region_name="us-east-1")
    for attempt in range(5):
        key = f"race/{attempt}/00000000000000000000.json"
        barrier, outcomes = threading.Barrier(16), []

        def put(i: int, key: str = key, barrier: threading.Barrier = barrier, outcomes: list = outcomes) -> None:
            barrier.wait()
            try:
                s3.put_object(Bucket=cluster.bucket, Key=key, Body=f"writer {i}".encode(), IfNoneMatch="*")
                outcomes.append(("won", i))
            except s3.exceptions.ClientError as err:
                outcomes.append((err.response["Error"]["Code"], i))

        threads = [threading.Thread(target=put, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [i for what, i in outcomes if what == "won"]
        assert len(won) == 1, outcomes
        assert sorted(what for what, _ in outcomes if what != "won") == ["PreconditionFailed"] * 15
        body = s3.get_object(Bucket=cluster.bucket, Key=key)["Body"].read()
        assert body == f"writer {won[0]}".encode()


def test_embedded_engine_writes_replays_and_reads_back_on_s3(s3_path, dl_options):
    batches = F.feed(0)
    sink = UpsertSink(s3_path, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id="emb",
                      storage_options=dl_options)
    for i, rows in enumerate(batches):
        last = sink.write(F.arrow_batch(rows), batch_id=i)
        assert not last.skipped
    again = sink.write(F.arrow_batch(batches[1]), batch_id=1)
    assert again.skipped and again.version == last.version  # no commit
    assert sink.last_batch_id() == len(batches) - 1
    assert F.state(s3_path, dl_options) == F.expected(0)


def test_cluster_job_writes_s3_with_the_sessions_credentials_only(cluster, s3_path, dl_options, tmp_path):
    """A Spark job on the cluster: no storage_options given, deltalake's reads use the session's s3a conf."""
    result = tmp_path / "spark.jsonl"
    proc = submit(cluster, JOBS / "writer.py", "--engine", "spark",
                  *writer_args(s3_path, "job", 0, result, batches=3, send="0,1,2,1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    calls = records(result)
    assert [c["outcome"] for c in calls] == ["committed", "committed", "committed", "skipped"], calls
    assert F.state(s3_path, dl_options) == F.expected(0, batches=3)
    assert UpsertSink(s3_path, "id", app_id="job", storage_options=dl_options).last_batch_id() == 2
    # the table moves between engines: the embedded engine sees the Spark job's markers
    emb = UpsertSink(s3_path, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id="job",
                     storage_options=dl_options)
    assert emb.write(F.arrow_batch(F.feed(0, batches=3)[2]), batch_id=2).skipped


def test_a_spark_job_and_an_embedded_writer_send_one_feed_at_once(cluster, s3_path, dl_options, tmp_path):
    """The concurrent pair: both engines, one app id, the same batches at the same moment. Each batch lands
    exactly once, every call commits or is skipped (or gives up with ConcurrentWriteError), and the table is
    the model's."""
    _seed(s3_path, dl_options)
    go = tmp_path / "go"
    ready = [tmp_path / "ready-spark", tmp_path / "ready-embedded"]
    results = [tmp_path / "spark.jsonl", tmp_path / "embedded.jsonl"]
    procs = [
        spark_writer(cluster, s3_path, "pair", 0, results[0], ready=ready[0], go=go),
        embedded_writer(s3_path, "pair", 0, results[1], dl_options, ready=ready[1], go=go),
    ]
    start_together(ready, go, procs)
    finish(procs)
    calls = records(results[0]) + records(results[1])
    _judge(calls)
    _resend_gave_up(calls, s3_path, dl_options)
    per_batch = commits_per_batch(s3_path, dl_options)
    assert all(per_batch[("pair", b)] == 1 for b in range(F.BATCHES)), per_batch
    assert F.state(s3_path, dl_options) == {**F.expected(0), **SEED}


@pytest.mark.cluster_full
@pytest.mark.parametrize("run", range(2))
def test_four_writers_two_engines_with_deletes_converge(cluster, s3_path, dl_options, tmp_path, run):
    """Issue #7's concurrency scenario on S3, mixing engines, on the reliability harness's feeds: two writers (one
    per engine) share an app id and send the same feed; two more (one per engine) send feeds of their own over
    the same keys (deletes, duplicates, late and stale rows).
    Every call commits, is skipped, or raises ConcurrentWriteError; after re-sending what gave up, the table
    equals the model and every batch of every app id is in the log exactly once."""
    _seed(s3_path, dl_options)
    go = tmp_path / "go"
    plan = [  # (engine, app id, feed)
        ("spark", "shared", 0), ("embedded", "shared", 0), ("spark", "own-s", 1), ("embedded", "own-e", 2),
    ]
    ready = [tmp_path / f"ready-{i}" for i in range(len(plan))]
    results = [tmp_path / f"w{i}.jsonl" for i in range(len(plan))]
    procs = []
    for i, (engine, app_id, writer) in enumerate(plan):
        if engine == "spark":
            procs.append(spark_writer(cluster, s3_path, app_id, writer, results[i], ready=ready[i], go=go))
        else:
            procs.append(embedded_writer(s3_path, app_id, writer, results[i], dl_options, ready=ready[i], go=go))
    start_together(ready, go, procs)
    finish(procs)
    calls = [c for r in results for c in records(r)]
    _judge(calls)
    _resend_gave_up(calls, s3_path, dl_options)
    per_batch = commits_per_batch(s3_path, dl_options)
    for app_id in ("shared", "own-s", "own-e"):
        assert all(per_batch[(app_id, b)] == 1 for b in range(F.BATCHES)), (app_id, per_batch)
        last = UpsertSink(s3_path, "id", app_id=app_id, storage_options=dl_options).last_batch_id()
        assert last == F.BATCHES - 1
    assert F.state(s3_path, dl_options) == {**F.expected(0, 1, 2), **SEED}


# ---------------------------------------------------------------- odd key prefixes (issue #22)

# Spark (S3A) takes every character of a key literally; deltalake reads '#' and '?' as the start of a URL's
# fragment and query, and '%' and two hex digits as an escape. A '%' that starts no escape is a character.
ODD_NAMES = ["sp ace", "ü nïcode", "hash#tag", "q?mark", "100%", "a b#c?d 50%off"]
CDC = pa.schema([("id", pa.int64()), ("seq", pa.int64()), ("op", pa.string())])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """moto's server alone, without a Spark cluster (a Spark job here runs on local[1])."""
    run_dir = tmp_path_factory.mktemp("store")
    try:
        yield lc.start(run_dir, workers=0, spark=False)
    finally:
        lc.stop(run_dir)


def cdc_rows(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(CDC.names, r, strict=True)) for r in rows], schema=CDC)


def odd_key_scenario(path: str, frame, options: dict[str, str] | None) -> None:
    """Writes, a replay, a delete under sequence_by (a tombstone), a stale row dropped, the marker. ``frame``
    turns rows into the engine's batch. Run by the embedded engine here and by a Spark job."""
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="odd", storage_options=options)
    assert sink.write(frame([(1, 1, "U"), (2, 1, "U")]), batch_id=0).inserted == 2
    again = sink.write(frame([(1, 1, "U"), (2, 1, "U")]), batch_id=0)
    assert again.skipped and again.replay_check == "matched"
    assert sink.write(frame([(2, 5, "D")]), batch_id=1).deleted == 1
    stale = sink.write(frame([(2, 3, "U"), (3, 1, "U")]), batch_id=2)
    assert (stale.stale, stale.inserted) == (1, 1), stale
    assert sink.write(frame([(2, 5, "D")]), batch_id=1).replay_check == "matched"
    assert sink.last_batch_id() == 2


def _keys(store, prefix: str) -> list[str]:
    s3 = boto3.client("s3", endpoint_url=store.s3_endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                      region_name="us-east-1")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _check_in_place(store, run: str, name: str) -> None:
    """Every object of the table, its log and its tombstones, is under exactly ``run/name/``."""
    keys = _keys(store, f"{run}/")
    assert keys and all(k.startswith(f"{run}/{name}/") for k in keys), sorted(keys)
    assert any(k.startswith(f"{run}/{name}/_delta_log/") for k in keys)
    assert any(k.startswith(f"{run}/{name}/_upsertsink/tombstones/") for k in keys)


def _ids(path: str, options: dict[str, str]) -> list[int]:
    from upsertsink.sidecar.folder import deltalake_uri

    return sorted(DeltaTable(deltalake_uri(path), storage_options=options).to_pyarrow_table()["id"].to_pylist())


@pytest.mark.parametrize("name", ODD_NAMES)
def test_embedded_engine_takes_odd_key_prefixes_literally(store, name):
    options, run = lc.deltalake_options(store), uuid.uuid4().hex[:12]
    path = f"s3a://{store.bucket}/{run}/{name}"
    odd_key_scenario(path, cdc_rows, options)
    _check_in_place(store, run, name)
    assert _ids(path, options) == [1, 3]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_maintain_works_under_odd_key_prefixes(store, name):
    options, run = lc.deltalake_options(store), uuid.uuid4().hex[:12]
    path = f"s3a://{store.bucket}/{run}/{name}"
    odd_key_scenario(path, cdc_rows, options)
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="odd", storage_options=options)
    report = sink.maintain()
    assert [s["tombstones"] for s in report.tombstones] == [1]
    _check_in_place(store, run, name)


SPARK_JOB = """
import json, sys
sys.path.insert(0, {here!r})
import clusterlib  # noqa: F401 - puts the jobs' and scripts' folders on sys.path, as conftest does
from pyspark.sql import SparkSession
from test_objectstore import cdc_rows, odd_key_scenario

spark = SparkSession.builder.getOrCreate()
failed = {{}}
for path in json.loads(sys.argv[1]):
    try:
        odd_key_scenario(path, lambda rows: spark.createDataFrame(cdc_rows(rows).to_pandas()), None)
    except BaseException as err:  # noqa: BLE001 - reported per path
        failed[path] = f"{{type(err).__name__}}: {{err}}"
print("FAILED " + json.dumps(failed))
"""


def test_spark_engine_takes_odd_key_prefixes_literally_and_the_embedded_engine_agrees(store, tmp_path):
    """One Spark job (local[1], the store's S3A settings, no storage_options: the sink derives deltalake's
    from the session) runs the scenario for every name; the embedded engine then replays and continues."""
    run = uuid.uuid4().hex[:12]
    paths = [f"s3a://{store.bucket}/{run}-{i}/{name}" for i, name in enumerate(ODD_NAMES)]
    job = tmp_path / "odd_keys.py"
    job.write_text(SPARK_JOB.format(here=str(Path(__file__).resolve().parent)))
    cmd = lc.submit_command(store, str(job), [json.dumps(paths)], cores=1, master="local[1]")
    proc = subprocess.run(cmd, env=lc.submit_env(), cwd=str(ROOT), capture_output=True, text=True, timeout=900,
                          check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert json.loads(lines[-1].removeprefix("FAILED ")) == {}
    options = lc.deltalake_options(store)
    for i, (name, path) in enumerate(zip(ODD_NAMES, paths, strict=True)):
        _check_in_place(store, f"{run}-{i}", name)
        sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="odd",
                          storage_options=options)
        assert sink.write(cdc_rows([(2, 3, "U"), (3, 1, "U")]), batch_id=2).replay_check == "matched"
        assert sink.write(cdc_rows([(4, 1, "U")]), batch_id=3).inserted == 1
        _check_in_place(store, f"{run}-{i}", name)
        assert _ids(path, options) == [1, 3, 4]


@pytest.mark.parametrize("name", ["pct%41enc", "a%2Fb"])
def test_a_key_prefix_with_a_percent_escape_is_refused(store, name):
    run = uuid.uuid4().hex[:12]
    with pytest.raises(InvalidInputError, match=r"%..'.*decodes"):
        UpsertSink(f"s3a://{store.bucket}/{run}/{name}", "id", storage_options=lc.deltalake_options(store))
    assert _keys(store, f"{run}/") == []


# ---------------------------------------------------------------- helpers


SEED = {10_000: ("seed", 0)}  # a key no feed uses


def _seed(path: str, options: dict[str, str]) -> None:
    """Create the table first, so that the writers race on commits, not on creating the table."""
    row = {"id": 10_000, "val": "seed", "seq": 0, "op": "U"}
    UpsertSink(path, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id="seed",
               storage_options=options).write(F.arrow_batch([row]), batch_id=0)


def _judge(calls: list[dict]) -> None:
    bad = [c for c in calls if c["outcome"] not in ALLOWED or c.get("error", "ConcurrentWriteError") != "ConcurrentWriteError"]
    assert not bad, "calls that neither committed, skipped nor gave up cleanly:\n" + "\n".join(
        f"{c['engine']} {c['app_id']} batch {c['batch_id']}: {c.get('error')}: {c.get('message')}\n"
        f"{c.get('traceback', '')}" for c in bad
    )


def _resend_gave_up(calls: list[dict], path: str, options: dict[str, str]) -> None:
    """A writer that gave up stopped there (as a failed job does): re-send its feed from that batch on, in
    order, on the embedded engine (as an operator would)."""
    for c in calls:
        if c["outcome"] == "gave up":
            batches = F.feed(c["writer"])
            sink = UpsertSink(path, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id=c["app_id"],
                              storage_options=options)
            for batch_id in range(c["batch_id"], len(batches)):
                sink.write(F.arrow_batch(batches[batch_id]), batch_id=batch_id)
