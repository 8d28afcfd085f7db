"""Delta tables named in Spark's catalog (``catalog.schema.table``): finding them, creating them by name.

A sink for a named table (``UpsertSink.for_table``) asks Spark, on the batch's session (classic or Spark
Connect), for the table (``DESCRIBE DETAIL``: location, properties, features) and creates it under its name
when it does not exist (``saveAsTable``: registered in the catalog, managed unless the name's schema says
otherwise). Then, by ``file_access``: when this process can read the location with deltalake (or
``file_access=True``) the write protocol runs on the location's files as for a path; when it cannot (a governed
catalog such as Unity Catalog, or ``file_access=False``) it runs in Spark-only mode, through SQL on the name
alone (``catalog_table.py``; docs/user-guide.md, "Spark Connect and catalogs").
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote, urlparse

from upsertsink.errors import InvalidInputError, NotADeltaTableError, UpsertSinkError

log = logging.getLogger(__name__)

# a.b.c, each part a plain identifier or a back-quoted one (`my table`, with `` for a back-quote inside)
_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_NAME = re.compile(rf"^{_PART}(?:\.{_PART}){{0,2}}$")


def check_name(name: Any) -> str:
    """The table name as given, when it is ``table``, ``schema.table`` or ``catalog.schema.table``."""
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise InvalidInputError(
            f"table name {name!r} is not a catalog table name: give table, schema.table or catalog.schema.table "
            "(back-quote a part holding other characters: schema.`my table`)"
        )
    return name.strip()


def find_active_session() -> Any:
    """The active Spark session of this thread, classic or Spark Connect, or None."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        try:
            from pyspark.sql.connect.session import SparkSession as ConnectSession
        except ImportError:  # no Connect client installed
            return None
        session = ConnectSession.getActiveSession()
    return session


def active_session(feature: str) -> Any:
    """The active Spark session of this thread (classic, or Spark Connect), else a clear UpsertSinkError."""
    from upsertsink.session import require_spark

    require_spark(feature, delta=False)
    session = find_active_session()
    if session is None:
        raise UpsertSinkError(
            f"{feature} needs a Spark session: a table named in a catalog is reached through Spark only. Start one "
            "first (upsertsink.spark_session(), or spark_session(connect=True) / remote=...) or write a Spark "
            "DataFrame of it."
        )
    return session


def location(spark: Any, name: str) -> str | None:
    """The table's location as a path or URI the sink can read (file: URIs as local paths); None when no table
    of that name exists. A table that is not a Delta table is refused, naming it."""
    found = detail(spark, name)
    return None if found is None else as_path(str(found["location"]))


def detail(spark: Any, name: str) -> dict[str, Any] | None:
    """``DESCRIBE DETAIL`` of the Delta table ``name`` as a dict; None when no table of that name exists. A
    table that is not a Delta table is refused, naming it."""
    try:
        exists = spark.catalog.tableExists(name)
    except Exception as err:  # noqa: BLE001 - Spark refused: say which table, not the raw engine error
        from upsertsink.conflicts import first_line

        raise UpsertSinkError(f"looking up table {name} in Spark's catalog failed: {first_line(err)}") from None
    if not exists:
        return None
    try:
        row = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]
    except Exception as err:  # noqa: BLE001 - Spark refused: say which table, not the raw engine error
        from upsertsink.conflicts import first_line

        raise NotADeltaTableError(f"table {name} cannot be written by the sink: {first_line(err)}") from None
    fmt = str(row["format"] or "").lower()
    if fmt != "delta":
        raise NotADeltaTableError(f"table {name} is a {fmt or 'non-Delta'} table, not a Delta table: the sink MERGEs "
                                  "into Delta tables only. Nothing was written.")
    return row.asDict()


def as_path(uri: str) -> str:
    """``file:/a/b%20c`` as ``/a/b c``; any other URI as it is (``s3a://...``)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


CREATE_RACE_ATTEMPTS = 6


def save_new_table(spark: Any, name: str, writer: Any) -> None:
    """``writer.saveAsTable(name)`` (a ``mode("ignore")`` writer) unless the table exists. A lost creation race
    is fine: the table found, or Delta's conflict of writers creating one table at once (``ProtocolChanged``:
    the winner's commit is in the log before the catalog shows its name) retried until the catalog shows it."""
    import random
    import time

    from upsertsink.conflicts import spark_conflict, spark_error_class

    for attempt in range(CREATE_RACE_ATTEMPTS):
        try:
            writer.saveAsTable(name)
            return
        except Exception as err:
            if (spark_error_class(err) or "") in ("TABLE_OR_VIEW_ALREADY_EXISTS", "DELTA_TABLE_ALREADY_EXISTS"):
                return
            if spark_conflict(err) is None and "PROTOCOL_CHANGED" not in (spark_error_class(err) or ""):
                raise
            if spark.catalog.tableExists(name):
                return
            if attempt == CREATE_RACE_ATTEMPTS - 1:
                raise
            log.info("creating table %s raced another writer (%s); looking again", name, spark_error_class(err))
            time.sleep(0.1 * 2**attempt * (0.5 + random.random()))


def create(
    spark: Any, name: str, df: Any, partition_by: list[str] | None, column_mapping: bool, history_of: str | None = None,
) -> str:
    """Create the Delta table ``name`` with ``df``'s columns (no rows) unless it exists; its location. With
    ``history_of`` (a history sink's sequence column), with ``__START_AT`` and ``__END_AT`` of its type too.

    The empty table is version 0; the first batch then commits, with its marker, as version 1. Two writers
    creating it at once: one creates it, the other finds it."""
    empty = df.limit(0)
    if history_of is not None:
        from upsertsink.history import END, START

        kind = empty.schema[history_of].dataType
        empty = empty.withColumns({START: empty[history_of].cast(kind), END: empty[history_of].cast(kind)})
    writer = empty.write.format("delta").mode("ignore")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if column_mapping:
        writer = writer.option("delta.columnMapping.mode", "name")
    try:
        save_new_table(spark, name, writer)
    except Exception as err:  # noqa: BLE001 - anything but a lost creation race is named
        from upsertsink.conflicts import first_line

        raise InvalidInputError(f"table {name} could not be created: {first_line(err)}") from None
    found = location(spark, name)
    if found is None:
        raise UpsertSinkError(f"table {name} was created but the catalog does not show it")
    log.info("created table %s at %s", name, found)
    return found
