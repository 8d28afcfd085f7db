"""Benchmark: upsertsink.diff of two equal 5M-row Delta tables, and of two that differ in 1% of rows,
against a plain Spark count() of both tables, measured side by side in one run.

    .venv/bin/python bench/bench_diff.py [--rows 5000000] [--repeat 3] [--workdir /tmp/upsertsink-bench-diff]

Prints a table and writes bench/results/diff.json. The tables are generated once per row count and reused.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "diff.json"


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_gib() -> float:
    with open("/proc/meminfo") as f:
        kb = int(f.readline().split()[1])
    return round(kb / 1024 / 1024, 1)


def make_tables(spark, root: Path, rows: int) -> dict[str, str]:
    from pyspark.sql import functions as F

    paths = {name: str(root / f"{name}_{rows}") for name in ("a", "b", "c")}
    if all(os.path.isdir(os.path.join(p, "_delta_log")) for p in paths.values()):
        return paths
    base = spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("customer-"), (F.col("id") % 50_000).cast("string")).alias("customer"),
        ((F.col("id") * 7919) % 100_000 / 100.0).alias("amount"),
        (F.col("id") % 17).cast("int").alias("qty"),
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("day"),
    )
    # a: written in id order; b: the same rows in another order and file layout; c: 1% of rows changed
    base.repartition(4).sortWithinPartitions("id").write.format("delta").mode("overwrite").save(paths["a"])
    base.repartition(5, F.col("customer")).write.format("delta").mode("overwrite").save(paths["b"])
    changed = base.withColumn(
        "amount", F.when(F.col("id") % 100 == 0, F.col("amount") + 1).otherwise(F.col("amount"))
    )
    changed.repartition(4).write.format("delta").mode("overwrite").save(paths["c"])
    return paths


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/upsertsink-bench-diff")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--output", default=str(RESULTS))
    args = ap.parse_args()

    from pyspark.sql import functions as F

    import upsertsink
    from upsertsink import spark_session

    spark = spark_session(
        "upsertsink-bench-diff",
        "local[2]",
        **{"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "4"},
    )
    root = Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    t_gen, paths = timed(lambda: make_tables(spark, root, args.rows))
    print(f"tables ready in {t_gen:.1f}s: {paths}")

    def read(name: str):
        return spark.read.format("delta").load(paths[name])

    phases: dict[str, list[float]] = {}

    def diff(left: str, right: str):
        marks: list[tuple[str, float]] = []
        start = time.perf_counter()
        result = upsertsink.diff(
            paths[left], paths[right], "id", engine="spark",
            progress=lambda msg: marks.append((msg, time.perf_counter() - start)),
        )  # fmt: skip
        total = time.perf_counter() - start
        bounds = [*marks, ("end", total)]
        for (msg, t0), (_, t1) in itertools.pairwise(bounds):
            phases.setdefault(f"{left}-{right}: {msg}", []).append(t1 - t0)
        return result

    cases = {
        "count() of both tables": lambda: (read("a").count(), read("b").count()),
        "scan sum(amount) of both tables": lambda: (
            read("a").agg(F.sum("amount")).first(),
            read("b").agg(F.sum("amount")).first(),
        ),
        "diff, equal tables": lambda: diff("a", "b"),
        "diff, 1% of rows differ": lambda: diff("a", "c"),
    }
    load_start = os.getloadavg()
    for fn in cases.values():  # warm-up: JIT, Delta snapshots, file listing
        fn()
    phases.clear()
    times: dict[str, list[float]] = {name: [] for name in cases}
    outputs: dict[str, object] = {}
    for _ in range(args.repeat):
        for name, fn in cases.items():  # interleaved, so drift hits every case alike
            t, outputs[name] = timed(fn)
            times[name].append(t)

    eq, ne = outputs["diff, equal tables"], outputs["diff, 1% of rows differ"]
    assert eq.equal and eq.fingerprint_match, eq.summary()
    assert not ne.equal and ne.changed == (args.rows + 99) // 100, ne.summary()
    base = statistics.median(times["count() of both tables"])
    rows = []
    print(f"\n{args.rows:,} rows per table, local[2], median of {args.repeat}")
    print(f"{'case':<34} {'median s':>9} {'min s':>7} {'x count':>8}")
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"case": name, "median_s": round(med, 3), "min_s": round(min(ts), 3),
                     "runs_s": [round(t, 3) for t in ts], "ratio_to_count": round(med / base, 2)})  # fmt: skip
        print(f"{name:<34} {med:>9.2f} {min(ts):>7.2f} {med / base:>7.2f}x")
    phase_rows = {k: round(statistics.median(v), 3) for k, v in phases.items()}
    print("\nphases of diff (median s):")
    for k, v in phase_rows.items():
        print(f"  {k:<48} {v:>7.2f}")
    ratio = statistics.median(times["diff, equal tables"]) / base
    print(
        f"\nequal-case ratio {ratio:.2f}x the count (target <= 1.5x): {'met' if ratio <= 1.5 else 'NOT met'}"
    )
    load_end = os.getloadavg()
    print(f"load average (1, 5, 15 min) at start {load_start}, at end {load_end}")
    report = {
        "benchmark": "diff",
        "rows": args.rows,
        "repeat": args.repeat,
        "master": "local[2]",
        "driver_memory": args.driver_memory,
        "machine": {"cpus": os.cpu_count(), "cpu_model": cpu_model(), "memory_gib": mem_gib()},
        "load_average_start": load_start,
        "load_average_end": load_end,
        "versions": {
            "pyspark": spark.version,
            "upsertsink": version("upsertsink"),
            "delta-spark": version("delta-spark"),
        },
        "cases": rows,
        "diff_phases_median_s": phase_rows,
        "equal_ratio_to_count": round(ratio, 2),
        "target_ratio": 1.5,
        "target_met": ratio <= 1.5,
        "summary_equal": eq.summary(),
        "summary_1pct": ne.summary(),
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    spark.stop()


if __name__ == "__main__":
    main()
