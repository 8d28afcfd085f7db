"""A micro-batch against the raw idempotent MERGE of the same batch, both engines (issue #20's target: <= 1.3x).

For each engine, batch size (20 and 1,000 rows, 10% deletes) and table size (5k and 1M keys), two copies of
one table; after warm-up batches, raw and sink batches alternate (the same batches, in the same order, one to
each copy) and the medians are compared. The raw side is each engine's hand-written MERGE with its own
idempotence marker (``stream_common.py``).

    .venv/bin/python bench/bench_microbatch.py [--engines embedded,spark] [--batches 40] [--warmup 5]
                                               [--sizes 20,1000] [--tables 5000,1000000]

Prints a table and writes bench/results/microbatch.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_sink import machine
from stream_common import Feed, RawEmbedded, RawSpark, make_tables, sink_for

RESULTS = Path(__file__).resolve().parent / "results" / "microbatch.json"


def run(engine: str, keys: int, size: int, batches: int, warmup: int, work: Path, spark=None) -> dict:
    raw_path, sink_path = make_tables(work, keys, engine, spark)
    raw = RawSpark(spark, raw_path) if engine == "spark" else RawEmbedded(raw_path)
    sink = sink_for(sink_path)
    feed = Feed(keys, size)
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    for b in range(warmup + batches):
        data = feed.batch(b)
        order = ("raw", "sink") if b % 2 else ("sink", "raw")
        for side in order:
            frame = data
            if engine == "spark":
                frame = raw.frame(data) if side == "raw" else spark.createDataFrame(data)
            t = time.perf_counter()
            if side == "raw":
                raw.write(frame, b)
            else:
                sink.write(frame, batch_id=b)
            if b >= warmup:
                times[side].append(time.perf_counter() - t)
    r, s = statistics.median(times["raw"]), statistics.median(times["sink"])
    return {"engine": engine, "table_keys": keys, "batch_rows": size, "raw_median_s": round(r, 4),
            "sink_median_s": round(s, 4), "sink_over_raw": round(s / r, 3),
            "samples": {k: [round(x, 4) for x in v] for k, v in times.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="embedded,spark")
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--sizes", default="20,1000")
    ap.add_argument("--tables", default="5000,1000000")
    args = ap.parse_args()
    start = machine()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-microbatch-") as tmp:
        for engine in args.engines.split(","):
            spark = None
            if engine == "spark":
                from upsertsink import spark_session

                spark = spark_session("bench-microbatch", "local[2]")
            for keys in (int(k) for k in args.tables.split(",")):
                for size in (int(s) for s in args.sizes.split(",")):
                    result = run(engine, keys, size, args.batches, args.warmup, Path(tmp), spark)
                    print(json.dumps({k: v for k, v in result.items() if k != "samples"}), flush=True)
                    results.append(result)

    from rich.console import Console
    from rich.table import Table

    table = Table("engine", "table keys", "batch rows", "raw MERGE ms", "sink ms", "sink/raw (<=1.3)")
    for r in results:
        table.add_row(r["engine"], f"{r['table_keys']:,}", str(r["batch_rows"]), f"{r['raw_median_s'] * 1000:.1f}",
                      f"{r['sink_median_s'] * 1000:.1f}", f"{r['sink_over_raw']:.2f}")
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "microbatch", "machine": start, "batches": args.batches,
                                   "warmup": args.warmup, "results": results}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
