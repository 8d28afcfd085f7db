"""Small Spark batches on the driver: read them without a Spark job where that is exact, and give the MERGE a
source that is cheap to read twice.

- ``read_plain_parquet``: a batch that is nothing but a scan of local parquet files (``spark.read.parquet``,
  possibly with a choice of its columns; no filter, computed column, partition columns or reader options) is
  read by pyarrow from the files Spark lists,
  and cast to the Arrow schema Spark itself would hand over (``toArrow``). Anything that Spark could read
  differently (another type category, nanosecond or INT96 timestamps, legacy-calendar files, a column
  missing from a file, more rows than the driver takes) returns None, and the caller collects through Spark.
- ``ScratchFiles``: with a local master (driver and executors share a disk), the prepared batch is written
  once as a parquet file and the MERGE reads that file: Spark plans it as a small file scan (a broadcast
  join) and reading it twice costs little, where a local relation of the same rows is serialised into every
  task of both MERGE passes. Elsewhere the prepared batch is a local relation that Delta materialises.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from upsertsink import batch as B
from upsertsink import fingerprint as fp

log = logging.getLogger(__name__)

_READER_OPTIONS = {"path", "paths", "mergeschema"}  # options that change which files are read, not how
_LEGACY_PREFIX = b"org.apache.spark.legacy"  # files written with Spark 2's hybrid calendar or INT96 rebase
# Spark types a parquet file round-trips exactly (nested ones by their parts)
_FILE_SAFE = {
    "BooleanType", "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType",
    "StringType", "BinaryType", "DateType", "TimestampType", "TimestampNTZType",
}


def plain_parquet_files(df: Any) -> list[str] | None:
    """The local files of a batch that is a bare parquet scan, else None (planning only, no Spark job)."""
    try:
        plan = df._jdf.queryExecution().optimizedPlan()
        if plan.getClass().getSimpleName() == "Project":  # a choice of columns, each one as it is stored
            chosen = plan.projectList()
            if any(chosen.apply(i).getClass().getSimpleName() != "AttributeReference" for i in range(chosen.size())):
                return None
            plan = plan.child()
        if plan.getClass().getSimpleName() != "LogicalRelation":
            return None
        rel = plan.relation()
        if rel.getClass().getSimpleName() != "HadoopFsRelation":
            return None
        if rel.fileFormat().getClass().getSimpleName() != "ParquetFileFormat":  # Delta's format is another
            return None
        if rel.partitionSchema().length() or rel.bucketSpec().isDefined():
            return None
        options = rel.options()
        if any(str(k).lower() not in _READER_OPTIONS for k in _scala_keys(options)):
            return None
        uris = list(df.inputFiles())
    except Exception as err:  # noqa: BLE001 - Spark Connect or another plan shape: not a bare scan
        log.debug("not a plain parquet scan: %s", err)
        return None
    paths = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme not in ("file", ""):
            return None
        paths.append(unquote(parsed.path))
    return paths


def _scala_keys(options: Any) -> list[str]:
    keys = options.keySet().iterator()
    out = []
    while keys.hasNext():
        out.append(keys.next())
    return out


def _same_kind(found: pa.DataType, wanted: pa.DataType) -> bool:
    """The file's type holds the values Spark would read, unchanged by the cast to Spark's Arrow type."""
    if pa.types.is_timestamp(wanted):
        return (pa.types.is_timestamp(found) and found.unit in ("ms", "us")
                and (found.tz is None) == (wanted.tz is None))
    if pa.types.is_decimal(wanted):
        return pa.types.is_decimal(found) and (found.precision, found.scale) == (wanted.precision, wanted.scale)
    if pa.types.is_floating(wanted):
        return pa.types.is_floating(found) and found.bit_width <= wanted.bit_width
    if pa.types.is_integer(wanted):
        return pa.types.is_integer(found) and found.bit_width <= wanted.bit_width and (
            pa.types.is_signed_integer(found) or found.bit_width < wanted.bit_width
        )
    return fp.category(found) == fp.category(wanted)


def read_plain_parquet(df: Any, wanted: pa.Schema, max_rows: int) -> pa.Table | None:
    """The batch read from its parquet files by pyarrow, as Spark's ``toArrow`` would give it; None when
    that cannot be done exactly (the caller then collects through Spark)."""
    files = plain_parquet_files(df)
    if files is None:
        return None
    pieces, rows = [], 0
    try:
        for path in files:
            handle = pq.ParquetFile(path)
            meta = handle.metadata
            rows += meta.num_rows
            if rows > max_rows or any(k.startswith(_LEGACY_PREFIX) for k in (meta.metadata or {})):
                return None
            schema = handle.schema_arrow
            for field in wanted:
                found = schema.get_all_field_indices(field.name)
                if len(found) != 1 or not _same_kind(schema.field(found[0]).type, field.type):
                    return None
            pieces.append(handle.read(columns=wanted.names, use_threads=False).cast(wanted))
    except (OSError, pa.ArrowException, ValueError) as err:
        log.debug("reading %s directly failed, Spark reads it: %s", files, err)
        return None
    return pa.concat_tables(pieces) if pieces else wanted.empty_table()


def local_master(spark: Any) -> bool:
    """Driver and executors share the driver's disk (``local``, ``local[N]``, ``local-cluster``)."""
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return False


def file_safe(schema: Any) -> bool:
    """Every column round-trips through a parquet file unchanged, under a name Spark reads back as is."""
    def safe(t: Any) -> bool:
        kind = type(t).__name__
        if kind == "ArrayType":
            return safe(t.elementType)
        if kind == "MapType":
            return safe(t.keyType) and safe(t.valueType)
        if kind == "StructType":
            return all(safe(f.dataType) for f in t.fields) and not B.needs_column_mapping(t.fieldNames())
        if kind == "StringType":
            return t.simpleString() == "string"  # no collation
        return kind in _FILE_SAFE

    return safe(schema)


_PREFIX = "upsertsink-batch-"


def _sweep(root: str) -> None:
    """Remove scratch folders left by writers that were killed (their process is gone)."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX):].split("-", 1)[0] if name.startswith(_PREFIX) else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            log.debug("removing the scratch folder of a writer that is gone: %s", name)
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except (PermissionError, OverflowError):
            continue  # alive under another user, or not a pid at all


class ScratchFiles:
    """Parquet files of prepared batches, in a folder of their own removed by ``close`` (or when the owner
    is collected): the MERGE source of a small batch on a local master."""

    def __init__(self) -> None:
        self._folder: str | None = None
        self._finalizer: Any = None
        self._count = 0

    def source(self, spark: Any, table: pa.Table, schema: Any) -> Any:
        if self._folder is None:
            _sweep(tempfile.gettempdir())
            self._folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._folder, True)
        path = os.path.join(self._folder, f"batch-{self._count}.parquet")
        self._count += 1
        pq.write_table(table, path, compression="none")
        return spark.read.schema(schema).parquet(path)

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._folder = None
