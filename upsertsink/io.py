"""Reading inputs, shared by ``write``, ``diff`` and ``replay-check``.

An input is either a frame in memory (a Spark, pandas or pyarrow frame, recognised by :func:`frame_kind`)
or a path: a Delta table (``PATH@N`` for its version N), or a parquet, csv or json file or a folder of
files of one of those formats. :func:`resolve_path` checks a path once and says what it is; the readers
turn it into an Arrow table (no JVM) or a Spark DataFrame.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from upsertsink.errors import InvalidInputError, NotADeltaTableError

log = logging.getLogger(__name__)

#: File name extensions of the data files upsertsink reads, and their format.
FILE_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


# ---------------------------------------------------------------------------------------- frames


def frame_kind(value: Any) -> str | None:
    """``"spark"``, ``"pandas"`` or ``"arrow"`` for a DataFrame/Table in memory, else None.

    Decided by class names and modules, so nothing is imported (pyspark may not be installed).
    """
    for cls in type(value).__mro__:
        module, name = cls.__module__ or "", cls.__name__
        if name == "DataFrame" and module.startswith("pyspark.sql"):  # classic and Spark Connect
            return "spark"
        if name == "DataFrame" and module.startswith("pandas"):
            return "pandas"
        if name in ("Table", "RecordBatch") and module.startswith("pyarrow"):
            return "arrow"
    return None


def is_spark_frame(value: Any) -> bool:
    """True for a Spark DataFrame (classic or Spark Connect), without importing pyspark."""
    return frame_kind(value) == "spark"


def to_arrow_table(value: Any) -> Any:
    """A pandas DataFrame, pyarrow Table or RecordBatch as a pyarrow Table (the index is dropped)."""
    import pyarrow as pa

    kind = frame_kind(value)
    if kind == "pandas":
        return pa.Table.from_pandas(value, preserve_index=False)
    if kind == "arrow":
        return pa.Table.from_batches([value]) if isinstance(value, pa.RecordBatch) else value
    raise InvalidInputError(f"expected a pandas DataFrame or a pyarrow Table, got {type(value).__name__}")


# ----------------------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class PathInput:
    """A checked input path: a Delta table (at ``version``, None for the latest) or data files."""

    spec: str  # as given, e.g. "/data/orders@3"
    path: str  # without the version
    kind: str  # "delta" | "files"
    version: int | None = None
    fmt: str | None = None  # parquet | csv | json, for files
    files: tuple[str, ...] = ()
    what: str = "input"  # how messages name it: "left", "source", "input 'orders'"
    csv: Any = None  # for csv files: a typed_csv.CsvOptions (column types, null markers, timestamp format)

    def size_bytes(self) -> int:
        """Bytes of data files: the Delta log's add actions at this version, or the files' sizes."""
        if self.kind == "files":
            return sum(os.path.getsize(f) for f in self.files)
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            actions = pa.table(open_delta(self).get_add_actions(flatten=True))
            return int(pc.sum(actions.column("size_bytes")).as_py() or 0)
        except InvalidInputError:
            raise
        except Exception as exc:  # deltalake raises its own error types
            raise unreadable(self, exc) from exc


    def num_rows(self) -> int | None:
        """Rows, when the metadata says so without reading data (Delta add actions, parquet footers)."""
        try:
            if self.kind == "delta":
                import pyarrow as pa
                import pyarrow.compute as pc

                counts = pa.table(open_delta(self).get_add_actions(flatten=True)).column("num_records")
                return None if counts.null_count else int(pc.sum(counts).as_py() or 0)
            if self.fmt == "parquet":
                import pyarrow.parquet as pq

                return sum(pq.read_metadata(f).num_rows for f in self.files)
        except Exception:  # no statistics, or unreadable here: the caller does without
            log.debug("no row count for %s", self.spec, exc_info=True)
        return None


def is_uri(text: str) -> bool:
    """True for ``scheme://...`` locations other than local ``file://`` paths."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme.lower() != "file"


def split_version(text: str) -> tuple[str, int | None]:
    """``"PATH@N"`` -> ``("PATH", N)``; a path that exists as written keeps its ``@``."""
    if "@" in text and (is_uri(text) or not os.path.exists(text)):
        path, _, ver = text.rpartition("@")
        if ver.isdigit():
            return path, int(ver)
        raise InvalidInputError(f"{text!r}: the version after '@' must be a number, e.g. {path}@3")
    return text, None


def data_files(folder: str) -> list[str]:
    """Every file under ``folder`` (sorted), leaving out hidden and ``_``-prefixed files and folders."""
    out = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out += [os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_"))]
    return out


def resolve_path(spec: str | os.PathLike[str], what: str = "input", csv: Any = None) -> PathInput:
    """Check ``spec`` (``PATH``, ``PATH@N`` or a URI of a Delta table) and say what it holds.

    ``what`` names the input in messages (``left``, ``source``, ``input 'orders'``). ``csv`` (a
    ``typed_csv.CsvOptions``) says how csv files are read; other inputs carry their own types and ignore it.
    """
    text = os.fspath(spec)
    path, version = split_version(text.removeprefix("file://"))
    if is_uri(path):  # a remote table: deltalake/Spark check it when it is read
        return PathInput(text, path, "delta", version, what=what)
    if not os.path.exists(path):
        raise InvalidInputError(f"{what}: {path!r} does not exist")
    if os.path.isdir(os.path.join(path, "_delta_log")):
        src = PathInput(text, path, "delta", version, what=what)
        if version is not None:
            latest = open_delta(PathInput(text, path, "delta", what=what)).version()
            if version > latest:
                raise InvalidInputError(f"{what}: {path!r} has no version {version} (latest is {latest})")
        return src
    if version is not None:
        raise InvalidInputError(f"{what}: {text!r}: a version (@{version}) needs a Delta table")
    files = [path] if os.path.isfile(path) else data_files(path)
    kinds = {FILE_FORMATS.get(os.path.splitext(f)[1].lower()) for f in files}
    if not files or None in kinds or len(kinds) != 1:
        found = sorted({os.path.splitext(f)[1] or os.path.basename(f) for f in files})[:5]
        error = NotADeltaTableError if os.path.isdir(path) else InvalidInputError
        raise error(
            f"{what}: {path!r} is not a Delta table (no _delta_log) nor a parquet, csv or json file or a "
            f"folder of files of one of those formats (found {found or 'no files'})"
        )
    fmt = kinds.pop()
    return PathInput(text, path, "files", fmt=fmt, files=tuple(files), what=what, csv=csv if fmt == "csv" else None)


# --------------------------------------------------------------------------------------- readers


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (JVM errors carry stack traces below it)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def unreadable(src: PathInput, exc: BaseException) -> InvalidInputError:
    """The error for an input that exists but cannot be read."""
    what = "Delta table " if src.kind == "delta" else ""
    return InvalidInputError(f"{src.what}: cannot read {what}{src.spec!r}: {first_line(exc)}")


def open_delta(src: PathInput) -> Any:
    """The deltalake ``DeltaTable`` of a Delta input, at its version."""
    import deltalake

    from upsertsink.storage import deltalake_options

    try:  # object-store URIs read with the same settings as the Spark session's s3a configuration
        return deltalake.DeltaTable(src.path, version=src.version, storage_options=deltalake_options(src.path))
    except Exception as exc:  # deltalake raises its own error types
        raise unreadable(src, exc) from exc


def arrow_source(src: PathInput) -> Any:
    """The input as something with ``.schema`` that Arrow can read: a pyarrow Dataset (Delta tables, read
    lazily, so only the needed columns are read) or a Table (files, and column-mapped Delta tables)."""
    if src.kind == "files":
        return _read_files(src)
    import pyarrow as pa

    table = open_delta(src)
    try:
        if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
            # deltalake 1.6's Arrow reader returns nulls for column-mapped tables (Spark makes them for
            # column names with spaces); its DataFusion reader maps the columns right.
            from deltalake import QueryBuilder

            read = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
            return read.cast(pa.schema(table.schema().to_arrow()))
        return table.to_pyarrow_dataset()
    except Exception as exc:
        raise unreadable(src, exc) from exc


def read_arrow(src: PathInput) -> Any:
    """The whole input as one pyarrow Table."""
    data = arrow_source(src)
    return data.to_table() if hasattr(data, "to_table") else data


def _read_files(src: PathInput) -> Any:
    import pyarrow as pa
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    from upsertsink import typed_csv

    readers = {
        "parquet": pq.read_table,
        # csv: an empty field is null, as Spark reads it, and nothing else unless --null-value says so
        "csv": lambda f: typed_csv.read_csv(f, src.csv, src.what),
        "json": pajson.read_json,
    }
    tables = []
    for f in src.files:
        try:
            tables.append(readers[str(src.fmt)](f))
        except (pa.ArrowException, OSError) as exc:
            raise InvalidInputError(f"{src.what}: cannot read {f!r} as {src.fmt}: {first_line(exc)}") from exc
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as exc:
        raise InvalidInputError(
            f"{src.what}: the files of {src.path!r} do not share one schema: {first_line(exc)}"
        ) from exc


def read_spark(spark: Any, src: PathInput) -> Any:
    """The input as a Spark DataFrame (csv: a header row, types inferred by Spark; with typed_csv options, read
    by the same reader as the embedded engine's, so both engines see the same values)."""
    if src.csv is not None:
        return spark.createDataFrame(_read_files(src))
    path = src.path if is_uri(src.path) else os.path.abspath(src.path)
    try:
        if src.kind == "delta":
            reader = spark.read.format("delta")
            if src.version is not None:
                reader = reader.option("versionAsOf", src.version)
            return reader.load(path)
        reader = spark.read.format(src.fmt)
        if src.fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        return reader.load(path)
    except Exception as exc:  # AnalysisException and friends
        raise unreadable(src, exc) from exc
