"""Merge engines (issue #47) against the hand-written MERGE a careful user writes for each, both engines, one run.

Modes: ``first_row`` (the hand-written side: an insert-only MERGE), ``first_row_seq`` (with ``sequence_by``: also
``WHEN MATCHED AND s.seq < t.seq THEN UPDATE``), ``partial_update`` (a stream writing its column group into a
wide table: the update guarded by the group's sequence, ``coalesce`` so nulls keep the stored value) and
``aggregate`` (the batch pre-aggregated by key, then ``t.x + s.x``, ``least``/``greatest`` as CASEs, counts
added, ``last``/``first`` by sequence). The hand-written side carries each engine's idempotence marker, as
bench/stream_common.py's does: delta-spark's ``txnAppId``/``txnVersion`` on a session of its own (Delta skips
a replay), delta-rs's ``Transaction`` with a ``transaction_version`` check before the write (delta-rs records
markers but never skips by itself).

Measured, per mode and engine:

- **batch**: a ``--batch``-row batch into a ``--rows``-row table (200k into 1M by default: half updates of
  existing keys, half new keys; for ``aggregate`` two rows a key). Every trial starts from a fresh copy of one
  base table; hand-written and sink trials alternate (which goes first alternates too); medians and the
  spread (min-max) are reported.
- **micro**: ``--micro-batches`` batches of ``--micro-size`` rows (after ``--warmup`` ones) into two copies of
  the base table, one per side, sides alternating.
- **memory** (embedded): the peak resident memory of a fresh process per write, for the batch above: the
  process imports, reads the batch from parquet, writes once, and reports its own ``VmHWM`` (from
  /proc/self/status) before and after the write. Not ``getrusage``: Linux carries the high-water mark of the
  forked copy of the parent into the child's ``ru_maxrss`` at exec, so that figure (kept in the JSON as an
  upper bound, from ``os.wait4``) grows with this script's own memory (seen: three children with peaks of
  267-296 MiB all reported 385 MiB).

Before timing, a cheap check (``--check-rows``, a few batches into a small table) compares each side's table
with the reference model of tests/merge_engine_models.py, and shows what the hand-written MERGE gets wrong
when an ``aggregate`` batch is run twice without its marker check, or a ``first_row`` batch holds a key twice.

Targets (issue #47): sink <= 1.2x the hand-written MERGE's time, and on the embedded engine its peak memory <=
the hand-written MERGE's. The sink side runs only once ``UpsertSink`` takes ``merge_engine``; until then the
hand-written side is measured alone ("sink: not available yet").

    .venv/bin/python bench/bench_merge_engines.py [--rows 1000000] [--batch 200000] [--repeat 3]
        [--micro-batches 30] [--micro-size 1000] [--warmup 3] [--engines embedded,spark]
        [--modes first_row,first_row_seq,partial_update,aggregate] [--memory-trials 1] [--check-rows 300]
        [--memory-rows N --memory-batch M]
        [--output bench/results/merge_engines.json]

Prints tables and writes bench/results/merge_engines.json.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from bench_sink import machine

RESULTS = HERE / "results" / "merge_engines.json"
MODES = ("first_row", "first_row_seq", "partial_update", "aggregate")
GROUPS = {"pay_seq": ["paid_at", "amount"], "ship_seq": ["shipped_at", "carrier"]}
AGGREGATES = {"clicks": "sum", "revenue": "sum", "first_seen": "min", "last_seen": "max", "events": "count",
              "status": "last", "source": "first"}
TIME_TARGET, MEMORY_TARGET = 1.2, 1.0
RAW_APP = "raw"


def sink_available() -> bool:
    try:
        from upsertsink import UpsertSink
    except ImportError:
        return False
    return "merge_engine" in inspect.signature(UpsertSink.__init__).parameters


# ---------------------------------------------------------------- data


def _strings(prefix: str, values: np.ndarray, mod: int) -> pa.Array:
    return pa.array([f"{prefix}{v % mod}" for v in values.tolist()])


def _with_nulls(arr: np.ndarray, rng: np.random.Generator, share: float, type_: pa.DataType) -> pa.Array:
    return pa.array(arr, type=type_, mask=rng.random(len(arr)) < share)


def base_table(mode: str, rows: int) -> pa.Table:
    """The table the batches go into (written without the sink: a plain Delta table)."""
    ids = np.arange(rows, dtype=np.int64)
    if mode in ("first_row", "first_row_seq"):
        return pa.table({"id": ids, "val": _strings("v", ids, 9973), "n": ids % 1000,
                         "seq": np.full(rows, 10, np.int64)})
    if mode == "partial_update":
        return pa.table({
            "id": ids, "pay_seq": np.ones(rows, np.int64), "paid_at": 1_000_000 + ids, "amount": (ids % 400) / 4,
            "ship_seq": np.ones(rows, np.int64), "shipped_at": 2_000_000 + ids, "carrier": _strings("c", ids, 7),
        })
    return pa.table({
        "id": ids, "clicks": ids % 7, "revenue": (ids % 400) / 4, "first_seen": 1_000 + ids % 5000,
        "last_seen": 1_000 + ids % 5000, "events": np.ones(rows, np.int64), "status": _strings("s", ids, 3),
        "source": _strings("src", ids, 2), "seq": np.ones(rows, np.int64),
    })


def change_batch(mode: str, existing: np.ndarray, new: np.ndarray, seq: int, seed: int) -> pa.Table:
    """A batch over ``existing`` keys (updates) and ``new`` keys; ``seq`` is the batch's sequence base (greater
    than everything before it)."""
    rng = np.random.default_rng(seed)
    ids = np.concatenate([existing, new]).astype(np.int64)
    if mode == "aggregate":
        ids = np.repeat(ids, 2)  # two events a key: the batch is pre-aggregated by the hand-written side
    rng.shuffle(ids)
    n = len(ids)
    if mode in ("first_row", "first_row_seq"):
        # with a sequence, 30% of the keys arrive with an earlier event (it replaces the stored row); the rest later
        seqs = np.where(rng.random(n) < 0.3, 5, 20).astype(np.int64)
        return pa.table({"id": ids, "val": _strings("w", ids + seq, 9973), "n": (ids + seq) % 1000, "seq": seqs})
    if mode == "partial_update":
        # the pay stream's columns only: its group sequence grows (10% equal: a no-op; 5% null: nothing moves)
        draw = rng.random(n)
        pay_seq = np.where(draw < 0.1, 1, seq).astype(np.int64)
        return pa.table({
            "id": ids, "pay_seq": pa.array(pay_seq, pa.int64(), mask=draw > 0.95),
            "paid_at": _with_nulls(3_000_000 + ids, rng, 0.1, pa.int64()),
            "amount": _with_nulls(((ids + seq) % 400) / 4, rng, 0.1, pa.float64()),
        })
    seqs = seq + np.arange(n, dtype=np.int64)  # one sequence per event
    return pa.table({
        "id": ids, "clicks": _with_nulls(rng.integers(0, 5, n), rng, 0.1, pa.int64()),
        "revenue": _with_nulls(rng.integers(0, 40, n) / 4, rng, 0.1, pa.float64()),
        "first_seen": pa.array(10_000 + seqs), "last_seen": pa.array(10_000 + seqs),
        "events": pa.array(np.ones(n, np.int64)), "status": _with_nulls(rng.integers(0, 3, n).astype(str), rng, 0.2,
                                                                         pa.string()),
        "source": _with_nulls(rng.integers(0, 2, n).astype(str), rng, 0.2, pa.string()), "seq": seqs,
    })


def big_batch(mode: str, rows: int, size: int) -> pa.Table:
    half = size // 2 if mode != "aggregate" else size // 4
    return change_batch(mode, np.arange(rows - half, rows), np.arange(rows, rows + half), seq=2, seed=1)


def micro_batch(mode: str, rows: int, size: int, b: int) -> pa.Table:
    """Micro-batch ``b``: half updates in a window of recent keys moving with the stream, half new keys."""
    half = size // 2 if mode != "aggregate" else size // 4
    rng = np.random.default_rng(100 + b)
    window = max(0, rows - 50_000) + (b * half) % max(1, min(40_000, rows - half))
    pool = np.arange(window, min(window + 10_000, rows))
    existing = rng.choice(pool, min(half, len(pool)), replace=False)
    new = np.arange(rows + b * half, rows + (b + 1) * half)
    return change_batch(mode, existing, new, seq=(b + 2) * 10_000_000, seed=b)


# ---------------------------------------------------------------- the hand-written MERGEs (SQL shared by both)


def partial_update_clauses(columns: list[str]) -> dict[str, Any]:
    """The careful partial update for the groups a batch carries: a matched row is updated only when one of its
    groups moves; a group moves on a greater non-null group sequence, and then its null values keep the
    stored ones (``coalesce``). With one group (a stream's batch) that is a guarded coalesce; with several, a
    CASE per group. New keys: a group with a null sequence inserts nothing."""
    carried = {g: [c for c in cols if c in columns] for g, cols in GROUPS.items() if g in columns}
    cond = {g: f"(s.{g} IS NOT NULL AND (t.{g} IS NULL OR s.{g} > t.{g}))" for g in carried}
    update: dict[str, str] = {}
    for g, cols in carried.items():
        if len(carried) == 1:
            update[g] = f"s.{g}"
            update.update({c: f"coalesce(s.{c}, t.{c})" for c in cols})
        else:
            update[g] = f"CASE WHEN {cond[g]} THEN s.{g} ELSE t.{g} END"
            update.update({c: f"CASE WHEN {cond[g]} AND s.{c} IS NOT NULL THEN s.{c} ELSE t.{c} END" for c in cols})
    insert = {"id": "s.id"}
    for g, cols in carried.items():
        insert[g] = f"s.{g}"
        insert.update({c: f"CASE WHEN s.{g} IS NOT NULL THEN s.{c} END" for c in cols})
    return {"matched": " OR ".join(cond.values()), "update": update, "insert": insert}


def _least(c: str, op: str) -> str:
    return f"CASE WHEN t.{c} IS NULL OR s.{c} {op} t.{c} THEN s.{c} ELSE t.{c} END"


def _plus(c: str) -> str:
    return f"CASE WHEN t.{c} IS NULL THEN s.{c} WHEN s.{c} IS NULL THEN t.{c} ELSE t.{c} + s.{c} END"


# The update of the pre-aggregated batch ``s`` into ``t``: sums that keep nulls SQL's way, least/greatest, counts
# added, ``last`` taken from the batch when its greatest sequence is newer, ``first`` kept once set.
AGGREGATE_UPDATE = {
    "clicks": _plus("clicks"), "revenue": _plus("revenue"),
    "first_seen": _least("first_seen", "<"), "last_seen": _least("last_seen", ">"),
    "events": "coalesce(t.events, 0) + s.events",
    "status": "CASE WHEN t.seq IS NULL OR s.seq >= t.seq THEN coalesce(s.status, t.status) "
              "ELSE coalesce(t.status, s.status) END",
    "source": "coalesce(t.source, s.source)",
    "seq": _least("seq", ">"),
}
AGG_COLUMNS = ["id", "clicks", "revenue", "first_seen", "last_seen", "events", "status", "source", "seq"]


def preaggregate_arrow(batch: pa.Table) -> pa.Table:
    """GROUP BY id in Arrow: sums and min/max skip nulls (all null: null), rows counted, last/first non-null
    values in sequence order (a stable sort then an ordered group-by)."""
    ordered = batch.sort_by([("id", "ascending"), ("seq", "ascending")])
    g = ordered.group_by("id", use_threads=False).aggregate([
        ("clicks", "sum"), ("revenue", "sum"), ("first_seen", "min"), ("last_seen", "max"), ([], "count_all"),
        ("status", "last"), ("source", "first"), ("seq", "max"),
    ])
    names = {"clicks_sum": "clicks", "revenue_sum": "revenue", "first_seen_min": "first_seen",
             "last_seen_max": "last_seen", "count_all": "events", "status_last": "status",
             "source_first": "source", "seq_max": "seq"}
    g = g.rename_columns([names.get(c, c) for c in g.column_names])
    return g.select(AGG_COLUMNS)


def preaggregate_spark(df: Any) -> Any:
    from pyspark.sql import functions as F

    def seq_if(c: str) -> Any:
        return F.when(F.col(c).isNotNull(), F.col("seq"))

    return df.groupBy("id").agg(
        F.sum("clicks").alias("clicks"), F.sum("revenue").alias("revenue"), F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"), F.count(F.lit(1)).alias("events"),
        F.max_by("status", seq_if("status")).alias("status"), F.min_by("source", seq_if("source")).alias("source"),
        F.max("seq").alias("seq"),
    )


class RawEmbedded:
    """The hand-written delta-rs MERGE of a mode, with the app transaction marker and its check."""

    def __init__(self, mode: str, path: str):
        from deltalake import DeltaTable

        self.mode, self.table = mode, DeltaTable(path)

    def write(self, batch: pa.Table, batch_id: int | None, check_marker: bool = True) -> None:
        from deltalake import CommitProperties, Transaction

        self.table.update_incremental()
        if batch_id is not None and check_marker:
            done = self.table.transaction_version(RAW_APP)
            if done is not None and batch_id <= done:
                return  # a replay: delta-rs records markers but never skips by itself
        props = CommitProperties(app_transactions=[Transaction(RAW_APP, batch_id)]) if batch_id is not None else None
        mode = self.mode
        source = preaggregate_arrow(batch) if mode == "aggregate" else batch
        merger = self.table.merge(source, "t.id = s.id", source_alias="s", target_alias="t", commit_properties=props)
        if mode == "first_row":
            merger = merger.when_not_matched_insert_all()
        elif mode == "first_row_seq":
            merger = merger.when_matched_update_all(predicate="s.seq < t.seq").when_not_matched_insert_all()
        elif mode == "partial_update":
            clauses = partial_update_clauses(batch.column_names)
            merger = (merger.when_matched_update(clauses["update"], predicate=clauses["matched"])
                      .when_not_matched_insert(clauses["insert"]))
        else:
            merger = merger.when_matched_update(AGGREGATE_UPDATE).when_not_matched_insert_all()
        merger.execute()


class RawSpark:
    """The hand-written delta-spark MERGE of a mode, with Delta's txnAppId/txnVersion on a session of its own."""

    def __init__(self, mode: str, spark: Any, path: str):
        self.mode, self.session, self.path = mode, spark.newSession(), path

    def frame(self, batch: pa.Table) -> Any:
        return self.session.createDataFrame(batch)

    def write(self, df: Any, batch_id: int | None, check_marker: bool = True) -> None:
        from delta.tables import DeltaTable

        conf = self.session.conf
        if batch_id is not None and check_marker:
            conf.set("spark.databricks.delta.write.txnAppId", RAW_APP)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        else:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        mode = self.mode
        source = preaggregate_spark(df) if mode == "aggregate" else df
        merge = DeltaTable.forPath(self.session, self.path).alias("t").merge(source.alias("s"), "t.id = s.id")
        if mode == "first_row":
            merge = merge.whenNotMatchedInsertAll()
        elif mode == "first_row_seq":
            merge = merge.whenMatchedUpdateAll(condition="s.seq < t.seq").whenNotMatchedInsertAll()
        elif mode == "partial_update":
            clauses = partial_update_clauses(df.columns)
            merge = (merge.whenMatchedUpdate(condition=clauses["matched"], set=clauses["update"])
                     .whenNotMatchedInsert(values=clauses["insert"]))
        else:
            merge = merge.whenMatchedUpdate(set=AGGREGATE_UPDATE).whenNotMatchedInsertAll()
        merge.execute()


def sink_for(mode: str, path: str, app_id: str = "bench") -> Any:
    from upsertsink import UpsertSink

    options: dict[str, Any] = {"merge_engine": mode.removesuffix("_seq")}
    if mode == "first_row_seq":
        options["sequence_by"] = "seq"
    elif mode == "partial_update":
        options["sequence_groups"] = GROUPS
    elif mode == "aggregate":
        options.update(aggregates=AGGREGATES, sequence_by="seq")
    return UpsertSink(path, "id", app_id=app_id, **options)


# ---------------------------------------------------------------- tables on disk


class Seeds:
    """One base table per (engine, mode, rows), copied fresh for every trial."""

    def __init__(self, work: Path, spark: Any = None):
        self.work, self.spark = work, spark

    def seed(self, engine: str, mode: str, rows: int) -> Path:
        from deltalake import write_deltalake

        kind = "first_row" if mode.startswith("first_row") else mode
        seed = self.work / f"seed-{engine}-{kind}-{rows}"
        if seed.exists():
            return seed
        base = base_table(mode, rows)
        if engine == "spark":
            parquet = self.work / f"seed-{kind}-{rows}.parquet"
            pq.write_table(base, parquet)
            files = max(1, rows // 100_000)
            df = self.spark.read.parquet(str(parquet))
            df.repartitionByRange(files, "id").sortWithinPartitions("id").write.format("delta").save(str(seed))
        else:
            for i, start in enumerate(range(0, rows, 100_000)):  # one file per 100k keys, in key order
                write_deltalake(str(seed), base.slice(start, 100_000), mode="error" if i == 0 else "append")
        return seed

    def fresh(self, engine: str, mode: str, rows: int, name: str) -> str:
        dst = self.work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(self.seed(engine, mode, rows), dst)
        return str(dst)


def read_table(path: str, columns: list[str]) -> list[tuple]:
    from deltalake import DeltaTable, QueryBuilder

    got = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all()).to_pylist()
    return sorted(tuple(r.get(c) for c in columns) for r in got)


def model_rows(mode: str, batches: list[list[dict]], columns: list[str]) -> list[tuple]:
    import merge_engine_models as M

    if mode == "first_row":
        table = M.first_row(batches, ["id"], columns=columns)
    elif mode == "first_row_seq":
        table = M.first_row(batches, ["id"], "seq", columns=columns)
    elif mode == "partial_update":
        table = M.partial_update(batches, ["id"], sequence_groups=GROUPS, columns=columns)
    else:
        table = M.aggregate(batches, ["id"], AGGREGATES, "seq", columns=columns)
    return sorted(tuple(r[c] for c in columns) for r in table.values())


# ---------------------------------------------------------------- the check


def check(engine: str, mode: str, rows: int, seeds: Seeds, spark: Any, with_sink: bool) -> dict:
    """A few batches into a small table, each side against the model; and the traps of the hand-written side."""
    columns = base_table(mode, 1).column_names
    batches = [micro_batch(mode, rows, max(8, rows // 10), b) for b in range(3)]
    expected = model_rows(mode, [base_table(mode, rows).to_pylist(), *(b.to_pylist() for b in batches)], columns)
    out: dict[str, Any] = {"engine": engine, "mode": mode, "rows": rows, "batches": len(batches)}
    sides = ["raw", "sink"] if with_sink else ["raw"]
    for side in sides:
        path = seeds.fresh(engine, mode, rows, f"check-{engine}-{mode}-{side}")
        writer = _writer(engine, mode, side, path, spark)
        for b, batch in enumerate(batches):
            writer(batch, b)
            writer(batch, b)  # a replay: skipped by the marker (raw) or the batch id (sink)
        got = read_table(path, columns)
        out[f"{side}_matches_model"] = got == expected
        if got != expected:
            out[f"{side}_keys_differing"] = len(set(got) ^ set(expected))
    # the traps: an aggregate batch run again without the marker check; a first_row batch holding a key twice
    if mode == "aggregate":
        path = seeds.fresh(engine, mode, rows, f"check-{engine}-{mode}-rerun")
        raw = RawSpark(mode, spark, path) if engine == "spark" else RawEmbedded(mode, path)
        frame = raw.frame(batches[0]) if engine == "spark" else batches[0]
        raw.write(frame, None, check_marker=False)
        raw.write(frame, None, check_marker=False)
        once = model_rows(mode, [base_table(mode, rows).to_pylist(), batches[0].to_pylist()], columns)
        out["raw_rerun_keys_counted_twice"] = len(set(read_table(path, columns)) - set(once))
    if mode.startswith("first_row"):
        path = seeds.fresh(engine, mode, rows, f"check-{engine}-{mode}-dups")
        raw = RawSpark(mode, spark, path) if engine == "spark" else RawEmbedded(mode, path)
        twice = pa.concat_tables([batches[0], batches[0].set_column(1, "val", pa.array(["other"] * len(batches[0])))])
        twice = twice.filter(pc.greater_equal(twice["id"], rows))  # new keys, each twice with two contents
        try:
            raw.write(raw.frame(twice) if engine == "spark" else twice, None, check_marker=False)
            ids = [r[0] for r in read_table(path, ["id"])]
            out["raw_duplicate_keys_inserted"] = len(ids) - len(set(ids))
        except Exception as err:  # noqa: BLE001 - an engine that refuses is a finding too
            out["raw_duplicate_keys_inserted"] = f"refused: {type(err).__name__}"
    return out


def _writer(engine: str, mode: str, side: str, path: str, spark: Any):
    if side == "raw":
        raw = RawSpark(mode, spark, path) if engine == "spark" else RawEmbedded(mode, path)
        return lambda batch, b: raw.write(raw.frame(batch) if engine == "spark" else batch, b)
    sink = sink_for(mode, path)
    return lambda batch, b: sink.write(spark.createDataFrame(batch) if engine == "spark" else batch, batch_id=b)


# ---------------------------------------------------------------- timing


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def spread(samples: list[float]) -> dict:
    return {"median": round(statistics.median(samples), 4), "min": round(min(samples), 4),
            "max": round(max(samples), 4), "samples": [round(x, 4) for x in samples]}


def bench_batch(engine: str, mode: str, rows: int, size: int, repeat: int, seeds: Seeds, spark: Any,
                with_sink: bool) -> dict:
    batch = big_batch(mode, rows, size)
    parquet = seeds.work / f"batch-{mode}-{rows}-{size}.parquet"
    if engine == "spark":  # both sides read the batch from the same parquet file, as bench_sink.py does
        pq.write_table(batch, parquet)

    def raw_once() -> float:
        path = seeds.fresh(engine, mode, rows, f"batch-{engine}-raw")
        if engine == "spark":
            raw = RawSpark(mode, spark, path)
            return timed(lambda: raw.write(raw.session.read.parquet(str(parquet)), 0))
        emb = RawEmbedded(mode, path)
        return timed(lambda: emb.write(batch, 0))

    def sink_once() -> float:
        path = seeds.fresh(engine, mode, rows, f"batch-{engine}-sink")
        sink = sink_for(mode, path)
        return timed(lambda: sink.write(spark.read.parquet(str(parquet)) if engine == "spark" else batch, batch_id=0))

    if engine == "spark":  # warm-up of both paths: JIT and Delta's first-use costs go to neither side
        raw_once()
        if with_sink:
            sink_once()
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    for trial in range(repeat):
        order = ("raw", "sink") if trial % 2 == 0 else ("sink", "raw")
        for side in order:
            if side == "sink" and not with_sink:
                continue
            times[side].append(raw_once() if side == "raw" else sink_once())
    return _summary("batch", engine, mode, {"table_rows": rows, "batch_rows": batch.num_rows}, times)


def bench_micro(engine: str, mode: str, rows: int, size: int, batches: int, warmup: int, seeds: Seeds, spark: Any,
                with_sink: bool) -> dict:
    raw_path = seeds.fresh(engine, mode, rows, f"micro-{engine}-raw")
    raw = RawSpark(mode, spark, raw_path) if engine == "spark" else RawEmbedded(mode, raw_path)
    sink = sink_for(mode, seeds.fresh(engine, mode, rows, f"micro-{engine}-sink")) if with_sink else None
    times: dict[str, list[float]] = {"raw": [], "sink": []}
    for b in range(warmup + batches):
        data = micro_batch(mode, rows, size, b)
        for side in (("raw", "sink") if b % 2 else ("sink", "raw")):
            if side == "sink" and sink is None:
                continue
            if side == "raw":
                frame = raw.frame(data) if engine == "spark" else data
                t = timed(lambda frame=frame, b=b: raw.write(frame, b))
            else:
                frame = spark.createDataFrame(data) if engine == "spark" else data
                t = timed(lambda frame=frame, b=b: sink.write(frame, batch_id=b))
            if b >= warmup:
                times[side].append(t)
    return _summary("micro", engine, mode, {"table_rows": rows, "batch_rows": size, "batches": batches}, times)


def _summary(kind: str, engine: str, mode: str, shape: dict, times: dict[str, list[float]]) -> dict:
    out = {"kind": kind, "engine": engine, "mode": mode, **shape, "raw_s": spread(times["raw"])}
    if times["sink"]:
        out["sink_s"] = spread(times["sink"])
        out["sink_over_raw"] = round(out["sink_s"]["median"] / out["raw_s"]["median"], 3)
        out["meets_target"] = out["sink_over_raw"] <= TIME_TARGET
    return out


# ---------------------------------------------------------------- memory: a fresh process per write


def _vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_write(side: str, mode: str, table: str, batch_file: str) -> None:
    """In a fresh process: read the batch, write it once, print the peak memory before and after."""
    if side == "sink":
        import upsertsink.sink  # noqa: F401 - imports count before the write, as the raw side's do
    from deltalake import DeltaTable  # noqa: F401

    batch = pq.read_table(batch_file)
    before = _vm_hwm_mib()
    t = time.perf_counter()
    if side == "raw":
        RawEmbedded(mode, table).write(batch, 0)
    else:
        sink_for(mode, table).write(batch, batch_id=0)
    elapsed = time.perf_counter() - t
    print(json.dumps({"before_write_mib": round(before, 1), "peak_mib": round(_vm_hwm_mib(), 1),
                      "write_s": round(elapsed, 3)}), flush=True)


def bench_memory(mode: str, rows: int, size: int, trials: int, seeds: Seeds, with_sink: bool) -> dict:
    batch_file = seeds.work / f"memory-{mode}-{rows}-{size}.parquet"
    pq.write_table(big_batch(mode, rows, size), batch_file)
    found: dict[str, list[dict]] = {"raw": [], "sink": []}
    for trial in range(trials):
        for side in (("raw", "sink") if trial % 2 == 0 else ("sink", "raw")):
            if side == "sink" and not with_sink:
                continue
            path = seeds.fresh("embedded", mode, rows, f"memory-{side}")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--child-mode", mode,
                   "--child-table", path, "--child-batch", str(batch_file)]
            out_file, err_file = seeds.work / "child.out", seeds.work / "child.err"
            with open(out_file, "w") as out, open(err_file, "w") as err:
                proc = subprocess.Popen(cmd, stdout=out, stderr=err)
                _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak, not the largest child's
                proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                raise SystemExit(f"{side} write of {mode} failed in its process: {err_file.read_text()[-3000:]}")
            got = json.loads(out_file.read_text().strip().splitlines()[-1])
            got["ru_maxrss_upper_bound_mib"] = round(usage.ru_maxrss / 1024, 1)
            found[side].append(got)
    out = {"kind": "memory", "engine": "embedded", "mode": mode, "table_rows": rows, "batch_rows": size,
           "raw": found["raw"], "raw_peak_mib": max(x["peak_mib"] for x in found["raw"])}
    if found["sink"]:
        out["sink"] = found["sink"]
        out["sink_peak_mib"] = max(x["peak_mib"] for x in found["sink"])
        out["sink_over_raw"] = round(out["sink_peak_mib"] / out["raw_peak_mib"], 3)
        out["meets_target"] = out["sink_over_raw"] <= MEMORY_TARGET
    return out


# ---------------------------------------------------------------- main


def print_tables(results: list[dict], checks: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    t = Table("check", "engine", "mode", "raw = model", "sink = model", "hand-written traps")
    for c in checks:
        traps = []
        if "raw_rerun_keys_counted_twice" in c:
            traps.append(f"batch run twice without its marker: {c['raw_rerun_keys_counted_twice']} keys counted twice")
        if "raw_duplicate_keys_inserted" in c:
            traps.append(f"a key twice in a batch: {c['raw_duplicate_keys_inserted']} duplicate keys inserted")
        t.add_row(f"{c['rows']} rows", c["engine"], c["mode"], str(c["raw_matches_model"]),
                  str(c.get("sink_matches_model", "n/a")), "; ".join(traps))
    console.print(t)
    t = Table("kind", "engine", "mode", "rows into", "raw s (min-max)", "sink s (min-max)", f"sink/raw (<={TIME_TARGET})")
    for r in results:
        if r["kind"] == "memory":
            continue
        raw, sink = r["raw_s"], r.get("sink_s")
        t.add_row(r["kind"], r["engine"], r["mode"], f"{r['batch_rows']:,} into {r['table_rows']:,}",
                  f"{raw['median']:.3f} ({raw['min']:.3f}-{raw['max']:.3f})",
                  f"{sink['median']:.3f} ({sink['min']:.3f}-{sink['max']:.3f})" if sink else "not available yet",
                  f"{r['sink_over_raw']:.2f}" if sink else "-")
    console.print(t)
    if not any(r["kind"] == "memory" for r in results):
        return
    t = Table("memory (fresh process)", "mode", "raw peak MiB", "sink peak MiB", "sink/raw (<=1.0)")
    for r in results:
        if r["kind"] != "memory":
            continue
        t.add_row(f"{r['batch_rows']:,} into {r['table_rows']:,}", r["mode"], f"{r['raw_peak_mib']:.0f}",
                  f"{r['sink_peak_mib']:.0f}" if "sink_peak_mib" in r else "not available yet",
                  f"{r['sink_over_raw']:.2f}" if "sink_over_raw" in r else "-")
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--micro-batches", type=int, default=30)
    ap.add_argument("--micro-size", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--engines", default="embedded,spark")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--memory-trials", type=int, default=1, help="fresh processes per side and mode (0: none)")
    ap.add_argument("--memory-rows", type=int, help="the memory measurement's table (default: --rows; the upsert "
                    "figure of issue #47 is 1M rows into 10M)")
    ap.add_argument("--memory-batch", type=int, help="the memory measurement's batch (default: --batch)")
    ap.add_argument("--check-rows", type=int, default=300, help="the table of the model check (0: no check)")
    ap.add_argument("--output", default=str(RESULTS))
    ap.add_argument("--child", choices=["raw", "sink"], help=argparse.SUPPRESS)
    ap.add_argument("--child-mode", help=argparse.SUPPRESS)
    ap.add_argument("--child-table", help=argparse.SUPPRESS)
    ap.add_argument("--child-batch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_write(args.child, args.child_mode, args.child_table, args.child_batch)
        return
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown mode(s) {sorted(unknown)}; known: {', '.join(MODES)}")
    with_sink = sink_available()
    if not with_sink:
        print("sink: not available yet (UpsertSink has no merge_engine parameter): measuring the hand-written "
              "MERGEs alone", flush=True)
    start = machine()
    results: list[dict] = []
    checks: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-merge-engines-") as tmp:
        for engine in args.engines.split(","):
            spark = None
            if engine == "spark":
                from upsertsink import spark_session

                spark = spark_session("bench-merge-engines", "local[2]")
            seeds = Seeds(Path(tmp), spark)
            for mode in modes:
                if args.check_rows:
                    checks.append(check(engine, mode, args.check_rows, seeds, spark, with_sink))
                    print(json.dumps(checks[-1]), flush=True)
                for result in (
                    bench_batch(engine, mode, args.rows, args.batch, args.repeat, seeds, spark, with_sink),
                    bench_micro(engine, mode, args.rows, args.micro_size, args.micro_batches, args.warmup, seeds,
                                spark, with_sink),
                ):
                    results.append(result)
                    print(json.dumps({k: v for k, v in result.items() if k not in ("raw_s", "sink_s")} |
                                     {"raw_median_s": result["raw_s"]["median"],
                                      "sink_median_s": result.get("sink_s", {}).get("median")}), flush=True)
                if engine == "embedded" and args.memory_trials:
                    results.append(bench_memory(mode, args.memory_rows or args.rows, args.memory_batch or args.batch,
                                                args.memory_trials, seeds, with_sink))
                    print(json.dumps({k: v for k, v in results[-1].items() if k not in ("raw", "sink")}), flush=True)
            for p in Path(tmp).iterdir():  # the next engine's seeds are its own; keep the disk small
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    print_tables(results, checks)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({
        "benchmark": "merge_engines", "sink_available": with_sink, "targets": {
            "time": f"sink <= {TIME_TARGET}x the hand-written MERGE (median)",
            "memory": "embedded: sink peak <= the hand-written MERGE's peak (fresh process per write)"},
        "table_rows": args.rows, "batch_rows": args.batch, "repeat": args.repeat,
        "micro": {"batches": args.micro_batches, "size": args.micro_size, "warmup": args.warmup},
        "machine": start, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "checks": checks, "results": results,
    }, indent=2) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
