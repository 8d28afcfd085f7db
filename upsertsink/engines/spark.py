"""The plan executed with delta-spark on a Spark DataFrame.

The batch is evaluated once: it is checkpointed locally (``localCheckpoint``), then one aggregation pass
gives the null counts, the duplicate-key count and the fingerprint, and the MERGE reads the checkpoint
(Delta's own source materialization is switched off for it, since the checkpoint already is one).

Batch markers go through Delta's session settings ``spark.databricks.delta.write.txnAppId/txnVersion``,
which are global to a SparkSession (delta-io/delta#3934). Every commit therefore runs in its own
``spark.newSession()``: concurrent writes from several threads never see each other's markers, and the
user's session is never changed.
"""

from __future__ import annotations

import json
import logging
import time
from decimal import Decimal
from typing import Any

import numpy as np

from upsertsink import batch as B
from upsertsink import markers, storage
from upsertsink.engines.base import (
    TOMBSTONE_BATCH,
    TOMBSTONE_DELETED_AT,
    TOMBSTONE_SEQUENCE,
    CommitOutcome,
    PreparedBatch,
    TombstoneSpec,
    tombstone_key,
)
from upsertsink.engines.embedded import check_not_other, record_tombstones
from upsertsink.errors import InvalidInputError, SchemaMismatchError
from upsertsink.markers import Fingerprint
from upsertsink.spec import DELETE_FLAG, SOURCE, TARGET, MergePlan, quote

log = logging.getLogger(__name__)

ALGORITHM = "spark-xxhash64-v1"
_CONFLICT_MARKERS = (
    "Concurrent", "MetadataChanged", "ProtocolChanged", "DELTA_CONCURRENT", "already exists",
    "DELTA_TABLE_ALREADY_EXISTS", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED",
)


# Up to this many rows, key uniqueness is checked on the driver from 64-bit key hashes (8 bytes a row).
DRIVER_KEY_CHECK_ROWS = 2_000_000

# Batches up to this many rows are broadcast when the no-op rows are looked up in the target.
BROADCAST_MAX_ROWS = 2_000_000

# Key types whose batch min/max narrows the target scan through Delta's file statistics.
_RANGE_CATEGORIES = {"integer", "decimal", "string", "date", "timestamp"}


def _in_key_ranges(alias: str | None, ranges: dict[str, tuple[Any, Any]] | None):
    """``key BETWEEN batch-min AND batch-max`` for each ranged key, as typed literals (never SQL text)."""
    from pyspark.sql import functions as F

    cond = None
    for key, (low, high) in (ranges or {}).items():
        ref = F.col(f"{alias}.{quote(key, 'spark')}" if alias else quote(key, "spark"))
        part = ref.between(F.lit(low), F.lit(high))
        cond = part if cond is None else cond & part
    return cond


class RetryableConflict(Exception):
    """A concurrent commit won; the write may be retried."""


def _category(dt: Any) -> str:
    name = type(dt).__name__
    return {
        "ByteType": "integer", "ShortType": "integer", "IntegerType": "integer", "LongType": "integer",
        "FloatType": "float", "DoubleType": "float", "DecimalType": "decimal",
        "StringType": "string", "CharType": "string", "VarcharType": "string",
        "BooleanType": "boolean", "DateType": "date",
        "TimestampType": "timestamp", "TimestampNTZType": "timestamp",
        "BinaryType": "binary", "NullType": "null",
    }.get(name, f"other:{dt.simpleString()}")


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col(quote(name, "spark"))


def _is_conflict(err: Exception) -> bool:
    text = f"{type(err).__name__}: {err}"
    return any(m in text for m in _CONFLICT_MARKERS)


def _analysis_error(err: Exception) -> bool:
    return type(err).__name__ in ("AnalysisException", "ParseException", "PySparkValueError")


class SparkBatch:
    """One batch on the delta-spark engine."""

    engine = "spark"
    RetryableConflict = RetryableConflict

    def __init__(self, df: Any, storage_options: dict[str, str] | None = None):
        self.df = df
        self.spark = df.sparkSession
        self.storage_options = storage_options

    def _options(self, path: str) -> dict[str, str] | None:
        """deltalake's options for path: the sink's, else derived from this session's S3A settings."""
        return storage.deltalake_options(path, self.storage_options, self.spark)

    def columns(self) -> list[B.Column]:
        return [B.Column(f.name, _category(f.dataType), f.dataType.simpleString()) for f in self.df.schema]

    def _target_schema(self, path: str):
        if not markers.table_exists(path, self._options(path)):
            check_not_other(path)
            return None
        return self.spark.read.format("delta").load(path).schema

    def target_columns(self, path: str, snapshot: Any = None) -> list[B.Column] | None:
        """The table's columns as Spark sees them (``snapshot`` only says whether the table exists)."""
        if snapshot is None:
            check_not_other(path)
            return None
        schema = self.spark.read.format("delta").load(path).schema
        if schema is None:
            return None
        return [B.Column(f.name, _category(f.dataType), f.dataType.simpleString()) for f in schema]

    def cast_to(self, path: str, casts: list[str]) -> None:
        if not casts:
            return
        schema = self._target_schema(path)
        types = {f.name: f.dataType for f in schema}
        self.df = self.df.select(
            *[_col(c).cast(types[c]).alias(c) if c in casts else _col(c) for c in self.df.columns]
        )

    def _row_hash(self, df: Any):
        from pyspark.sql import functions as F

        names = sorted(c for c in df.columns if c != DELETE_FLAG)
        return F.xxhash64(*[_col(c) for c in names]).cast("decimal(20,0)")

    def _fingerprint(self, rows: int, total: Decimal | None, df: Any) -> Fingerprint:
        import hashlib

        value = int(total or 0) % 2**64
        schema = ";".join(
            f"{f.name}:{_category(f.dataType)}" for f in sorted(df.schema, key=lambda f: f.name)
            if f.name != DELETE_FLAG
        )
        digest = hashlib.sha256(f"{schema}|{rows}|{value}".encode()).hexdigest()[:32]
        return Fingerprint(ALGORITHM, rows, digest)

    def fingerprint(self) -> Fingerprint:
        from pyspark.sql import functions as F

        row = self.df.agg(F.count(F.lit(1)).alias("n"), F.sum(self._row_hash(self.df)).alias("h")).first()
        return self._fingerprint(int(row["n"]), row["h"], self.df)

    def prepare(
        self, keys: tuple[str, ...], sequence: str | None, delete_tree: Any, delete_text: str
    ) -> PreparedBatch:
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType, NullType

        df = self.df
        if delete_tree is not None:
            try:
                flag = F.expr(delete_text)
                kind = df.select(flag.alias("f")).schema[0].dataType
            except Exception as err:
                if _analysis_error(err):
                    raise InvalidInputError(f"delete_when {delete_text!r} is not valid here: {err}") from None
                raise
            if not isinstance(kind, (BooleanType, NullType)):
                raise InvalidInputError(
                    f"delete_when {delete_text!r} is not a boolean predicate (it gives {kind.simpleString()})"
                )
            df = df.withColumn(DELETE_FLAG, F.coalesce(flag.cast("boolean"), F.lit(False)))
        df = df.localCheckpoint(eager=True)

        # One global aggregation (no shuffle): rows, fingerprint, null counts, key ranges.
        aggs = [
            F.count(F.lit(1)).alias("rows"),
            F.sum(self._row_hash(df)).alias("hash"),
            (F.sum(F.when(_col(sequence).isNull(), 1).otherwise(0)) if sequence else F.lit(0)).alias("null_seq"),
        ]
        aggs += [F.sum(F.when(_col(k).isNull(), 1).otherwise(0)).alias(f"null_{i}") for i, k in enumerate(keys)]
        ranged = [k for k in keys if _category(df.schema[k].dataType) in _RANGE_CATEGORIES]
        for i, k in enumerate(ranged):
            aggs += [F.min(_col(k)).alias(f"min_{i}"), F.max(_col(k)).alias(f"max_{i}")]
        stats = df.agg(*aggs).first()
        for i, k in enumerate(keys):
            if stats[f"null_{i}"]:
                raise B.null_error(k, int(stats[f"null_{i}"]), "key")
        if sequence and stats["null_seq"]:
            raise B.null_error(sequence, int(stats["null_seq"]), "sequence_by")
        rows = int(stats["rows"] or 0)
        fp = self._fingerprint(rows, stats["hash"], df)
        if self._may_have_duplicate_keys(df, keys, rows):
            df, rows = self._resolve_duplicates(df, keys, sequence)
        ranges = {k: (stats[f"min_{i}"], stats[f"max_{i}"]) for i, k in enumerate(ranged) if rows}
        return PreparedBatch(data=df, fingerprint=fp, rows=rows, key_ranges=ranges)

    @staticmethod
    def _may_have_duplicate_keys(df: Any, keys: tuple[str, ...], rows: int) -> bool:
        """False when every key is distinct; True when some may repeat (the exact path then decides)."""
        from pyspark.sql import functions as F

        if rows <= 1:
            return False
        if rows <= DRIVER_KEY_CHECK_ROWS:
            # 8 bytes a row to the driver and a sort there beat a shuffle: distinct hashes prove distinct keys.
            hashes = df.select(F.xxhash64(*[_col(k) for k in keys]).alias("h")).toArrow()["h"]
            ordered = np.sort(hashes.to_numpy())
            return bool((ordered[1:] == ordered[:-1]).any())
        return not df.groupBy(*[_col(k) for k in keys]).count().filter(F.col("count") > 1).isEmpty()

    def _resolve_duplicates(self, df: Any, keys: tuple[str, ...], sequence: str | None) -> tuple[Any, int]:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        df = df.dropDuplicates()
        reason = "no sequence_by column to choose a row"
        if sequence:
            w = Window.partitionBy(*[_col(k) for k in keys])
            df = df.withColumn("__us_max", F.max(_col(sequence)).over(w))
            df = df.filter(_col(sequence) == F.col("__us_max")).drop("__us_max")
            reason = f"equal {sequence!r} values with different content"
        df = df.localCheckpoint(eager=True)
        dup = (
            df.groupBy(*[_col(k) for k in keys]).count().filter(F.col("count") > 1)
            .drop("count").orderBy(*[_col(k) for k in keys]).limit(B.MAX_NAMED_KEYS).collect()
        )
        if dup:
            raise B.duplicate_error(keys, [tuple(r) for r in dup], reason)
        return df, df.count()

    # -------------------------------------------------------------- tombstones

    def apply_tombstones(self, prepared: PreparedBatch, spec: TombstoneSpec) -> int:
        """Drop rows older than a remembered delete, then remember this batch's deletes. Returns dropped."""
        from pyspark.sql import functions as F

        df = prepared.data
        kcols = [tombstone_key(i) for i in range(len(spec.keys))]
        dropped = 0
        if markers.table_exists(spec.path, self._options(spec.path)):
            seq_type = df.schema[spec.sequence].dataType
            tomb = self.spark.read.format("delta").load(spec.path).select(
                *[F.col(k).alias(f"__tomb_{k}") for k in kcols],
                F.col(TOMBSTONE_SEQUENCE).cast(seq_type).alias("__tomb_seq"),
            )
            cond = [df[quote(k, "spark")] == tomb[f"__tomb_{kc}"] for k, kc in zip(spec.keys, kcols, strict=True)]
            cond.append(df[quote(spec.sequence, "spark")] <= tomb["__tomb_seq"])
            before = prepared.rows
            df = df.join(tomb, on=cond, how="left_anti").localCheckpoint(eager=True)
            prepared.rows = df.count()
            dropped = before - prepared.rows
        prepared.data = df
        deletes = df.filter(F.col(DELETE_FLAG)).select(
            *[_col(k).alias(kc) for k, kc in zip(spec.keys, kcols, strict=True)],
            _col(spec.sequence).alias(TOMBSTONE_SEQUENCE),
            F.lit(int(time.time() * 1_000_000)).cast("bigint").alias(TOMBSTONE_DELETED_AT),
            F.lit(spec.batch_id).cast("bigint").alias(TOMBSTONE_BATCH),
        )
        rows = deletes.toArrow()
        if rows.num_rows:
            record_tombstones(rows, spec, self._options(spec.path))
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
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType

        df = prepared.data
        session = self.spark.newSession()
        try:
            if create:
                schema = StructType([StructField(f.name, f.dataType, True) for f in df.schema if f.name != DELETE_FLAG])
                builder = DeltaTable.createIfNotExists(session).location(path).addColumns(schema)
                if partition_by:
                    builder = builder.partitionedBy(*partition_by)
                if B.needs_column_mapping(schema.names):
                    builder = (
                        builder.property("delta.columnMapping.mode", "name")
                        .property("delta.minReaderVersion", "2").property("delta.minWriterVersion", "5")
                    )
                builder.execute()
            if new_columns:
                types = {f.name: f.dataType.simpleString() for f in df.schema}
                cols = ", ".join(f"{quote(c.name, 'spark')} {types[c.name]}" for c in new_columns)
                session.sql(f"ALTER TABLE delta.{quote(path, 'spark')} ADD COLUMNS ({cols})")
            session.conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps(metadata))
            session.conf.set("spark.databricks.delta.merge.materializeSource", "none")
            if batch_id is not None:
                session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
                session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            options = self._options(path)
            before = markers_version(path, options)
            on = F.expr(plan.on("spark"))
            pruning = _in_key_ranges(TARGET, prepared.key_ranges)
            if pruning is not None:
                on = on & pruning  # lets Delta skip target files whose key range misses the batch
            if not create:
                df = self._changed_rows(df, path, plan, prepared.key_ranges, prepared.rows)
            merge = DeltaTable.forPath(session, path).alias(TARGET).merge(df.alias(SOURCE), on)
            if plan.deletes:
                merge = merge.whenMatchedDelete(condition=plan.delete_condition("spark"))
            if plan.has_update:
                merge = merge.whenMatchedUpdate(condition=plan.update_condition("spark"), set=plan.update_set("spark"))
            merge = merge.whenNotMatchedInsert(condition=plan.insert_condition("spark"), values=plan.insert_values("spark"))
            metrics = merge.execute().first()
            version = markers_version(path, options)
            if version == before and batch_id is not None:
                # No row changed and Delta made no commit: record the marker alone with an empty append,
                # unless a concurrent writer committed this very batch meanwhile.
                done = markers.last_batch_id(path, app_id, options)
                if done is not None and done >= batch_id:
                    raise RetryableConflict(f"batch {batch_id} was committed concurrently by another writer")
                empty = session.createDataFrame([], df.drop(DELETE_FLAG).schema)
                empty.write.format("delta").mode("append").save(path)
                version = markers_version(path, options)
        except Exception as err:
            if _is_conflict(err):
                raise RetryableConflict(str(err).splitlines()[0]) from err
            if _analysis_error(err):
                raise SchemaMismatchError(f"the MERGE into {path} was refused: {str(err).splitlines()[0]}") from err
            raise
        return CommitOutcome(
            version=version,
            inserted=int(metrics["num_inserted_rows"] or 0),
            updated=int(metrics["num_updated_rows"] or 0),
            deleted=int(metrics["num_deleted_rows"] or 0),
        )

    def _changed_rows(
        self, df: Any, path: str, plan: MergePlan, ranges: dict[str, tuple[Any, Any]] | None, rows: int
    ) -> Any:
        """Drop source rows the MERGE would not apply: identical to the stored row, or not newer.

        Delta's MERGE rewrites every file holding a matched key, even when the clause conditions leave the
        row as it was; filtering first keeps unchanged rows (and the files holding them) untouched.
        """
        from pyspark.sql import functions as F

        target = self.spark.read.format("delta").load(path)
        pruning = _in_key_ranges(None, ranges)
        if pruning is not None:
            target = target.filter(pruning)
        cols = [c for c in plan.columns if c in target.columns and c in df.columns]
        tgt = target.select(*[_col(c).alias(f"__t{i}") for i, c in enumerate(cols)])
        idx = {c: i for i, c in enumerate(cols)}
        on = [_col(k).eqNullSafe(F.col(f"__t{idx[k]}")) for k in plan.keys]
        same = [_col(c).eqNullSafe(F.col(f"__t{idx[c]}")) for c in plan.value_columns if c in idx]
        unchanged = F.lit(True)
        for cond in same:
            unchanged = unchanged & cond
        stale = F.lit(False)
        if plan.sequence is not None and plan.sequence in idx:
            t_seq = F.col(f"__t{idx[plan.sequence]}")
            stale = t_seq.isNotNull() & (_col(plan.sequence) <= t_seq)
        noop = unchanged | stale
        if plan.deletes:
            # a delete is dropped only when it is not newer; its payload may well equal the stored row
            noop = (~F.col(DELETE_FLAG) & noop) | (F.col(DELETE_FLAG) & stale)
        cond = on[0]
        for c in on[1:]:
            cond = cond & c
        if rows <= BROADCAST_MAX_ROWS:
            # Broadcast the batch and stream the target past it once: the keys of the no-op rows come out
            # (few columns, no shuffle of the target), and a broadcast anti-join drops them from the batch.
            noop_keys = tgt.join(F.broadcast(df), on=cond & noop, how="left_semi").select(
                *[F.col(f"__t{idx[k]}").alias(f"__k{i}") for i, k in enumerate(plan.keys)]
            )
            drop = [_col(k) == F.col(f"__k{i}") for i, k in enumerate(plan.keys)]
            match = drop[0]
            for c in drop[1:]:
                match = match & c
            changed = df.join(F.broadcast(noop_keys), on=match, how="left_anti")
        else:
            changed = df.join(tgt, on=cond & noop, how="left_anti")
        # Checkpointed: the MERGE reads its source twice (find touched files, then write), and this join
        # must run once.
        return changed.localCheckpoint(eager=True)


def markers_version(path: str, storage_options: dict[str, str] | None = None) -> int | None:
    from deltalake import DeltaTable

    if not markers.table_exists(path, storage_options):
        return None
    return DeltaTable(path, storage_options=storage_options).version()
