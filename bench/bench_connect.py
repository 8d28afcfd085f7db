"""The sink over Spark Connect against a hand-written idempotent SQL MERGE over the same Connect session (#21).

Issue #21's targets: a micro-batch (1,000 rows into a 1M-key table) within 1.2x of the raw SQL MERGE, and a
200,000-row batch into 1M within 1.15x. One local Spark (``local[2]``) with Delta and a Spark Connect server in
the same JVM (``spark_session(connect=True)``); one Connect session runs both sides. For each case, two copies
of one table (made once with the classic session: ``stream_common.make_tables``); the same batches, in the same
order, go to each copy, raw and sink alternating (which goes first alternates too); warm-up batches are not
counted; medians are compared. Each batch is ``connect.createDataFrame(arrow_batch)``, made outside the timing.

*Raw* is what a careful user writes over Connect, where Delta's Python ``DeltaTable`` API is unavailable:
``df.createOrReplaceTempView(v)``, ``spark.conf.set`` of ``spark.databricks.delta.write.txnAppId``/``txnVersion``
and ``spark.sql("MERGE INTO delta.`path` t USING v s ON t.id = s.id WHEN MATCHED AND <delete> THEN DELETE WHEN
MATCHED AND <update> THEN UPDATE SET * WHEN NOT MATCHED AND <insert> THEN INSERT *").collect()``, with the
clauses of ``stream_common.CLAUSES`` (sequence guard, deletes). *Sink* is ``UpsertSink(path, "id",
sequence_by="seq", delete_when="op = 'D'", app_id="bench").write(df, batch_id=b)``.

Batches: the micro case uses ``stream_common.Feed`` (half updates in a window of recent keys, half new keys,
10% deletes); the large case (which Feed's 10k-key window cannot hold) draws its updates from the newest
``2 x half`` keys of the growing table, the rest new keys, 10% deletes, ``seq`` = batch + 1.

With ``--before``, a third side writes a third copy of the table with the sink's path before the large-batch
change (``SparkEngine._keep_on_server`` forced to False: every batch collected to the client when it can be),
so that before and after are measured in one run.

With ``--profile N`` (default 3), N further batches of each case run after the measured ones (not counted)
with every Connect RPC of the client timed and attributed to the pyspark call and the upsertsink function that
made it, and a cProfile of the client side; the breakdown goes to the JSON (``profile``) and is printed.

    .venv/bin/python bench/bench_connect.py [--keys 1000000] [--cases micro,large]
        [--micro-rows 1000] [--micro-batches 30] [--micro-warmup 3]
        [--large-rows 200000] [--large-batches 5] [--large-warmup 1] [--profile 3] [--before] [--output PATH]

Prints a table and writes bench/results/connect.json.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from bench_sink import machine
from stream_common import CLAUSES, DELETE_SHARE, Feed, make_tables, sink_for

RESULTS = Path(__file__).resolve().parent / "results" / "connect.json"
TARGETS = {"micro": 1.2, "large": 1.15}


class LargeFeed:
    """Batch ``b`` of ``size`` rows into a table of ``keys`` keys that grows by ``size // 2`` a batch: half
    updates drawn from the newest ``2 * (size // 2)`` keys, half new keys beyond the end; 10% deletes."""

    def __init__(self, keys: int, size: int, seed: int = 7):
        self.keys, self.size, self.rng = keys, size, np.random.default_rng(seed)

    def batch(self, b: int) -> pa.Table:
        rng, size = self.rng, self.size
        half = size // 2
        end = self.keys + b * half  # keys 0 .. end-1 exist (but for deletes)
        low = max(0, end - 2 * half)
        ids = np.concatenate([rng.choice(np.arange(low, end), half, replace=False),
                              np.arange(end, end + size - half)]).astype(np.int64)
        op = np.where(rng.random(size) < DELETE_SHARE, "D", "U")
        return pa.table({
            "id": ids, "customer": pa.array([f"c-{i % 5000}" for i in ids]), "amount": rng.random(size),
            "status": pa.array(["updated"] * size), "seq": np.full(size, b + 1, dtype=np.int64), "op": pa.array(op),
        })


def _sql_condition(clause: str) -> str:
    return clause.replace("<>", "!=")


MERGE = (
    "MERGE INTO delta.`{path}` t USING {view} s ON t.id = s.id "
    f"WHEN MATCHED AND {_sql_condition(CLAUSES['delete'])} THEN DELETE "
    f"WHEN MATCHED AND {_sql_condition(CLAUSES['update'])} THEN UPDATE SET * "
    f"WHEN NOT MATCHED AND {_sql_condition(CLAUSES['insert'])} THEN INSERT *"
)


class RawConnect:
    """The hand-written idempotent SQL MERGE over a Connect session, with Delta's txnAppId/txnVersion."""

    def __init__(self, spark: Any, path: str, app_id: str = "raw", view: str = "raw_batch"):
        self.spark, self.path, self.app_id, self.view = spark, path, app_id, view

    def write(self, df: Any, batch_id: int) -> None:
        df.createOrReplaceTempView(self.view)
        self.spark.conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
        self.spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        self.spark.sql(MERGE.format(path=self.path.replace("`", "``"), view=self.view)).collect()


# ----------------------------------------------------------------------------------------- RPC tracing

class RpcTracer:
    """Times every Connect RPC of the client (the outermost of the client methods below), attributed to the
    pyspark call made from outside pyspark and to the function that made it (an upsertsink function or this
    script), per side."""

    # AnalyzePlan, ExecutePlan, Config, and the artifact uploads of a large local relation (createDataFrame of
    # a batch over spark.sql.session.localRelationCacheThreshold sends it as cached artifacts).
    METHODS = ("_analyze", "_execute_and_fetch_as_iterator", "_execute", "config", "cache_artifacts",
               "cache_artifact")

    def __init__(self) -> None:
        self.side: str | None = None
        self.records: dict[str, dict[tuple[str, str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
        self._depth = threading.local()
        self._originals: dict[str, Any] = {}

    def install(self) -> None:
        from pyspark.sql.connect.client.core import SparkConnectClient

        for name in self.METHODS:
            original = getattr(SparkConnectClient, name)
            self._originals[name] = original
            setattr(SparkConnectClient, name, self._wrap(name, original))

    def uninstall(self) -> None:
        from pyspark.sql.connect.client.core import SparkConnectClient

        for name, original in self._originals.items():
            setattr(SparkConnectClient, name, original)
        self._originals.clear()

    def _wrap(self, name: str, original: Any) -> Any:
        tracer = self

        if name == "_execute_and_fetch_as_iterator":  # a generator: time it to exhaustion
            @functools.wraps(original)
            def gen(client: Any, *args: Any, **kwargs: Any) -> Any:
                outer = tracer._enter()
                where = tracer._where() if outer else None
                t = time.perf_counter()
                try:
                    yield from original(client, *args, **kwargs)
                finally:
                    tracer._leave(name, where, time.perf_counter() - t, outer)
            return gen

        @functools.wraps(original)
        def call(client: Any, *args: Any, **kwargs: Any) -> Any:
            outer = tracer._enter()
            where = tracer._where() if outer else None
            t = time.perf_counter()
            try:
                return original(client, *args, **kwargs)
            finally:
                tracer._leave(name, where, time.perf_counter() - t, outer)
        return call

    def _enter(self) -> bool:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        return depth == 0

    def _leave(self, name: str, where: tuple[str, str] | None, elapsed: float, outer: bool) -> None:
        self._depth.n -= 1
        if outer and self.side is not None and where is not None:
            self.records[self.side][(name, *where)].append(elapsed)

    @staticmethod
    def _where() -> tuple[str, str]:
        """(the pyspark function called from outside pyspark, the caller outside pyspark)."""
        frame = sys._getframe(2)
        api = "?"
        while frame is not None:
            filename = frame.f_code.co_filename
            if "/pyspark/" not in filename:
                short = filename.split("/upsertsink/", 1)[-1] if "/upsertsink/" in filename else Path(filename).name
                return api, f"{short}:{frame.f_code.co_qualname}"
            api = frame.f_code.co_qualname
            frame = frame.f_back
        return api, "?"


def _rpc_summary(records: dict[tuple[str, str, str], list[float]], batches: int) -> list[dict]:
    rows = [{"rpc": k[0], "pyspark_call": k[1], "caller": k[2], "calls_per_batch": round(len(v) / batches, 2),
             "ms_per_batch": round(sum(v) * 1000 / batches, 1)} for k, v in records.items()]
    return sorted(rows, key=lambda r: -r["ms_per_batch"])


def _cprofile_summary(prof: cProfile.Profile, batches: int, top: int = 30) -> list[dict]:
    """The client-side functions with the most cumulative time a batch: upsertsink's own, and pyspark's and
    deltalake's entry points, excluding the benchmark's loop."""
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, func), (_, ncalls, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "/upsertsink/" in filename and "/bench/" not in filename:
            where = "upsertsink/" + filename.split("/upsertsink/", 1)[-1]
        elif "/pyspark/sql/connect/" in filename and "/client/" not in filename:
            where = "pyspark/sql/connect/" + filename.split("/pyspark/sql/connect/", 1)[-1]
        elif "/deltalake/" in filename:
            where = "deltalake/" + filename.split("/deltalake/", 1)[-1]
        else:
            continue
        rows.append({"function": f"{where}:{line}:{func}", "calls_per_batch": round(ncalls / batches, 2),
                     "cum_ms_per_batch": round(cum * 1000 / batches, 1)})
    rows.sort(key=lambda r: -r["cum_ms_per_batch"])
    return rows[:top]


# ----------------------------------------------------------------------------------------- the runs

class BeforeSink:
    """The sink with the path it took before large Connect batches were kept on the server."""

    def __init__(self, path: str):
        self.sink = sink_for(path)

    def write(self, df: Any, batch_id: int) -> None:
        from upsertsink.engines.spark import SparkEngine

        keep = SparkEngine._keep_on_server
        SparkEngine._keep_on_server = lambda self: False  # type: ignore[method-assign]
        try:
            self.sink.write(df, batch_id=batch_id)
        finally:
            SparkEngine._keep_on_server = keep  # type: ignore[method-assign]


def run_case(
    case: str, connect: Any, classic: Any, work: Path, keys: int, rows: int, batches: int, warmup: int,
    profile: int, before: bool = False,
) -> dict:
    raw_path, sink_path = make_tables(work, keys, "spark", classic)
    raw = RawConnect(connect, raw_path)
    sink = sink_for(sink_path)
    old = None
    if before:
        old_path = str(work / f"spark-{keys}-before")
        shutil.rmtree(old_path, ignore_errors=True)
        shutil.copytree(raw_path, old_path)
        old = BeforeSink(old_path)
    feed = Feed(keys, rows) if case == "micro" else LargeFeed(keys, rows)
    times: dict[str, list[float]] = {"raw": [], "sink": [], **({"before": []} if before else {})}
    tracer = RpcTracer()
    profiles = {"raw": cProfile.Profile(), "sink": cProfile.Profile()}
    wall: dict[str, list[float]] = {"raw": [], "sink": []}
    total = warmup + batches + profile
    for b in range(total):
        data = feed.batch(b)
        profiling = b >= warmup + batches
        if profiling and b == warmup + batches:
            tracer.install()
        order = ["raw", "sink"] if b % 2 else ["sink", "raw"]
        if before and not profiling:
            order.insert(b % 3, "before")
        for side in order:
            frame = connect.createDataFrame(data)
            if profiling:
                tracer.side = side
                profiles[side].enable()
            t = time.perf_counter()
            if side == "raw":
                raw.write(frame, b)
            elif side == "before":
                assert old is not None
                old.write(frame, b)
            else:
                sink.write(frame, batch_id=b)
            elapsed = time.perf_counter() - t
            if profiling:
                profiles[side].disable()
                tracer.side = None
                wall[side].append(elapsed)
            elif b >= warmup:
                times[side].append(elapsed)
        if b < warmup + batches and (b + 1) % 10 == 0:
            print(f"  {case}: batch {b + 1}/{warmup + batches}", flush=True)
    tracer.uninstall()
    r, s = statistics.median(times["raw"]), statistics.median(times["sink"])
    result = {
        "case": case, "table_keys": keys, "batch_rows": rows, "warmup": warmup, "batches": batches,
        "raw_median_s": round(r, 4), "sink_median_s": round(s, 4), "sink_over_raw": round(s / r, 3),
        "target": TARGETS[case], "met": s / r <= TARGETS[case],
        "raw_min_s": round(min(times["raw"]), 4), "sink_min_s": round(min(times["sink"]), 4),
        "samples": {k: [round(x, 4) for x in v] for k, v in times.items()},
    }
    if before:
        o = statistics.median(times["before"])
        result.update({"before_median_s": round(o, 4), "before_over_raw": round(o / r, 3),
                       "before_min_s": round(min(times["before"]), 4)})
    if profile:
        result["profile"] = {}
        for side in ("raw", "sink"):
            rpcs = _rpc_summary(tracer.records[side], profile)
            wall_ms = sum(wall[side]) * 1000 / profile
            rpc_ms = sum(x["ms_per_batch"] for x in rpcs)
            result["profile"][side] = {
                "batches": profile, "wall_ms_per_batch": round(wall_ms, 1),
                "rpc_ms_per_batch": round(rpc_ms, 1), "rpcs_per_batch": round(sum(x["calls_per_batch"] for x in rpcs), 1),
                "client_outside_rpcs_ms_per_batch": round(wall_ms - rpc_ms, 1),
                "rpcs": rpcs, "cprofile_top": _cprofile_summary(profiles[side], profile),
            }
    return result


def print_profile(result: dict) -> None:
    prof = result.get("profile")
    if not prof:
        return
    print(f"\n{result['case']}: client-side profile over {prof['raw']['batches']} batches (per batch)")
    for side in ("raw", "sink"):
        p = prof[side]
        print(f"  {side}: wall {p['wall_ms_per_batch']:.0f} ms, {p['rpcs_per_batch']:.0f} RPCs taking "
              f"{p['rpc_ms_per_batch']:.0f} ms, client work outside RPCs {p['client_outside_rpcs_ms_per_batch']:.0f} ms")
        for r in p["rpcs"]:
            print(f"    {r['ms_per_batch']:8.1f} ms  {r['calls_per_batch']:5.1f}x  {r['rpc']:<32} "
                  f"{r['pyspark_call']:<40} {r['caller']}")
    print("  sink, cProfile (cumulative ms per batch):")
    for r in prof["sink"]["cprofile_top"][:20]:
        print(f"    {r['cum_ms_per_batch']:8.1f} ms  {r['calls_per_batch']:5.1f}x  {r['function']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--cases", default="micro,large")
    ap.add_argument("--micro-rows", type=int, default=1000)
    ap.add_argument("--micro-batches", type=int, default=30)
    ap.add_argument("--micro-warmup", type=int, default=3)
    ap.add_argument("--large-rows", type=int, default=200_000)
    ap.add_argument("--large-batches", type=int, default=5)
    ap.add_argument("--large-warmup", type=int, default=1)
    ap.add_argument("--profile", type=int, default=3, help="batches profiled after the measured ones (0: none)")
    ap.add_argument("--before", action="store_true", help="also run the sink's path before the large-batch change")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    start = machine()
    began = time.time()

    from upsertsink import spark_session

    classic = spark_session("bench-connect", "local[2]")
    connect = spark_session("bench-connect", connect=True, master="local[2]")
    from importlib.metadata import version

    versions = {"pyspark": version("pyspark"), "delta_spark": version("delta-spark"), "pyarrow": version("pyarrow")}
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-connect-") as tmp:
        for case in args.cases.split(","):
            rows, batches, warmup = (
                (args.micro_rows, args.micro_batches, args.micro_warmup) if case == "micro"
                else (args.large_rows, args.large_batches, args.large_warmup)
            )
            result = run_case(case, connect, classic, Path(tmp), args.keys, rows, batches, warmup, args.profile,
                              args.before)
            print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "profile")}), flush=True)
            results.append(result)
    end_load = [round(x, 2) for x in os.getloadavg()]

    from rich.console import Console
    from rich.table import Table

    table = Table("case", "table keys", "batch rows", "measured", "raw SQL MERGE ms", "sink ms", "sink/raw", "target",
                  *(("before ms", "before/raw") if args.before else ()))
    for r in results:
        table.add_row(r["case"], f"{r['table_keys']:,}", f"{r['batch_rows']:,}", f"{r['batches']}",
                      f"{r['raw_median_s'] * 1000:.0f}", f"{r['sink_median_s'] * 1000:.0f}",
                      f"{r['sink_over_raw']:.2f}", f"<= {r['target']} ({'met' if r['met'] else 'NOT met'})",
                      *((f"{r['before_median_s'] * 1000:.0f}", f"{r['before_over_raw']:.2f}") if args.before else ()))
    Console().print(table)
    for r in results:
        print_profile(r)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "connect", "machine": {**start, "load_average_at_end": end_load}, "versions": versions,
        "master": "local[2]", "elapsed_s": round(time.time() - began, 1),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": results,
    }, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
