"""The batch ledger of a table with many sink commits (issue #48): reading it against reading the whole history.

The table: a stream of ``--commits`` sink commits (default 100,000) of one app. The first two are real writes
of the sink (embedded engine: the table's creation, then a MERGE); every later commit is that MERGE's commit
written again as the sink writes it, one log file per version: its ``commitInfo`` (the MERGE's parameters and
metrics, a timestamp, ``readVersion``) with the sink's ``userMetadata`` built by the sink's own code (the app's
record of committed ids, ``records.Record.add``, and ``commit_log.encode_metadata``), an ``add`` of a new data file and
a ``remove`` of the previous one, and the ``txn`` marker (``upsertsink-late:<app>`` for a late batch). One id
in ``--gap-every`` is skipped (a gap; ~100 ranges in the record at the default sizes, the record's size a
real stream with that many gaps carries), and one commit in ``--late-every`` applies the oldest gap late. A
checkpoint is written every ``--checkpoint-interval`` versions' worth (the latest one at the last multiple,
as a writer with that interval leaves it), so opening the table reads that checkpoint and the commits after
it. What is read is what a real table of that history holds: the ledger never reads data files (the synthetic
``add`` entries name files that are not on disk). Writing the log directly takes a minute; 100,000 real
writes would take hours here.

Timed, each as a new process would (the process's caches of handles, markers and records dropped first),
``--repeat`` times, medians:

- the ledger's summary (``upsertsink.batches(path, detail=0)``: what ``upsertsink batches PATH`` shows);
- the ledger with ``--detail`` for the newest 50 batches (``detail=50``);
- opening the table alone (``DeltaTable(path)``), the part of both that is Delta's own;
- the whole history with deltalake (``DeltaTable(path).history()``), and with Spark (``DESCRIBE HISTORY``,
  ``--spark``: it needs the JVM and takes minutes at 100,000 commits);
- the command end to end (``upsertsink batches PATH``, a new Python process: start-up and imports included);
- once, ``--detail --all`` (every batch: O(history) by nature).

Then the same after log cleanup (the commits before the newest ``--keep`` removed; the checkpoint kept).

    .venv/bin/python bench/bench_ledger.py [--commits 100000] [--repeat 5] [--spark] [--work DIR]

Writes bench/results/ledger.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
from bench_sink import machine

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "ledger.json"
APP = "stream"


def build(path: Path, commits: int, gap_every: int, late_every: int, interval: int) -> dict:
    """The table: two real sink writes, then the rest of the stream's commits written as the sink writes them."""
    from deltalake import DeltaTable

    from upsertsink import UpsertSink
    from upsertsink.fingerprint import Fingerprint
    from upsertsink.table import commit_log, records

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("seq", pa.int64())])
    sink = UpsertSink(str(path), ["id"], sequence_by="seq", app_id=APP, late_batches="apply")
    for b in (0, 1):
        sink.write(pa.Table.from_pylist([{"id": b, "name": "x", "seq": b}], schema=schema), batch_id=b)
    log_dir = path / "_delta_log"
    lines = [json.loads(line) for line in (log_dir / f"{1:020d}.json").read_text().splitlines()]
    info = next(x["commitInfo"] for x in lines if "commitInfo" in x)
    add = next(x["add"] for x in lines if "add" in x)
    table_id = DeltaTable(str(path)).metadata().id
    record = records.Record(((0, 1),))
    previous, next_id, late_counter = add["path"], 2, -1
    gaps: list[int] = []
    late_ids: list[int] = []
    start = int(info["timestamp"])
    for v in range(2, commits):
        late = bool(late_every) and v % late_every == 0 and bool(gaps)
        if late:
            batch_id = gaps.pop(0)
            late_counter += 1
            late_ids.append(batch_id)
        else:
            if gap_every and next_id % gap_every == 0:
                gaps.append(next_id)
                next_id += 1
            batch_id, next_id = next_id, next_id + 1
        record = record.add(batch_id, late)
        extra = {**record.encode(), "read_version": v - 1, "table_id": table_id, "files_scanned": 1}
        if late:
            extra.update({"late": late_counter, "late_batch": True})
        meta = commit_log.encode_metadata(APP, batch_id, Fingerprint("upsertsink-row-hash64-v3", 20, uuid.uuid4().hex),
                                       "embedded", tombstones_version=None, write=uuid.uuid4().hex[:16], **extra)
        stamp = start + v * 1000
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        actions = [
            {"commitInfo": {**info, "timestamp": stamp, "readVersion": v - 1, "userMetadata": json.dumps(meta)}},
            {"remove": {"path": previous, "dataChange": True, "deletionTimestamp": stamp, "extendedFileMetadata": True,
                        "partitionValues": {}, "size": add["size"]}},
            {"add": {**add, "path": name, "modificationTime": stamp}},
            {"txn": {"appId": records.late_app(APP) if late else APP, "version": late_counter if late else batch_id}},
        ]
        (log_dir / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        previous = name
    checkpoint = (commits - 1) - (commits - 1) % interval
    DeltaTable(str(path), version=checkpoint).create_checkpoint()
    return {"commits": commits, "checkpoint": checkpoint, "ranges": [list(r) for r in record.ranges],
            "late": [list(r) for r in record.late], "late_ids": len(late_ids), "gaps_left": len(gaps),
            "record_bytes": len(json.dumps(record.encode())), "log_bytes": sum(f.stat().st_size for f in log_dir.iterdir())}


def fresh() -> None:
    from upsertsink.sidecar import tombstones
    from upsertsink.table import files, lineage

    files.forget_handles()
    lineage.forget()
    tombstones.forget_indexes()


def timed(fn, repeat: int) -> tuple[float, list[float], object]:
    samples, result = [], None
    for _ in range(repeat):
        fresh()
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples), samples, result


def measure(path: Path, expected: dict, repeat: int, spark, detail_all: bool) -> dict:
    from deltalake import DeltaTable

    import upsertsink

    out: dict = {}

    def row(name: str, fn, times: int = repeat) -> object:
        median, samples, result = timed(fn, times)
        out[name] = {"median_s": round(median, 4), "samples_s": [round(s, 4) for s in samples]}
        print(f"  {name:<44} {median * 1000:10.1f} ms", flush=True)
        return result

    summary = row("ledger summary (detail=0)", lambda: upsertsink.batches(str(path), detail=0))
    assert [list(r) for r in summary.committed] == expected["ranges"], "the summary is not the stream's record"
    assert [list(r) for r in summary.late] == expected["late"]
    newest = row("ledger --detail, newest 50", lambda: upsertsink.batches(str(path), detail=50))
    assert len(newest.records) == 50 and all(r.in_log for r in newest.records)
    row("open the table (DeltaTable(path))", lambda: DeltaTable(str(path)))
    history = row("deltalake history(), whole log", lambda: DeltaTable(str(path)).history())
    out["history_entries"] = len(history)
    cli = str(Path(sys.executable).with_name("upsertsink"))
    row("upsertsink batches PATH (new process)", lambda: subprocess.run([cli, "batches", str(path)], check=True,
                                                                        capture_output=True))
    row("upsertsink batches PATH --detail (new process)", lambda: subprocess.run(
        [cli, "batches", str(path), "--detail"], check=True, capture_output=True))
    if detail_all:
        everything = row("ledger --detail --all (once)", lambda: upsertsink.batches(str(path), detail="all"), 1)
        out["detail_all_in_log"] = sum(r.in_log for r in everything.records)
    if spark is not None:
        row("Spark DESCRIBE HISTORY, whole log (collect)",
            lambda: spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect(), max(1, repeat // 2))
    return out


def clean(path: Path, keep: int, checkpoint: int) -> int:
    """Delta's log cleanup: the commits before the newest ``keep`` removed (the checkpoint kept)."""
    log_dir = path / "_delta_log"
    versions = sorted(int(f.name[:20]) for f in log_dir.iterdir() if f.name.endswith(".json") and f.name[:20].isdigit())
    below = min(versions[-1] - keep + 1, checkpoint)
    removed = 0
    for v in versions:
        if v < below:
            (log_dir / f"{v:020d}.json").unlink()
            removed += 1
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--gap-every", type=int, default=997, help="one batch id in N is skipped (a gap)")
    parser.add_argument("--late-every", type=int, default=10_000, help="one commit in N applies the oldest gap late")
    parser.add_argument("--checkpoint-interval", type=int, default=100)
    parser.add_argument("--keep", type=int, default=1000, help="commits kept by the log cleanup")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--spark", action="store_true", help="time Spark's DESCRIBE HISTORY too")
    parser.add_argument("--no-detail-all", action="store_true", help="skip the one --detail --all read")
    parser.add_argument("--work", type=Path, default=None, help="where to build the table (default: a temp dir)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench_ledger_", dir=args.work))
    started = machine()
    try:
        path = work / "t"
        t = time.perf_counter()
        built = build(path, args.commits, args.gap_every, args.late_every, args.checkpoint_interval)
        built["build_s"] = round(time.perf_counter() - t, 1)
        print(f"built {args.commits} commits in {built['build_s']} s: {len(built['ranges'])} ranges, "
              f"{built['late_ids']} late batches, record {built['record_bytes']} bytes, log "
              f"{built['log_bytes'] / 2**20:.0f} MiB, checkpoint at {built['checkpoint']}", flush=True)
        spark = None
        if args.spark:
            from upsertsink import spark_session

            spark = spark_session("bench-ledger", "local[2]")
        print("the whole log:")
        whole = measure(path, built, args.repeat, spark, not args.no_detail_all)
        removed = clean(path, args.keep, built["checkpoint"])
        print(f"after log cleanup ({removed} commits removed, {args.commits - removed} kept):")
        cleaned = measure(path, built, args.repeat, spark, False)
        result = {"machine": started, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                  "settings": vars(args) | {"work": str(work), "output": str(args.output)}, "table": built,
                  "whole_log": whole, "after_cleanup": {"removed": removed, **cleaned}}
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.output}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
