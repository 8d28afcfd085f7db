"""Preparing a batch held as Arrow: the checks, hashes and duplicate resolution both engines share.

The embedded engine prepares every batch here; the Spark engine prepares small batches here too (it collects
them to the driver as Arrow, which costs less than a distributed pass for a streaming micro-batch).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import batch as B
from upsertsink import fingerprint as fp
from upsertsink.engines.base import PreparedBatch, WriteRequest
from upsertsink.predicate import evaluate_arrow
from upsertsink.spec import DELETE_FLAG


def orderable(t: pa.DataType) -> bool:
    return fp.category(t) in ("integer", "float", "decimal", "string", "date", "timestamp")


def prepare_arrow(
    table: pa.Table, request: WriteRequest, casts: Iterable[str], exclude: Iterable[str] = ()
) -> PreparedBatch:
    """Check nulls and NaNs, take the fingerprint, resolve duplicate keys, add the delete flag if missing.

    ``exclude`` names columns that are not data (the delete flag when an engine computed it already).
    """
    checked = [*request.keys, *([request.sequence] if request.sequence else [])]
    nulls = {c: table[c].null_count for c in checked}
    nans = {c: int(pc.sum(pc.is_nan(table[c])).as_py() or 0) for c in checked if pa.types.is_floating(table[c].type)}
    B.check_stats(request.keys, request.sequence, nulls, nans)
    hasher = fp.Hasher(table, exclude=[DELETE_FLAG, *exclude])
    row_hashes = hasher.rows()
    fingerprint = fp.digest(hasher.schema_text(), table.num_rows, fp.hash_sum(row_hashes))
    key_hashes = hasher.keys(request.keys)
    if fp.has_repeats(key_hashes):
        keep = resolve_duplicates(table, request.keys, request.sequence, row_hashes)
        table, key_hashes = table.take(pa.array(keep)), key_hashes[keep]
    if request.delete_when is not None and DELETE_FLAG not in table.column_names:
        table = table.append_column(pa.field(DELETE_FLAG, pa.bool_()), evaluate_arrow(request.delete_when, table))
    ranges = {}
    for k in request.keys:
        if table.num_rows and orderable(table[k].type):
            mm = pc.min_max(table[k])
            ranges[k] = (mm["min"].as_py(), mm["max"].as_py())
    sequence_range = None
    if request.sequence and table.num_rows and pa.types.is_integer(table[request.sequence].type):
        mm = pc.min_max(table[request.sequence])
        sequence_range = (mm["min"].as_py(), mm["max"].as_py())
    deletes = int(pc.sum(table[DELETE_FLAG]).as_py() or 0) if DELETE_FLAG in table.column_names else 0
    return PreparedBatch(
        table, fingerprint, table.num_rows, key_hashes, ranges, tuple(casts), delete_count=deletes,
        key_values=table.select(list(request.keys)), sequence_range=sequence_range,
    )


def resolve_duplicates(
    table: pa.Table, keys: tuple[str, ...], sequence: str | None, row_hashes: np.ndarray
) -> np.ndarray:
    """Indices of the rows to keep: exact duplicates collapse; the highest sequence wins; else an error."""
    frame = pd.DataFrame({f"k{i}": table[k].to_pandas() for i, k in enumerate(keys)})
    kcols = list(frame.columns)
    frame["_h"] = row_hashes
    frame["_i"] = np.arange(table.num_rows)
    frame = frame.drop_duplicates(subset=[*kcols, "_h"], keep="first")
    reason = "no sequence_by column to choose a row"
    if sequence is not None:
        frame["_s"] = table[sequence].to_pandas().to_numpy()[frame["_i"].to_numpy()]
        top = frame.groupby(kcols, sort=False, dropna=False)["_s"].transform("max")
        frame = frame[frame["_s"] == top]
        reason = f"equal {sequence!r} values with different content"
    dup = frame[frame.duplicated(subset=kcols, keep=False)]
    if len(dup):
        examples = sorted({tuple(r) for r in dup[kcols].itertuples(index=False, name=None)}, key=repr)
        raise B.duplicate_error(keys, examples, reason)
    return np.sort(frame["_i"].to_numpy())


def apply_tombstones(table: pa.Table, request: WriteRequest, tombstones: pa.Table) -> tuple[pa.Table, int]:
    """Rows of a prepared Arrow batch made stale by ``tombstones`` (k0..kN, sequence) turned into deletes at the
    tombstone's sequence; returns (table, stale rows). Shared by the embedded engine and the Spark engine's
    driver-side micro-batches."""
    from upsertsink.sidecar.tombstones import SEQUENCE, key_column, stale_mask

    if tombstones.num_rows == 0:
        return table, 0
    kc = [key_column(i) for i in range(len(request.keys))]
    probe = table.select(list(request.keys)).rename_columns(kc)
    probe = probe.append_column("_i", pa.array(np.arange(table.num_rows)))
    joined = probe.join(tombstones.select([*kc, SEQUENCE]), keys=kc, join_type="inner")
    if joined.num_rows == 0:
        return table, 0
    seq_type = table[request.sequence].type
    tomb = np.full(table.num_rows, None, dtype=object)
    tomb[joined["_i"].to_numpy()] = pc.cast(joined[SEQUENCE], seq_type).to_numpy(zero_copy_only=False)
    tomb_seq = pa.chunked_array([pa.array(tomb, seq_type)])
    stale = stale_mask(table[request.sequence], table[DELETE_FLAG], tomb_seq)
    count = int(pc.sum(stale).as_py() or 0)
    if count == 0:
        return table, 0
    seq = pc.if_else(stale, tomb_seq, table[request.sequence])
    table = table.set_column(table.schema.get_field_index(request.sequence), request.sequence, seq)
    table = table.set_column(table.schema.get_field_index(DELETE_FLAG), DELETE_FLAG, pc.or_(table[DELETE_FLAG], stale))
    return table, count


def key_rows(table: pa.Table, request: WriteRequest, deletes: bool) -> pa.Table:
    """The batch's delete rows (or its other rows) as (k0..kN, sequence)."""
    from upsertsink.sidecar.tombstones import SEQUENCE, key_column

    flag = table[DELETE_FLAG] if DELETE_FLAG in table.column_names else pa.chunked_array(
        [pa.array(np.zeros(table.num_rows, bool))]
    )
    chosen = table.filter(flag if deletes else pc.invert(flag))
    kc = [key_column(i) for i in range(len(request.keys))]
    assert request.sequence is not None
    return chosen.select([*request.keys, request.sequence]).rename_columns([*kc, SEQUENCE])
