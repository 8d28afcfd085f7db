"""The write protocol's steps executed with delta-spark on a Spark DataFrame.

The batch is evaluated once: it is checkpointed locally (lazily: the first job over it fills the checkpoint)
and one ``mapInArrow`` pass (``spark_stats.py``) gives the row count, the canonical fingerprint, null/NaN/
overflow counts, key ranges and key hashes. The MERGE reads the checkpoint (Delta's own source
materialization is switched off for it, since the checkpoint already is one).

Over Spark Connect a batch that is exactly a local relation the client built (``createDataFrame`` of pandas,
Arrow or rows) already has its rows in the client's plan (``_client_rows``): it is prepared there in Arrow, as
the embedded engine does, with no job and no round trip, and only the MERGE source is sent. Any other large
batch the client sent as a local relation is never collected back (``_connect_large``): it is checkpointed
lazily before its schema is asked for, cast and flagged over the checkpoint, and the statistics job also ships
every row's key, sequence and delete flag, so tombstones and delete keys are handled on the client in Arrow and
the MERGE reads the checkpoint (docs/design-notes.md).

The commits themselves (create, MERGE, marker-only, repair) are in ``spark_merge.py``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import arrow_batch
from upsertsink import batch as B
from upsertsink import fingerprint as fp
from upsertsink.arrow_batch import prepare_arrow
from upsertsink.conflicts import first_line
from upsertsink.engines import spark_local, spark_merge, spark_stats
from upsertsink.engines.base import CommitOutcome, Marker, PreparedBatch, WriteRequest
from upsertsink.engines.spark_merge import analysis_error as _analysis_error
from upsertsink.engines.spark_merge import col as _col
from upsertsink.errors import InvalidInputError, SchemaMismatchError
from upsertsink.sidecar.tombstones import SEQUENCE, key_column
from upsertsink.spec import DELETE_FLAG, MergePlan
from upsertsink.table.files import Snapshot

log = logging.getLogger(__name__)

# Batches up to this many rows are collected once and prepared on the driver (as the embedded engine does):
# for them one collect costs less than a distributed pass through the Python workers.
LOCAL_ROWS = 500_000
# A batch whose planned size Spark estimates above this is not collected at all: trying would read up to
# LOCAL_ROWS rows only to throw them away and read the source again in the distributed pass.
LOCAL_MAX_ESTIMATE_BYTES = 1 << 30
# Over Spark Connect a batch the client sent as a local relation (``createDataFrame``) of more rows than this,
# or large enough that pyspark cached it on the server as artifacts, is kept on the server: collecting it back
# costs more than one pass over it there (docs/benchmarks.md, "Spark Connect"). Tests lower it.
CONNECT_LOCAL_ROWS = 50_000
OK_PREFIX = "__upsertsink_ok_"  # per cast column: the value fits the table's type (dropped before the MERGE)
STALE = "__upsertsink_stale"
_RANGE_CATEGORIES = {"integer", "decimal", "string", "date", "timestamp"}


def _estimated_bytes(df: Any) -> int:
    """Spark's size estimate of the batch's plan (planning only, no job); 0 when unknown or unavailable."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        size = int(size if isinstance(size, int) else size.toString())
    except Exception:  # noqa: BLE001 - Spark Connect has no _jdf; an estimate is only a hint
        return 0
    return 0 if size >= 2**63 - 1 else size  # Long.MaxValue: Spark does not know (RDDs, some sources)


def _connect_large(df: Any) -> bool:
    """A Spark Connect batch that is a local relation the client sent, over CONNECT_LOCAL_ROWS rows or cached
    on the server as artifacts (pyspark does that above ``spark.sql.session.localRelationCacheThreshold``
    bytes). Decided from the client's plan: no RPC, no job. Other Connect plans keep the collect path."""
    from upsertsink.session import is_connect

    if not is_connect(df):
        return False
    plan = getattr(df, "_plan", None)
    while plan is not None:
        kind = type(plan).__name__
        if kind in ("ChunkedCachedLocalRelation", "CachedLocalRelation"):
            return True
        if kind == "LocalRelation":
            table = getattr(plan, "_table", None)
            return table is not None and table.num_rows > CONNECT_LOCAL_ROWS
        plan = getattr(plan, "_child", None)
    return False


def _client_rows(df: Any) -> tuple[pa.Table, Any] | None:
    """(rows, Spark schema) of a Spark Connect batch that is exactly a local relation built by the client
    (``createDataFrame`` below pyspark's cache threshold), read from the client's plan: no RPC. Only when the
    server would take the rows as they are: flat columns whose Arrow types are the ones Spark gives their Spark
    types (a declared schema the server would still cast to, or nested types, keep the server paths)."""
    from upsertsink.session import is_connect

    plan = getattr(df, "_plan", None)
    names = None
    if type(plan).__name__ == "ToDF":  # createDataFrame names the columns of pandas and Arrow data this way
        names = list(getattr(plan, "_cols", None) or ())
        plan = getattr(plan, "_child", None)
    if type(plan).__name__ != "LocalRelation" or not is_connect(df):
        return None
    table = getattr(plan, "_table", None)
    if not isinstance(table, pa.Table) or any(pa.types.is_nested(t) for t in table.schema.types):
        return None
    if names is not None:
        if len(names) != table.num_columns or not all(isinstance(n, str) for n in names):
            return None
        table = table.rename_columns(names)
    if len(set(table.column_names)) != table.num_columns:
        return None  # repeated names: Spark's own analysis names the problem
    import json

    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type
    from pyspark.sql.types import StructField, StructType

    try:
        derived = from_arrow_schema(table.schema, prefer_timestamp_ntz=True)  # as the server reads Arrow
        declared = getattr(plan, "_schema", None)
        schema = derived if declared is None else StructType.fromJson(json.loads(declared))
        if names is not None and declared is not None:
            schema = StructType([StructField(n, f.dataType, f.nullable) for n, f in zip(names, schema, strict=True)])
        if [(f.name, f.dataType) for f in schema] != [(f.name, f.dataType) for f in derived]:
            return None
        if any(_plain(to_arrow_type(f.dataType, timezone="UTC")) != _plain(t)
               for f, t in zip(schema, table.schema.types, strict=True)):
            return None
    except Exception:  # noqa: BLE001 - a type pyspark cannot map either way: the server paths decide
        return None
    return table, schema


def _arrow_type(dtype: Any) -> pa.DataType | None:
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(dtype, timezone="UTC")  # zoned timestamps need a zone; only the category is used
    except Exception:  # noqa: BLE001 - a Spark type Arrow cannot carry (intervals, variants ...)
        return None


def _fits(ref: Any, dtype: Any) -> Any:
    """The value casts to ``dtype`` without loss: a number into a decimal keeps its value (Spark would round
    1.005 into 1.01; the embedded engine refuses it, and so does this engine: one meaning on both)."""
    cast = ref.try_cast(dtype)
    if type(dtype).__name__ == "DecimalType":
        return cast.isNotNull() & (cast == ref)
    return cast.isNotNull()


def _column(f: Any) -> B.Column:
    arrow = _arrow_type(f.dataType)
    cat = fp.category(arrow) if arrow is not None else f"other:{f.dataType.simpleString()}"
    return B.Column(f.name, cat, f.dataType.simpleString(), f.dataType)


def _plain(t: pa.DataType) -> pa.DataType:
    """Arrow view and large types as the plain ones Spark's type mapping knows."""
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_list_view(t) or pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), _plain(t.item_type))
    return t


class SparkEngine:
    """One batch on the delta-spark engine."""

    name: ClassVar[str] = "spark"

    def __init__(self, df: Any, storage_options: dict[str, str] | None = None):
        self.df = df
        self.spark = df.sparkSession
        self.storage_options = storage_options
        self._scratch = spark_local.ScratchFiles()
        self._client = _client_rows(df)  # from the client's plan: no RPC
        self._large = _connect_large(df)  # kept on the server when the client's rows cannot be used as they are
        self._checkpointed = False

    def close(self) -> None:
        """Remove the files this write left for its MERGE source."""
        self._scratch.close()

    def renamed(self, names: dict[str, str]) -> SparkEngine:
        """The same batch with columns renamed (``names``: old -> new)."""
        return SparkEngine(self.df.withColumnsRenamed(names), self.storage_options)

    # -------------------------------------------------------------- schema and preparation

    def _batch(self) -> Any:
        """The batch. One kept on the server (Spark Connect) becomes its lazy checkpoint on first use, before
        anything asks for its schema: the server turns a relation the client sent into a scan once, for the
        checkpoint, and every later question (schema, statistics job, MERGE) is about the checkpoint. Asking
        the sent relation for its schema first would pay that planning twice (about 0.25 s for 200k rows)."""
        if not self._checkpointed and self._keep_on_server():
            self.df = self.df.localCheckpoint(eager=False)
            self._checkpointed = True
        return self.df

    def _schema(self) -> Any:
        """The batch's Spark schema: known on the client for a batch whose rows the client holds."""
        return self._client[1] if self._client is not None else self._batch().schema

    def columns(self) -> list[B.Column]:
        return [_column(f) for f in self._schema()]

    def target_columns(self, request: WriteRequest, snapshot: Snapshot) -> list[B.Column] | None:
        if not snapshot.exists:
            return None
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import StructField

        # The table's schema from the deltalake snapshot the attempt already holds: no Spark job, no analysis.
        arrow = pa.schema(snapshot.table.schema().to_arrow())
        return [_column(StructField(f.name, from_arrow_type(_plain(f.type)), True)) for f in arrow]

    def _canonical(
        self, request: WriteRequest, target: list[B.Column] | None, casts: list[str], source: Any = None,
    ) -> tuple[Any, list[str]]:
        """The batch (or ``source``: the same rows, e.g. its checkpoint) cast to the table's types (with a
        fits-check column per cast) and float keys normalized."""
        from upsertsink.sparkapi import F

        frame = self.df if source is None else source
        if self._canonical_as_is(request, casts):
            return frame, []  # already canonical: no plan to build
        types = {c.name: c.dtype for c in target or ()}
        cols, oks = [], []
        for c in self._schema():
            ref = _col(c.name)
            if c.name in casts:
                ref = ref.try_cast(types[c.name])
                oks.append((OK_PREFIX + str(len(oks)), c.name))
            if c.name in request.keys and type(c.dataType).__name__ in ("FloatType", "DoubleType"):
                ref = F.when(ref == F.lit(0.0), F.lit(0.0).cast(c.dataType)).otherwise(ref)
            cols.append(ref.alias(c.name))
        checks = [(_col(src).isNull() | _fits(_col(src), types[src])).alias(name) for name, src in oks]
        return frame.select(*cols, *checks), [src for _, src in oks]

    def _canonical_as_is(self, request: WriteRequest, casts: list[str]) -> bool:
        """No cast to the table's types and no float key to normalize: the batch's rows are canonical."""
        schema = self._schema()
        return not casts and not any(
            type(schema[k].dataType).__name__ in ("FloatType", "DoubleType") for k in request.keys)

    def _client_batch(self, request: WriteRequest, casts: list[str]) -> tuple[pa.Table, Any] | None:
        """The rows the client holds (``_client_rows``), canonical and with the delete flag added, with their
        Spark schema; None when the batch must go through Spark: not a client-built local relation, cast or
        normalized on the way, or a ``delete_when`` outside the shapes Arrow and Spark SQL evaluate alike."""
        if self._client is None or not self._canonical_as_is(request, casts):
            return None
        table, schema = self._client
        if request.delete_when is not None:
            from pyspark.sql.types import BooleanType, StructField, StructType

            from upsertsink.predicate import evaluate_simple

            flag = evaluate_simple(request.delete_when, table)
            if flag is None:
                return None
            table = table.append_column(pa.field(DELETE_FLAG, pa.bool_()), flag)
            schema = StructType([*schema.fields, StructField(DELETE_FLAG, BooleanType(), False)])
        return table, schema

    def _stats(
        self, df: Any, request: WriteRequest, hashed: list[str], oks: list[str], full: bool, key_rows: bool = False,
    ) -> list[Any]:
        """One ``mapInArrow`` job: a stats row per partition (see spark_stats.py), collected. With ``key_rows``
        each row also carries the partition's key, sequence and delete-flag columns (``_key_rows``)."""
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType

        checked = [*request.keys, *([request.sequence] if request.sequence else [])]
        floats = [c for c in checked if type(df.schema[c].dataType).__name__ in ("FloatType", "DoubleType")]
        ranged = [k for k in request.keys if _column(df.schema[k]).category in _RANGE_CATEGORIES]
        if request.sequence and _column(df.schema[request.sequence]).category == "integer":
            ranged.append(request.sequence)  # its range tells whether the batch is newer than the table
        spark_types = {"long": LongType(), "binary": BinaryType()}
        fields = spark_stats.output_fields(
            checked, floats, oks, [(k, df.schema[k].dataType) for k in ranged], key_rows=key_rows
        )
        if not full:
            fields = fields[:3]
        schema = StructType([StructField(n, spark_types.get(t, t) if isinstance(t, str) else t) for n, t in fields])
        # Positional names: Spark's Arrow path cannot carry every name (a backtick, say).
        pos = {n: f"c{i}" for i, n in enumerate(df.columns)}
        fn = functools.partial(
            spark_stats.partition_stats, keys=tuple(pos[k] for k in request.keys),
            hashed=tuple(pos[c] for c in sorted(hashed)), checked=tuple(pos[c] for c in checked),
            floats=tuple(pos[c] for c in floats), oks=tuple(pos[OK_PREFIX + str(i)] for i in range(len(oks))),
            ranged=tuple(pos[k] for k in ranged), flag=pos.get(DELETE_FLAG), hashes_only=not full,
            key_rows=tuple(pos[c] for c in _key_row_columns(request, df.columns)) if key_rows else (),
        )
        rows = df.toDF(*[pos[n] for n in df.columns]).mapInArrow(fn, schema).collect()
        return [rows, checked, floats, ranged]

    def _digest(self, df: Any, hashed: list[str], rows: list[Any]) -> fp.Fingerprint:
        count = sum(int(r["rows"]) for r in rows)
        total = sum(int(np.int64(r["hash"]).astype(np.uint64)) for r in rows) % 2**64
        schema = fp.schema_text((c.name, c.category) for c in (_column(df.schema[n]) for n in hashed))
        return fp.digest(schema, count, total)

    def _keep_on_server(self) -> bool:
        """The batch is prepared and merged on the server, never collected to this process (Spark Connect)."""
        return self._large

    def _collect_small(self, df: Any) -> pa.Table | None:
        """The batch as Arrow on the driver when it has at most LOCAL_ROWS rows, else None: read from its
        parquet files when it is a bare scan of them (no job), otherwise collected (one job)."""
        if any(_arrow_type(f.dataType) is None for f in df.schema):
            return None
        if df is self.df:
            from pyspark.sql.pandas.types import to_arrow_schema

            wanted = to_arrow_schema(df.schema, timezone="UTC")
            direct = spark_local.read_plain_parquet(df, wanted, LOCAL_ROWS)
            if direct is not None:
                return direct
        if _estimated_bytes(df) > LOCAL_MAX_ESTIMATE_BYTES:
            return None
        table = self._run(lambda: df.limit(LOCAL_ROWS + 1).toArrow())
        return table if table.num_rows <= LOCAL_ROWS else None

    def null_counts(self, columns: list[str]) -> dict[str, int]:
        from upsertsink.sparkapi import F

        if self._client is not None:
            return {c: self._client[0][c].null_count for c in columns}

        row = self._run(lambda: self.df.select(
            *[F.sum(_col(c).isNull().cast("long")).alias(f"n{i}") for i, c in enumerate(columns)]
        ).first())
        return {c: int(row[f"n{i}"] or 0) for i, c in enumerate(columns)} if row else {}

    def fingerprint(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> fp.Fingerprint:
        client = self._client_batch(request, casts)
        if client is not None:
            return fp.fingerprint(client[0], exclude=[DELETE_FLAG])
        self._batch()
        df, oks = self._canonical(request, target, casts)
        small = None if self._keep_on_server() else self._collect_small(df)
        if small is not None:
            return fp.fingerprint(small, exclude=[OK_PREFIX + str(i) for i in range(len(oks))])
        hashed = [c for c in self.df.columns]
        stats = self._run(lambda: self._stats(df, request, hashed, oks, full=False))
        return self._digest(df, hashed, stats[0])

    def _run(self, work: Any) -> Any:
        try:
            return work()
        except Exception as err:
            if _analysis_error(err):
                raise SchemaMismatchError(f"the batch was refused by Spark: {first_line(err)}") from err
            raise

    def _with_delete_flag(self, df: Any, request: WriteRequest) -> Any:
        from pyspark.sql.types import BooleanType, NullType

        from upsertsink.sparkapi import F

        if request.delete_when is None:
            return df
        text = request.delete_when.spark_sql()
        try:
            kind = df.select(F.expr(text).alias("f")).schema[0].dataType
        except Exception as err:
            if _analysis_error(err):
                raise InvalidInputError(f"delete_when {text!r} is not valid here: {first_line(err)}") from None
            raise
        if not isinstance(kind, (BooleanType, NullType)):
            raise InvalidInputError(f"delete_when {text!r} is not a boolean predicate (it gives {kind.simpleString()})")
        return df.withColumn(DELETE_FLAG, F.coalesce(F.expr(text).cast("boolean"), F.lit(False)))

    def prepare(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> PreparedBatch:
        client = self._client_batch(request, casts)
        if client is not None:  # prepared here, as the embedded engine does; only the MERGE source is sent
            table, schema = client
            prepared = prepare_arrow(table, request, casts)
            return self._local_source(prepared, prepared.data, schema)
        keep = self._keep_on_server()
        hashed = list(self._batch().columns)
        if keep:
            # The batch as sent was checkpointed lazily (``_batch``; the statistics job below fills it) and the
            # casts and delete flag are computed over the checkpoint: deterministic expressions (delete_when is refused
            # otherwise: predicate.py), so the statistics job and the MERGE see the same rows. Checkpointing a
            # projection of a local relation instead would have Spark evaluate the projection on the driver,
            # row by row, while planning (the optimizer folds it into a new local relation).
            df, oks = self._canonical(request, target, casts)
            df = self._with_delete_flag(df, request)
        else:
            df, oks = self._canonical(request, target, casts)
            df = self._with_delete_flag(df, request)
            small = self._collect_small(df)
            if small is not None:  # a micro-batch: prepared on the driver, merged from a local relation
                return self._prepare_small(small, df, request, target, casts, oks)
            # Checkpointed lazily: the statistics job below fills it, and everything after (the MERGE, the
            # no-op filter, a duplicate check) reads the checkpoint, never the source again.
            df = df.localCheckpoint(eager=False)
        rows, checked, floats, ranged = self._run(
            lambda: self._stats(df, request, hashed, oks, full=True, key_rows=keep)
        )
        def total(name: str) -> int:
            return sum(int(r[name] or 0) for r in rows)

        nulls = {c: total(f"null_{i}") for i, c in enumerate(checked)}
        nans = {c: total(f"nan_{i}") for i, c in enumerate(floats)}
        B.check_stats(request.keys, request.sequence, nulls, nans)
        types = {c.name: c for c in target or ()}
        for i, name in enumerate(oks):
            if total(f"bad_{i}"):
                raise B.cast_overflow_error(
                    name, total(f"bad_{i}"), self.df.schema[name].dataType.simpleString(), types[name].type
                )
        fingerprint = self._digest(df, hashed, rows)
        df = df.drop(*[OK_PREFIX + str(i) for i in range(len(oks))])
        count = sum(int(r["rows"]) for r in rows)
        hashes = None
        if count and all(r["key_hashes"] is not None for r in rows):
            hashes = np.concatenate([np.frombuffer(r["key_hashes"], np.uint64) for r in rows])
        ranges = {}
        for i, k in enumerate(ranged):
            lows = [r[f"min_{i}"] for r in rows if r[f"min_{i}"] is not None]
            highs = [r[f"max_{i}"] for r in rows if r[f"max_{i}"] is not None]
            if lows:
                ranges[k] = (min(lows), max(highs))
        sequence_range = ranges.pop(request.sequence, None) if request.sequence not in request.keys else None
        keys_local = _key_rows(rows, df.columns, request) if keep else None
        if (hashes is not None and fp.has_repeats(hashes)) or (hashes is None and count > 1 and _repeats(df, request)):
            keys_local = None  # the rows change: the Spark paths below take over
            df, count = self._resolve_duplicates(df, request.keys, request.sequence)
            hashes = None
            if count <= fp.LOCAL_KEY_CHECK_ROWS:
                stats = self._run(lambda: self._stats(df, request, list(df.columns), [], full=True))[0]
                hashes = np.concatenate([np.frombuffer(r["key_hashes"], np.uint64) for r in stats]) if stats else None
        values = None
        if keys_local is not None:
            values = keys_local.select(list(request.keys))
        elif rows and all(r["key_values"] is not None for r in rows):
            values = spark_stats.read_key_values([r["key_values"] for r in rows], request.keys)
        return PreparedBatch(
            df, fingerprint, count, hashes, ranges, tuple(casts), delete_count=total("deletes"), key_values=values,
            sequence_range=sequence_range, keys_local=keys_local,
        )

    def history_batch(self, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> pa.Table:
        df, oks = self._canonical(request, target, casts)
        df = self._with_delete_flag(df, request)
        table = self._run(lambda: df.toArrow())
        checks = self._check_fits(table, oks, target)
        return table.drop_columns(checks) if checks else table

    def history_source(self, prepared: PreparedBatch) -> PreparedBatch:
        from pyspark.sql.pandas.types import from_arrow_schema

        table: pa.Table = prepared.data
        return self._local_source(prepared, table, from_arrow_schema(table.schema))

    def _check_fits(self, table: pa.Table, oks: list[str], target: list[B.Column] | None) -> list[str]:
        """Refuse a batch whose cast columns (``oks``) do not fit the table's types, from the fits-check columns
        ``_canonical`` added (their names are returned, to be dropped)."""
        checks = [OK_PREFIX + str(i) for i in range(len(oks))]
        types = {c.name: c for c in target or ()}
        for name, check in zip(oks, checks, strict=True):
            bad = table.num_rows - int(pc.sum(pc.fill_null(table[check], True)).as_py() or 0)
            if bad:
                raise B.cast_overflow_error(name, bad, self.df.schema[name].dataType.simpleString(), types[name].type)
        return checks

    def _prepare_small(
        self, table: pa.Table, df: Any, request: WriteRequest, target: list[B.Column] | None, casts: list[str],
        oks: list[str],
    ) -> PreparedBatch:
        checks = self._check_fits(table, oks, target)
        prepared = prepare_arrow(table.drop_columns(checks), request, casts)
        schema = df.drop(*checks).schema if checks else df.schema
        return self._local_source(prepared, prepared.data, schema)

    def _local_source(self, prepared: PreparedBatch, table: pa.Table, schema: Any, added_deletes: int = 0) -> PreparedBatch:
        """``prepared`` with ``table`` (the driver's Arrow rows) as its Spark source, the rows kept beside it:
        a scratch parquet file on a local master, else a local relation that Delta materialises once rather
        than shipping its rows with both MERGE passes."""
        if spark_local.local_master(self.spark) and spark_local.file_safe(schema):
            done = prepared.with_data(self._scratch.source(self.spark, table, schema), added_deletes=added_deletes)
        else:
            source = self.spark.createDataFrame(table, schema=schema)
            done = replace(prepared.with_data(source, added_deletes=added_deletes), materialize_source=True)
        return replace(done, local=table)

    def _resolve_duplicates(self, df: Any, keys: tuple[str, ...], sequence: str | None) -> tuple[Any, int]:
        from upsertsink.sparkapi import F, Window

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

    def key_sample(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        from pyspark.sql.pandas.types import to_arrow_schema

        if prepared.local is not None:  # no analysis round trip (Spark Connect) for a driver-side micro-batch
            return prepared.local.select(list(request.keys)).slice(0, 0)
        if prepared.keys_local is not None:
            return prepared.keys_local.select(list(request.keys)).slice(0, 0)
        schema = to_arrow_schema(prepared.data.select(*[_col(k) for k in request.keys]).schema, timezone="UTC")
        return schema.empty_table()

    def apply_tombstones(
        self, request: WriteRequest, prepared: PreparedBatch, tombstones: pa.Table
    ) -> tuple[PreparedBatch, int]:
        from upsertsink.sparkapi import F

        if tombstones.num_rows == 0:
            return prepared, 0
        if prepared.local is not None:  # a micro-batch held on the driver: matched there, no Spark job
            table, count = arrow_batch.apply_tombstones(prepared.local, request, tombstones)
            if count == 0:
                return prepared, 0
            return self._local_source(prepared, table, prepared.data.schema, added_deletes=count), count
        if prepared.keys_local is not None:  # kept on the server: matched here, joined lazily into the source
            keys, count = arrow_batch.apply_tombstones(prepared.keys_local, request, tombstones)
            if count == 0:
                return prepared, 0
            source = self._tombstone_join(prepared.data, request, tombstones).drop(STALE)
            return replace(prepared.with_data(source, added_deletes=count), keys_local=keys), count
        out = self._tombstone_join(prepared.data, request, tombstones).localCheckpoint(eager=True)
        count = out.filter(F.col(STALE)).count()
        if count == 0:
            return prepared, 0
        return prepared.with_data(out.drop(STALE), added_deletes=count), count

    def _tombstone_join(self, df: Any, request: WriteRequest, tombstones: pa.Table) -> Any:
        """``df`` with its rows made stale by ``tombstones`` turned into deletes at the tombstone's sequence,
        and a STALE column marking them (a broadcast join with the tombstones; lazy)."""
        from upsertsink.sparkapi import F

        kc = [key_column(i) for i in range(len(request.keys))]
        tomb = self.spark.createDataFrame(tombstones.select([*kc, SEQUENCE]))
        tomb = tomb.select(*[F.col(c).alias(f"__tomb_{c}") for c in [*kc, SEQUENCE]])
        cond = [_col(k) == F.col(f"__tomb_{c}") for k, c in zip(request.keys, kc, strict=True)]
        joined = df.join(F.broadcast(tomb), on=functools.reduce(lambda a, b: a & b, cond), how="left")
        seq, tseq = _col(request.sequence), F.col(f"__tomb_{SEQUENCE}").cast(df.schema[request.sequence].dataType)
        stale = tseq.isNotNull() & ((seq < tseq) | ((seq == tseq) & ~F.col(DELETE_FLAG)))
        out = joined.withColumn(STALE, F.coalesce(stale, F.lit(False)))
        return out.select(*[
            (F.when(F.col(STALE), tseq).otherwise(seq).alias(c) if c == request.sequence else
             (F.col(DELETE_FLAG) | F.col(STALE)).alias(c) if c == DELETE_FLAG else _col(c))
            for c in df.columns
        ], F.col(STALE))

    def _rows(self, request: WriteRequest, prepared: PreparedBatch, deletes: bool) -> pa.Table:
        from upsertsink.sparkapi import F

        if prepared.local is not None:
            return arrow_batch.key_rows(prepared.local, request, deletes)
        if prepared.keys_local is not None:
            return arrow_batch.key_rows(prepared.keys_local, request, deletes)
        df = prepared.data
        if deletes and DELETE_FLAG not in df.columns:
            df = df.limit(0)
        elif DELETE_FLAG in df.columns:
            df = df.filter(F.col(DELETE_FLAG) if deletes else ~F.col(DELETE_FLAG))
        kc = [key_column(i) for i in range(len(request.keys))]
        chosen = df.select(*[_col(k).alias(c) for k, c in zip(request.keys, kc, strict=True)],
                           _col(request.sequence).alias(SEQUENCE))
        return chosen.toArrow()

    def deletes(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        if prepared.delete_count == 0:
            kc = [key_column(i) for i in range(len(request.keys))]
            sample = self.key_sample(request, prepared)
            seq = _arrow_type(prepared.data.schema[request.sequence].dataType)
            return pa.schema([*[pa.field(c, sample.schema.field(k).type) for c, k in zip(kc, request.keys, strict=True)],
                              pa.field(SEQUENCE, seq)]).empty_table()
        return self._rows(request, prepared, deletes=True)

    def upserted_keys(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        return self._rows(request, prepared, deletes=False)

    # -------------------------------------------------------------- commits (spark_merge.py)

    def commit(
        self, request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, plan: MergePlan,
        metadata: dict[str, Any], new_columns: list[B.Column], marker: Marker | None,
    ) -> CommitOutcome:
        return spark_merge.commit(
            self.spark, request, prepared, snapshot, plan, metadata, bool(new_columns), marker
        )

    def repair(self, request: WriteRequest, deletes: pa.Table, metadata: dict[str, Any]) -> CommitOutcome | None:
        return spark_merge.repair(self.spark, request, deletes, metadata)


def _key_row_columns(request: WriteRequest, columns: list[str]) -> list[str]:
    """The columns a batch kept on the server ships to the driver: keys, sequence, delete flag."""
    wanted = [*request.keys, *([request.sequence] if request.sequence else []), DELETE_FLAG]
    return list(dict.fromkeys(c for c in wanted if c in columns))


def _key_rows(rows: list[Any], columns: list[str], request: WriteRequest) -> pa.Table | None:
    """The key rows the statistics job shipped (``_stats(key_rows=True)``), under the columns' real names;
    None for an empty batch (the Spark paths handle it)."""
    names = _key_row_columns(request, columns)
    blobs = [r["key_rows"] for r in rows if r["key_rows"] is not None]
    if not blobs:
        return None
    table = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs])
    return table.rename_columns(names)


def _repeats(df: Any, request: WriteRequest) -> bool:
    from upsertsink.sparkapi import F

    keys = [_col(k) for k in request.keys]
    return not df.groupBy(*keys).count().filter(F.col("count") > 1).isEmpty()


