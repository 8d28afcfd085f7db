"""A Spark job with batches big enough to spread over both workers: for the worker-loss test and the figures.

    spark-submit ... bigwrite.py TARGET --rows N [--batches 3] [--progress FILE] [--result FILE]

Batch b holds ids ``b*N/3 .. b*N/3 + N - 1`` (consecutive batches overlap by two thirds), every column
computed from (id, b); in the last batch every 17th id is a delete. ``expected()`` is the table that any
sequence of complete re-sends converges to.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

APP_ID = "bigwrite"


def batch_range(b: int, rows: int) -> tuple[int, int]:
    start = b * (rows // 3)
    return start, start + rows


def expected(rows: int, batches: int):
    """id -> (name, amount, seq) of the converged table, as a pandas DataFrame sorted by id."""
    import numpy as np
    import pandas as pd

    last = {}
    for b in range(batches):
        lo, hi = batch_range(b, rows)
        ids = np.arange(lo, hi)
        last.update(dict.fromkeys(ids.tolist(), b))
    ids = np.array(sorted(last))
    seq = np.array([last[i] for i in ids])
    keep = ~((seq == batches - 1) & (ids % 17 == 0))
    ids, seq = ids[keep], seq[keep]
    return pd.DataFrame({
        "id": ids, "name": [f"n{i % 1000}-b{s}" for i, s in zip(ids, seq, strict=True)],
        "amount": (ids % 997) * 1.5 + seq, "seq": seq,
    })


def frame(spark, b: int, rows: int, batches: int):
    from pyspark.sql import functions as F

    lo, hi = batch_range(b, rows)
    df = spark.range(lo, hi, numPartitions=8)
    return df.select(
        F.col("id"),
        F.concat(F.lit("n"), (F.col("id") % 1000).cast("string"), F.lit(f"-b{b}")).alias("name"),
        ((F.col("id") % 997) * 1.5 + F.lit(b)).alias("amount"),
        F.lit(b).cast("long").alias("seq"),
        F.when((F.lit(b) == batches - 1) & (F.col("id") % 17 == 0), "D").otherwise("U").alias("op"),
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--progress", default="")
    parser.add_argument("--result", default="")
    args = parser.parse_args()

    import upsertsink
    from upsertsink import UpsertSink

    spark = upsertsink.spark_session("bigwrite")
    sink = UpsertSink(args.target, "id", sequence_by="seq", delete_when="op = 'D'", app_id=APP_ID)
    status = 0
    for b in range(args.batches):
        if args.progress:
            Path(args.progress).write_text(f"batch {b}")
        started = time.monotonic()
        record = {"batch_id": b}
        try:
            r = sink.write(frame(spark, b, args.rows, args.batches), batch_id=b)
            record.update(outcome="skipped" if r.skipped else "committed", inserted=r.inserted,
                          updated=r.updated, deleted=r.deleted, version=r.version)
        except Exception as err:  # noqa: BLE001  (the test judges what a caller saw)
            record.update(outcome="error", error=type(err).__name__, message=str(err)[:3000],
                          traceback=traceback.format_exc()[-6000:])
            status = 3
        record["seconds"] = round(time.monotonic() - started, 3)
        if args.result:
            with open(args.result, "a") as out:
                out.write(json.dumps(record) + "\n")
        if status:
            break
    spark.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
