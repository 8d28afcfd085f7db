"""The canonical row hash and the batch fingerprint: one definition, used by both engines.

A batch's fingerprint is recorded with its commit and recomputed when the batch is sent again, by whichever
engine sends it; so the hash is defined on Arrow data, after a canonical encoding that does not depend on
how an engine happens to store a value:

- integers of any width hash as int64, floats as float64 with ``-0.0`` as ``0.0`` and one NaN;
- dates as days, timestamps as microseconds since the epoch (the instant for zoned ones, the wall clock for
  ``timestamp_ntz``), decimals and strings by their text, binaries by their bytes, nested values by their JSON;
- a null hashes to a constant of its own.

A row's hash combines its columns' hashes in sorted column-name order; the fingerprint digests the column
names with their type categories, the row count, and the sum of the row hashes (order-independent).
The embedded engine calls this on its Arrow table; the Spark engine runs the same code on each partition's
Arrow batches (``mapInArrow``) and adds the partial sums on the driver.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

ALGORITHM = "upsertsink-row-hash64-v3"
# Earlier per-engine algorithms: still readable, compared by row count only.
LEGACY_ALGORITHMS = ("spark-xxhash64-v1", "arrow-pandas-hash64-v2")

# Up to this many rows, key uniqueness is decided from 64-bit key hashes in one process (8 bytes a row);
# above it, the Spark engine groups by key instead. One threshold for every caller.
LOCAL_KEY_CHECK_ROWS = 4_000_000

# Batches with at least this many rows have their columns hashed on several threads.
PARALLEL_ROWS = 50_000

_MIX = np.uint64(0x9E3779B97F4A7C15)
_NULL = np.uint64(0x5BD1E9955BD1E995)
_CANONICAL_NAN = np.float64("nan")


@dataclass(frozen=True)
class Fingerprint:
    """An order-independent digest of a batch's rows, and the algorithm that made it."""

    algorithm: str
    rows: int
    value: str

    def matches(self, other: Fingerprint) -> bool | None:
        """True/False when comparable; None when the algorithms differ and only the row counts agree."""
        if self.algorithm != other.algorithm:
            return None if self.rows == other.rows else False
        return self.rows == other.rows and self.value == other.value


def category(t: pa.DataType) -> str:
    """A coarse, engine-independent type name: what schema checks and the fingerprint compare."""
    if pa.types.is_dictionary(t):
        return category(t.value_type)
    checks = (
        ("integer", pa.types.is_integer), ("float", pa.types.is_floating), ("decimal", pa.types.is_decimal),
        ("boolean", pa.types.is_boolean), ("date", pa.types.is_date), ("timestamp", pa.types.is_timestamp),
        ("null", pa.types.is_null),
    )
    for name, check in checks:
        if check(t):
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    # nested types by their shape, not by Arrow's names for the parts (Spark says "element", pandas "item")
    if pa.types.is_map(t):
        return f"map<{category(t.key_type)},{category(t.item_type)}>"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        return f"list<{category(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{category(f.type)}" for f in t) + ">"
    return f"other:{t}"


# ---------------------------------------------------------------- per column


def _hash_values(values: np.ndarray) -> np.ndarray:
    """Hash Python objects (the distinct strings, bytes and texts of a column): pandas' SipHash, fixed key."""
    return pd.util.hash_array(values, categorize=False)


_M1 = np.uint64(0xBF58476D1CE4E5B9)


def _mix64(x: np.ndarray) -> np.ndarray:
    """A multiply-xorshift finaliser, in place: spreads each 64-bit row word before the rows are summed."""
    with np.errstate(over="ignore"):
        shifted = x >> np.uint64(32)
        x ^= shifted
        x *= _M1
        np.right_shift(x, np.uint64(29), out=shifted)
        x ^= shifted
    return x


def _text_hash(col: pa.ChunkedArray) -> np.ndarray:
    """Hash text-like values through their distinct values (Arrow finds them; only those are hashed)."""
    encoded = pc.dictionary_encode(col).combine_chunks()
    distinct = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    table = np.append(_hash_values(distinct) if len(distinct) else np.empty(0, np.uint64), _NULL)
    return table[pc.fill_null(encoded.indices, len(distinct)).to_numpy()]


def _numeric(col: pa.ChunkedArray) -> np.ndarray:
    """The canonical fixed-width encoding of a numeric-like column, as uint64 (nulls filled)."""
    t = col.type
    if col.null_count:
        col = pc.fill_null(col, False if pa.types.is_boolean(t) else 0)  # nulls get their own hash later
    if pa.types.is_floating(t):
        v = pc.cast(col, pa.float64()).to_numpy() + 0.0  # -0.0 + 0.0 is 0.0
        nan = np.isnan(v)
        if nan.any():
            v[nan] = _CANONICAL_NAN  # every NaN alike
        return v.view(np.uint64)
    if pa.types.is_timestamp(t):
        col = pc.cast(col, pa.timestamp("us", t.tz), safe=False)
        return col.cast(pa.int64()).to_numpy().view(np.uint64)
    if pa.types.is_date(t):  # days since the epoch
        col = pc.cast(col, pa.date32()).cast(pa.int32())
    elif pa.types.is_time32(t):
        col = col.cast(pa.int32())
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return col.cast(pa.int64()).to_numpy().view(np.uint64)
    if pa.types.is_boolean(t):
        return col.to_numpy(zero_copy_only=False).astype(np.uint64)
    # integers of every width and sign: the int64 two's complement
    return pc.cast(col, pa.int64(), safe=False).to_numpy().view(np.uint64)


def column_hash(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A 64-bit word per value of one column, by the canonical encoding of its type: fixed-width values as
    their canonical 64-bit form, text-like ones hashed (SipHash), nulls a constant of their own."""
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col], type=col.type)
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    t = col.type
    if pa.types.is_null(t):
        return np.full(len(col), _NULL, dtype=np.uint64)
    if pa.types.is_decimal(t):
        return _text_hash(pc.cast(col, pa.string()))
    if category(t) in ("string", "binary"):
        return _text_hash(col)
    if pa.types.is_nested(t):
        text = [None if v is None else json.dumps(v, sort_keys=True, default=str) for v in col.to_pylist()]
        return _text_hash(pa.chunked_array([pa.array(text, pa.string())]))
    if category(t) in ("integer", "float", "timestamp", "date", "boolean") or pa.types.is_time(t) \
            or pa.types.is_duration(t):
        hashes = _numeric(col)  # the canonical word itself; rows are mixed once, after combining
    else:
        text = [None if v is None else str(v) for v in col.to_pylist()]
        return _text_hash(pa.chunked_array([pa.array(text, pa.string())]))
    if col.null_count:
        hashes = np.where(pc.is_null(col).to_numpy(zero_copy_only=False), _NULL, hashes)
    return hashes


def combine(hashes: Sequence[np.ndarray], rows: int) -> np.ndarray:
    """Combine per-column hashes into one per row, in the order given."""
    out = np.zeros(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for h in hashes:  # out = (out ^ h) * MIX + 1, in place
            np.bitwise_xor(out, h, out=out)
            np.multiply(out, _MIX, out=out)
            np.add(out, np.uint64(1), out=out)
    return out


class Hasher:
    """Row and key hashes of one Arrow table, each column hashed once."""

    def __init__(self, table: pa.Table, exclude: Iterable[str] = (), order: Sequence[str] | None = None):
        self.table = table
        # sorted column names, or the caller's order when it renamed columns (the Spark engine does)
        self.columns = list(order) if order is not None else sorted(
            c for c in table.column_names if c not in set(exclude)
        )
        self._cache: dict[str, np.ndarray] = {}

    def column(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = column_hash(self.table[name])
        return self._cache[name]

    def rows(self) -> np.ndarray:
        """One 64-bit hash per row: the columns' words combined in order, then mixed."""
        missing = [c for c in self.columns if c not in self._cache]
        if len(missing) > 1 and self.table.num_rows >= PARALLEL_ROWS:
            # Arrow and numpy release the GIL: the columns of a large batch are hashed side by side.
            for name, hashes in zip(missing, _pool().map(lambda c: column_hash(self.table[c]), missing), strict=True):
                self._cache[name] = hashes
        return _mix64(combine([self.column(c) for c in self.columns], self.table.num_rows))

    def keys(self, keys: Sequence[str]) -> np.ndarray:
        return combine([self.column(k) for k in keys], self.table.num_rows)

    def schema_text(self) -> str:
        return schema_text((c, category(self.table.schema.field(c).type)) for c in self.columns)


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="upsertsink-hash")


def schema_text(columns: Iterable[tuple[str, str]]) -> str:
    return ";".join(f"{name}:{cat}" for name, cat in sorted(columns))


def hash_sum(hashes: np.ndarray) -> int:
    """The sum of row hashes modulo 2**64 (partial sums add up the same way)."""
    return int(hashes.sum(dtype=np.uint64)) if len(hashes) else 0


def digest(schema: str, rows: int, total: int) -> Fingerprint:
    """The fingerprint of ``rows`` rows of ``schema`` whose row hashes sum to ``total`` (mod 2**64)."""
    text = f"{ALGORITHM}|{schema}|{rows}|{total % 2**64}"
    return Fingerprint(ALGORITHM, rows, hashlib.sha256(text.encode()).hexdigest()[:32])


def fingerprint(table: pa.Table, exclude: Iterable[str] = ()) -> Fingerprint:
    """The fingerprint of an Arrow table (columns in ``exclude`` left out)."""
    hasher = Hasher(table, exclude)
    return digest(hasher.schema_text(), table.num_rows, hash_sum(hasher.rows()))


def has_repeats(hashes: np.ndarray) -> bool:
    """True when some hash occurs twice (distinct hashes prove distinct values)."""
    if len(hashes) < 2:
        return False
    return not pd.Index(hashes).is_unique  # a hash table: about half the time of sorting them
