"""History tables (SCD type 2): the sink against the hand-written SCD2 MERGE, both engines, one run.

The base table: ``--keys`` keys with three versions each (sequences 10, 20, 30; the last one open), written
by the sink, so its event log holds every event. The change batch: ``--changes`` events, 90% in order (a new
address at sequence 40 for an existing key) and 10% late (an address change at 25, inside the version
[20, 30) of another key). Every trial starts from a fresh copy of the base; hand-written and sink trials
alternate; medians are reported.

The hand-written SCD2 MERGE is the common "union the updates twice and MERGE" pattern: the updates keyed by
their key (to close the open version) plus, for keys whose tracked column changed, once more with a null
merge key (to insert the new version); then one MERGE on ``key = merge_key AND __END_AT IS NULL``. It gets
the late events wrong (it closes the open version at the late event's sequence, before its own start, and
opens a new version on top); the bench counts the keys whose history differs from the sink's.

    .venv/bin/python bench/bench_history.py [--keys 1000000] [--changes 10000] [--repeat 3]
                                            [--engines embedded,spark] [--growth 100000,300000,1000000]
                                            [--output bench/results/history.json]

Prints a table and writes bench/results/history.json. Target: sink <= 1.3x the hand-written MERGE.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sink import machine

RESULTS = Path(__file__).resolve().parent / "results" / "history.json"
START, END = "__START_AT", "__END_AT"


def events(ids: np.ndarray, seq: int, tag: str) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "addr": pa.array([f"{tag}-{i % 9973}" for i in ids]),
        "tier": pa.array(np.where(ids % 3 == 0, "gold", "basic")),
        "seq": pa.array(np.full(len(ids), seq, np.int64)),
        "op": pa.array(["U"] * len(ids)),
    })


def change_batch(keys: int, changes: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    chosen = rng.choice(keys, size=changes, replace=False).astype(np.int64)
    late = changes // 10
    return pa.concat_tables([events(chosen[late:], 40, "new"), events(chosen[:late], 25, "late")])


def sink_for(path: str):
    from upsertsink import UpsertSink

    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", scd_type=2,
                      track_history=["addr"], app_id="bench")


def build_base(path: Path, keys: int, engine: str, spark=None) -> float:
    t = time.perf_counter()
    sink = sink_for(str(path))
    ids = np.arange(keys, dtype=np.int64)
    for b, (seq, tag) in enumerate(((10, "a"), (20, "b"), (30, "c"))):
        batch = events(ids, seq, tag)
        sink.write(batch if engine == "embedded" else spark.createDataFrame(batch), batch_id=b)
    return time.perf_counter() - t


def staged_arrow(table_path: str, changes: pa.Table) -> pa.Table:
    """The hand-written pattern's source, built with deltalake and Arrow: every update keyed (mk = id), plus
    the updates whose address differs from the open version's once more with a null key (to insert)."""
    from deltalake import DeltaTable

    dt = DeltaTable(table_path)
    wanted = pc.field("id").isin(changes["id"]) & pc.field(END).is_null()
    current = dt.to_pyarrow_dataset().to_table(columns=["id", "addr"], filter=wanted)
    joined = changes.join(current.rename_columns(["id", "t_addr"]), keys="id", join_type="inner")
    changed = joined.filter(pc.not_equal(joined["addr"], joined["t_addr"])).drop_columns(["t_addr"])
    keyed = changes.append_column("mk", changes["id"])
    nulls = changed.select(changes.column_names).append_column("mk", pa.nulls(changed.num_rows, pa.int64()))
    return pa.concat_tables([keyed, nulls])


def raw_embedded(path: str, changes: pa.Table) -> None:
    from deltalake import DeltaTable

    source = staged_arrow(path, changes)
    cols = ["id", "addr", "tier", "seq", "op"]
    (DeltaTable(path).merge(source, f't."id" = s."mk" AND t."{END}" IS NULL', source_alias="s", target_alias="t")
     .when_matched_update(updates={f'"{END}"': 's."seq"'}, predicate='t."addr" <> s."addr"')
     .when_not_matched_insert(updates={**{f'"{c}"': f's."{c}"' for c in cols}, f'"{START}"': 's."seq"',
                                       f'"{END}"': "CAST(NULL AS BIGINT)"})
     .execute())


def raw_spark(spark, path: str, changes_path: str) -> None:
    spark.read.parquet(changes_path).createOrReplaceTempView("updates")
    spark.sql(f"""
        MERGE INTO delta.`{path}` t
        USING (
          SELECT u.id AS mk, u.* FROM updates u
          UNION ALL
          SELECT CAST(NULL AS BIGINT) AS mk, u.* FROM updates u
            JOIN delta.`{path}` c ON u.id = c.id AND c.{END} IS NULL AND c.addr <> u.addr
        ) s
        ON t.id = s.mk AND t.{END} IS NULL
        WHEN MATCHED AND t.addr <> s.addr THEN UPDATE SET t.{END} = s.seq
        WHEN NOT MATCHED THEN INSERT (id, addr, tier, seq, op, {START}, {END})
          VALUES (s.id, s.addr, s.tier, s.seq, s.op, s.seq, CAST(NULL AS BIGINT))
    """)


def histories(path: str, ids: pa.Array) -> dict[int, list]:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_dataset().to_table(
        columns=["id", START, END, "addr"], filter=pc.field("id").isin(ids)).to_pylist()
    out: dict[int, list] = {}
    for r in sorted(rows, key=lambda r: (r["id"], r[START])):
        out.setdefault(r["id"], []).append((r[START], r[END], r["addr"]))
    return out


def trial(work: Path, base: Path, name: str) -> str:
    dst = work / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(base, dst)
    return str(dst)


def run(engine: str, work: Path, keys: int, changes: int, repeat: int, spark=None) -> dict:
    base = work / f"base-{engine}-{keys}"
    built = build_base(base, keys, engine, spark)
    batch = change_batch(keys, changes)
    changes_path = str(work / "changes.parquet")
    import pyarrow.parquet as pq

    pq.write_table(batch, changes_path)
    raw_t, sink_t = [], []
    if engine == "spark":  # warm-up of both paths
        raw_spark(spark, trial(work, base, "warm-raw"), changes_path)
        sink_for(trial(work, base, "warm-sink")).write(spark.read.parquet(changes_path), batch_id=3)
    for _ in range(repeat):
        raw_path = trial(work, base, "raw")
        t = time.perf_counter()
        if engine == "embedded":
            raw_embedded(raw_path, batch)
        else:
            raw_spark(spark, raw_path, changes_path)
        raw_t.append(time.perf_counter() - t)
        sink_path = trial(work, base, "sink")
        source = batch if engine == "embedded" else spark.read.parquet(changes_path)
        t = time.perf_counter()
        sink_for(sink_path).write(source, batch_id=3)
        sink_t.append(time.perf_counter() - t)
    ours, theirs = histories(sink_path, batch["id"]), histories(raw_path, batch["id"])
    wrong = sum(1 for k in ours if ours[k] != theirs.get(k))
    late_keys = set(batch.filter(pc.equal(batch["seq"], 25))["id"].to_pylist())
    raw_med, sink_med = statistics.median(raw_t), statistics.median(sink_t)
    return {
        "engine": engine, "keys": keys, "versions": 3 * keys, "changes": changes, "late": len(late_keys),
        "base_build_s": round(built, 2), "raw_s": [round(x, 3) for x in raw_t], "sink_s": [round(x, 3) for x in sink_t],
        "raw_median_s": round(raw_med, 3), "sink_median_s": round(sink_med, 3), "ratio": round(sink_med / raw_med, 2),
        "raw_wrong_keys": wrong, "raw_wrong_keys_late": sum(1 for k in late_keys if ours[k] != theirs.get(k)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--changes", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--engines", default="embedded,spark")
    p.add_argument("--growth", default="", help="comma-separated key counts: the sink's write at each (embedded)")
    p.add_argument("--output", type=Path, default=RESULTS, help="where the JSON goes (default: %(default)s)")
    args = p.parse_args()
    engines = args.engines.split(",")
    out = {"machine": machine(), "runs": [], "growth": []}
    spark = None
    if "spark" in engines:
        from upsertsink import spark_session

        spark = spark_session("bench-history", "local[2]")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        work = Path(tmp)
        for engine in engines:
            result = run(engine, work, args.keys, args.changes, args.repeat, spark)
            out["runs"].append(result)
            print(f"{engine:9} {result['keys']:>9} keys  raw {result['raw_median_s']:.2f}s  sink "
                  f"{result['sink_median_s']:.2f}s  ratio {result['ratio']:.2f}x  raw wrong keys "
                  f"{result['raw_wrong_keys']} ({result['raw_wrong_keys_late']} of {result['late']} late)", flush=True)
            for d in work.iterdir():
                if d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)
        for keys in [int(k) for k in args.growth.split(",") if k]:
            result = run("embedded", work, keys, args.changes, args.repeat)
            out["growth"].append(result)
            print(f"growth    {keys:>9} keys  raw {result['raw_median_s']:.2f}s  sink {result['sink_median_s']:.2f}s "
                  f" ratio {result['ratio']:.2f}x", flush=True)
            for d in work.iterdir():
                if d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
