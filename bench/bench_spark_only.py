"""Spark statements and wall time of small writes in Spark-only mode (a table by name, ``file_access=False``).

    python bench/bench_spark_only.py [--rows 20] [--writes 8] [--connect] [--log]

Every Spark round trip the sink makes from Python is counted: ``spark.sql``, ``spark.table``, DataFrame
actions (collect, toArrow, ...), writer saves and catalog look-ups. A seed write creates the table and its
tombstone table first; then ``--writes`` batches of ``--rows`` rows (an upsert of new keys, an update and a
delete each) are timed. Prints per-write counts by kind and the median time; note the load average.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import tempfile
import time
import traceback
import uuid

COUNTS: collections.Counter = collections.Counter()
LOG = False


def _wrap(cls, name, kind):
    fn = getattr(cls, name)

    @functools.wraps(fn)
    def inner(*a, **k):
        COUNTS[kind] += 1
        start = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            if LOG:
                where = [f for f in traceback.extract_stack()[:-1] if "/upsertsink/" in f.filename][-1:]
                text = a[1] if kind == "sql" and len(a) > 1 else ""
                print(f"  {kind:<12} {str(text)[:60]:<60} {where[0].name if where else ''} "
                      f"{time.perf_counter() - start:.3f} s")

    setattr(cls, name, inner)


def instrument(connect: bool) -> None:
    if connect:
        from pyspark.sql.connect.catalog import Catalog
        from pyspark.sql.connect.dataframe import DataFrame
        from pyspark.sql.connect.readwriter import DataFrameWriter
        from pyspark.sql.connect.session import SparkSession
    else:
        from pyspark.sql.catalog import Catalog
        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.readwriter import DataFrameWriter
        from pyspark.sql.session import SparkSession
    _wrap(SparkSession, "sql", "sql")
    _wrap(SparkSession, "table", "table")
    _wrap(SparkSession, "createDataFrame", "createDF")
    for action in ("collect", "toArrow", "toPandas", "first", "count", "take", "head"):
        _wrap(DataFrame, action, "action")
    for action in ("save", "saveAsTable"):
        _wrap(DataFrameWriter, action, "write")
    _wrap(Catalog, "tableExists", "tableExists")


def main() -> None:
    global LOG
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--writes", type=int, default=8)
    p.add_argument("--connect", action="store_true")
    p.add_argument("--log", action="store_true")
    args = p.parse_args()
    from upsertsink import UpsertSink, spark_session

    spark = spark_session("bench-spark-only", "local[2]", connect=args.connect,
                          **{"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2"})
    instrument(args.connect)
    where = tempfile.mkdtemp(prefix="bench_so_")
    schema = f"bso_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {schema} LOCATION '{where}'")
    name = f"{schema}.t"
    cols = "id long, v string, seq long, op string"
    sink = UpsertSink.for_table(name, keys="id", sequence_by="seq", delete_when="op = 'D'", file_access=False)
    n = args.rows
    sink.write(spark.createDataFrame([(i, "a", 1, "U") for i in range(n)] + [(10**6, None, 1, "D")], cols), batch_id=0)
    times, per = [], []
    for b in range(1, args.writes + 1):
        rows = [(b * n + i, "n", b + 1, "U") for i in range(n - 2)]
        rows += [(b - 1, f"u{b}", b + 1, "U"), (b * n - 1, None, b + 1, "D")]  # an update and a delete
        df = spark.createDataFrame(rows, cols)
        COUNTS.clear()
        LOG = args.log and b == args.writes
        if LOG:
            print(f"statements of write {b}:")
        start = time.perf_counter()
        sink.write(df, batch_id=b)
        times.append(time.perf_counter() - start)
        per.append(dict(COUNTS))
        LOG = False
    last = per[-1]
    print(f"rows {n}, {'connect' if args.connect else 'classic'}: statements per write {sum(last.values())} "
          f"{dict(sorted(last.items()))}; median {statistics.median(times):.2f} s (min {min(times):.2f}, "
          f"max {max(times):.2f}) over {len(times)} writes; load {os.getloadavg()[0]:.2f}")
    spark.sql(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
