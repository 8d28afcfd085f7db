"""Keyed comparison of two tables, table versions or frames: ``diff()`` and its ``DiffResult``.

Equal inputs are proven cheaply first: each side is reduced in one pass to an order-independent
fingerprint (row count and the sum of a 64-bit hash per row over the compared columns, taken in sorted
column order). Only when the fingerprints differ is the full keyed comparison run. Two engines share
these semantics: Spark (any Spark DataFrame input, or a Delta table larger than ``SPARK_THRESHOLD_BYTES``)
and the embedded engine (pandas/pyarrow, Delta tables read with deltalake; no JVM).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from upsertsink.errors import InvalidInputError, NotADeltaTableError, SchemaMismatchError

log = logging.getLogger(__name__)

#: Delta tables whose data files add up to more than this are compared on Spark by ``engine="auto"``.
SPARK_THRESHOLD_BYTES = 64 * 1024 * 1024
#: How many differing rows (in key order) are collected with the counts; ``samples(n)`` beyond it recomputes.
DEFAULT_SAMPLE_SIZE = 100
#: Up to this many rows, the Spark engine checks key uniqueness by sorting 64-bit key hashes on the driver.
DRIVER_KEY_CHECK_ROWS = 20_000_000
#: Up to this many differing key hashes, the rows to compare exactly are picked with a broadcast semi-join.
BROADCAST_SUSPECTS = 2_000_000
#: Rows per partition of the key-hash aggregation that narrows a comparison (at least shuffle partitions).
ROWS_PER_PARTITION = 500_000

STATUSES = ("only_in_left", "only_in_right", "changed", "duplicate_key")

Progress = Callable[[str], None]


# --------------------------------------------------------------------------------------------- result


@dataclass
class DiffResult:
    """What ``diff()`` found: counts, per-column change counts and a few differing rows."""

    keys: list[str]
    columns: list[str]
    equal: bool
    only_in_left: int
    only_in_right: int
    changed: int
    changed_columns: dict[str, int]
    duplicate_keys_left: int
    duplicate_keys_right: int
    rows_left: int
    rows_right: int
    engine: str
    fingerprint_match: bool
    duplicate_keys: int = 0  # distinct keys held more than once by either side, each counted once
    left_label: str = "left"
    right_label: str = "right"
    _samples: Any = field(default=None, repr=False)
    _more_samples: Callable[[int], Any] | None = field(default=None, repr=False)

    @property
    def differences(self) -> int:
        """Number of keys that differ in any way (missing on a side, changed, or duplicated)."""
        return self.only_in_left + self.only_in_right + self.changed + self.duplicate_keys

    def samples(self, n: int = 10) -> Any:
        """Up to ``n`` differing keys in key order, as a pandas DataFrame (object columns, None for null).

        Columns: the key columns, ``status`` (only_in_left, only_in_right, changed, duplicate_key),
        ``differs`` (the changed column names), ``count_left``/``count_right`` (rows with that key on each
        side), then ``left_<col>`` and ``right_<col>`` for every compared column.
        """
        import pandas as pd

        if n < 0:
            raise InvalidInputError(f"samples(n): n must be >= 0, got {n}")
        stored = self._samples if self._samples is not None else pd.DataFrame()
        if n > len(stored) and self._more_samples is not None and len(stored) < self.differences:
            stored = self._more_samples(n)
        return stored.head(n).reset_index(drop=True)

    def summary(self) -> str:
        """One line: equal, or the counts that make the inputs differ."""
        if self.equal:
            return f"equal: {self.rows_left} rows, keyed by {', '.join(self.keys)}"
        parts = [
            f"{self.only_in_left} only in left",
            f"{self.only_in_right} only in right",
            f"{self.changed} changed",
        ]
        if self.duplicate_keys_left or self.duplicate_keys_right:
            parts.append(
                f"duplicate keys: {self.duplicate_keys_left} in left, {self.duplicate_keys_right} in right"
            )
        text = f"different: {', '.join(parts)} (rows: {self.rows_left} left, {self.rows_right} right)"
        if self.changed_columns:
            cols = ", ".join(f"{c}={n}" for c, n in self.changed_columns.items())
            text += f"; changed columns: {cols}"
        return text

    def to_dict(self, limit: int = 10) -> dict[str, Any]:
        """A JSON-ready dict of the result with up to ``limit`` sample rows (values made JSON-safe)."""
        samples = self.samples(limit) if not self.equal else None
        records = []
        if samples is not None:
            for rec in samples.to_dict(orient="records"):
                records.append({k: _json_value(v) for k, v in rec.items()})
        return {
            "equal": self.equal,
            "left": self.left_label,
            "right": self.right_label,
            "keys": list(self.keys),
            "columns": list(self.columns),
            "rows_left": self.rows_left,
            "rows_right": self.rows_right,
            "only_in_left": self.only_in_left,
            "only_in_right": self.only_in_right,
            "changed": self.changed,
            "changed_columns": dict(self.changed_columns),
            "duplicate_keys_left": self.duplicate_keys_left,
            "duplicate_keys_right": self.duplicate_keys_right,
            "engine": self.engine,
            "fingerprint_match": self.fingerprint_match,
            "samples": records,
        }

    def to_json(self, limit: int = 10) -> str:
        """``to_dict(limit)`` as one JSON object."""
        return json.dumps(self.to_dict(limit), allow_nan=False)

    def format_text(self, limit: int = 10) -> str:
        """A plain-text report (summary plus one block per sample row), used by the pytest helpers."""
        lines = [self.summary()]
        if self.equal:
            return "\n".join(lines)
        samples = self.samples(limit)
        if len(samples):
            lines.append(f"first {len(samples)} of {self.differences} differing keys (key order):")
        for rec in samples.to_dict(orient="records"):
            key = ", ".join(f"{k}={_show(rec[k])}" for k in self.keys)
            status = rec["status"]
            if status == "changed":
                lines.append(f"  changed     {key}")
                for col in rec["differs"]:
                    lines.append(
                        f"      {col}: left={_show(rec['left_' + col])}  right={_show(rec['right_' + col])}"
                    )
            elif status == "duplicate_key":
                lines.append(
                    f"  duplicate   {key}: {rec['count_left']} rows in left, {rec['count_right']} in right"
                )
            else:
                side = "left" if status == "only_in_left" else "right"
                vals = ", ".join(f"{c}={_show(rec[side + '_' + c])}" for c in self.columns)
                lines.append(f"  only {side:<6} {key}" + (f": {vals}" if vals else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _show(value: Any) -> str:
    return "null" if value is None else repr(value)


def _json_value(value: Any) -> Any:
    import datetime
    import decimal

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if hasattr(value, "tolist"):
        return _json_value(value.tolist())
    return str(value)


# --------------------------------------------------------------------------------------------- inputs


@dataclass
class _Source:
    side: str
    kind: str  # delta | spark | pandas | arrow
    obj: Any
    label: str
    path: str | None = None
    version: int | None = None

    def delta_table(self) -> Any:
        import deltalake

        from upsertsink.storage import deltalake_options

        return deltalake.DeltaTable(self.path, version=self.version, storage_options=deltalake_options(self.path))


def _split_version(text: str) -> tuple[str, int | None]:
    if "@" in text and not os.path.exists(text):
        path, _, ver = text.rpartition("@")
        if ver.isdigit():
            return path, int(ver)
        raise InvalidInputError(f"{text!r}: the version after '@' must be a number, e.g. {path}@3")
    return text, None


def _resolve(value: Any, side: str) -> _Source:
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        path, version = _split_version(text)
        from upsertsink.storage import deltalake_options

        options = deltalake_options(path)
        if "://" in path and not path.startswith("file://"):  # object storage: ask deltalake
            import deltalake

            if not deltalake.DeltaTable.is_deltatable(path, storage_options=options):
                raise NotADeltaTableError(f"{side}: {path!r} is not a Delta table (no _delta_log there)")
        elif not os.path.exists(path):
            raise InvalidInputError(f"{side}: no such table path {path!r}")
        elif not os.path.isdir(os.path.join(path, "_delta_log")):
            raise NotADeltaTableError(f"{side}: {path!r} is not a Delta table (no _delta_log directory)")
        src = _Source(side, "delta", None, text, path=path, version=version)
        if version is not None:
            try:
                import deltalake

                latest = deltalake.DeltaTable(path, storage_options=options).version()
            except Exception as exc:  # deltalake raises its own error types
                raise InvalidInputError(f"{side}: cannot read Delta table {path!r}: {exc}") from exc
            if version > latest:
                raise InvalidInputError(f"{side}: {path!r} has no version {version} (latest is {latest})")
        return src
    module = type(value).__module__ or ""
    if module.startswith("pyspark.sql") and hasattr(value, "sparkSession"):
        return _Source(side, "spark", value, f"<Spark DataFrame ({side})>")
    if module.startswith("pandas") and type(value).__name__ == "DataFrame":
        return _Source(side, "pandas", value, f"<pandas DataFrame ({side})>")
    if module.startswith("pyarrow"):
        import pyarrow as pa

        if isinstance(value, pa.RecordBatch):
            value = pa.Table.from_batches([value])
        if isinstance(value, pa.Table):
            return _Source(side, "arrow", value, f"<pyarrow Table ({side})>")
    raise InvalidInputError(
        f"{side}: cannot compare a {type(value).__name__}; pass a Delta table path (PATH or PATH@VERSION), "
        "a Spark DataFrame, a pandas DataFrame or a pyarrow Table"
    )


def _delta_size(src: _Source) -> int:
    try:
        import pyarrow as pa

        actions = pa.table(src.delta_table().get_add_actions(flatten=True))
        return int(pa.compute.sum(actions.column("size_bytes")).as_py() or 0)
    except Exception as exc:
        raise InvalidInputError(f"{src.side}: cannot read Delta table {src.label!r}: {exc}") from exc


def _choose_engine(engine: str, sources: Sequence[_Source]) -> str:
    if engine not in ("auto", "spark", "embedded"):
        raise InvalidInputError(f"engine must be 'auto', 'spark' or 'embedded', got {engine!r}")
    has_spark = any(s.kind == "spark" for s in sources)
    if engine == "embedded" and has_spark:
        raise InvalidInputError("engine='embedded' cannot compare a Spark DataFrame; use engine='spark'")
    if engine != "auto":
        return engine
    if has_spark:
        return "spark"
    for src in sources:
        if src.kind == "delta" and _delta_size(src) > SPARK_THRESHOLD_BYTES:
            return "spark"
    return "embedded"


# ----------------------------------------------------------------------------------- column planning


def _as_list(value: str | Sequence[str] | None, what: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    out = list(value)
    for item in out:
        if not isinstance(item, str):
            raise InvalidInputError(f"{what} must be column names (str), got {item!r}")
    return out


def _plan_columns(
    left: Sequence[str],
    right: Sequence[str],
    keys: list[str],
    columns: list[str] | None,
    ignore: list[str] | None,
) -> list[str]:
    """Check keys and column selections against both sides; return the compared non-key columns."""
    lset, rset = set(left), set(right)
    if not keys:
        raise InvalidInputError("diff needs at least one key column")
    for k in keys:
        for side, names in (("left", left), ("right", right)):
            if k not in names:
                raise InvalidInputError(
                    f"key column {k!r} is not in the {side} input (columns: {', '.join(names)})"
                )
    ignore = ignore or []
    for c in ignore:
        if c in keys:
            raise InvalidInputError(f"key column {c!r} cannot be ignored")
        if c not in lset and c not in rset:
            raise InvalidInputError(f"ignore_columns: unknown column {c!r} (in neither input)")
    if columns is not None:
        compared: list[str] = []
        for c in columns:
            for side, names in (("left", lset), ("right", rset)):
                if c not in names:
                    raise InvalidInputError(f"columns: unknown column {c!r} (not in the {side} input)")
            if c not in keys and c not in ignore and c not in compared:
                compared.append(c)
        return compared
    skip = set(keys) | set(ignore)
    only_left = [c for c in left if c not in rset and c not in skip]
    only_right = [c for c in right if c not in lset and c not in skip]
    if only_left or only_right:
        parts = []
        if only_left:
            parts.append(f"only in left: {', '.join(only_left)}")
        if only_right:
            parts.append(f"only in right: {', '.join(only_right)}")
        raise SchemaMismatchError(
            f"the inputs have different columns ({'; '.join(parts)}); pass ignore_columns=[...] "
            "or columns=[...] to compare the shared ones"
        )
    return [c for c in left if c not in skip]


def _check_tolerance(tolerance: float | None) -> float | None:
    if tolerance is None:
        return None
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise InvalidInputError(f"tolerance must be a number, got {tolerance!r}") from None
    if not tol >= 0 or math.isinf(tol):
        raise InvalidInputError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    return tol


# ------------------------------------------------------------------------------------------- diff()


def diff(
    left: Any,
    right: Any,
    keys: str | Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    ignore_columns: Sequence[str] | None = None,
    tolerance: float | None = None,
    engine: str = "auto",
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    progress: Progress | None = None,
) -> DiffResult:
    """Compare two inputs row by row by ``keys``; row order never matters and nulls equal nulls.

    Inputs: a Delta table path (``PATH@N`` for version N), a Spark/pandas DataFrame or a pyarrow Table.
    ``tolerance`` is an absolute tolerance for float/decimal columns (exact by default).
    """
    key_list = _as_list(keys, "keys") or []
    col_list = _as_list(columns, "columns")
    ignore_list = _as_list(ignore_columns, "ignore_columns")
    tol = _check_tolerance(tolerance)
    if not isinstance(sample_size, int) or sample_size < 0:
        raise InvalidInputError(f"sample_size must be an int >= 0, got {sample_size!r}")
    lsrc, rsrc = _resolve(left, "left"), _resolve(right, "right")
    chosen = _choose_engine(engine, (lsrc, rsrc))
    log.debug("diff %s vs %s on %s engine", lsrc.label, rsrc.label, chosen)
    say = progress or (lambda _msg: None)
    run = _run_spark if chosen == "spark" else _run_embedded
    result = run(lsrc, rsrc, key_list, col_list, ignore_list, tol, sample_size, say)
    result.left_label, result.right_label = lsrc.label, rsrc.label
    return result


# ------------------------------------------------------------------------------------- shared helpers


def _sample_records(
    rows: Sequence[dict[str, Any]], keys: list[str], compared: list[str]
) -> list[dict[str, Any]]:
    """Internal sample rows (``__k*``, ``__status``, ``__nl``, ``__nr``, ``__l*``, ``__r*``, ``__d*``) ->
    the public records documented in ``DiffResult.samples``."""
    out = []
    for row in rows:
        status = row["__status"]
        nl, nr = row["__nl"] or 0, row["__nr"] or 0
        rec: dict[str, Any] = {k: row[f"__k{i}"] for i, k in enumerate(keys)}
        rec["status"] = status
        rec["differs"] = [c for j, c in enumerate(compared) if row[f"__d{j}"]] if status == "changed" else []
        rec["count_left"], rec["count_right"] = int(nl), int(nr)
        for j, c in enumerate(compared):
            show = status != "duplicate_key"
            rec[f"left_{c}"] = row[f"__l{j}"] if show and nl else None
            rec[f"right_{c}"] = row[f"__r{j}"] if show and nr else None
        out.append(rec)
    return out


def _sample_frame(records: list[dict[str, Any]], keys: list[str], compared: list[str]) -> Any:
    import pandas as pd

    names = [*keys, "status", "differs", "count_left", "count_right"]
    for c in compared:
        names += [f"left_{c}", f"right_{c}"]
    # object columns: ints with nulls stay ints, None stays None
    return pd.DataFrame({n: pd.Series([r[n] for r in records], dtype=object) for n in names}, columns=names)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --------------------------------------------------------------------------------------- Spark engine


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _spark_for(sources: Sequence[_Source]) -> Any:
    for src in sources:
        if src.kind == "spark":
            return src.obj.sparkSession
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    existing = getattr(SparkSession, "_instantiatedSession", None)
    if existing is not None and getattr(existing.sparkContext, "_jsc", None) is not None:
        return existing
    from upsertsink.session import spark_session

    return spark_session()


def _spark_frame(src: _Source, spark: Any) -> Any:
    if src.kind == "spark":
        return src.obj
    if src.kind == "delta":
        reader = spark.read.format("delta")
        if src.version is not None:
            reader = reader.option("versionAsOf", src.version)
        try:
            return reader.load(os.path.abspath(src.path))
        except Exception as exc:  # AnalysisException and friends
            raise InvalidInputError(
                f"{src.side}: cannot read Delta table {src.label!r}: {_first_line(exc)}"
            ) from exc
    table = src.obj
    if src.kind == "pandas":
        import pyarrow as pa

        table = pa.Table.from_pandas(src.obj, preserve_index=False)
    return spark.createDataFrame(table)


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
    raise SchemaMismatchError(
        f"column {name!r} has type {lt.simpleString()} on the left and {rt.simpleString()} on the right; "
        f"cast one side, or pass ignore_columns=[{name!r}]"
    )


def _spark_project(df: Any, cols: list[str], types: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    exprs = []
    for c in cols:
        e = F.col(_q(c))
        target = types[c]
        if df.schema[c].dataType.simpleString() != target.simpleString():
            e = e.cast(target)
        if isinstance(target, T.MapType):  # maps have no equality or hash in Spark: compare sorted entries
            e = F.array_sort(F.map_entries(e))
        exprs.append(e.alias(c))
    return df.select(*exprs)


def _spark_row_hash(cols: list[str]) -> Any:
    from pyspark.sql import functions as F

    args = []
    for c in sorted(cols):
        # the null flag keeps (null, 1) and (1, null) apart: xxhash64 skips null arguments
        args += [F.isnull(F.col(_q(c))), F.col(_q(c))]
    return F.xxhash64(*args)


def _spark_fingerprints(lp: Any, rp: Any, cols: list[str]) -> list[tuple[int, int, int]]:
    """(rows, sum of high 32 bits, sum of low 32 bits) of each side's per-row xxhash64, in one job.

    Summing the halves as longs cannot overflow below 2**31 rows (ANSI mode would fail on overflow)."""
    from pyspark.sql import functions as F

    def one(df: Any, tag: int) -> Any:
        h = F.col("h")
        return df.select(_spark_row_hash(cols).alias("h")).agg(
            F.lit(tag).alias("side"),
            F.count(F.lit(1)).alias("n"),
            F.sum(F.shiftright(h, 32)).alias("hi"),
            F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
        )

    rows = sorted(one(lp, 0).unionByName(one(rp, 1)).collect(), key=lambda r: r["side"])
    return [(int(r["n"]), int(r["hi"] or 0), int(r["lo"] or 0)) for r in rows]


def _spark_has_duplicates(df: Any, keys: list[str], rows: int) -> bool:
    """Exact: all 64-bit key hashes distinct proves unique keys; a repeated hash (a duplicate, or in theory a
    collision) is settled by an exact group-by. Up to DRIVER_KEY_CHECK_ROWS rows the hashes are sorted on the
    driver (one narrow scan, 8 bytes a row), which is much cheaper than a distinct count's shuffle."""
    from pyspark.sql import functions as F

    kh = _spark_row_hash(keys).alias("kh")
    if rows <= DRIVER_KEY_CHECK_ROWS:
        import numpy as np

        hashes = np.sort(df.select(kh).toArrow().column("kh").to_numpy())
        unique = not bool((hashes[1:] == hashes[:-1]).any())
    else:
        unique = df.select(kh).agg(F.count_distinct("kh").alias("d")).first()["d"] == rows
    if unique:
        return False
    dup = df.groupBy(*[F.col(_q(k)) for k in keys]).count().filter(F.col("count") > 1).limit(1).count()
    return dup > 0


def _spark_suspects(
    lp: Any, rp: Any, keys: list[str], cols: list[str], rows: int
) -> tuple[list[Any], Any, Any]:
    """Narrow both sides to the rows whose key may differ, before the exact keyed comparison.

    One hash aggregation over (key hash, side, row hash) - 17 bytes a row, fixed-width buffers - finds the
    key hashes whose rows are not exactly one identical row on each side. Only those rows (cached) go through the
    exact group-by and join, so a 1% difference costs a narrow shuffle plus an exact diff of 1% of the rows.
    A key-hash collision only adds rows to the exact comparison; it cannot hide a difference.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    kh, rh = _spark_row_hash(keys), _spark_row_hash(cols)

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


def _run_spark(
    lsrc: _Source,
    rsrc: _Source,
    keys: list[str],
    columns: list[str] | None,
    ignore: list[str] | None,
    tol: float | None,
    sample_size: int,
    say: Progress,
) -> DiffResult:
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = _spark_for((lsrc, rsrc))
    lf, rf = _spark_frame(lsrc, spark), _spark_frame(rsrc, spark)
    compared = _plan_columns(lf.columns, rf.columns, keys, columns, ignore)
    cols = [*keys, *compared]
    ls, rs = lf.schema, rf.schema
    types = {c: _spark_common_type(c, ls[c].dataType, rs[c].dataType) for c in cols}
    lp, rp = _spark_project(lf, cols, types), _spark_project(rf, cols, types)

    say("fingerprinting both sides")
    (nl_rows, *lfp), (nr_rows, *rfp) = _spark_fingerprints(lp, rp, cols)
    base = {"keys": keys, "columns": compared, "rows_left": nl_rows, "rows_right": nr_rows, "engine": "spark"}
    if (nl_rows, *lfp) == (nr_rows, *rfp):
        say("checking for duplicate keys")
        if not _spark_has_duplicates(lp, keys, nl_rows):
            log.debug("fingerprints match and keys are unique: equal")
            return DiffResult(
                equal=True, only_in_left=0, only_in_right=0, changed=0, changed_columns={},
                duplicate_keys_left=0, duplicate_keys_right=0, fingerprint_match=True,
                _samples=_sample_frame([], keys, compared), **base,
            )  # fmt: skip
        fingerprint_match = True
    else:
        fingerprint_match = False

    say("finding the keys that differ")
    cached, lp, rp = _spark_suspects(lp, rp, keys, cols, nl_rows + nr_rows)
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
            return _sample_frame(_sample_records(rows, keys, compared), keys, compared)

        samples = take(sample_size)
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


# ------------------------------------------------------------------------------------ embedded engine


def _arrow_table(src: _Source) -> Any:
    import pyarrow as pa

    if src.kind == "delta":
        try:
            table = src.delta_table()
            if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
                # deltalake 1.6's Arrow reader returns nulls for column-mapped tables (Spark makes them
                # for column names with spaces); its DataFusion reader maps the columns right.
                from deltalake import QueryBuilder

                read = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
                return read.cast(pa.schema(table.schema().to_arrow()))
            return table.to_pyarrow_dataset()
        except Exception as exc:
            raise InvalidInputError(
                f"{src.side}: cannot read Delta table {src.label!r}: {_first_line(exc)}"
            ) from exc
    if src.kind == "pandas":
        return pa.Table.from_pandas(src.obj, preserve_index=False)
    return src.obj


def _arrow_common_type(name: str, lt: Any, rt: Any) -> Any:
    import pyarrow as pa

    t = pa.types
    if lt.equals(rt):
        return lt
    if t.is_null(lt):
        return rt
    if t.is_null(rt):
        return lt
    if t.is_integer(lt) and t.is_integer(rt):
        return pa.int64()
    if (t.is_integer(lt) or t.is_floating(lt)) and (t.is_integer(rt) or t.is_floating(rt)):
        return pa.float64()
    if t.is_decimal(lt) and t.is_decimal(rt):
        scale = max(lt.scale, rt.scale)
        return pa.decimal128(min(38, max(lt.precision - lt.scale, rt.precision - rt.scale) + scale), scale)
    if t.is_decimal(lt) or t.is_decimal(rt):
        dec, other = (lt, rt) if t.is_decimal(lt) else (rt, lt)
        if t.is_integer(other):
            return pa.decimal128(min(38, max(dec.precision - dec.scale, 19) + dec.scale), dec.scale)
        if t.is_floating(other):
            return pa.float64()
    if (t.is_string(lt) or t.is_large_string(lt)) and (t.is_string(rt) or t.is_large_string(rt)):
        return pa.large_string()
    if (t.is_binary(lt) or t.is_large_binary(lt)) and (t.is_binary(rt) or t.is_large_binary(rt)):
        return pa.large_binary()
    if t.is_timestamp(lt) and t.is_timestamp(rt):
        return pa.timestamp("us", tz="UTC")
    if t.is_date(lt) and t.is_date(rt):
        return pa.date32()
    raise SchemaMismatchError(
        f"column {name!r} has type {lt} on the left and {rt} on the right; "
        f"cast one side, or pass ignore_columns=[{name!r}]"
    )


def _arrow_project(data: Any, cols: list[str], types: dict[str, Any]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = data.to_table(columns=cols) if hasattr(data, "to_table") else data.select(cols)
    arrays = []
    for c in cols:
        arr = table.column(c)
        if not arr.type.equals(types[c]):
            arr = pc.cast(arr, types[c], safe=False)
        arrays.append(arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0))
    return pa.table(arrays, names=cols) if arrays else table


_NULL_HASH = 0x9E3779B97F4A7C15
_PRIME = 0x100000001B3


def _arrow_hash(arr: Any) -> Any:
    """One uint64 hash per value; nulls hash to a constant that no value is likely to produce."""
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


def _arrow_fingerprint(table: Any, cols: list[str]) -> tuple[int, int]:
    import numpy as np
    import pandas as pd

    acc = np.zeros(table.num_rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in sorted(cols):
            acc = acc * np.uint64(_PRIME) + _arrow_hash(table.column(c).combine_chunks())
        mixed = pd.util.hash_array(acc)  # non-linear per-row mix, so swapped cells change the sum
        return table.num_rows, int(mixed.sum(dtype=np.uint64))


def _arrow_key_ids(left: Any, right: Any, keys: list[str]) -> tuple[Any, Any, int]:
    """Dense ids of the key values of both sides (nulls equal nulls), and how many distinct keys exist."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    n = left.num_rows
    combined = None
    for k in keys:
        arr = pa.concat_arrays([left.column(k).combine_chunks(), right.column(k).combine_chunks()])
        try:
            codes = pc.dictionary_encode(arr, null_encoding="encode").indices.to_numpy(zero_copy_only=False)
            codes = codes.astype(np.int64)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
            codes = pd.factorize(np.array([repr(v) for v in arr.to_pylist()], dtype=object))[0]
        if combined is None:
            combined = codes
        else:  # re-densify after each column so the mixed radix never overflows
            combined = pd.factorize(combined * (int(codes.max(initial=0)) + 1) + codes)[0].astype(np.int64)
    assert combined is not None
    groups = int(combined.max(initial=-1)) + 1
    return combined[:n], combined[n:], groups


def _arrow_differs(a: Any, b: Any, tol: float | None) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t = a.type
    try:
        same = pc.fill_null(pc.equal(a, b), False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        av, bv = a.to_pylist(), b.to_pylist()
        return np.array([x != y for x, y in zip(av, bv)], dtype=bool)
    same = pc.or_(same, pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(t):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    if tol is not None and (pa.types.is_floating(t) or pa.types.is_decimal(t)):
        gap = pc.abs(pc.subtract(pc.cast(a, pa.float64()), pc.cast(b, pa.float64())))
        same = pc.or_(same, pc.fill_null(pc.less_equal(gap, tol), False))
    return ~same.to_numpy(zero_copy_only=False)


def _arrow_has_duplicates(table: Any, keys: list[str]) -> bool:
    import numpy as np

    ids, _, groups = _arrow_key_ids(table, table.slice(0, 0), keys)
    return bool((np.bincount(ids, minlength=groups) > 1).any())


def _run_embedded(
    lsrc: _Source,
    rsrc: _Source,
    keys: list[str],
    columns: list[str] | None,
    ignore: list[str] | None,
    tol: float | None,
    sample_size: int,
    say: Progress,
) -> DiffResult:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ld, rd = _arrow_table(lsrc), _arrow_table(rsrc)
    compared = _plan_columns(ld.schema.names, rd.schema.names, keys, columns, ignore)
    cols = [*keys, *compared]
    types = {c: _arrow_common_type(c, ld.schema.field(c).type, rd.schema.field(c).type) for c in cols}
    say("reading both sides")
    left, right = _arrow_project(ld, cols, types), _arrow_project(rd, cols, types)
    base = {"keys": keys, "columns": compared, "rows_left": left.num_rows, "rows_right": right.num_rows}
    say("fingerprinting both sides")
    fingerprint_match = _arrow_fingerprint(left, cols) == _arrow_fingerprint(right, cols)
    if fingerprint_match:
        say("checking for duplicate keys")
        if not _arrow_has_duplicates(left, keys):
            return DiffResult(
                equal=True, only_in_left=0, only_in_right=0, changed=0, changed_columns={},
                duplicate_keys_left=0, duplicate_keys_right=0, fingerprint_match=True, engine="embedded",
                _samples=_sample_frame([], keys, compared), **base,
            )  # fmt: skip

    say("comparing by key")
    nl_rows = left.num_rows
    lid, rid, groups = _arrow_key_ids(left, right, keys)
    cl, cr = np.bincount(lid, minlength=groups), np.bincount(rid, minlength=groups)
    pos_l, pos_r = np.full(groups, -1, dtype=np.int64), np.full(groups, -1, dtype=np.int64)
    pos_l[lid] = np.arange(len(lid))
    pos_r[rid] = np.arange(len(rid))
    dup = (cl > 1) | (cr > 1)
    only_l = ~dup & (cl == 1) & (cr == 0)
    only_r = ~dup & (cl == 0) & (cr == 1)
    both = np.flatnonzero(~dup & (cl == 1) & (cr == 1))
    li, ri = pos_l[both], pos_r[both]
    flags = np.zeros((groups, len(compared)), dtype=bool)
    for j, c in enumerate(compared):
        flags[both, j] = _arrow_differs(
            left.column(c).combine_chunks().take(li), right.column(c).combine_chunks().take(ri), tol
        )
    changed = np.zeros(groups, dtype=bool)
    changed[both] = flags[both].any(axis=1)
    differing = np.flatnonzero(dup | only_l | only_r | changed)

    say("collecting samples")
    rep = np.where(cl[differing] > 0, pos_l[differing], nl_rows + pos_r[differing])
    key_table = pa.concat_tables([left.select(keys), right.select(keys)]).take(pa.array(rep))
    try:  # pyarrow >= 25 takes the null placement per sort key
        order = pc.sort_indices(key_table, sort_keys=[(k, "ascending", "at_start") for k in keys])
    except (TypeError, ValueError, pa.ArrowInvalid):
        order = pc.sort_indices(
            key_table, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start"
        )
    order = order.to_numpy()
    differing, rep = differing[order], rep[order]
    key_table = key_table.take(pa.array(order))

    def take(n: int) -> Any:
        groups_n = differing[:n]
        keyvals = key_table.slice(0, len(groups_n)).to_pylist()
        lvals = left.take(pa.array(np.maximum(pos_l[groups_n], 0))).to_pylist() if nl_rows else None
        rvals = right.take(pa.array(np.maximum(pos_r[groups_n], 0))).to_pylist() if right.num_rows else None
        rows = []
        for i, g in enumerate(groups_n):
            row: dict[str, Any] = {f"__k{x}": keyvals[i][k] for x, k in enumerate(keys)}
            row["__status"] = (
                "duplicate_key" if dup[g] else "only_in_left" if only_l[g]
                else "only_in_right" if only_r[g] else "changed"
            )  # fmt: skip
            row["__nl"], row["__nr"] = int(cl[g]), int(cr[g])
            for j, c in enumerate(compared):
                row[f"__l{j}"] = lvals[i][c] if lvals is not None and cl[g] else None
                row[f"__r{j}"] = rvals[i][c] if rvals is not None and cr[g] else None
                row[f"__d{j}"] = bool(flags[g, j])
            rows.append(row)
        return _sample_frame(_sample_records(rows, keys, compared), keys, compared)

    changed_columns = {
        c: int(flags[changed, j].sum()) for j, c in enumerate(compared) if flags[changed, j].any()
    }
    result = DiffResult(
        equal=False,
        only_in_left=int(only_l.sum()),
        only_in_right=int(only_r.sum()),
        changed=int(changed.sum()),
        changed_columns=changed_columns,
        duplicate_keys_left=int((cl > 1).sum()),
        duplicate_keys_right=int((cr > 1).sum()),
        duplicate_keys=int(dup.sum()),
        fingerprint_match=fingerprint_match,
        engine="embedded",
        _samples=take(sample_size),
        _more_samples=take,
        **base,
    )
    result.equal = result.differences == 0
    return result
