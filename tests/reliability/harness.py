"""The reliability harness: a change feed, the model it must converge to, and writer processes.

The feed has inserts, updates, deletes (``op = 'D'``), exact duplicates, several rows of one key in a batch,
out-of-order (older) events and a batch that is entirely stale. Every (key, sequence) pair occurs once with
one content, so the model is order-independent: a key ends as its highest-sequence event, absent when that
event is a delete. Batches a marker skips are not applied, so the model takes the batches that are.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

HERE = Path(__file__).resolve().parent
WRITER = HERE / "writer.py"
SCHEMA = pa.schema([("id", pa.int64()), ("val", pa.string()), ("seq", pa.int64()), ("op", pa.string())])
KEYS = ["id"]
SEQUENCE = "seq"
DELETE_WHEN = "op = 'D'"


def change_feed(seed: int, batches: int = 30, keys: int = 40, size: tuple[int, int] = (6, 16)) -> list[list[dict]]:
    """A deterministic change feed of ``batches`` batches over ``keys`` keys."""
    rng = random.Random(seed)
    clock = 0
    latest: dict[int, int] = {}
    used: set[tuple[int, int]] = set()
    feed: list[list[dict]] = []
    for b in range(batches):
        rows: list[dict] = []
        if b == batches // 2 and latest:
            # an entirely stale batch: every row older than what the key already had
            for k in sorted(latest)[:5]:
                seq = latest[k] * 10 - 9
                if (k, seq) not in used:
                    used.add((k, seq))
                    rows.append({"id": k, "val": f"old{k}", "seq": seq, "op": "U"})
            feed.append(rows)
            continue
        for _ in range(rng.randint(*size)):
            k = rng.randrange(keys)
            clock += 1
            if rng.random() < 0.15 and k in latest:
                seq = latest[k] * 10 - rng.randint(1, 9)  # an older event for the key, arriving late
            else:
                seq = clock * 10
                latest[k] = max(latest.get(k, 0), clock)
            if (k, seq) in used:
                continue
            used.add((k, seq))
            op = "D" if rng.random() < 0.25 else "U"
            row = {"id": k, "val": f"v{k}-{seq}-{op}", "seq": seq, "op": op}
            rows.append(row)
            if rng.random() < 0.1:
                rows.append(dict(row))  # an exact duplicate in the same batch
        feed.append(rows)
    return feed


def model(batches: list[list[dict]]) -> dict[int, tuple[str, int]]:
    """The table the applied batches must give: per key its highest-sequence event, unless a delete."""
    best: dict[int, dict] = {}
    for rows in batches:
        for r in rows:
            if r["id"] not in best or r["seq"] > best[r["id"]]["seq"]:
                best[r["id"]] = r
    return {k: (r["val"], r["seq"]) for k, r in sorted(best.items()) if r["op"] != "D"}


def table_state(path: str) -> dict[int, tuple[str, int]]:
    """The table as {id: (val, seq)}; raises if a key occurs twice."""
    rows = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT id, val, seq FROM t").read_all())
    state: dict[int, tuple[str, int]] = {}
    for r in rows.to_pylist():
        if r["id"] in state:
            raise AssertionError(f"duplicate key {r['id']} in {path}")
        state[r["id"]] = (r["val"], r["seq"])
    return dict(sorted(state.items()))


def history_model(batches: list[list[dict]]) -> list[tuple]:
    """The history table (SCD type 2, ``op`` not tracked) the applied batches must give: per key, its events
    in sequence order; an upsert with another ``val`` closes the open version and opens one, a delete closes
    it. Rows are (id, __START_AT, __END_AT, val, seq)."""
    events = {(r["id"], r["seq"]): r for rows in batches for r in rows}
    out = []
    for key in sorted({k for k, _ in events}):
        current = None
        for seq in sorted(s for k, s in events if k == key):
            e = events[(key, seq)]
            if e["op"] == "D":
                if current is not None:
                    out.append((key, current[0], seq, current[1], current[2]))
                current = None
            elif current is None or current[1] != e["val"]:
                if current is not None:
                    out.append((key, current[0], seq, current[1], current[2]))
                current = (seq, e["val"], seq)
            else:
                current = (current[0], e["val"], seq)
        if current is not None:
            out.append((key, current[0], None, current[1], current[2]))
    return out


def history_state(path: str) -> list[tuple]:
    """A history table as sorted (id, __START_AT, __END_AT, val, seq) rows."""
    sql = 'SELECT id, "__START_AT", "__END_AT", val, seq FROM t'
    rows = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all()).to_pylist()
    return sorted((r["id"], r["__START_AT"], r["__END_AT"], r["val"], r["seq"]) for r in rows)


def arrow_batch(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def run_writer(
    path: str, feed_file: Path, *, engine: str = "embedded", start: int = 0, stop: int | None = None,
    app_id: str = "feed", fault: str | None = None, fault_mode: str | None = None, timeout: float = 600,
    extra_env: dict[str, str] | None = None, batch_ids: bool = True, result_file: Path | None = None,
    order: list[int] | None = None, late_batches: str = "refuse", remote: str | None = None, scd2: bool = False,
    connect_large: bool = False, spark_only: bool = False,
) -> subprocess.CompletedProcess:
    """Run writer.py in a child process: batches [start, stop) of the feed, one write each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_FAULT")}
    # writers compact their tombstones every few files, so that compaction happens inside these short feeds
    env.setdefault("UPSERTSINK_COMPACT_TOMBSTONES_AT", "3")
    env.setdefault("UPSERTSINK_COMPACT_HISTORY_AT", "3")  # and their history tables' event logs
    if fault:
        env["UPSERTSINK_FAULT"] = fault
    if fault_mode:
        env["UPSERTSINK_FAULT_MODE"] = fault_mode
    env.update(extra_env or {})
    cmd = [sys.executable, str(WRITER), "--path", path, "--feed", str(feed_file), "--engine", engine,
           "--start", str(start), "--app-id", app_id]
    if stop is not None:
        cmd += ["--stop", str(stop)]
    if not batch_ids:
        cmd.append("--no-batch-ids")
    if result_file is not None:
        cmd += ["--result", str(result_file)]
    if order is not None:
        cmd += ["--order", ",".join(map(str, order))]
    if late_batches != "refuse":
        cmd += ["--late-batches", late_batches]
    if remote is not None:
        cmd += ["--remote", remote]
    if scd2:
        cmd.append("--scd2")
    if connect_large:
        cmd.append("--connect-large")
    if spark_only:
        cmd.append("--spark-only")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def late_order(n: int, seed: int) -> list[int]:
    """A send order in which about a third of the batches arrive after a later one (a backfill's shape)."""
    rng = random.Random(seed)
    held = sorted(rng.sample(range(n - 1), max(1, n // 3)))
    return [i for i in range(n) if i not in held] + held


def record_of(path: str, app_id: str) -> tuple[tuple[int, int], ...]:
    """The committed batch ids the table's log records for ``app_id`` (read as a new process would)."""
    from upsertsink.table import lineage
    from upsertsink.table.files import open_snapshot

    lineage._CACHE.clear()
    return lineage.app_state(open_snapshot(path), app_id).record.ranges


def save_feed(feed: list[list[dict]], path: Path) -> Path:
    path.write_text(json.dumps(feed))
    return path
