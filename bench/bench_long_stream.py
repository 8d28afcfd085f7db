"""A stream that runs for months, compressed: write time and files on disk against batches written.

One stream of micro-batches (20 rows, 10% deletes, into a table of 5,000 keys) through UpsertSink and through
the raw idempotent MERGE of the same batches (``stream_common.py``), side by side, batch by batch, on each
engine. Every batch's time is kept; the files on disk (data, log, the sink's own) are counted every
``--sample-every`` batches. Issue #20's target: the median write of the last 1,000 batches within 1.2x of the
median of batches 1,001-2,000, and the sink's own files bounded.

    .venv/bin/python bench/bench_long_stream.py [--engines embedded,spark] [--batches 10000] [--plot]
    .venv/bin/python bench/bench_long_stream.py --plot-from results/a.json results/b.json   (runs made apart)

Writes bench/results/long_stream.json (and docs/img/long_stream.png with --plot, which needs matplotlib:
the ``bench`` extra). ``make bench`` runs a short version (--batches 600).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_sink import machine
from stream_common import Feed, RawEmbedded, RawSpark, files_on_disk, make_tables, sink_for

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "long_stream.json"
PLOT = HERE.parent / "docs" / "img" / "long_stream.png"


def run(
    engine: str, batches: int, keys: int, size: int, every: int, work: Path, spark=None, retention: str | None = None,
    vacuum_every: int = 0,
) -> dict:
    raw_path, sink_path = make_tables(work, keys, engine, spark, retention)
    raw = RawSpark(spark, raw_path) if engine == "spark" else RawEmbedded(raw_path)
    sink = sink_for(sink_path)
    feed = Feed(keys, size, seed=11)
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    files: list[dict] = []
    started = time.time()
    for b in range(batches):
        data = feed.batch(b)
        for side in (("raw", "sink") if b % 2 else ("sink", "raw")):
            frame = data
            if engine == "spark":
                frame = raw.frame(data) if side == "raw" else spark.createDataFrame(data)
            t = time.perf_counter()
            if side == "raw":
                raw.write(frame, b)
            else:
                sink.write(frame, batch_id=b)
            times[side].append(time.perf_counter() - t)
        if vacuum_every and (b + 1) % vacuum_every == 0:  # what a user schedules (e.g. daily), on both tables alike
            for path in (raw_path, sink_path):
                vacuum(path)
        if (b + 1) % every == 0 or b == batches - 1:
            files.append({"batches": b + 1, "raw": files_on_disk(raw_path), "sink": files_on_disk(sink_path)})
            done = files[-1]
            print(f"{engine} {b + 1}/{batches}: raw {statistics.median(times['raw'][-every:]) * 1000:.1f} ms, "
                  f"sink {statistics.median(times['sink'][-every:]) * 1000:.1f} ms; files raw {done['raw']} "
                  f"sink {done['sink']} ({time.time() - started:.0f} s)", flush=True)
    return {"engine": engine, "batches": batches, "table_keys": keys, "batch_rows": size, "log_retention": retention,
            "vacuum_every": vacuum_every,
            "summary": summarize(times), "files": files,
            "times_ms": {k: [round(x * 1000, 2) for x in v] for k, v in times.items()}}


def vacuum(path: str) -> None:
    """VACUUM with the table's own retention (deltalake's, the same call for both tables; untimed)."""
    from deltalake import DeltaTable

    DeltaTable(path).vacuum(dry_run=False)


def summarize(times: dict[str, list[float]]) -> dict:
    n = len(times["sink"])
    out: dict = {"per_1000": []}
    for start in range(0, n, 1000):
        r = statistics.median(times["raw"][start:start + 1000])
        s = statistics.median(times["sink"][start:start + 1000])
        out["per_1000"].append({"batches": f"{start + 1}-{min(n, start + 1000)}", "raw_ms": round(r * 1000, 2),
                                "sink_ms": round(s * 1000, 2), "sink_over_raw": round(s / r, 3)})
    if n >= 3000:
        early = statistics.median(times["sink"][1000:2000])
        late = statistics.median(times["sink"][-1000:])
        out["sink_last_1000_over_1001_2000"] = round(late / early, 3)
        out["raw_last_1000_over_1001_2000"] = round(
            statistics.median(times["raw"][-1000:]) / statistics.median(times["raw"][1000:2000]), 3)
    return out


def plot(results: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(6 * len(results), 7), squeeze=False)
    for col, r in enumerate(results):
        ax = axes[0][col]
        window = max(1, r["batches"] // 100)
        for side, colour in (("raw", "tab:gray"), ("sink", "tab:blue")):
            t = r["times_ms"][side]
            xs = list(range(window, len(t) + 1, window))
            ax.plot(xs, [statistics.median(t[x - window:x]) for x in xs], label=side, color=colour)
        kept = r.get("log_retention") or "Delta's default log retention"
        ax.set_title(f"{r['engine']}: write time (median of {window} batches; {kept})", fontsize=9)
        ax.set_xlabel("batches written")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.legend()
        ax = axes[1][col]
        xs = [f["batches"] for f in r["files"]]
        ax.plot(xs, [f["raw"]["log"] for f in r["files"]], label="raw: log files", color="tab:gray", ls="--")
        ax.plot(xs, [f["sink"]["log"] for f in r["files"]], label="sink: log files", color="tab:blue", ls="--")
        ax.plot(xs, [f["raw"]["data"] for f in r["files"]], label="raw: data files", color="tab:gray")
        ax.plot(xs, [f["sink"]["data"] for f in r["files"]], label="sink: data files", color="tab:blue")
        ax.plot(xs, [f["sink"]["sink"] for f in r["files"]], label="sink: its own files", color="tab:orange")
        ax.set_title(f"{r['engine']}: files on disk")
        ax.set_xlabel("batches written")
        ax.set_yscale("symlog")
        ax.legend(fontsize=8)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    print(f"wrote {PLOT}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="embedded,spark")
    ap.add_argument("--batches", type=int, default=10_000)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--batch-rows", type=int, default=20)
    ap.add_argument("--sample-every", type=int, default=250)
    ap.add_argument("--plot", action="store_true")
    ap.add_argument("--log-retention", default=None,
                    help="the tables' delta.logRetentionDuration, e.g. 'interval 1 minute' (default: Delta's 30 days)")
    ap.add_argument("--vacuum-every", type=int, default=0,
                    help="VACUUM both tables every N batches with their own retention (untimed; default: never)")
    ap.add_argument("--output", default=str(RESULTS))
    ap.add_argument("--plot-from", nargs="+", metavar="JSON",
                    help="draw docs/img/long_stream.png from earlier runs' JSON files (one engine each) and exit")
    args = ap.parse_args()
    if args.plot_from:
        plot([r for f in args.plot_from for r in json.loads(Path(f).read_text())["results"]])
        return
    start = machine()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-long-stream-") as tmp:
        for engine in args.engines.split(","):
            spark = None
            if engine == "spark":
                from upsertsink import spark_session

                spark = spark_session("bench-long-stream", "local[2]")
            results.append(run(engine, args.batches, args.keys, args.batch_rows, args.sample_every, Path(tmp), spark,
                               args.log_retention, args.vacuum_every))
            print(json.dumps({"engine": engine, **results[-1]["summary"]}), flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"benchmark": "long_stream", "machine": start, "results": results}) + "\n")
    print(f"wrote {args.output}")
    if args.plot:
        plot(results)


if __name__ == "__main__":
    main()
