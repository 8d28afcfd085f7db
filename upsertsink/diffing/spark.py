"""The keyed comparison on Spark: fingerprints first, then an exact comparison of only the rows whose key
may differ (see docs/diff.md, "How it works")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from upsertsink import io
from upsertsink.diffing.hashing import (
    fold_row_hashes,
    nullable_columns,
    spark_fingerprint,
    spark_fingerprints,
    spark_row_hash,
)
from upsertsink.diffing.hashing import quote as _q
from upsertsink.diffing.inputs import Request, Side, history_keys, plan_columns, type_mismatch
from upsertsink.diffing.result import STATUSES, DiffResult, equal_result, sample_frame, sample_records
from upsertsink.fingerprint import has_repeats

log = logging.getLogger(__name__)

#: Up to this many rows, key uniqueness is checked by sorting 64-bit key hashes on the driver.
DRIVER_KEY_CHECK_ROWS = 20_000_000
#: Up to this many differing key hashes, the rows to compare exactly are picked with a broadcast semi-join.
BROADCAST_SUSPECTS = 2_000_000
#: Rows per partition of the key-hash aggregation that narrows a comparison (at least shuffle partitions).
ROWS_PER_PARTITION = 500_000


def _session(sides: tuple[Side, Side]) -> Any:
    for side in sides:
        if side.kind == "spark":
            return side.obj.sparkSession
    from upsertsink.session import current_or_new_session

    return current_or_new_session(feature="diff on Spark")


def _frame(side: Side, spark: Any) -> Any:
    if side.kind == "spark":
        return side.obj
    if side.path is not None:
        return io.read_spark(spark, side.path)
    return spark.createDataFrame(io.to_arrow_table(side.obj))


def _spark_common_type(name: str, lt: Any, rt: Any) -> Any:
    from pyspark.sql import types as T

    if lt.simpleString() == rt.simpleString():
        return lt
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    nums = (*ints, T.FloatType, T.DoubleType)
    strings = (T.StringType, T.CharType, T.VarcharType)
    stamps = (T.TimestampType, T.TimestampNTZType)
    if isinstance(lt, T.NullType):
        return rt
    if isinstance(rt, T.NullType):
        return lt
    if isinstance(lt, ints) and isinstance(rt, ints):
        return T.LongType()
    if isinstance(lt, nums) and isinstance(rt, nums):
        return T.DoubleType()
    if isinstance(lt, T.DecimalType) and isinstance(rt, T.DecimalType):
        scale = max(lt.scale, rt.scale)
        return T.DecimalType(min(38, max(lt.precision - lt.scale, rt.precision - rt.scale) + scale), scale)
    if isinstance(lt, T.DecimalType) or isinstance(rt, T.DecimalType):
        dec, other = (lt, rt) if isinstance(lt, T.DecimalType) else (rt, lt)
        if isinstance(other, ints):
            return T.DecimalType(min(38, max(dec.precision - dec.scale, 19) + dec.scale), dec.scale)
        if isinstance(other, nums):
            return T.DoubleType()
    if isinstance(lt, strings) and isinstance(rt, strings):
        return T.StringType()
    if isinstance(lt, stamps) and isinstance(rt, stamps):
        return T.TimestampType()
    raise type_mismatch(name, lt.simpleString(), rt.simpleString())


def _spark_project(df: Any, cols: list[str], types: dict[str, Any]) -> Any:
    from pyspark.sql import types as T

    from upsertsink.sparkapi import F

    exprs = []
    for c in cols:
        e = F.col(_q(c))
        target = types[c]
        if df.schema[c].dataType.simpleString() != target.simpleString():
            e = e.cast(target)
        if isinstance(target, T.MapType):  # maps have no equality or hash in Spark: compare sorted entries
            e = F.array_sort(F.map_entries(e))
        elif "map<" in target.simpleString():  # a map inside a struct or array: compared by its JSON text
            e = F.to_json(e)
        exprs.append(e.alias(c))
    return df.select(*exprs)


def _has_duplicates(df: Any, keys: list[str], rows: int, nullable: set[str], unique: bool | None = None) -> bool:
    """Exact: all 64-bit key hashes distinct proves unique keys; a repeated hash (a duplicate, or in theory a
    collision) is settled by an exact group-by. Up to DRIVER_KEY_CHECK_ROWS rows the hashes are checked on the
    driver with ``fingerprint.has_repeats`` (8 bytes a row; ``unique`` when that was done already), much
    cheaper than a distinct count's shuffle."""
    from upsertsink.sparkapi import F

    if unique is None:
        kh = spark_row_hash(keys, nullable).alias("kh")
        if rows <= DRIVER_KEY_CHECK_ROWS:
            unique = not has_repeats(df.select(kh).toArrow().column("kh").to_numpy())
        else:
            unique = df.select(kh).agg(F.count_distinct("kh").alias("d")).first()["d"] == rows
    if unique:
        return False
    dup = df.groupBy(*[F.col(_q(k)) for k in keys]).count().filter(F.col("count") > 1).limit(1).count()
    return dup > 0


def _fingerprints(
    lp: Any, rp: Any, keys: list[str], cols: list[str], nullable: set[str], left_rows: int | None
) -> tuple[tuple[int, int, int], tuple[int, int, int], bool | None]:
    """Both sides' fingerprints, and whether the left side's key hashes are distinct when that came for free.

    When the left side is known (from its Delta log or parquet footers) to hold at most
    DRIVER_KEY_CHECK_ROWS rows, its key and row hashes travel to the driver in the one scan that
    fingerprints it (16 bytes a row), so proving its keys unique needs no second scan; the right side is
    aggregated by Spark in a job of its own, run alongside (its tasks fill the slots the left scan leaves,
    and the driver's share, receiving and checking the hashes, overlaps it). Otherwise both fingerprints are
    one aggregation job, and the key check scans later.
    """
    if left_rows is None or left_rows > DRIVER_KEY_CHECK_ROWS:
        lfp, rfp = spark_fingerprints(lp, rp, cols, nullable)
        return lfp, rfp, None
    from pyspark import InheritableThread

    right: dict[str, Any] = {}

    def run_right() -> None:
        try:
            right["fp"] = spark_fingerprint(rp, cols, nullable)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread below
            right["error"] = err

    worker = InheritableThread(target=run_right, name="upsertsink-diff-right")
    worker.start()
    try:
        hashed = lp.select(
            spark_row_hash(keys, nullable).alias("kh"), spark_row_hash(cols, nullable).alias("rh")
        ).toArrow()
        lfp = fold_row_hashes(hashed.column("rh").to_numpy())
        unique = not has_repeats(hashed.column("kh").to_numpy())
    finally:
        worker.join()
    if "error" in right:
        raise right["error"]
    return lfp, right["fp"], unique


def _spark_suspects(
    lp: Any, rp: Any, keys: list[str], cols: list[str], rows: int, nullable: set[str]
) -> tuple[list[Any], Any, Any]:
    """Narrow both sides to the rows whose key may differ, before the exact keyed comparison.

    One hash aggregation over (key hash, side, row hash) - 17 bytes a row, fixed-width buffers - finds the
    key hashes whose rows are not exactly one identical row on each side. Only those rows (cached) go
    through the exact group-by and join, so a 1% difference costs a narrow shuffle plus an exact diff of 1%
    of the rows.
    A key-hash collision only adds rows to the exact comparison; it cannot hide a difference.
    """
    from pyspark import StorageLevel

    from upsertsink.sparkapi import F

    kh, rh = spark_row_hash(keys, nullable), spark_row_hash(cols, nullable)

    def tagged(df: Any, side: int) -> Any:
        return df.select(kh.alias("__kh"), F.lit(side).alias("__s"), rh.alias("__rh"))

    side, rowh = F.col("__s"), F.col("__rh")
    # Hash-partitioning by key hash first makes the aggregation one pass after the shuffle (a map-side
    # partial aggregate cannot shrink mostly-distinct keys), and ~500k rows a partition keeps maps small.
    shuffle = int(lp.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    parts = max(shuffle, -(-rows // ROWS_PER_PARTITION))
    per_key = (
        tagged(lp, 0)
        .unionByName(tagged(rp, 1))
        .repartition(parts, "__kh")
        .groupBy("__kh")
        .agg(
            F.count(F.when(side == 0, 1)).alias("nl"),
            F.count(F.when(side == 1, 1)).alias("nr"),
            F.max(F.when(side == 0, rowh)).alias("hl"),
            F.max(F.when(side == 1, rowh)).alias("hr"),
        )
    )
    suspects = per_key.filter("nl != 1 OR nr != 1 OR hl != hr").select("__kh")
    suspects.persist(StorageLevel.MEMORY_AND_DISK)
    n = suspects.count()
    log.debug("%d key hashes differ", n)
    build = F.broadcast(suspects) if n <= BROADCAST_SUSPECTS else suspects

    def narrowed(df: Any) -> Any:
        probe = "__upsertsink_key_hash"  # not a user column name; dropped again after the semi-join
        out = df.withColumn(probe, kh).join(build, F.col(probe) == build["__kh"], "left_semi").drop(probe)
        return out.persist(StorageLevel.MEMORY_AND_DISK)

    lsub, rsub = narrowed(lp), narrowed(rp)
    lsub.select(F.lit(0)).unionAll(rsub.select(F.lit(0))).count()  # materialize both in one job
    return [suspects, lsub, rsub], lsub, rsub


def compare(left: Side, right: Side, req: Request, say: Callable[[str], None]) -> DiffResult:
    """Compare two sides on Spark (the active session, or a new local one)."""
    spark = _session((left, right))  # first: says so when the spark extra is missing
    from functools import reduce

    from pyspark.sql import types as T

    from upsertsink.sparkapi import F

    keys, tol = req.keys, req.tolerance
    lf, rf = _frame(left, spark), _frame(right, spark)
    keys = history_keys(lf.columns, rf.columns, keys)  # two history tables: version by version
    compared = plan_columns(lf.columns, rf.columns, keys, req.columns, req.ignore)
    cols = [*keys, *compared]
    ls, rs = lf.schema, rf.schema
    types = {c: _spark_common_type(c, ls[c].dataType, rs[c].dataType) for c in cols}
    lp, rp = _spark_project(lf, cols, types), _spark_project(rf, cols, types)

    say("fingerprinting both sides")
    nullable = nullable_columns(lp, rp)  # both sides hash alike: a column nullable on either side
    left_rows = left.path.num_rows() if left.path is not None else None
    (nl_rows, *lfp), (nr_rows, *rfp), unique = _fingerprints(lp, rp, keys, cols, nullable, left_rows)
    base = {"keys": keys, "columns": compared, "rows_left": nl_rows, "rows_right": nr_rows, "engine": "spark"}
    if (nl_rows, *lfp) == (nr_rows, *rfp):
        say("checking for duplicate keys")
        if not _has_duplicates(lp, keys, nl_rows, nullable, unique):
            log.debug("fingerprints match and keys are unique: equal")
            return equal_result(keys, compared, nl_rows, "spark")
        fingerprint_match = True
    else:
        fingerprint_match = False

    say("finding the keys that differ")
    cached, lp, rp = _spark_suspects(lp, rp, keys, cols, nl_rows + nr_rows, nullable)
    say("comparing by key")
    nk, nc = len(keys), len(compared)

    def grouped(df: Any, kname: str, vname: str, nname: str) -> Any:
        aggs = [F.count(F.lit(1)).alias(nname)]
        aggs += [F.first(F.col(_q(c))).alias(f"{vname}{j}") for j, c in enumerate(compared)]
        return df.groupBy(*[F.col(_q(k)).alias(f"{kname}{i}") for i, k in enumerate(keys)]).agg(*aggs)

    lg, rg = grouped(lp, "__k", "__l", "__nl"), grouped(rp, "__rk", "__r", "__nr")
    cond = reduce(lambda a, b: a & b, [F.col(f"__k{i}").eqNullSafe(F.col(f"__rk{i}")) for i in range(nk)])
    joined = lg.join(rg, cond, "full_outer")
    nl, nr = F.col("__nl"), F.col("__nr")
    flags = []
    for j, c in enumerate(compared):
        lv, rv = F.col(f"__l{j}"), F.col(f"__r{j}")
        same = lv.eqNullSafe(rv)
        if tol is not None and isinstance(types[c], (T.FloatType, T.DoubleType, T.DecimalType)):
            same = same | F.coalesce(F.abs(lv.cast("double") - rv.cast("double")) <= F.lit(tol), F.lit(False))
        flags.append(~same)
    dup = (F.coalesce(nl, F.lit(0)) > 1) | (F.coalesce(nr, F.lit(0)) > 1)
    any_diff = reduce(lambda a, b: a | b, flags) if flags else F.lit(False)
    status = (
        F.when(dup, "duplicate_key")
        .when(nl.isNull(), "only_in_right")
        .when(nr.isNull(), "only_in_left")
        .when(any_diff, "changed")
    )
    diffs = joined.select(
        *[F.coalesce(F.col(f"__k{i}"), F.col(f"__rk{i}")).alias(f"__k{i}") for i in range(nk)],
        status.alias("__status"),
        nl,
        nr,
        *[F.col(f"__l{j}") for j in range(nc)],
        *[F.col(f"__r{j}") for j in range(nc)],
        *[f.alias(f"__d{j}") for j, f in enumerate(flags)],
    ).filter(F.col("__status").isNotNull())
    try:
        st = F.col("__status")
        aggs = [F.count(F.when(st == s, 1)).alias(s) for s in STATUSES]
        aggs += [F.count(F.when(nl > 1, 1)).alias("__dl"), F.count(F.when(nr > 1, 1)).alias("__dr")]
        aggs += [F.count(F.when((st == "changed") & F.col(f"__d{j}"), 1)).alias(f"__c{j}") for j in range(nc)]
        counts = diffs.agg(*aggs).first()
        say("collecting samples")
        order = [F.col(f"__k{i}").asc_nulls_first() for i in range(nk)]

        def take(n: int) -> Any:
            rows = diffs.orderBy(*order).limit(n).toArrow().to_pylist()
            return sample_frame(sample_records(rows, keys, compared), keys, compared)

        samples = take(req.sample_size)
    finally:
        for df in cached:
            df.unpersist()
    changed_columns = {c: int(counts[f"__c{j}"]) for j, c in enumerate(compared) if counts[f"__c{j}"]}
    result = DiffResult(
        equal=False,
        only_in_left=int(counts["only_in_left"]),
        only_in_right=int(counts["only_in_right"]),
        changed=int(counts["changed"]),
        changed_columns=changed_columns,
        duplicate_keys_left=int(counts["__dl"]),
        duplicate_keys_right=int(counts["__dr"]),
        duplicate_keys=int(counts["duplicate_key"]),
        fingerprint_match=fingerprint_match,
        _samples=samples,
        _more_samples=take,
        **base,
    )
    result.equal = result.differences == 0
    return result


