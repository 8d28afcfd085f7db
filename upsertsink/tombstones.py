"""Remembered deletes ("tombstones"): what keeps an older row, sent again later, from bringing a key back.

With ``delete_when`` and ``sequence_by``, every delete the sink applies is remembered as (key, sequence) in a
small Delta table inside the target folder, ``<target>/_upsertsink_tombstones`` (columns ``k0..kN`` for the
key values, whatever the key columns are called, then ``sequence``, ``deleted_at_us`` and ``batch_id``).
Both engines read and write it with deltalake. The rules, which docs/reliability.md argues in full:

1. A batch's deletes are recorded *before* its data commit. A writer that dies in between leaves a
   tombstone whose delete is not applied yet; re-sending the batch applies it.
2. A tombstone never suppresses the delete that recorded it: a delete at sequence S passes a tombstone at S.
3. A row of a later batch whose sequence is below a tombstone's (or equal to it, for a non-delete) is
   *stale*: it becomes a delete at the tombstone's sequence instead of an upsert. On a consistent table that
   delete changes nothing; on a table where a racing or killed writer let the older row in, it removes it.
4. After its data commit a writer looks again: a tombstone recorded concurrently for one of its keys, newer
   than the row it wrote, is applied at once by a repair commit (and again on a re-send of the batch, if the
   writer died before the repair). So no interleaving of writers resurrects a deleted key.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import fingerprint as fp
from upsertsink.conflicts import deltalake_conflict

log = logging.getLogger(__name__)

TOMBSTONE_DIR = "_upsertsink_tombstones"
SEQUENCE = "sequence"
DELETED_AT = "deleted_at_us"
BATCH = "batch_id"
# Folders the sink keeps inside a target: a target that holds only these is still a new table.
HELPER_DIRS = (TOMBSTONE_DIR,)


def key_column(i: int) -> str:
    return f"k{i}"


def tombstone_path(target: str) -> str:
    return target.rstrip("/") + "/" + TOMBSTONE_DIR


class TombstoneStore:
    """The tombstone table of one target, for one sink's key and sequence columns."""

    def __init__(self, target: str, keys: tuple[str, ...], sequence: str, storage_options: dict[str, str] | None):
        self.path = tombstone_path(target)
        self.keys = keys
        self.sequence = sequence
        self.storage_options = storage_options
        self.key_columns = [key_column(i) for i in range(len(keys))]

    def _table(self):
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path, storage_options=self.storage_options):
            return None
        return DeltaTable(self.path, storage_options=self.storage_options)

    def version(self) -> int | None:
        table = self._table()
        return None if table is None else table.version()

    def read(self, ranges: dict[str, tuple[object, object]] | None = None) -> pa.Table:
        """The tombstones (``k0..kN``, ``sequence``) whose keys fall in ``ranges`` (key -> (min, max)).

        The ranges let deltalake skip files by their statistics; an empty table when none was recorded.
        """
        table = self._table()
        columns = [*self.key_columns, SEQUENCE]
        if table is None:
            return pa.table({c: pa.array([], pa.null()) for c in columns})
        condition = None
        for i, key in enumerate(self.keys):
            if ranges and key in ranges and ranges[key][0] is not None:
                low, high = ranges[key]
                part = (pc.field(key_column(i)) >= low) & (pc.field(key_column(i)) <= high)
                condition = part if condition is None else condition & part
        try:
            return table.to_pyarrow_dataset().to_table(columns=columns, filter=condition)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return table.to_pyarrow_table(columns=columns)  # a range of a type the files cannot compare

    def matching(
        self, key_hashes: np.ndarray | None, sample: pa.Table | None = None,
        ranges: dict[str, tuple[object, object]] | None = None,
    ) -> pa.Table:
        """The tombstones whose key hash is among ``key_hashes`` (the batch's); exact matching is the join's.

        With ``key_hashes`` None every tombstone in ``ranges`` is returned.

        ``sample`` (a table with the batch's key columns) gives the key types the tombstone keys are cast to.
        """
        tombs = self.read(ranges)
        if tombs.num_rows == 0 or (key_hashes is not None and len(key_hashes) == 0):
            return tombs.slice(0, 0)
        if sample is not None:
            tombs = self._cast_keys(tombs, sample)
        if key_hashes is None:  # a batch too large to hash in one process: the engine's join matches
            return tombs
        hashes = fp.combine([fp.column_hash(tombs[c]) for c in self.key_columns], tombs.num_rows)
        keep = np.isin(hashes, key_hashes)
        return tombs.filter(pa.array(keep))

    def _cast_keys(self, tombs: pa.Table, sample: pa.Table) -> pa.Table:
        for i, (kc, key) in enumerate(zip(self.key_columns, self.keys, strict=True)):
            want = sample.schema.field(key).type
            if tombs.schema.field(kc).type != want:
                try:
                    tombs = tombs.set_column(i, kc, pc.cast(tombs[kc], want))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue  # a remembered key that cannot be of this type cannot match this batch
        return tombs

    def record(self, rows: pa.Table, batch_id: int | None, retention_us: int | None) -> None:
        """Remember deletes: ``rows`` has ``k0..kN`` and ``sequence``; an existing tombstone keeps the higher.

        Tombstones older than the retention are dropped in the same commit. A lost commit race raises
        RetryableConflict (the caller retries the whole attempt).
        """
        from deltalake import CommitProperties, DeltaTable

        from upsertsink.spec import SOURCE, TARGET, MergePlan

        now_us = int(time.time() * 1_000_000)
        rows = rows.append_column(DELETED_AT, pa.array([now_us] * rows.num_rows, pa.int64()))
        rows = rows.append_column(BATCH, pa.array([batch_id] * rows.num_rows, pa.int64()))
        try:
            table = self._table()
            if table is None:
                schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in rows.schema])
                DeltaTable.create(self.path, schema, mode="ignore", storage_options=self.storage_options)
                table = DeltaTable(self.path, storage_options=self.storage_options)
            plan = MergePlan(tuple(self.key_columns), tuple(rows.column_names), SEQUENCE)
            merger = table.merge(
                rows, plan.on("datafusion"), source_alias=SOURCE, target_alias=TARGET,
                commit_properties=CommitProperties(custom_metadata={"userMetadata": "upsertsink tombstones"}),
            )
            newer = f"{plan.ref(SOURCE, SEQUENCE, 'datafusion')} > {plan.ref(TARGET, SEQUENCE, 'datafusion')}"
            merger = merger.when_matched_update(updates=plan.update_set("datafusion"), predicate=newer)
            merger = merger.when_not_matched_insert(updates=plan.insert_values("datafusion"))
            if retention_us is not None:
                cutoff = int(now_us - retention_us)  # an int computed here, never user data
                merger = merger.when_not_matched_by_source_delete(
                    predicate=f"{plan.ref(TARGET, DELETED_AT, 'datafusion')} < {cutoff}"
                )
            merger.execute()
        except Exception as err:
            conflict = deltalake_conflict(err)
            if conflict is not None:
                raise conflict from err
            raise


def stale_mask(seq: pa.ChunkedArray, is_delete: pa.ChunkedArray, tomb_seq: pa.ChunkedArray) -> pa.ChunkedArray:
    """Rule 3 on Arrow: rows older than their key's tombstone, or as old and not themselves a delete."""
    older = pc.less(seq, tomb_seq)
    same_not_delete = pc.and_(pc.equal(seq, tomb_seq), pc.invert(is_delete))
    return pc.fill_null(pc.or_(older, same_not_delete), False)


def stored_sequences(snapshot: Any, keys: tuple[str, ...], sequence: str | None, wanted: pa.Table) -> pa.Table:
    """The table's (k0..kN, sequence) for the keys in ``wanted`` (k0..kN), read with deltalake."""
    kc = [key_column(i) for i in range(len(keys))]
    condition = None
    for k, c in zip(keys, kc, strict=True):
        part = pc.field(k).isin(wanted[c].combine_chunks())
        condition = part if condition is None else condition & part
    table = snapshot.table
    if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        from deltalake import QueryBuilder

        # deltalake's Arrow reader returns nulls for column-mapped tables; DataFusion reads them right.
        cols = ", ".join('"' + c.replace('"', '""') + '"' for c in (*keys, sequence))
        rows = pa.table(QueryBuilder().register("t", table).execute(f"SELECT {cols} FROM t").read_all())
        rows = rows.filter(condition)
    else:
        rows = table.to_pyarrow_dataset().to_table(columns=[*keys, sequence], filter=condition)
    return rows.rename_columns([*kc, SEQUENCE])
