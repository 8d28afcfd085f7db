"""Row hashing for the keyed diff, on both engines: one 64-bit hash per row over given columns, and the
order-independent fingerprint of a table (row count and the sum of its row hashes).

The two engines hash differently (Spark's ``xxhash64``, Arrow columns through ``pandas.util.hash_array``);
a diff only ever compares hashes made by one engine. Columns are always taken in sorted name order, and
each value carries a null flag, so ``(null, 1)`` and ``(1, null)`` hash apart.
"""

from __future__ import annotations

from typing import Any

_NULL_HASH = 0x9E3779B97F4A7C15
_PRIME = 0x100000001B3


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


# ------------------------------------------------------------------------------------------- Spark


def spark_row_hash(cols: list[str]) -> Any:
    """A Spark column: ``xxhash64`` of the row's values in ``cols`` (sorted), each after its null flag."""
    from pyspark.sql import functions as F

    args = []
    for c in sorted(cols):
        # the null flag keeps (null, 1) and (1, null) apart: xxhash64 skips null arguments
        args += [F.isnull(F.col(quote(c))), F.col(quote(c))]
    return F.xxhash64(*args)


def spark_fingerprints(lp: Any, rp: Any, cols: list[str]) -> list[tuple[int, int, int]]:
    """(rows, sum of high 32 bits, sum of low 32 bits) of each side's per-row hash, in one Spark job.

    Summing the halves as longs cannot overflow below 2**31 rows (ANSI mode would fail on overflow)."""
    from pyspark.sql import functions as F

    def one(df: Any, tag: int) -> Any:
        h = F.col("h")
        return df.select(spark_row_hash(cols).alias("h")).agg(
            F.lit(tag).alias("side"),
            F.count(F.lit(1)).alias("n"),
            F.sum(F.shiftright(h, 32)).alias("hi"),
            F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
        )

    rows = sorted(one(lp, 0).unionByName(one(rp, 1)).collect(), key=lambda r: r["side"])
    return [(int(r["n"]), int(r["hi"] or 0), int(r["lo"] or 0)) for r in rows]


# ------------------------------------------------------------------------------------------- Arrow


def arrow_hash(arr: Any) -> Any:
    """One uint64 hash per value of an Arrow array; nulls hash to a constant no value is likely to make."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    valid = pc.is_valid(arr).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        values = pc.fill_null(arr, False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False)
        h = pd.util.hash_array(values)
    elif pa.types.is_temporal(t):
        raw = arr.view(pa.int64()) if t.bit_width == 64 else arr.view(pa.int32()).cast(pa.int64())
        h = pd.util.hash_array(pc.fill_null(raw, 0).to_numpy(zero_copy_only=False))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        values = pc.fill_null(arr, "").to_numpy(zero_copy_only=False)
        h = pd.util.hash_array(values.astype(object), categorize=False)
    else:  # binary, decimal, nested: hash a faithful text form
        values = np.array([repr(v) for v in arr.to_pylist()], dtype=object)
        h = pd.util.hash_array(values, categorize=False)
    return np.where(valid, h, np.uint64(_NULL_HASH))


def arrow_fingerprint(table: Any, cols: list[str]) -> tuple[int, int]:
    """(rows, sum of the mixed per-row hashes as uint64) of an Arrow table over ``cols``."""
    import numpy as np
    import pandas as pd

    acc = np.zeros(table.num_rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in sorted(cols):
            acc = acc * np.uint64(_PRIME) + arrow_hash(table.column(c).combine_chunks())
        mixed = pd.util.hash_array(acc)  # non-linear per-row mix, so swapped cells change the sum
        return table.num_rows, int(mixed.sum(dtype=np.uint64))
