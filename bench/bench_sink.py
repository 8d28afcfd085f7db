"""UpsertSink against a hand-written MERGE of the same batch on the same table, both engines, one run.

A 200k-row batch (half updates of existing keys, half new keys) into a 1M-row Delta table. Every trial
starts from a fresh copy of the same base table; raw and sink trials alternate; the median is reported.
Also measured: replaying the committed batch (the sink recognises its batch id and skips it), and
re-sending the same rows under a new batch id (a re-run backfill: nothing in the table changes), where the
raw MERGE rewrites every file holding a matched key and the sink rewrites nothing.

    .venv/bin/python bench/bench_sink.py [--rows 1000000] [--batch 200000] [--repeat 3] [--engines spark,embedded]

Prints a table and writes bench/results/sink.json. Targets: sink <= 1.15x raw; replay <= 5% of the write.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

RESULTS = Path(__file__).resolve().parent / "results" / "sink.json"


def make_table(start: int, count: int, seq: int, tag: str) -> pa.Table:
    ids = np.arange(start, start + count, dtype=np.int64)
    return pa.table({
        "id": ids,
        "customer": pa.array([f"{tag}-{i % 5000}" for i in ids]),
        "amount": (ids % 1000).astype(np.float64) * (1.5 if tag == "new" else 1.0),
        "status": pa.array(["shipped" if tag == "new" else "created"] * count),
        "seq": np.full(count, seq, dtype=np.int64),
    })


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem, 1), "python": platform.python_version(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_embedded(work: Path, base: pa.Table, batch: pa.Table, repeat: int) -> dict:
    from deltalake import DeltaTable, write_deltalake

    from upsertsink import UpsertSink

    seed = work / "emb_base"
    write_deltalake(str(seed), base)

    def fresh(name: str) -> str:
        dst = work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(seed, dst)
        return str(dst)

    def raw_merge_into(path: str) -> None:
        (DeltaTable(path).merge(batch, 't."id" = s."id"', source_alias="s", target_alias="t")
         .when_matched_update_all(predicate='s."seq" > t."seq"').when_not_matched_insert_all().execute())

    def raw() -> None:
        raw_merge_into(fresh("emb_raw"))

    sink_times, raw_times, replay_times, resend_raw, resend_sink = [], [], [], [], []
    for _ in range(repeat):
        raw_times.append(timed(raw))
        resend_raw.append(timed(lambda: raw_merge_into(str(work / "emb_raw"))))
        path = fresh("emb_sink")
        sink = UpsertSink(path, "id", sequence_by="seq", app_id="bench")
        sink_times.append(timed(lambda sink=sink: sink.write(batch, batch_id=0)))
        replay_times.append(timed(lambda sink=sink: sink.write(batch, batch_id=0)))
        resend_sink.append(timed(lambda sink=sink: sink.write(batch, batch_id=1)))
    return summarize("embedded", raw_times, sink_times, replay_times, resend_raw, resend_sink)


def bench_spark(work: Path, base: pa.Table, batch: pa.Table, repeat: int, source_kind: str = "parquet") -> dict:
    """``source_kind``: "parquet" (the batch read from a parquet file) or "cached" (a DataFrame made with
    ``spark.createDataFrame(pandas)`` and cached, as jobs that build a batch on the driver do)."""
    from delta.tables import DeltaTable

    from upsertsink import UpsertSink, spark_session

    spark = spark_session("bench-sink", "local[2]")
    seed = work / f"spark_base_{source_kind}"
    pq.write_table(base, work / "base.parquet")
    spark.read.parquet(str(work / "base.parquet")).write.format("delta").save(str(seed))
    pq.write_table(batch, work / "batch.parquet")

    def fresh(name: str) -> str:
        dst = work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(seed, dst)
        return str(dst)

    cached = None
    if source_kind == "cached":
        cached = spark.createDataFrame(batch.to_pandas()).cache()
        cached.count()

    def source():
        return cached if cached is not None else spark.read.parquet(str(work / "batch.parquet"))

    cols = ["id", "customer", "amount", "status", "seq"]

    def raw() -> None:
        path = fresh("spark_raw")
        (DeltaTable.forPath(spark, path).alias("t").merge(source().alias("s"), "t.id = s.id")
         .whenMatchedUpdate(condition="s.seq > t.seq", set={c: f"s.{c}" for c in cols if c != "id"})
         .whenNotMatchedInsertAll().execute())

    # warm-up of both paths: JIT and Delta's first-use costs go to neither side
    raw()
    UpsertSink(fresh("spark_warm"), "id", sequence_by="seq", app_id="warm").write(source(), batch_id=0)
    def raw_merge_into(path: str) -> None:
        (DeltaTable.forPath(spark, path).alias("t").merge(source().alias("s"), "t.id = s.id")
         .whenMatchedUpdate(condition="s.seq > t.seq", set={c: f"s.{c}" for c in cols if c != "id"})
         .whenNotMatchedInsertAll().execute())

    sink_times, raw_times, replay_times, resend_raw, resend_sink = [], [], [], [], []
    for _ in range(repeat):
        raw_times.append(timed(raw))
        # the same rows sent again (a re-run backfill, new batch id): nothing changes in the table
        resend_raw.append(timed(lambda: raw_merge_into(str(work / "spark_raw"))))
        path = fresh("spark_sink")
        sink = UpsertSink(path, "id", sequence_by="seq", app_id="bench")
        sink_times.append(timed(lambda sink=sink: sink.write(source(), batch_id=0)))
        replay_times.append(timed(lambda sink=sink: sink.write(source(), batch_id=0)))
        resend_sink.append(timed(lambda sink=sink: sink.write(source(), batch_id=1)))
    if cached is not None:
        cached.unpersist()
    return summarize("spark" if source_kind == "parquet" else "spark-cached", raw_times, sink_times, replay_times, resend_raw, resend_sink)


def summarize(engine: str, raw: list[float], sink: list[float], replay: list[float],
              resend_raw: list[float], resend_sink: list[float]) -> dict:
    r, s, p = statistics.median(raw), statistics.median(sink), statistics.median(replay)
    rr, rs = statistics.median(resend_raw), statistics.median(resend_sink)
    return {
        "engine": engine, "raw_merge_s": round(r, 3), "sink_write_s": round(s, 3), "replay_s": round(p, 3),
        "sink_over_raw": round(s / r, 3), "replay_over_write": round(p / s, 4),
        "resend_raw_merge_s": round(rr, 3), "resend_sink_s": round(rs, 3), "resend_sink_over_raw": round(rs / rr, 3),
        "samples": {"raw": [round(x, 3) for x in raw], "sink": [round(x, 3) for x in sink],
                    "replay": [round(x, 3) for x in replay], "resend_raw": [round(x, 3) for x in resend_raw],
                    "resend_sink": [round(x, 3) for x in resend_sink]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="embedded,spark,spark-cached",
                    help="embedded, spark (batch from parquet), spark-cached (batch from a cached createDataFrame)")
    args = ap.parse_args()

    base = make_table(0, args.rows, 1, "old")
    half = args.batch // 2
    batch = make_table(args.rows - half, args.batch, 2, "new")  # half existing keys, half new ones
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-sink-") as tmp:
        for engine in args.engines.split(","):
            if engine == "embedded":
                results.append(bench_embedded(Path(tmp), base, batch, args.repeat))
            else:
                kind = "cached" if engine == "spark-cached" else "parquet"
                results.append(bench_spark(Path(tmp), base, batch, args.repeat, kind))

    from rich.console import Console
    from rich.table import Table

    table = Table("engine", "raw MERGE s", "sink s", "sink/raw (<=1.15)", "replay s", "replay/write (<=0.05)",
                  "re-send: raw s", "re-send: sink s")
    for r in results:
        table.add_row(r["engine"], f"{r['raw_merge_s']:.2f}", f"{r['sink_write_s']:.2f}", f"{r['sink_over_raw']:.2f}",
                      f"{r['replay_s']:.3f}", f"{r['replay_over_write']:.3f}", f"{r['resend_raw_merge_s']:.2f}",
                      f"{r['resend_sink_s']:.2f}")
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "sink", "table_rows": args.rows, "batch_rows": args.batch, "repeat": args.repeat,
        "machine": machine(), "results": results,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
