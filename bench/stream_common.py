"""What the micro-batch and long-stream benchmarks share: a change feed of micro-batches, the raw writers
(each engine's hand-written idempotent MERGE) and the sink writer, and a count of the files on disk.

The raw side is what a careful user writes by hand for ``foreachBatch``: the same MERGE clauses (a delete, an
update and an insert, each guarded by the sequence column) with the engine's own idempotence marker
(delta-rs ``CommitProperties(app_transactions=...)`` on a table handle kept and updated incrementally;
delta-spark ``txnAppId``/``txnVersion`` on a session of its own). It has no tombstones: a delete followed by an
older insert of the same key brings the row back there, which the sink prevents.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

DELETE_SHARE = 0.1


def base_table(keys: int) -> pa.Table:
    ids = np.arange(keys, dtype=np.int64)
    return pa.table({
        "id": ids, "customer": pa.array([f"c-{i % 5000}" for i in ids]), "amount": (ids % 997).astype(np.float64),
        "status": pa.array(["created"] * keys), "seq": np.zeros(keys, dtype=np.int64), "op": pa.array(["U"] * keys),
    })


class Feed:
    """Micro-batch ``b`` of ``size`` rows over a table of ``keys`` keys: on a small table, keys drawn at random
    from all of them; on a large one (over 100k keys), half updates in a window of recent keys that moves on
    with the stream and half new keys beyond the end, as a change feed over a growing table looks. 10% of the
    rows are deletes."""

    def __init__(self, keys: int, size: int, seed: int = 7):
        self.keys, self.size, self.rng = keys, size, np.random.default_rng(seed)

    def batch(self, b: int) -> pa.Table:
        rng, size = self.rng, self.size
        if self.keys <= 100_000:
            ids = rng.choice(self.keys, size, replace=False).astype(np.int64)
        else:
            half = size // 2
            window = self.keys - 50_000 + (b * half) % 40_000
            ids = np.concatenate([rng.choice(np.arange(window, window + 10_000), half, replace=False),
                                  np.arange(self.keys + b * half, self.keys + b * half + size - half)]).astype(np.int64)
        op = np.where(rng.random(size) < DELETE_SHARE, "D", "U")
        return pa.table({
            "id": ids, "customer": pa.array([f"c-{i % 5000}" for i in ids]), "amount": rng.random(size),
            "status": pa.array(["updated"] * size), "seq": np.full(size, b + 1, dtype=np.int64), "op": pa.array(op),
        })


CLAUSES = {
    "delete": "s.op = 'D' AND s.seq > t.seq",
    "update": "s.op <> 'D' AND s.seq > t.seq",
    "insert": "s.op <> 'D'",
}


class RawEmbedded:
    """The hand-written delta-rs MERGE: a handle kept and updated incrementally, the app transaction marker."""

    name = "raw"

    def __init__(self, path: str):
        from deltalake import DeltaTable

        self.table = DeltaTable(path)

    def write(self, batch: pa.Table, batch_id: int) -> None:
        from deltalake import CommitProperties, Transaction

        self.table.update_incremental()
        props = CommitProperties(app_transactions=[Transaction("raw", batch_id)])
        (self.table.merge(batch, "t.id = s.id", source_alias="s", target_alias="t", commit_properties=props)
         .when_matched_delete(CLAUSES["delete"]).when_matched_update_all(CLAUSES["update"])
         .when_not_matched_insert_all(CLAUSES["insert"]).execute())


class RawSpark:
    """The hand-written delta-spark MERGE with Delta's own txnAppId/txnVersion on a session of its own."""

    name = "raw"

    def __init__(self, spark: Any, path: str):
        self.session = spark.newSession()
        self.path = path

    def frame(self, batch: pa.Table) -> Any:
        return self.session.createDataFrame(batch)

    def write(self, df: Any, batch_id: int) -> None:
        from delta.tables import DeltaTable

        self.session.conf.set("spark.databricks.delta.write.txnAppId", "raw")
        self.session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        (DeltaTable.forPath(self.session, self.path).alias("t").merge(df.alias("s"), "t.id = s.id")
         .whenMatchedDelete(CLAUSES["delete"]).whenMatchedUpdateAll(CLAUSES["update"])
         .whenNotMatchedInsertAll(CLAUSES["insert"]).execute())


def sink_for(path: str) -> Any:
    from upsertsink import UpsertSink

    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", app_id="bench")


def make_tables(
    work: Path, keys: int, engine: str, spark: Any = None, log_retention: str | None = None
) -> tuple[str, str]:
    """Two identical tables of ``keys`` rows (raw and sink), in files of up to 100k rows sorted by key; with
    ``log_retention`` (e.g. ``"interval 1 minute"``) as their ``delta.logRetentionDuration`` and
    ``delta.deletedFileRetentionDuration``."""
    from deltalake import DeltaTable, write_deltalake

    seed = work / f"seed-{engine}-{keys}-{log_retention or 'default'}"
    if not seed.exists():
        table = base_table(keys)
        if engine == "spark":
            import pyarrow.parquet as pq

            pq.write_table(table, work / f"seed-{keys}.parquet")
            files = max(1, keys // 100_000)
            df = spark.read.parquet(str(work / f"seed-{keys}.parquet"))
            df.repartitionByRange(files, "id").sortWithinPartitions("id").write.format("delta").save(str(seed))
        else:
            for i, start in enumerate(range(0, keys, 100_000)):  # one file per 100k keys, in key order
                write_deltalake(str(seed), table.slice(start, 100_000), mode="error" if i == 0 else "append")
        if log_retention:  # the steady state of a stream older than its retention, compressed: log and removes
            DeltaTable(str(seed)).alter.set_table_properties(
                {"delta.logRetentionDuration": log_retention, "delta.deletedFileRetentionDuration": log_retention})
    paths = []
    for side in ("raw", "sink"):
        dst = work / f"{engine}-{keys}-{side}"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(seed, dst)
        paths.append(str(dst))
    return paths[0], paths[1]


def files_on_disk(path: str) -> dict[str, int]:
    """Files under a table folder: its data files, its log, and the sink's own (``_upsertsink``)."""
    counts = {"data": 0, "log": 0, "sink": 0}
    for root, _, names in os.walk(path):
        rel = os.path.relpath(root, path)
        part = "log" if rel.startswith("_delta_log") else "sink" if rel.startswith("_upsertsink") else "data"
        counts[part] += len(names)
    return counts
