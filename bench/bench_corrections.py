"""What counting the rows a write leaves alone, a dry run and a restatement cost (issue #45 items 3-5),
embedded engine, side by side in one run.

A 200k-row batch into a 1M-row Delta table (``sequence_by``), each trial on a fresh copy of the same base:

- ``raw``: the hand-written MERGE of the batch (deltalake, ``s.seq > t.seq`` guarded update, insert);
- ``write, all change``: the sink writing a batch whose every row is an update or an insert (the MERGE
  accounts for every row: nothing more is read);
- ``write, half left alone``: half the rows are at the stored sequence with other content, a quarter equal to
  the stored row: the sink counts them (``ignored_equal_sequence``, ``unchanged``) with one more read of the
  rows the batch's keys reach;
- ``dry run``: ``dry_run=True`` of that same batch (nothing committed);
- ``restate``: ``restate=True`` of a committed batch with half its rows corrected at the same sequence.

    .venv/bin/python bench/bench_corrections.py [--rows 1000000] [--batch 200000] [--repeat 3]

Writes bench/results/corrections.json.
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

RESULTS = Path(__file__).resolve().parent / "results" / "corrections.json"


def rows(ids: np.ndarray, seq: np.ndarray, amount: np.ndarray) -> pa.Table:
    return pa.table({"id": ids, "amount": amount, "note": pa.array([f"n{i % 977}" for i in ids]), "seq": seq})


def base_table(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return rows(ids, np.ones(n, dtype=np.int64), (ids % 1000).astype(np.float64))


def all_change(n: int, batch: int) -> pa.Table:
    half = batch // 2
    ids = np.concatenate([np.arange(0, n, n // half, dtype=np.int64)[:half], np.arange(n, n + batch - half, dtype=np.int64)])
    return rows(ids, np.full(batch, 2, dtype=np.int64), (ids % 1000).astype(np.float64) + 0.5)


def half_alone(n: int, batch: int) -> pa.Table:
    ids = np.arange(0, n, n // batch, dtype=np.int64)[:batch]
    seq = np.ones(batch, dtype=np.int64)
    amount = (ids % 1000).astype(np.float64)
    amount[: batch // 2] += 0.25  # at the stored sequence, other content: ignored
    seq[batch * 3 // 4:] = 2  # a quarter newer and changed
    amount[batch * 3 // 4:] += 1.0
    return rows(ids, seq, amount)  # the quarter between: equal to the stored rows


def raw_merge(path: str, data: pa.Table) -> None:
    from deltalake import DeltaTable

    (DeltaTable(path).merge(data, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all(predicate="s.seq > t.seq").when_not_matched_insert_all().execute())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from deltalake import write_deltalake

    from upsertsink import UpsertSink

    work = Path(tempfile.mkdtemp(prefix="bench-corrections-"))
    base = work / "base"
    write_deltalake(str(base), base_table(args.rows))
    UpsertSink(str(base), "id", sequence_by="seq", app_id="bench").write(all_change(args.rows, 1000), batch_id=0)
    changing, alone = all_change(args.rows, args.batch), half_alone(args.rows, args.batch)
    corrected = half_alone(args.rows, args.batch)

    def fresh() -> str:
        target = work / f"t{time.perf_counter_ns()}"
        shutil.copytree(base, target)
        return str(target)

    def sink(path: str) -> UpsertSink:
        return UpsertSink(path, "id", sequence_by="seq", app_id="bench")

    cases = {
        "raw MERGE (all change)": lambda p: raw_merge(p, changing),
        "write, all change": lambda p: sink(p).write(changing, batch_id=1),
        "raw MERGE (half left alone)": lambda p: raw_merge(p, alone),
        "write, half left alone": lambda p: sink(p).write(alone, batch_id=1),
        "dry run (half left alone)": lambda p: sink(p).write(alone, batch_id=1, dry_run=True),
        "restate (half corrected)": lambda p: sink(p).write(corrected, batch_id=0, restate=True),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, fn in cases.items():
            path = fresh()
            t = time.perf_counter()
            fn(path)
            times[name].append(time.perf_counter() - t)
            shutil.rmtree(path)
    shutil.rmtree(work)
    out = {"machine": machine(), "rows": args.rows, "batch": args.batch, "repeat": args.repeat,
           "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
           "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()}}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2))
    for name, v in times.items():
        print(f"{name:32s} median {statistics.median(v):7.3f} s  ({', '.join(f'{x:.3f}' for x in v)})")


if __name__ == "__main__":
    main()
