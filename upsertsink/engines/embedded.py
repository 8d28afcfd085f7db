"""The plan executed with deltalake (delta-rs) on pandas / Arrow data: no JVM."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from upsertsink import batch as B
from upsertsink.engines.base import (
    TOMBSTONE_BATCH,
    TOMBSTONE_DELETED_AT,
    TOMBSTONE_SEQUENCE,
    CommitOutcome,
    PreparedBatch,
    TombstoneSpec,
    tombstone_key,
)
from upsertsink.errors import InvalidInputError, NotADeltaTableError, SchemaMismatchError
from upsertsink.markers import Fingerprint
from upsertsink.spec import DELETE_FLAG, SOURCE, TARGET, MergePlan

log = logging.getLogger(__name__)

ALGORITHM = "arrow-pandas-hash64-v2"


class RetryableConflict(Exception):
    """A concurrent commit won; the write may be retried."""


def to_arrow(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pd.DataFrame):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise SchemaMismatchError(f"the pandas batch cannot be converted to Arrow: {err}") from None
    raise InvalidInputError(
        f"data must be a Spark DataFrame, a pandas DataFrame or a pyarrow Table, got {type(data).__name__}"
    )


def category(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_null(t):
        return "null"
    return f"other:{t}"


def columns_of(schema: pa.Schema) -> list[B.Column]:
    return [B.Column(f.name, category(f.type), str(f.type)) for f in schema]


def check_not_other(path: str) -> None:
    """Refuse a local target that exists but is no Delta table (a file, or a folder with data in it)."""
    import os

    if "://" in path and not path.startswith("file://"):
        return
    local = path.removeprefix("file://")
    if os.path.isfile(local):
        raise NotADeltaTableError(f"target {path} is a file, not a Delta table folder")
    if os.path.isdir(local):
        entries = [e for e in os.listdir(local) if not e.startswith(".")]
        if entries:
            raise NotADeltaTableError(
                f"target {path} exists but is not a Delta table (no _delta_log; it holds {sorted(entries)[:5]}); "
                "choose an empty or new path, or convert it to Delta first"
            )


# ---------------------------------------------------------------- row hashes and the fingerprint


_MIX = np.uint64(0x9E3779B97F4A7C15)


def column_hash(col: pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash per value of one column (pandas' hash_array on the Arrow data)."""
    if pa.types.is_nested(col.type) or pa.types.is_dictionary(col.type):
        values = np.asarray([json.dumps(v, sort_keys=True, default=str) for v in col.to_pylist()], dtype=object)
        return pd.util.hash_array(values)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type):
        # Arrow's C++ hash table finds the distinct values; only those are hashed in Python-land.
        encoded = pc.dictionary_encode(col).combine_chunks()
        distinct = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
        table_hashes = np.append(pd.util.hash_array(distinct, categorize=False), np.uint64(0x5BD1E995))
        idx = pc.fill_null(encoded.indices, len(distinct)).to_numpy()
        return table_hashes[idx]
    return pd.util.hash_array(col.to_pandas().to_numpy())


def combine(hashes: list[np.ndarray], rows: int) -> np.ndarray:
    """Combine per-column hashes into one per row (order matters; callers pass a fixed column order)."""
    out = np.zeros(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for h in hashes:
            out = (out ^ h) * _MIX + np.uint64(1)
    return out


def row_hashes(table: pa.Table, cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """A 64-bit hash per row over every column, in sorted column-name order."""
    cache = {} if cache is None else cache
    names = sorted(table.column_names)
    cache.update({n: column_hash(table[n]) for n in names if n not in cache})
    return combine([cache[n] for n in names], table.num_rows)


def fingerprint_from_hashes(table: pa.Table, hashes: np.ndarray) -> Fingerprint:
    total = int(hashes.sum(dtype=np.uint64)) if len(hashes) else 0
    schema = ";".join(f"{c.name}:{c.category}" for c in sorted(columns_of(table.schema), key=lambda c: c.name))
    digest = hashlib.sha256(f"{schema}|{table.num_rows}|{total}".encode()).hexdigest()[:32]
    return Fingerprint(ALGORITHM, table.num_rows, digest)


# ---------------------------------------------------------------- delete_when on Arrow

_COMPARE = {
    exp.EQ: pc.equal,
    exp.NEQ: pc.not_equal,
    exp.GT: pc.greater,
    exp.GTE: pc.greater_equal,
    exp.LT: pc.less,
    exp.LTE: pc.less_equal,
    exp.Add: pc.add_checked,
    exp.Sub: pc.subtract_checked,
    exp.Mul: pc.multiply_checked,
    exp.Div: pc.divide,
}


def evaluate_predicate(tree: exp.Expression, table: pa.Table, text: str) -> pa.ChunkedArray:
    """Evaluate a parsed Spark-SQL predicate on an Arrow table (a documented subset of SQL)."""

    def ev(node: exp.Expression) -> Any:
        if isinstance(node, exp.Paren):
            return ev(node.this)
        if isinstance(node, exp.Column):
            return table[node.name]
        if isinstance(node, exp.Literal):
            if node.is_string:
                return pa.scalar(node.this)
            return pa.scalar(int(node.this) if node.this.lstrip("-").isdigit() else float(node.this))
        if isinstance(node, exp.Boolean):
            return pa.scalar(bool(node.this))
        if isinstance(node, exp.Null):
            return pa.scalar(None)
        if isinstance(node, exp.Neg):
            return pc.negate(ev(node.this))
        for cls, fn in _COMPARE.items():
            if isinstance(node, cls):
                return fn(ev(node.this), ev(node.expression))
        if isinstance(node, exp.And):
            return pc.and_kleene(ev(node.this), ev(node.expression))
        if isinstance(node, exp.Or):
            return pc.or_kleene(ev(node.this), ev(node.expression))
        if isinstance(node, exp.Not):
            return pc.invert(ev(node.this))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return pc.is_null(ev(node.this))
        if isinstance(node, exp.In) and not node.args.get("query"):
            values = [ev(v) for v in node.expressions]
            if not all(isinstance(v, pa.Scalar) for v in values):
                raise _unsupported(node, text)
            return pc.is_in(ev(node.this), value_set=pa.array([v.as_py() for v in values]))
        if isinstance(node, exp.Between):
            value = ev(node.this)
            return pc.and_kleene(
                pc.greater_equal(value, ev(node.args["low"])), pc.less_equal(value, ev(node.args["high"]))
            )
        if isinstance(node, exp.Like) and isinstance(node.expression, exp.Literal):
            return pc.match_like(ev(node.this), node.expression.this)
        if isinstance(node, exp.Lower):
            return pc.utf8_lower(ev(node.this))
        if isinstance(node, exp.Upper):
            return pc.utf8_upper(ev(node.this))
        if isinstance(node, exp.Trim):
            return pc.utf8_trim_whitespace(ev(node.this))
        if isinstance(node, exp.Coalesce):
            return pc.coalesce(ev(node.this), *[ev(e) for e in node.expressions])
        raise _unsupported(node, text)

    try:
        result = ev(tree)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise InvalidInputError(f"delete_when {text!r} cannot be evaluated on this batch: {err}") from None
    if isinstance(result, pa.Scalar):
        result = pa.chunked_array([pa.array([result.as_py()] * table.num_rows, type=result.type)])
    if not pa.types.is_boolean(result.type) and not pa.types.is_null(result.type):
        raise InvalidInputError(f"delete_when {text!r} is not a boolean predicate (it gives {result.type})")
    return pc.fill_null(result.cast(pa.bool_()), False)


def _unsupported(node: exp.Expression, text: str) -> InvalidInputError:
    return InvalidInputError(
        f"delete_when {text!r} uses {node.sql(dialect='spark')!r}, which the embedded engine does not "
        "evaluate; it supports comparisons, arithmetic, AND/OR/NOT, IN, BETWEEN, LIKE, IS [NOT] NULL, lower/upper/trim "
        "and coalesce (the Spark engine accepts any Spark SQL predicate)"
    )


# ---------------------------------------------------------------- the engine


def record_tombstones(rows: pa.Table, spec: TombstoneSpec, storage_options: dict[str, str] | None) -> None:
    """Upsert (key, sequence, deleted_at_us, batch_id) rows into the tombstone table, with deltalake.

    Both engines use this: tombstones are few and small, and a delta-rs MERGE of them takes milliseconds.
    Tombstones older than the retention are dropped in the same commit.
    """
    from deltalake import CommitProperties, DeltaTable

    kcols = [tombstone_key(i) for i in range(len(spec.keys))]
    if not DeltaTable.is_deltatable(spec.path, storage_options=storage_options):
        schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in rows.schema])
        DeltaTable.create(spec.path, schema, mode="ignore", storage_options=storage_options)
    tomb = DeltaTable(spec.path, storage_options=storage_options)
    plan = MergePlan(tuple(kcols), tuple(rows.column_names), TOMBSTONE_SEQUENCE)
    merger = tomb.merge(
        rows, plan.on("datafusion"), source_alias=SOURCE, target_alias=TARGET,
        commit_properties=CommitProperties(custom_metadata={"userMetadata": "upsertsink tombstones"}),
    )
    newer = f"{plan.ref(SOURCE, TOMBSTONE_SEQUENCE, 'datafusion')} > {plan.ref(TARGET, TOMBSTONE_SEQUENCE, 'datafusion')}"
    merger = merger.when_matched_update(updates=plan.update_set("datafusion"), predicate=newer)
    merger = merger.when_not_matched_insert(updates=plan.insert_values("datafusion"))
    if spec.retention_us is not None:
        cutoff = int(time.time() * 1_000_000) - spec.retention_us
        # cutoff is an int computed here, never user data
        merger = merger.when_not_matched_by_source_delete(
            predicate=f"{plan.ref(TARGET, TOMBSTONE_DELETED_AT, 'datafusion')} < {int(cutoff)}"
        )
    merger.execute()


class EmbeddedBatch:
    """One batch on the deltalake engine."""

    engine = "embedded"
    RetryableConflict = RetryableConflict

    def __init__(self, data: Any, storage_options: dict[str, str] | None = None):
        self.table = to_arrow(data)
        self.storage_options = storage_options

    def columns(self) -> list[B.Column]:
        return columns_of(self.table.schema)

    def target_columns(self, path: str, snapshot: Any = None) -> list[B.Column] | None:
        """The table's columns, from the sink's snapshot of it (kept for the commit of this attempt)."""
        if snapshot is None:
            check_not_other(path)
            self._snapshot = None
            return None
        self._snapshot = snapshot
        return columns_of(pa.schema(snapshot.schema().to_arrow()))

    def cast_to(self, path: str, casts: list[str]) -> None:
        if not casts:
            return
        schema = pa.schema(self._snapshot.schema().to_arrow())
        for name in casts:
            i = self.table.schema.get_field_index(name)
            try:
                col = pc.cast(self.table[name], schema.field(name).type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise SchemaMismatchError(
                    f"column {name!r} cannot be cast from {self.table[name].type} to the table's "
                    f"{schema.field(name).type}: {err}"
                ) from None
            self.table = self.table.set_column(i, pa.field(name, col.type), col)

    def fingerprint(self) -> Fingerprint:
        return fingerprint_from_hashes(self.table, row_hashes(self.table))

    def prepare(
        self, keys: tuple[str, ...], sequence: str | None, delete_tree: exp.Expression | None, delete_text: str
    ) -> PreparedBatch:
        table = self.table
        for k in keys:
            if table[k].null_count:
                raise B.null_error(k, table[k].null_count, "key")
        if sequence is not None and table[sequence].null_count:
            raise B.null_error(sequence, table[sequence].null_count, "sequence_by")
        column_hashes: dict[str, np.ndarray] = {}
        hashes = row_hashes(table, column_hashes)
        fp = fingerprint_from_hashes(table, hashes)
        key_hashes = combine([column_hashes[k] for k in keys], table.num_rows)
        ordered = np.sort(key_hashes)
        if len(ordered) > 1 and (ordered[1:] == ordered[:-1]).any():  # distinct key hashes prove distinct keys
            table = self._resolve_duplicates(table, keys, sequence, hashes)
        if delete_tree is not None:
            flag = evaluate_predicate(delete_tree, table, delete_text)
            table = table.append_column(pa.field(DELETE_FLAG, pa.bool_()), flag)
        return PreparedBatch(data=table, fingerprint=fp, rows=table.num_rows)

    @staticmethod
    def _resolve_duplicates(
        table: pa.Table, keys: tuple[str, ...], sequence: str | None, hashes: np.ndarray
    ) -> pa.Table:
        counts = table.select(list(keys)).group_by(list(keys)).aggregate([([], "count_all")])
        if counts.num_rows == table.num_rows:
            return table
        cols = {f"k{i}": table[k].to_pandas() for i, k in enumerate(keys)}
        frame = pd.DataFrame(cols)
        kcols = list(cols)
        frame["_h"] = hashes
        frame["_i"] = np.arange(table.num_rows)
        frame = frame.drop_duplicates(subset=[*kcols, "_h"], keep="first")
        reason = "no sequence_by column to choose a row"
        if sequence is not None:
            frame["_s"] = table[sequence].to_pandas().to_numpy()[frame["_i"].to_numpy()]
            top = frame.groupby(kcols, sort=False, dropna=False)["_s"].transform("max")
            frame = frame[frame["_s"] == top]
            reason = f"equal {sequence!r} values with different content"
        dup = frame[frame.duplicated(subset=kcols, keep=False)]
        if len(dup):
            examples = sorted({tuple(r) for r in dup[kcols].itertuples(index=False, name=None)}, key=repr)
            raise B.duplicate_error(keys, examples, reason)
        return table.take(pa.array(np.sort(frame["_i"].to_numpy())))

    # -------------------------------------------------------------- tombstones

    def apply_tombstones(self, prepared: PreparedBatch, spec: TombstoneSpec) -> int:
        """Drop rows older than a remembered delete, then remember this batch's deletes. Returns dropped."""
        from deltalake import DeltaTable

        table: pa.Table = prepared.data
        kcols = [tombstone_key(i) for i in range(len(spec.keys))]
        dropped = 0
        if DeltaTable.is_deltatable(spec.path, storage_options=self.storage_options):
            tomb = DeltaTable(spec.path, storage_options=self.storage_options).to_pyarrow_table(
                columns=[*kcols, TOMBSTONE_SEQUENCE]
            )
            if tomb.num_rows:
                probe = table.select(list(spec.keys)).rename_columns(kcols)
                probe = probe.append_column("_seq", table[spec.sequence])
                probe = probe.append_column("_i", pa.array(np.arange(table.num_rows)))
                joined = probe.join(tomb, keys=kcols, join_type="inner")
                if joined.num_rows:
                    seq_type = table[spec.sequence].type
                    stale = pc.less_equal(joined["_seq"], pc.cast(joined[TOMBSTONE_SEQUENCE], seq_type))
                    drop = pc.filter(joined["_i"], stale)
                    dropped = len(drop)
                    if dropped:
                        mask = pc.invert(pc.is_in(pa.array(np.arange(table.num_rows)), value_set=drop))
                        table = table.filter(mask)
        prepared.data = table
        deletes = table.filter(table[DELETE_FLAG])
        if deletes.num_rows:
            now_us = int(time.time() * 1_000_000)
            rows = deletes.select(list(spec.keys)).rename_columns(kcols)
            rows = rows.append_column(TOMBSTONE_SEQUENCE, deletes[spec.sequence])
            rows = rows.append_column(TOMBSTONE_DELETED_AT, pa.array([now_us] * deletes.num_rows, pa.int64()))
            rows = rows.append_column(TOMBSTONE_BATCH, pa.array([spec.batch_id] * deletes.num_rows, pa.int64()))
            record_tombstones(rows, spec, self.storage_options)
        return dropped

    # -------------------------------------------------------------- commit

    def commit(
        self,
        path: str,
        prepared: PreparedBatch,
        plan: MergePlan,
        app_id: str,
        batch_id: int | None,
        metadata: dict[str, Any],
        create: bool,
        partition_by: list[str] | None,
        new_columns: list[B.Column],
    ) -> CommitOutcome:
        from deltalake import CommitProperties, DeltaTable, Schema, Transaction
        from deltalake.exceptions import CommitFailedError, DeltaError

        data: pa.Table = prepared.data
        user_schema = pa.schema(
            [pa.field(f.name, f.type, nullable=True) for f in data.schema if f.name != DELETE_FLAG]
        )
        try:
            if create:
                # No column mapping here: delta-rs 1.6 creates such a table but writes data that reads back as
                # nulls. delta-rs needs none for unusual names; Spark does (see docs/user-guide.md).
                DeltaTable.create(
                    path, user_schema, mode="ignore", partition_by=partition_by or None,
                    storage_options=self.storage_options,
                )
            table = getattr(self, "_snapshot", None)
            if table is None or create:
                table = DeltaTable(path, storage_options=self.storage_options)
            if new_columns:
                fields = Schema.from_arrow(pa.schema([user_schema.field(c.name) for c in new_columns])).fields
                table.alter.add_columns(list(fields))
                table = DeltaTable(path, storage_options=self.storage_options)
            txns = [Transaction(app_id, batch_id)] if batch_id is not None else None
            props = CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata)}, app_transactions=txns)
            merger = table.merge(
                data, plan.on("datafusion"), source_alias=SOURCE, target_alias=TARGET, commit_properties=props
            )
            if plan.deletes:
                merger = merger.when_matched_delete(predicate=plan.delete_condition("datafusion"))
            if plan.has_update:
                merger = merger.when_matched_update(
                    updates=plan.update_set("datafusion"), predicate=plan.update_condition("datafusion")
                )
            merger = merger.when_not_matched_insert(
                updates=plan.insert_values("datafusion"), predicate=plan.insert_condition("datafusion")
            )
            before = table.version()
            metrics = merger.execute()
            if table.version() == before and batch_id is not None:
                # delta-rs makes no commit for a MERGE that changes no row; the batch marker must still
                # be recorded, so commit it alone (an empty append carrying the txn and the metadata) -
                # unless a concurrent writer committed this very batch meanwhile: then it is applied.
                table = DeltaTable(path, storage_options=self.storage_options)
                done = table.transaction_version(app_id)
                if done is not None and done >= batch_id:
                    raise RetryableConflict(f"batch {batch_id} was committed concurrently by another writer")
                table.create_write_transaction(
                    [], mode="append", schema=pa.schema(table.schema().to_arrow()),
                    partition_by=table.metadata().partition_columns or None, commit_properties=props,
                )
                table = DeltaTable(path, storage_options=self.storage_options)
        except CommitFailedError as err:
            raise RetryableConflict(str(err)) from err
        except DeltaError as err:
            text = str(err)
            if "onflict" in text or "oncurrent" in text or "already exists" in text:
                raise RetryableConflict(text) from err
            raise
        return CommitOutcome(
            version=table.version(),
            inserted=int(metrics.get("num_target_rows_inserted", 0)),
            updated=int(metrics.get("num_target_rows_updated", 0)),
            deleted=int(metrics.get("num_target_rows_deleted", 0)),
        )
