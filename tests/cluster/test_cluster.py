"""The standalone cluster: the examples give local[*]'s tables, a lost worker never corrupts a table, and
delta-spark's commits on S3 refuse a taken version."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import bigwrite
import localcluster as lc
import pytest
from clusterlib import JOBS, ROOT, records, submit
from deltalake import DeltaTable

pytestmark = pytest.mark.cluster_full

EXAMPLE = ROOT / "examples" / "orders_change_feed.py"


def rows(path: str, options: dict[str, str] | None = None) -> list[tuple]:
    df = DeltaTable(path, storage_options=options).to_pandas()
    return sorted(df.itertuples(index=False, name=None))


def test_orders_example_on_the_cluster_equals_local(cluster, tmp_path, s3_path, dl_options):
    """The README's example, submitted to the cluster (local disk and S3) and run on local[*]: one table."""
    local = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "local")], cwd=ROOT, capture_output=True,
                           text=True, timeout=900, check=False)
    assert local.returncode == 0, local.stdout + local.stderr
    on_disk = submit(cluster, EXAMPLE, str(tmp_path / "cluster"))
    assert on_disk.returncode == 0, on_disk.stdout[-3000:] + on_disk.stderr[-5000:]
    # On S3 nothing but the job's s3a conf is given: the sink and the example's diff derive deltalake's options.
    on_s3 = submit(cluster, EXAMPLE, s3_path)
    assert on_s3.returncode == 0, on_s3.stdout[-3000:] + on_s3.stderr[-5000:]
    for proc in (local, on_disk, on_s3):
        assert "identical" in proc.stdout and "last committed batch id for app 'orders-cdc': 4" in proc.stdout
    expected = rows(str(tmp_path / "local"))
    assert len(expected) == 9  # orders 1..10, order 8 deleted
    assert rows(str(tmp_path / "cluster")) == expected
    assert rows(s3_path, dl_options) == expected


def test_delta_spark_on_s3_refuses_a_taken_commit_version(cluster, s3_path):
    """upsertsink's LogStore turns S3's 412 into FileAlreadyExistsException (Delta then re-reads the log and
    retries), and the first writer's commit stays as it was."""
    proc = submit(cluster, JOBS / "logstore_probe.py", s3_path, cores=1)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE "))
    report = json.loads(line.removeprefix("PROBE "))
    assert report["upsertsink"] == {
        "first": "written", "second": "java.nio.file.FileAlreadyExistsException", "stored": ['{"writer":"first"}'],
    }


def test_a_worker_killed_mid_write_then_a_resend_converges(cluster, tmp_path, s3_path, dl_options):
    """SIGKILL one worker (and its executor) while a 3-batch job writes to S3. The job completes (Spark reran
    the lost tasks) or its write fails with an error naming the lost executor; the table is never half-written,
    and re-sending every batch gives the table of an uninterrupted run."""
    rows_per_batch = 300_000
    progress, result = tmp_path / "progress", tmp_path / "first.jsonl"
    job = submit(cluster, JOBS / "bigwrite.py", s3_path, "--rows", str(rows_per_batch), "--progress",
                 str(progress), "--result", str(result), wait=False)
    try:
        deadline = time.monotonic() + 600
        while not (progress.exists() and progress.read_text() == "batch 1"):
            assert job.poll() is None, job.communicate()[0][-5000:]
            assert time.monotonic() < deadline, "the job never reached batch 1"
            time.sleep(0.2)
        time.sleep(3)  # inside batch 1's write: preparing, checkpointing or merging
        lc.kill_worker(Path(cluster.dir), "worker-1")
        out, _ = job.communicate(timeout=900)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    first = records(result)
    assert [r["outcome"] for r in first[:1]] == ["committed"], first
    if job.returncode != 0:
        failed = first[-1]
        assert failed["outcome"] == "error", (first, out[-3000:])
        text = failed["message"] + failed["traceback"]
        assert any(word in text for word in ("executor", "Executor", "lost", "Lost", "checkpoint")), text[-3000:]
    # the log holds whole commits only: every version is a complete, readable snapshot
    table = DeltaTable(s3_path, storage_options=dl_options)
    for version in range(table.version() + 1):
        DeltaTable(s3_path, version=version, storage_options=dl_options).to_pyarrow_table(columns=["id"])

    lc.restart_worker(Path(cluster.dir), "worker-1")
    again = submit(cluster, JOBS / "bigwrite.py", s3_path, "--rows", str(rows_per_batch),
                   "--result", str(tmp_path / "resend.jsonl"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    resend = records(tmp_path / "resend.jsonl")
    assert all(r["outcome"] in ("committed", "skipped") for r in resend), resend
    got = DeltaTable(s3_path, storage_options=dl_options).to_pandas(columns=["id", "name", "amount", "seq"])
    got = got.sort_values("id").reset_index(drop=True)
    want = bigwrite.expected(rows_per_batch, 3)
    assert got["id"].is_unique
    assert got["id"].tolist() == want["id"].tolist()
    assert got["name"].tolist() == want["name"].tolist()
    assert got["seq"].tolist() == want["seq"].tolist()
    assert (got["amount"] - want["amount"]).abs().max() < 1e-9
    error = f"{first[-1].get('error')}: {first[-1].get('message', '')[:600]}" if job.returncode else ""
    print(f"worker-loss run: first job exit {job.returncode}; outcomes {[r['outcome'] for r in first]} {error}; "
          f"resend {[r['outcome'] for r in resend]}")


CONNECT_JOB = '''
import json, sys
from upsertsink import UpsertSink, spark_session
spark = spark_session(remote=sys.argv[1])
sink = UpsertSink(sys.argv[2], "id", sequence_by="seq", delete_when="op = 'D'", app_id="connect-job")
schema = "id long, v string, seq long, op string"
out = [sink.write(spark.createDataFrame([(1, "a", 1, "U"), (2, "b", 1, "U")], schema), batch_id=0).inserted,
       sink.write(spark.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], schema), batch_id=1).deleted,
       sink.write(spark.createDataFrame([(2, None, 2, "D"), (3, "c", 2, "U")], schema), batch_id=1).skipped,
       sink.write(spark.createDataFrame([(2, "old", 1, "U")], schema), batch_id=2).stale,
       sink.last_batch_id()]
print("RESULT " + json.dumps(out))
'''


def test_a_connect_client_writes_on_s3_through_the_server_in_front_of_the_cluster(cluster, s3_path, dl_options):
    """`make cluster`'s Connect server: a client process with no JVM writes, replays and deletes on S3 (the
    server's S3A settings reach the sink's deltalake reads through the session's spark.hadoop.* settings)."""
    lc.start_connect(cluster)
    try:
        assert cluster.connect_url.startswith("sc://")
        done = subprocess.run([sys.executable, "-c", CONNECT_JOB, cluster.connect_url, s3_path],
                              capture_output=True, text=True, timeout=600, check=False)
    finally:
        lc.stop_connect(cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT ")).removeprefix("RESULT "))
    assert result == [2, 1, True, 1, 2]
    assert [r[0] for r in rows(s3_path, dl_options)] == [1, 3]
