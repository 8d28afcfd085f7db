"""Cost follows the batch, not the table: write time against table size, both engines, raw MERGE and sink.

A fixed batch (default 10,000 rows: half updates of existing keys, half new keys) is written into tables of
1M, 4M and 16M rows, written in 1M-row files with keys in order. Raw MERGE and sink run side by side on fresh
copies of the same table, alternating; medians of --repeat trials. Three batch/table shapes:

- ``clustered``: the updates fall in one narrow key range (recent keys), the inserts are new keys;
- ``random``: the updates are spread at random over the whole key range, so every file holds one;
- ``unclustered``: clustered updates, but into a table whose files each hold keys from the whole range (as
  appends of unsorted data leave it) -- measured before and after ``OPTIMIZE ZORDER BY (id)``.

    .venv/bin/python bench/bench_scaling.py [--sizes 1,4,16] [--batch 10000] [--repeat 3] [--engines embedded,spark]

Prints a table, writes bench/results/scaling.json and draws docs/img/scaling.png (matplotlib). Targets, for
clustered keys: the 16M-row write takes at most 1.5x the 1M-row write, and the sink is never slower than 1.2x
the raw MERGE at any size.
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
from bench_sink import machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "scaling.json"
PLOT = ROOT / "docs" / "img" / "scaling.png"
FILE_ROWS = 1_000_000


def rows(ids: np.ndarray, seq: int, tag: str) -> pa.Table:
    return pa.table({
        "id": ids.astype(np.int64), "customer": pa.array([f"{tag}-{i % 5000}" for i in ids]),
        "amount": (ids % 997).astype(np.float64), "seq": np.full(len(ids), seq, dtype=np.int64),
    })


def build(path: Path, millions: int, layout: str) -> None:
    from deltalake import write_deltalake

    rng = np.random.default_rng(7)
    order = rng.permutation(millions * FILE_ROWS) if layout == "unclustered" else None
    for f in range(millions):
        ids = np.arange(f * FILE_ROWS, (f + 1) * FILE_ROWS) if order is None else np.sort(
            order[f * FILE_ROWS:(f + 1) * FILE_ROWS]
        )
        write_deltalake(str(path), rows(ids, 1, "old"), mode="append")


def batch(millions: int, size: int, shape: str) -> pa.Table:
    total = millions * FILE_ROWS
    half = size // 2
    if shape == "random":
        updates = np.sort(np.random.default_rng(11).choice(total, half, replace=False))
    else:  # one narrow range of recent keys
        updates = np.arange(total - 3 * half, total - 2 * half)
    inserts = np.arange(total, total + half)
    return rows(np.concatenate([updates, inserts]), 2, "new")


class Engine:
    def __init__(self, name: str):
        self.name = name
        self.spark = None
        if name == "spark":
            from upsertsink import spark_session

            self.spark = spark_session("bench-scaling", "local[2]")

    def source(self, data: pa.Table, work: Path):
        if self.spark is None:
            return data
        import pyarrow.parquet as pq

        pq.write_table(data, work / "batch.parquet")
        return self.spark.read.parquet(str(work / "batch.parquet"))

    def raw(self, path: str, data) -> None:
        cols = ["customer", "amount", "seq"]
        if self.spark is None:
            from deltalake import DeltaTable

            (DeltaTable(path).merge(data, 't."id" = s."id"', source_alias="s", target_alias="t")
             .when_matched_update_all(predicate='s."seq" > t."seq"').when_not_matched_insert_all().execute())
        else:
            from delta.tables import DeltaTable

            (DeltaTable.forPath(self.spark, path).alias("t").merge(data.alias("s"), "t.id = s.id")
             .whenMatchedUpdate(condition="s.seq > t.seq", set={c: f"s.{c}" for c in cols})
             .whenNotMatchedInsertAll().execute())

    def sink(self, path: str, data) -> dict:
        from deltalake import DeltaTable

        from upsertsink import UpsertSink

        UpsertSink(path, "id", sequence_by="seq", app_id="bench").write(data, batch_id=0)
        metrics = DeltaTable(path).history(1)[0].get("operationMetrics") or {}
        meta = json.loads(DeltaTable(path).history(1)[0].get("userMetadata") or "{}")
        removed = metrics.get("num_target_files_removed", metrics.get("numTargetFilesRemoved"))
        return {"files_scanned": meta.get("files_scanned"), "files_rewritten": None if removed is None else int(removed)}


def trial(engine: Engine, base: Path, work: Path, data: pa.Table, repeat: int) -> dict:
    source = engine.source(data, work)
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    files: dict = {}

    def fresh(name: str) -> str:
        dst = work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(base, dst)
        return str(dst)

    for i in range(repeat + 1):  # the first round warms both paths up and is not counted
        for side in (("raw", "sink") if i % 2 else ("sink", "raw")):
            path = fresh(side)
            t = time.perf_counter()
            if side == "raw":
                engine.raw(path, source)
            else:
                files = engine.sink(path, source)
            if i:
                times[side].append(time.perf_counter() - t)
    raw, sink = statistics.median(times["raw"]), statistics.median(times["sink"])
    from deltalake import DeltaTable

    total = len(DeltaTable(str(base)).file_uris())
    return {"raw_s": round(raw, 3), "sink_s": round(sink, 3), "sink_over_raw": round(sink / raw, 3), **files,
            "files_total": total,
            "samples": {k: [round(x, 3) for x in v] for k, v in times.items()}}


def optimize(path: Path, engine: Engine, millions: int) -> None:
    """Z-order by the key into about as many files as before (delta-rs's default target size would compact the
    whole table into one file, and one file tells nothing about skipping). Sorted data compresses to about half
    the size of the unsorted files, hence the target of half their size per million rows."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    size = sum(int(x) for x in pa.table(table.get_add_actions(flatten=True))["size_bytes"].to_pylist())
    table.optimize.z_order(["id"], target_size=max(1, size // (2 * millions)))
    DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


def plot(results: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for ax, shape in zip(axes, ("clustered", "random"), strict=True):
        for engine, colour in (("embedded", "tab:blue"), ("spark", "tab:orange")):
            pts = sorted((r["millions"], r) for r in results if r["engine"] == engine and r["shape"] == shape)
            if not pts:
                continue
            xs = [m for m, _ in pts]
            ax.plot(xs, [r["raw_s"] for _, r in pts], "--o", color=colour, label=f"{engine}: raw MERGE")
            ax.plot(xs, [r["sink_s"] for _, r in pts], "-s", color=colour, label=f"{engine}: UpsertSink")
        ax.set_title(f"{shape} batch keys")
        ax.set_xlabel("table size (million rows)")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 4, 16], ["1M", "4M", "16M"])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("write time of a 10k-row batch (s)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="embedded,spark")
    ap.add_argument("--optimize-size", type=int, default=4, help="table size (M rows) of the OPTIMIZE comparison")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        work = Path(tmp)
        for name in args.engines.split(","):
            engine = Engine(name)
            for m in sizes:
                base = work / f"base-{m}"
                if not base.exists():
                    build(base, m, "clustered")
                for shape in ("clustered", "random"):
                    r = trial(engine, base, work, batch(m, args.batch, shape), args.repeat)
                    results.append({"engine": name, "millions": m, "shape": shape, **r})
                    print(json.dumps(results[-1]), flush=True)
            m = args.optimize_size
            loose = work / f"loose-{m}-{name}"
            build(loose, m, "unclustered")
            data = batch(m, args.batch, "clustered")
            before = trial(engine, loose, work, data, args.repeat)
            optimize(loose, engine, m)
            after = trial(engine, loose, work, data, args.repeat)
            for label, r in (("unclustered", before), ("unclustered+zorder", after)):
                results.append({"engine": name, "millions": m, "shape": label, **r})
                print(json.dumps(results[-1]), flush=True)
            if engine.spark is not None:
                engine.spark.stop()
    from rich.console import Console
    from rich.table import Table

    table = Table("engine", "shape", "rows", "raw s", "sink s", "sink/raw", "files", "files scanned", "files rewritten")
    for r in results:
        table.add_row(r["engine"], r["shape"], f"{r['millions']}M", f"{r['raw_s']:.2f}", f"{r['sink_s']:.2f}",
                      f"{r['sink_over_raw']:.2f}", str(r.get("files_total")), str(r.get("files_scanned")),
                      str(r.get("files_rewritten")))
    Console().print(table)
    growth = {}
    for name in args.engines.split(","):
        pts = {r["millions"]: r["sink_s"] for r in results if r["engine"] == name and r["shape"] == "clustered"}
        if min(sizes) in pts and max(sizes) in pts:
            growth[name] = round(pts[max(sizes)] / pts[min(sizes)], 3)
    print("sink growth, clustered, largest/smallest table:", growth)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "scaling", "batch_rows": args.batch, "repeat": args.repeat,
                                   "machine": machine(), "growth_clustered": growth, "results": results},
                                  indent=2) + "\n")
    plot(results)
    print(f"wrote {RESULTS} and {PLOT}")


if __name__ == "__main__":
    main()
