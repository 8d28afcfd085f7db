"""The write protocol's steps executed with deltalake (delta-rs) on pandas / Arrow data: no JVM."""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import arrow_batch, faults
from upsertsink import batch as B
from upsertsink import fingerprint as fp
from upsertsink.arrow_batch import prepare_arrow
from upsertsink.conflicts import RetryableConflict, deltalake_conflict
from upsertsink.engines.base import CommitOutcome, Marker, PreparedBatch, WriteRequest
from upsertsink.errors import InvalidInputError, SchemaMismatchError
from upsertsink.pruning import FileRanges, file_ranges, sql_literal
from upsertsink.sidecar.folder import deltalake_uri
from upsertsink.sidecar.tombstones import SEQUENCE, key_column
from upsertsink.spec import DELETE_FLAG, SOURCE, TARGET, MergePlan
from upsertsink.table import checks as table_checks
from upsertsink.table import commit_log
from upsertsink.table.files import Snapshot

log = logging.getLogger(__name__)


def _microseconds(table: pa.Table) -> pa.Table:
    """Timestamps as Delta stores them (microseconds), as Spark writes them; finer units are truncated.

    A nanosecond column would make deltalake create a table with the ``timestampNanos`` feature, which
    delta-spark 4.4 cannot read.
    """
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.unit != "us":
            col = pc.cast(table[f.name], pa.timestamp("us", f.type.tz), safe=False)
            table = table.set_column(i, pa.field(f.name, col.type, f.nullable), col)
    return table


def to_arrow(data: Any) -> pa.Table:
    """A pandas DataFrame, pyarrow Table or RecordBatch as an Arrow table with microsecond timestamps."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pd.DataFrame):
        try:
            data = pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise SchemaMismatchError(f"the pandas batch cannot be converted to Arrow: {err}") from None
    if not isinstance(data, pa.Table):
        raise InvalidInputError(
            f"data must be a Spark DataFrame, a pandas DataFrame or a pyarrow Table, got {type(data).__name__}"
        )
    return _microseconds(data)


def columns_of(schema: pa.Schema) -> list[B.Column]:
    return [B.Column(f.name, fp.category(f.type), str(f.type), f.type) for f in schema]


class EmbeddedEngine:
    """One batch on the deltalake engine."""

    name: ClassVar[str] = "embedded"

    def __init__(self, data: Any, storage_options: dict[str, str] | None = None):
        self.table = to_arrow(data)
        self.storage_options = storage_options

    def _open(self, path: str):
        from deltalake import DeltaTable

        return DeltaTable(deltalake_uri(path), storage_options=self.storage_options)

    # -------------------------------------------------------------- schema and preparation

    def columns(self) -> list[B.Column]:
        return columns_of(self.table.schema)

    def target_columns(self, request: WriteRequest, snapshot: Snapshot) -> list[B.Column] | None:
        if not snapshot.exists:
            return None
        return columns_of(pa.schema(snapshot.table.schema().to_arrow()))

    def _canonical(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> pa.Table:
        table = self.table
        types = {c.name: c.dtype for c in target or ()}
        for name in casts:
            want = types[name]
            try:
                col = pc.cast(table[name], want, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                if pa.types.is_decimal(want) and "data loss" in str(err):
                    raise _decimal_error(name, table[name], want) from None
                raise SchemaMismatchError(
                    f"column {name!r} cannot be cast from {table[name].type} to the table's {want}: {err}. "
                    "Nothing was written."
                ) from None
            table = table.set_column(table.schema.get_field_index(name), pa.field(name, col.type), col)
        for k in request.keys:  # one key 0.0 for 0.0 and -0.0, on both engines
            if pa.types.is_floating(table[k].type):
                col = pc.if_else(pc.equal(table[k], 0), pa.scalar(0.0, table[k].type), table[k])
                table = table.set_column(table.schema.get_field_index(k), pa.field(k, col.type), col)
        return table

    def null_counts(self, columns: list[str]) -> dict[str, int]:
        return {c: self.table[c].null_count for c in columns if c in self.table.column_names}

    def fingerprint(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> fp.Fingerprint:
        return fp.fingerprint(self._canonical(request, target, casts))

    def prepare(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> PreparedBatch:
        return prepare_arrow(self._canonical(request, target, casts), request, casts)

    def history_batch(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> pa.Table:
        from upsertsink.predicate import evaluate_arrow

        table = self._canonical(request, target, casts)
        if request.delete_when is not None:
            table = table.append_column(pa.field(DELETE_FLAG, pa.bool_()), evaluate_arrow(request.delete_when, table))
        return table

    def history_source(self, prepared: PreparedBatch) -> PreparedBatch:
        return prepared

    # -------------------------------------------------------------- tombstones

    def key_sample(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        return prepared.data.select(list(request.keys)).slice(0, 0)

    def apply_tombstones(
        self, request: WriteRequest, prepared: PreparedBatch, tombstones: pa.Table
    ) -> tuple[PreparedBatch, int]:
        table, count = arrow_batch.apply_tombstones(prepared.data, request, tombstones)
        return (prepared.with_data(table), count) if count else (prepared, 0)

    def _rows(self, request: WriteRequest, prepared: PreparedBatch, deletes: bool) -> pa.Table:
        return arrow_batch.key_rows(prepared.data, request, deletes)

    def deletes(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        return self._rows(request, prepared, deletes=True)

    def upserted_keys(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        return self._rows(request, prepared, deletes=False)

    # -------------------------------------------------------------- commits

    def commit(
        self, request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, plan: MergePlan,
        metadata: dict[str, Any], new_columns: list[B.Column], marker: Marker | None,
    ) -> CommitOutcome:
        from deltalake import CommitProperties, Transaction

        txns = [Transaction(marker.app_id, marker.version)] if marker is not None else None
        props = CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata)}, app_transactions=txns)
        try:
            if not snapshot.exists:
                return self._create(request, prepared, props)
            return self._merge(request, prepared, snapshot.table, plan, props, new_columns, marker)
        except RetryableConflict:
            raise
        except Exception as err:
            permanent = self._permanent(request, prepared, snapshot, err)
            if permanent is not None:
                raise permanent from None
            conflict = deltalake_conflict(err)
            if conflict is not None:
                raise conflict from err
            raise

    @staticmethod
    def _permanent(request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, err: BaseException) -> Exception | None:
        """A refusal that no retry can change (a table feature, rows breaking a constraint), else None."""
        feature = table_checks.unsupported_feature(err, request.target) or table_checks.foreign_files(
            err, request.target)
        if feature is not None:
            return feature
        text = str(err)
        if "Invalid data found" not in text and "failed validation check" not in text:
            return None
        rows: pa.Table = prepared.data
        if DELETE_FLAG in rows.column_names:
            rows = rows.filter(pc.invert(rows[DELETE_FLAG])).drop_columns([DELETE_FLAG])
        found = table_checks.arrow_violation(snapshot, rows, request.keys) if snapshot.exists else None
        what, row = found if found is not None else (None, None)
        return table_checks.violation_error(request.target, request.keys, what, row, text.strip().splitlines()[0])

    def _create(self, request: WriteRequest, prepared: PreparedBatch, props: Any) -> CommitOutcome:
        """The first batch: the table, its data and its marker in one commit (version 0)."""
        from deltalake import CommitProperties, write_deltalake

        data: pa.Table = prepared.data
        if DELETE_FLAG in data.column_names:  # a delete in a new table has nothing to delete
            data = data.filter(pc.invert(data[DELETE_FLAG])).drop_columns([DELETE_FLAG])
        schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in data.schema])
        # No commit retries: delta-rs would retry a create that lost the race for version 0 as an append at
        # version 1 (a blind append conflicts with nothing), storing keys the winner's batch holds a second
        # time. Losing must be a conflict, after which the protocol MERGEs into the winner's table.
        props = CommitProperties(
            custom_metadata=props.custom_metadata, app_transactions=props.app_transactions, max_commit_retries=0,
        )
        # No column mapping: delta-rs 1.6 would write data that reads back as nulls (see the user guide).
        write_deltalake(
            deltalake_uri(request.target), data.cast(schema), mode="error",
            partition_by=list(request.partition_by or []) or None, commit_properties=props,
            storage_options=self.storage_options,
        )
        faults.point("table-created")
        return CommitOutcome(version=0, inserted=data.num_rows, updated=0, deleted=0, files_scanned=0)

    def _merge(
        self, request: WriteRequest, prepared: PreparedBatch, table: Any, plan: MergePlan, props: Any,
        new_columns: list[B.Column], marker: Marker | None,
    ) -> CommitOutcome:
        data, plan = _with_generated(prepared.data, plan, table, request.target)
        before = table.version()
        found = file_ranges(table, request.keys, prepared.key_values)
        if found is not None:
            props = _with_metadata(props, files_scanned=found.files)
        metrics = self._execute_merge(table, data, plan, props, evolve=bool(new_columns), ranges=found)
        if table.version() != before:
            faults.point("data-committed")
        elif marker is not None:
            # delta-rs makes no commit for a MERGE that changes no row: the marker gets a commit of its own,
            # unless a concurrent writer took the marker's version meanwhile. The commit is made on the
            # snapshot the attempt read, so a concurrent commit of the same app id conflicts with it.
            faults.point("marker-only-before")
            latest = self._open(request.target).transaction_version(marker.app_id)
            if latest is not None and latest >= marker.version:
                raise RetryableConflict(f"{marker.app_id} reached version {marker.version} concurrently")
            props = _with_metadata(props, marker_only=True)
            table.create_write_transaction(
                [], mode="append", schema=pa.schema(table.schema().to_arrow()),
                partition_by=table.metadata().partition_columns or None, commit_properties=props,
            )
            table.update_incremental()  # the handle stays at the version it read otherwise
            faults.point("marker-only-committed")
            mine = commit_log.find_write(
                table.table_uri, _token(props), before, table.version(), self.storage_options
            )
            if mine is not None:
                return CommitOutcome(version=mine, inserted=0, updated=0, deleted=0, files_scanned=0)
        return CommitOutcome(
            version=table.version(),
            inserted=int(metrics.get("num_target_rows_inserted", 0)),
            updated=int(metrics.get("num_target_rows_updated", 0)),
            deleted=int(metrics.get("num_target_rows_deleted", 0)),
            files_scanned=_int_or_none(metrics.get("num_target_files_scanned")),
            files_rewritten=_int_or_none(metrics.get("num_target_files_removed")),
        )

    @staticmethod
    def _execute_merge(
        table: Any, data: pa.Table, plan: MergePlan, props: Any, evolve: bool = False, ranges: FileRanges | None = None
    ) -> dict[str, Any]:
        on = plan.on("datafusion")
        if ranges is not None and ranges.narrows:
            # Only the files that can hold the batch's keys are read (and can be rewritten); new keys outside
            # every file are inserted unread. Bounds are rendered from typed values, never from user text.
            ref = plan.ref(TARGET, ranges.key, "datafusion")
            parts = [f"({ref} BETWEEN {sql_literal(lo)} AND {sql_literal(hi)})" for lo, hi in ranges.ranges]
            on = f"{on} AND ({' OR '.join(parts) if parts else 'FALSE'})"
        merger = table.merge(
            data, on, source_alias=SOURCE, target_alias=TARGET, commit_properties=props, merge_schema=evolve,
        )
        if plan.deletes:
            merger = merger.when_matched_delete(predicate=plan.delete_condition("datafusion"))
        if plan.has_update:
            merger = merger.when_matched_update(
                updates=plan.update_set("datafusion"), predicate=plan.update_condition("datafusion")
            )
        if plan.upserts:
            merger = merger.when_not_matched_insert(
                updates=plan.insert_values("datafusion"), predicate=plan.insert_condition("datafusion")
            )
        return merger.execute()

    def close(self) -> None:
        """Nothing to release: the batch is the caller's Arrow table."""

    def renamed(self, names: dict[str, str]) -> EmbeddedEngine:
        """The same batch with columns renamed (``names``: old -> new)."""
        return EmbeddedEngine(self.table.rename_columns([names.get(c, c) for c in self.table.column_names]),
                              self.storage_options)

    def repair(self, request: WriteRequest, deletes: pa.Table, metadata: dict[str, Any]) -> CommitOutcome | None:
        from deltalake import CommitProperties

        assert request.sequence is not None
        table = self._open(request.target)
        seq_type = pa.schema(table.schema().to_arrow()).field(request.sequence).type
        kc = [key_column(i) for i in range(len(request.keys))]
        source = deletes.select([*kc, SEQUENCE]).rename_columns([*request.keys, request.sequence])
        source = source.set_column(len(kc), request.sequence, pc.cast(source[request.sequence], seq_type))
        source = source.append_column(DELETE_FLAG, pa.array(np.ones(source.num_rows, bool)))
        plan = MergePlan(request.keys, (*request.keys, request.sequence), request.sequence, deletes=True, upserts=False)
        props = CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata)})
        before = table.version()
        try:
            metrics = self._execute_merge(table, source, plan, props)
        except Exception as err:
            conflict = deltalake_conflict(err)
            if conflict is not None:
                raise conflict from err
            raise
        if table.version() == before:
            return None
        return CommitOutcome(table.version(), 0, 0, int(metrics.get("num_target_rows_deleted", 0)))


def _with_generated(data: pa.Table, plan: MergePlan, table: Any, target: str) -> tuple[pa.Table, MergePlan]:
    """The MERGE source with the table's generated columns that the batch leaves out, computed here.

    delta-rs 1.6 computes a generated column (``GENERATED ALWAYS AS (expr)``) for the rows a MERGE inserts,
    but not for those it updates, and then refuses them in its own validation (``v`` updated, ``v * 2`` kept:
    "Invalid data found"). The expression is evaluated with DataFusion, as delta-rs evaluates it to validate
    the rows, and the column is written like any other.
    """
    import dataclasses

    from upsertsink.spec import quote

    missing = [
        (f.name, str(f.metadata["delta.generationExpression"])) for f in table.schema().fields
        if (f.metadata or {}).get("delta.generationExpression") and f.name not in data.column_names
    ]
    if not missing:
        return data, plan
    from datafusion import SessionContext

    types = pa.schema(table.schema().to_arrow())
    row = "__upsertsink_row"
    indexed = data.append_column(row, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    ctx = SessionContext()
    ctx.register_record_batches("batch", [indexed.to_batches() or [pa.RecordBatch.from_pylist([], indexed.schema)]])
    exprs = ", ".join(f"({expr}) AS {quote(name, 'datafusion')}" for name, expr in missing)
    try:
        computed = ctx.sql(f"SELECT {quote(row, 'datafusion')}, {exprs} FROM batch ORDER BY 1").to_arrow_table()
        for name, _ in missing:
            data = data.append_column(types.field(name), pc.cast(computed[name], types.field(name).type))
    except Exception as err:  # noqa: BLE001 - an expression DataFusion cannot evaluate: the batch must carry it
        shown = ", ".join(f"{name!r} ({expr})" for name, expr in missing)
        raise SchemaMismatchError(
            f"the batch lacks generated column(s) {shown} of table {target}, which the embedded engine computes "
            f"itself (delta-rs 1.6 does not on update) but could not: {str(err).strip().splitlines()[0]}. Send "
            "the column(s) with their values, or write with the Spark engine. Nothing was written."
        ) from None
    return data, dataclasses.replace(plan, columns=(*plan.columns, *(name for name, _ in missing)))


def _decimal_error(name: str, column: Any, want: pa.DataType) -> SchemaMismatchError:
    return B.cast_overflow_error(name, _inexact(column, want), str(column.type), str(want))


def _inexact(column: Any, want: pa.DataType) -> int:
    """How many values of ``column`` a cast into the decimal ``want`` would change (round or overflow)."""
    count = 0
    for value in column.to_pylist():
        if value is None:
            continue
        try:
            pc.cast(pa.array([value], column.type), want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            count += 1
    return count


def _with_metadata(props: Any, **extra: Any) -> Any:
    from deltalake import CommitProperties

    meta = json.loads(props.custom_metadata["userMetadata"])
    return CommitProperties(
        custom_metadata={"userMetadata": json.dumps({**meta, **extra})}, app_transactions=props.app_transactions
    )


def _token(props: Any) -> str | None:
    return json.loads(props.custom_metadata["userMetadata"]).get("write")


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
