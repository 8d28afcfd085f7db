"""Issue #44, item 7: a full disk never loses a re-sent batch.

The table lives on a small tmpfs; before each write a ballast file leaves 0-80 KB free, so writes fail with
ENOSPC at any step (the data files, the sink's files beside the table, the log). A failed write must be a
``WriteFailedError`` (or a conflict), and once space is freed, sending the batch again must converge to the
model: no key lost, none doubled, every batch recorded once. Many seeds, both engines.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid

import pytest
from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch, model, table_state

from upsertsink import ConcurrentWriteError, UpsertSink, WriteFailedError
from upsertsink.sidecar import tombstones
from upsertsink.table import files, lineage

SIZE = "6m"


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs mounted for the test (root is needed to mount it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def feed(seed: int, batches: int = 6, keys: int = 300) -> list[list[dict]]:
    """Batches touching most of ``keys`` keys each: updates with values of varied size, some deletes."""
    rng = random.Random(seed)
    out = []
    for b in range(batches):
        rows = [{"id": k, "val": f"{b}-" + "v" * rng.randint(5, 300), "seq": b * 10 + 1,
                 "op": "D" if rng.random() < 0.1 else "U"} for k in range(keys) if rng.random() < 0.7]
        out.append(rows)
    return out


def fill(disk, ballast, free_kb: int) -> None:
    if ballast.exists():
        ballast.unlink()
    stat = os.statvfs(disk)
    size = max(0, stat.f_bavail * stat.f_frsize - free_kb * 1024)
    with open(ballast, "wb") as f:
        f.write(b"\0" * size)


def run_feed(disk, seed: int, frame) -> tuple[list[list[dict]], int]:
    data = feed(seed)
    rng = random.Random(seed * 7919)
    path = str(disk / f"t-{uuid.uuid4().hex[:6]}")
    ballast = disk / "ballast"
    sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="disk")
    failed = 0
    for i, rows in enumerate(data):
        fill(disk, ballast, rng.randint(0, 80))
        try:
            sink.write(frame(rows), batch_id=i)
        except (WriteFailedError, ConcurrentWriteError):
            failed += 1
        finally:
            ballast.unlink()
        if rng.random() < 0.3:  # sometimes a new process does the re-send
            files.forget_handles()
            lineage.forget()
            tombstones.forget_indexes()
        for attempt in range(3):  # the re-send, with space: converges (a skip when the failed write committed)
            try:
                sink.write(frame(rows), batch_id=i)
                break
            except ConcurrentWriteError:
                continue
    assert table_state(path) == model(data), f"seed {seed}"
    assert sink.last_batch_id() == len(data) - 1
    shutil.rmtree(path)  # room for the next seed
    return data, failed


def test_embedded_writes_on_a_full_disk_converge_when_resent(small_disk):
    failures = sum(run_feed(small_disk, seed, arrow_batch)[1] for seed in range(16))
    assert failures >= 8  # the disk did run full, many times


@pytest.mark.spark
def test_spark_writes_on_a_full_disk_converge_when_resent(spark, small_disk):
    failures = sum(run_feed(small_disk, seed, lambda rows: spark.createDataFrame(arrow_batch(rows)))[1]
                   for seed in range(100, 104))
    assert failures >= 2
