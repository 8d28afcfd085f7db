"""UpsertSink: an idempotent, replay-safe MERGE into a Delta table, on Spark or on deltalake.

The sink validates its settings once, in the constructor; ``write`` runs the write protocol
(``upsertsink/protocol.py``) with the engine that fits the batch.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

from upsertsink import batch as B
from upsertsink import interrupts, predicate
from upsertsink.engines.base import Engine, WriteRequest
from upsertsink.errors import InvalidInputError, UpsertSinkError, option
from upsertsink.frames import is_connect
from upsertsink.io import is_spark_frame
from upsertsink.protocol import Settings, WriteResult, write
from upsertsink.session import require_connect, require_spark
from upsertsink.storage import deltalake_options
from upsertsink.table import files

log = logging.getLogger(__name__)

DEFAULT_TOMBSTONE_RETENTION = timedelta(days=7)
LATE_BATCHES = ("refuse", "apply")

__all__ = ["DEFAULT_TOMBSTONE_RETENTION", "UpsertSink", "WriteResult"]


def _default_app_id(target: str) -> str:
    name = os.path.basename(target.rstrip("/")) or target
    return f"upsertsink:{name}"


def _check_local_path(target: str) -> None:
    """Refuse a target that deltalake cannot address, locally or on object storage: the sink reads the
    table's log with deltalake on both engines.

    A ``%`` followed by two hex digits (``%41``) anywhere in the folder's real path or the key: delta-rs 1.6
    writes the log and the data under the name, then reads the log files it lists under the name decoded
    once more (``pct%41enc`` as ``pctAenc``, in delta-kernel's listing), in whatever form the name is given (a
    plain path, a URI that escapes ``%`` as ``%25``; symbolic links are resolved first). Any other ``%``
    (``100%``) is an ordinary character to both engines, as are ``#``, ``?`` and spaces
    (``tombstones.deltalake_uri`` escapes them for deltalake). A ``file:`` URI holding a ``%`` is refused
    too: the sink's own folders take it literally, deltalake as an escape; a plain path says the same.
    """
    import re
    from urllib.parse import unquote

    local = "://" not in target or target.startswith("file:")
    if target.startswith("file:"):
        if "%" in target:
            raise InvalidInputError(
                f"target {target}: a file URI with '%' cannot be used (it starts an escape, which deltalake "
                "decodes and the sink's own files under the table would not). Give the folder as a plain path. "
                "Nothing was written."
            )
        return
    real = os.path.realpath(target) if local else target
    for path in (target, real):
        found = re.search(r"%[0-9A-Fa-f]{2}", path)
        if found is None:
            continue
        escape = found.group(0)
        through = "" if path == target else f" (its real path, through a symbolic link: {real})"
        what = "a local folder whose path" if local else "an object-store key that"
        raise InvalidInputError(
            f"target {target}: {what} holds {escape!r}{through} cannot be used: deltalake (delta-rs 1.6), "
            "which the sink reads the table's log with on both engines, URL-decodes the log files' paths once "
            f"more when it reads them ({escape!r} would be read as {unquote(escape)!r}: another "
            f"{'folder' if local else 'key'}). Rename it; a '%' not followed by two hex digits is fine. Nothing "
            "was written."
        )


def _absolute(target: str) -> str:
    """A local path as an absolute one (Spark resolves relative paths against its own working directory)."""
    if "://" in target or target.startswith("file:"):
        return target
    return os.path.abspath(target)


class UpsertSink:
    """An idempotent upsert sink for one Delta table (path or URI), keyed by ``keys``."""

    def __init__(
        self,
        target: str,
        keys: str | list[str],
        *,
        sequence_by: str | None = None,
        delete_when: str | None = None,
        app_id: str | None = None,
        partition_by: list[str] | None = None,
        schema_evolution: bool = False,
        tombstone_retention: timedelta | None = DEFAULT_TOMBSTONE_RETENTION,
        max_retries: int = 8,
        storage_options: dict[str, str] | None = None,
        late_batches: str = "refuse",
        scd_type: int = 1,
        track_history: list[str] | None = None,
        track_history_except: list[str] | None = None,
        ignore_null_updates: bool = False,
        merge_engine: str = "upsert",
        aggregates: dict[str, str] | None = None,
        sequence_groups: dict[str, list[str]] | None = None,
        _table_name: str | None = None,
        _file_access: bool | None = None,
    ):
        self.table_name = _table_name
        if _file_access not in (None, True, False):
            raise InvalidInputError(f"{option('file_access')} must be None, True or False, got {_file_access!r}")
        self.file_access = _file_access
        self.spark_only: bool | None = None  # for_table: decided at the first write (or last_batch_id) from file_access
        self._named: Any = None  # Spark-only mode: the catalog_table.NamedTable of the current write
        if _table_name is not None:  # for_table: the location comes from the catalog at the first write
            self.target: str | None = None
        elif not isinstance(target, str) or not target:
            raise InvalidInputError(f"target must be a Delta table path or URI, got {target!r}")
        else:
            self.target = _absolute(target)
            _check_local_path(self.target)
        self.keys = B.normalize_keys(keys)
        if sequence_by is not None and (not isinstance(sequence_by, str) or not sequence_by):
            raise InvalidInputError(f"{option('sequence_by')} must be a column name, got {sequence_by!r}")
        if sequence_by in self.keys:
            raise InvalidInputError(f"{option('sequence_by')} {sequence_by!r} cannot also be a key column")
        self.sequence_by = sequence_by
        self._delete_when = predicate.parse(delete_when, option("delete_when")) if delete_when is not None else None
        self.delete_when = delete_when
        if app_id is None:
            app_id = f"upsertsink:{_table_name}" if _table_name is not None else _default_app_id(str(self.target))
        self.app_id = app_id
        if not isinstance(self.app_id, str) or not self.app_id:
            raise InvalidInputError(f"{option('app_id')} must be a non-empty string, got {app_id!r}")
        if isinstance(partition_by, str):
            partition_by = [partition_by]
        self.partition_by = list(partition_by) if partition_by else None
        self.schema_evolution = bool(schema_evolution)
        if tombstone_retention is not None and tombstone_retention.total_seconds() <= 0:
            raise InvalidInputError("tombstone_retention must be a positive timedelta, or None to keep forever")
        self.tombstone_retention = tombstone_retention
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidInputError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self.max_retries = max_retries
        self.storage_options = storage_options
        if late_batches not in LATE_BATCHES:
            raise InvalidInputError(
                f"{option('late_batches')} must be one of {', '.join(map(repr, LATE_BATCHES))}, got {late_batches!r}"
            )
        if late_batches == "apply" and sequence_by is None:
            raise InvalidInputError(
                f"{option('late_batches', repr('apply'), 'apply')} needs {option('sequence_by')}: a batch applied "
                "late must not overwrite newer rows, and only a sequence column can tell which rows are newer"
            )
        self.late_batches = late_batches
        from upsertsink import modes

        self._mode = modes.make(
            merge_engine, self.keys, sequence_by, aggregates=aggregates, sequence_groups=sequence_groups,
            delete_when=delete_when, scd_type=scd_type, ignore_null_updates=ignore_null_updates,
        )
        self.merge_engine = merge_engine
        self.aggregates = aggregates
        self.sequence_groups = sequence_groups
        from upsertsink import history

        self.scd_type, self._history = history.check_options(
            scd_type, sequence_by, self.keys, track_history, track_history_except
        )
        if not isinstance(ignore_null_updates, bool):
            raise InvalidInputError(f"{option('ignore_null_updates')} must be True or False, got {ignore_null_updates!r}")
        self.ignore_null_updates = ignore_null_updates
        if self._history is not None:
            import dataclasses

            self._history = dataclasses.replace(self._history, ignore_null_updates=ignore_null_updates)
        self.track_history = None if self._history is None else self._history.track
        self.track_history_except = None if self._history is None else self._history.track_except

    @classmethod
    def for_table(cls, name: str, keys: str | list[str], *, file_access: bool | None = None, **options: Any) -> UpsertSink:
        """A sink for the Delta table ``name`` in Spark's catalog (``table``, ``schema.table`` or
        ``catalog.schema.table``), with the same options as the constructor.

        Writes go through Spark (the batch's session, classic or Spark Connect; a pandas or Arrow batch through
        the active session); the first write creates the table under that name when it does not exist. The
        default ``app_id`` is ``upsertsink:<name>``. ``file_access``: None (default) reads the table's log from
        its location when this process can, else works through Spark SQL on the name only ("Spark-only
        mode", for catalogs that hide the files); False always Spark-only; True always the files (see
        docs/user-guide.md, "Spark Connect and catalogs")."""
        from upsertsink.table import catalog

        if "target" in options or "_table_name" in options or "_file_access" in options:
            raise InvalidInputError("UpsertSink.for_table takes the table's name, not a target path")
        return cls("", keys, _table_name=catalog.check_name(name), _file_access=file_access, **options)

    # ------------------------------------------------------------------ public

    def write(self, data: Any, batch_id: int | None = None, restate: bool = False, dry_run: bool = False) -> WriteResult:
        """Upsert one batch. A committed batch id is skipped (its content checked); one below the app's marker
        that was never committed raises BatchIdBehindMarkerError, or is applied with ``late_batches="apply"``.

        ``restate=True``: ``data`` is the corrected content of batch ``batch_id``, committed before: its rows
        replace stored rows at the same sequence or an older one, its deletes are applied, and its content
        becomes the batch's (a later replay of it is skipped, of the old content refused). ``dry_run=True``:
        nothing is committed or recorded; the result counts what the write would do (``refused`` says why it
        would be refused)."""
        batch_id = B.check_batch_id(batch_id)
        if (restate or dry_run) and self._history is not None:
            raise InvalidInputError(
                f"{'restate' if restate else 'dry_run'}=True is not available for a history table (scd_type=2): "
                "a history table keeps every version of a key; send a correction as a new event at a later sequence"
            )
        if restate and batch_id is None:
            raise InvalidInputError("restate=True needs the batch_id of the batch whose content it corrects")
        if (restate or dry_run) and self._mode.name != "upsert":
            raise InvalidInputError(
                f"{'restate' if restate else 'dry_run'}=True is not available with merge_engine="
                f"{self._mode.name!r}: only 'upsert' has it (a restated batch would be combined with the stored rows "
                "a second time: an aggregate would count it twice). Nothing was written."
            )
        if self.table_name is not None:
            data = self._table_frame(data)
            self._locate(data.sparkSession, data)
        engine = self._engine_for(data)
        retention = None
        if self.tombstone_retention is not None:
            retention = int(self.tombstone_retention.total_seconds() * 1_000_000)
        assert self.target is not None
        named = self._named if self.spark_only else None
        request = WriteRequest(
            target=self.target if named is None else self.table_name, catalog=named, keys=self.keys, sequence=self.sequence_by, delete_when=self._delete_when,
            app_id=self.app_id, batch_id=batch_id,
            partition_by=tuple(self.partition_by) if self.partition_by else None,
            storage_options=engine.storage_options, history=self._history,
            ignore_null_updates=self.ignore_null_updates, restate=bool(restate), dry_run=bool(dry_run),
            mode=self._mode,
        )
        try:
            settings = Settings(self.schema_evolution, retention, self.max_retries, self.late_batches)
            if engine.name != "spark":
                return write(engine, request, settings)
            from upsertsink.sparkapi import api_for

            with api_for(data):  # Spark columns of the batch's kind: classic or Connect
                return write(engine, request, settings)
        except KeyboardInterrupt:  # raised unchanged, after logging whether the batch was committed
            interrupts.report()
            raise
        finally:
            engine.close()

    def last_batch_id(self) -> int | None:
        """The last batch id committed to the table for this sink's app_id, or None."""
        if self.table_name is not None and not self._locate(None, None):
            return None  # no table of that name yet
        if self.spark_only:
            from upsertsink.table.named import named_errors

            with named_errors(self.table_name, "reading the last batch id of"):
                from upsertsink.table import lineage

                return lineage.app_state(self._named.snapshot(), self.app_id).marker
        assert self.target is not None
        return files.last_batch_id(self.target, self.app_id, deltalake_options(self.target, self.storage_options))

    def batches(self, app_id: str | None = None, detail: Any = 50) -> Any:
        """The batch ledger of the table for this sink's app id (or ``app_id``): ``committed`` ranges, ``gaps``,
        ``undone`` and ``late`` ids, ``missing(expected)`` and per-batch ``records`` (of the newest ``detail``
        batches; ``"all"``, or batch ids); a ``upsertsink.table.batch_ledger.BatchLedger``. See docs/user-guide.md,
        "Streaming restarts, new checkpoints and backfills"."""
        from upsertsink.table.batch_ledger import for_sink

        return for_sink(self, app_id, detail)

    def maintain(self, adopt_clone: bool = False) -> Any:
        """Compact and clean the sink's own bookkeeping in the table (tombstones of every key set) and write a
        checkpoint when one is due; returns a ``MaintenanceReport``. Writers do this as they go; see
        docs/user-guide.md, "Running a stream for months". ``adopt_clone``: the table is a clone whose source
        cannot be read any more; write it from now on without the source's history ("Operating on a sink's
        table")."""
        from upsertsink.table.maintenance import maintain

        if self.table_name is not None and not self._locate(None, None):
            raise InvalidInputError(f"table {self.table_name} does not exist: there is nothing to maintain")
        if self.spark_only:
            return self._maintain_named()
        assert self.target is not None
        return maintain(self.target, deltalake_options(self.target, self.storage_options), adopt_clone=adopt_clone)

    def foreach_batch(self, df: Any, epoch_id: int) -> None:
        """For ``df.writeStream.foreachBatch(sink.foreach_batch)``: the epoch id is the batch id. A write that
        the query's ``stop()`` interrupted ends the query quietly (``interrupts.stream_stopped``)."""
        try:
            self.write(df, batch_id=int(epoch_id))
        except Exception as err:
            stopped = interrupts.stream_stopped(df, err)
            if stopped is None:
                raise
            raise stopped from None

    def __repr__(self) -> str:
        if self.table_name is not None:
            return f"UpsertSink.for_table({self.table_name!r}, keys={list(self.keys)!r}, app_id={self.app_id!r})"
        return f"UpsertSink({self.target!r}, keys={list(self.keys)!r}, app_id={self.app_id!r})"

    # ------------------------------------------------------------------ internals

    def _table_frame(self, data: Any) -> Any:
        """A batch for a named table as a Spark DataFrame: pandas and Arrow go through the active session."""
        if is_spark_frame(data):
            return data
        from upsertsink.io import to_arrow_table
        from upsertsink.table import catalog

        spark = catalog.active_session(f"UpsertSink.for_table({self.table_name!r}).write with a pandas or Arrow batch")
        return spark.createDataFrame(to_arrow_table(data))

    def _locate(self, spark: Any, df: Any) -> bool:
        """Find (with ``df``: create) the named table; sets ``self.target`` to its location and, at the first
        call, chooses the mode (``file_access``). False when the table does not exist and ``df`` is None."""
        from upsertsink.table import catalog

        assert self.table_name is not None
        if not self.spark_only and self.target is not None and files.table_exists(
                self.target, deltalake_options(self.target, self.storage_options)):
            return True  # still where the catalog said it was (a dropped table is looked up again)
        if spark is None:
            spark = catalog.active_session(f"UpsertSink.for_table({self.table_name!r})")
        if self.spark_only and self._named is not None and self._named.spark is spark:
            # the table of the previous write: still there (a dropped one is created again below)? What DESCRIBE
            # DETAIL said is kept while only this sink commits (NamedTable._validate)
            from upsertsink.table.named import named_errors

            with named_errors(self.table_name, "looking up"):
                if spark.catalog.tableExists(self.table_name):
                    return True
        detail = catalog.detail(spark, self.table_name)
        if detail is None:
            if df is None:
                return False
            if self.spark_only is None and self.file_access is False:
                self._refuse_history()
            catalog.create(
                spark, self.table_name, df, self.partition_by, B.needs_column_mapping(df.columns),
                history_of=self.sequence_by if self._history is not None else None,
            )
            detail = catalog.detail(spark, self.table_name)
            if detail is None:
                raise UpsertSinkError(f"table {self.table_name} was created but the catalog does not show it")
        found = catalog.as_path(str(detail["location"]))
        if self.spark_only is None:
            self.spark_only = self._choose_mode(found)
        if self.spark_only:
            from upsertsink.table.named import NamedTable

            self._refuse_history()
            self._named = NamedTable(spark, self.table_name, detail)
        else:
            _check_local_path(found)
        self.target = found
        return True

    def _choose_mode(self, location: str) -> bool:
        """True for Spark-only mode: ``file_access=False``, or None and the location cannot be read here."""
        if self.file_access is not None:
            mode = not self.file_access
            reason = f"file_access={self.file_access}"
        else:
            from upsertsink.table.named import files_readable

            readable, why = files_readable(location, deltalake_options(location, self.storage_options))
            if readable:
                try:
                    _check_local_path(location)
                except InvalidInputError as err:
                    readable, why = False, str(err).split(":", 1)[0]
            mode, reason = not readable, why
        log.info("table %s at %s: %s (%s)", self.table_name, location,
                 "Spark-only mode (SQL on the name; no access to its files)" if mode else "files read with deltalake",
                 reason)
        return mode

    def _refuse_history(self) -> None:
        if self._history is not None:
            from upsertsink.table.named import CatalogTableError

            raise CatalogTableError(
                f"table {self.table_name}: a history sink (scd_type=2) keeps its events in files beside the table, "
                "which Spark-only mode (no access to the table's files) cannot read or write. Give the job read and "
                "write access to the table's location (file_access=None or True), or use scd_type=1. Nothing was "
                "written."
            )

    def _maintain_named(self) -> Any:
        """Spark-only mode's maintenance: the companion tombstone table of this sink's keys, cleaned by SQL."""
        from upsertsink.table.named import NamedTombstoneStore

        if self.sequence_by is None or self.delete_when is None:
            return {"table": self.table_name, "tombstones": []}
        store = NamedTombstoneStore(self._named, self.keys, self.sequence_by)
        return {"table": self.table_name, "tombstones": [{"table": store.table_name, "scope": store.scope,
                                                           **store.compact()}]}

    def _engine_for(self, data: Any) -> Engine:
        if is_spark_frame(data):
            if is_connect(data):  # the server has Delta; the client needs no delta-spark
                require_connect("UpsertSink.write with a Spark Connect DataFrame")
            else:
                require_spark("UpsertSink.write with a Spark DataFrame")
            from upsertsink.engines.spark import SparkEngine

            return SparkEngine(data, deltalake_options(self.target, self.storage_options, data.sparkSession))
        from upsertsink.engines.embedded import EmbeddedEngine

        return EmbeddedEngine(data, deltalake_options(self.target, self.storage_options))
