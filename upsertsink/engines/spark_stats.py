"""What the Spark engine learns about a batch in one pass: run on each partition through ``mapInArrow``.

The function below runs in Spark's Python workers (it imports no pyspark): for its partition it gives one
row with the row count, the sum of the canonical row hashes (``upsertsink.fingerprint``, the same code the
embedded engine runs), null/NaN/cast-failure counts, min/max per key, the key hashes and, for small
partitions, the key values themselves. The driver adds the rows up.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import fingerprint as fp

# A partition ships its key hashes (8 bytes a row) when it has at most this many rows, its key values when
# it has at most KEY_VALUES_ROWS.
KEY_HASH_ROWS = 2_000_000
KEY_VALUES_ROWS = 20_000


def output_fields(
    checked: Sequence[str], floats: Sequence[str], oks: Sequence[str], ranged: Sequence[tuple[str, object]],
    key_rows: bool = False,
) -> list[tuple[str, object]]:
    """(name, spark type) of the stats row; ``ranged`` pairs a key with its Spark type. Types are filled
    in by the caller (this module imports no pyspark): the strings 'long' and 'binary', or the key's type."""
    fields: list[tuple[str, object]] = [("rows", "long"), ("hash", "long"), ("deletes", "long")]
    fields += [(f"null_{i}", "long") for i in range(len(checked))]
    fields += [(f"nan_{i}", "long") for i in range(len(floats))]
    fields += [(f"bad_{i}", "long") for i in range(len(oks))]
    for i, (_, dtype) in enumerate(ranged):
        fields += [(f"min_{i}", dtype), (f"max_{i}", dtype)]
    fields += [("key_hashes", "binary"), ("key_values", "binary")]
    if key_rows:
        fields.append(("key_rows", "binary"))
    return fields


def partition_stats(
    batches: Iterator[pa.RecordBatch], *, keys: Sequence[str], hashed: Sequence[str], checked: Sequence[str],
    floats: Sequence[str], oks: Sequence[str], ranged: Sequence[str], flag: str | None, hashes_only: bool = False,
    key_rows: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """One stats row for the partition (nothing for an empty partition). With ``key_rows``, those columns of
    every row too (Arrow IPC), whatever the partition's size."""
    chunks = list(batches)
    if not chunks or not any(b.num_rows for b in chunks):
        return
    table = pa.Table.from_batches(chunks)
    hasher = fp.Hasher(table, order=hashed)  # ``hashed`` is in the order of the original names, sorted
    total = fp.hash_sum(hasher.rows())
    out: dict[str, pa.Array] = {
        "rows": pa.array([table.num_rows], pa.int64()),
        "hash": pa.array([np.uint64(total).astype(np.int64)], pa.int64()),
        "deletes": pa.array([int(pc.sum(table[flag]).as_py() or 0) if flag else 0], pa.int64()),
    }
    if hashes_only:
        yield pa.RecordBatch.from_pydict(out)
        return
    for i, c in enumerate(checked):
        out[f"null_{i}"] = pa.array([table[c].null_count], pa.int64())
    for i, c in enumerate(floats):
        out[f"nan_{i}"] = pa.array([int(pc.sum(pc.is_nan(table[c])).as_py() or 0)], pa.int64())
    for i, c in enumerate(oks):
        out[f"bad_{i}"] = pa.array([int(pc.sum(pc.invert(pc.fill_null(table[c], True))).as_py() or 0)], pa.int64())
    for i, c in enumerate(ranged):
        mm = pc.min_max(table[c])
        out[f"min_{i}"] = pa.array([mm["min"].as_py()], table[c].type)
        out[f"max_{i}"] = pa.array([mm["max"].as_py()], table[c].type)
    key_hashes = None
    if table.num_rows <= KEY_HASH_ROWS:
        key_hashes = hasher.keys(keys).tobytes() if set(keys) <= set(hashed) else None
    out["key_hashes"] = pa.array([key_hashes], pa.binary())
    values = None
    if table.num_rows <= KEY_VALUES_ROWS:
        sink = pa.BufferOutputStream()
        part = table.select(list(keys))
        with pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part)
        values = sink.getvalue().to_pybytes()
    out["key_values"] = pa.array([values], pa.binary())
    if key_rows:
        out["key_rows"] = pa.array([_ipc(table.select(list(key_rows)))], pa.binary())
    yield pa.RecordBatch.from_pydict(out)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_key_values(blobs: Sequence[bytes], names: Sequence[str]) -> pa.Table:
    """The key values shipped by the partitions, under the key columns' real names."""
    table = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs])
    return table.rename_columns(list(names))
