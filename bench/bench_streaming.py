"""Streaming micro-batches on Spark: UpsertSink against a hand-written idempotent MERGE, batch by batch.

Successive batches of 1,000 rows (half updates of existing keys in one narrow range, half new keys, with a
sequence column) into a 1,000,000-row Delta table written in 8 files with keys in order (range-partitioned, as a table appended over time is), as a Structured
Streaming ``foreachBatch`` would send them. The raw side is the MERGE a careful user writes by hand: sequence
rule in the update condition, and Delta's own idempotent-write settings ``txnAppId``/``txnVersion`` on a
session of its own. Raw and sink batches alternate on two copies of the table; medians are reported.

    .venv/bin/python bench/bench_streaming.py [--rows 1000000] [--batch 1000] [--batches 8]

Prints a table and writes bench/results/streaming.json. Target: sink <= 1.2x the hand-written MERGE.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_sink import machine

RESULTS = Path(__file__).resolve().parent / "results" / "streaming.json"


def batch_table(rows: int, b: int, size: int) -> pa.Table:
    half = size // 2
    updates = np.arange(rows // 2 + b * half, rows // 2 + (b + 1) * half)  # one narrow range of existing keys
    inserts = np.arange(rows + b * half, rows + (b + 1) * half)  # new keys beyond the end
    ids = np.concatenate([updates, inserts]).astype(np.int64)
    return pa.table({
        "id": ids, "customer": pa.array([f"c-{i % 5000}" for i in ids]), "amount": (ids % 997).astype(np.float64),
        "status": pa.array(["updated"] * size), "seq": np.full(size, 2 + b, dtype=np.int64),
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=8)
    args = ap.parse_args()

    from delta.tables import DeltaTable

    from upsertsink import UpsertSink, spark_session

    spark = spark_session("bench-streaming", "local[2]")
    raw_session = spark.newSession()
    cols = ["id", "customer", "amount", "status", "seq"]
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as tmp:
        work = Path(tmp)
        ids = np.arange(args.rows, dtype=np.int64)
        pq.write_table(pa.table({
            "id": ids, "customer": pa.array([f"c-{i % 5000}" for i in ids]), "amount": (ids % 997).astype(np.float64),
            "status": pa.array(["created"] * args.rows), "seq": np.ones(args.rows, dtype=np.int64),
        }), work / "base.parquet")
        base = work / "base"
        spark.read.parquet(str(work / "base.parquet")).repartitionByRange(8, "id").sortWithinPartitions("id") \
            .write.format("delta").save(str(base))
        raw_path, sink_path = work / "raw", work / "sink"
        shutil.copytree(base, raw_path)
        shutil.copytree(base, sink_path)
        sink = UpsertSink(str(sink_path), "id", sequence_by="seq", app_id="bench-stream")

        def raw(df, batch_id: int) -> None:
            raw_session.conf.set("spark.databricks.delta.write.txnAppId", "bench-raw")
            raw_session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            (DeltaTable.forPath(raw_session, str(raw_path)).alias("t").merge(df.alias("s"), "t.id = s.id")
             .whenMatchedUpdate(condition="s.seq > t.seq", set={c: f"s.{c}" for c in cols if c != "id"})
             .whenNotMatchedInsertAll().execute())

        for b in range(-1, args.batches):  # batch -1 warms both paths up and is not counted
            data = batch_table(args.rows, b + 1, args.batch)
            pq.write_table(data, work / f"b{b}.parquet")
            for side in (("raw", "sink") if b % 2 else ("sink", "raw")):
                session = raw_session if side == "raw" else spark
                df = session.read.parquet(str(work / f"b{b}.parquet"))
                t = time.perf_counter()
                if side == "raw":
                    raw(df, b + 1)
                else:
                    sink.write(df, batch_id=b + 1)
                if b >= 0:
                    times[side].append(time.perf_counter() - t)
        assert spark.read.format("delta").load(str(sink_path)).count() == \
            spark.read.format("delta").load(str(raw_path)).count()
    spark.stop()
    raw_m, sink_m = statistics.median(times["raw"]), statistics.median(times["sink"])
    result = {
        "benchmark": "streaming", "table_rows": args.rows, "batch_rows": args.batch, "batches": args.batches,
        "machine": machine(), "raw_merge_median_s": round(raw_m, 3), "sink_median_s": round(sink_m, 3),
        "sink_over_raw": round(sink_m / raw_m, 3),
        "samples": {k: [round(x, 3) for x in v] for k, v in times.items()},
    }
    from rich.console import Console
    from rich.table import Table

    table = Table("batches", "hand-written MERGE + txn, median s", "sink, median s", "sink/raw (<=1.2)")
    table.add_row(str(args.batches), f"{raw_m:.2f}", f"{sink_m:.2f}", f"{sink_m / raw_m:.2f}")
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
