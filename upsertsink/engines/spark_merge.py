"""The Spark engine's commits: create, MERGE (with the no-op filter and file pruning), marker-only, repair.

Batch markers go through Delta's session settings ``spark.databricks.delta.write.txnAppId/txnVersion``,
which are global to a SparkSession (delta-io/delta#3934). Commits therefore run in a child session
(``newSession()``, one per thread and user session, kept between writes): concurrent writes from several
threads never see each other's markers, and the user's session is never changed.

Over Spark Connect there is no JVM in this process (no ``newSession()``, no ``DeltaTable`` API without Delta's
Connect server plugin): the commit runs as SQL (``MERGE INTO delta.`path` ... USING <temp view>``) in the
client's own session, whose Delta settings belong to that client alone on the server. They are set for the
commit and put back afterwards, and the commits of one Connect session are serialised (one lock per session)
so that two threads sharing it never commit under each other's markers.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from upsertsink import batch as B
from upsertsink import faults
from upsertsink.conflicts import RetryableConflict, first_line, spark_conflict, spark_error_class
from upsertsink.engines.base import CommitOutcome, Marker, PreparedBatch, WriteRequest
from upsertsink.errors import SchemaMismatchError, TableNotWritableError
from upsertsink.pruning import FileRanges, file_ranges
from upsertsink.session import is_connect
from upsertsink.sidecar.tombstones import SEQUENCE, key_column
from upsertsink.spec import DELETE_FLAG, SOURCE, TARGET, MergePlan, quote
from upsertsink.table import checks as table_checks
from upsertsink.table import commit_log, files
from upsertsink.table.files import Snapshot

log = logging.getLogger(__name__)

_sessions = threading.local()


def col(name: str):
    """A Spark column reference to ``name``, quoted."""
    from upsertsink.sparkapi import F

    return F.col(quote(name, "spark"))


def analysis_error(err: BaseException) -> bool:
    """Spark refused the plan (an analysis, parse or type error), as opposed to failing while running it."""
    return type(err).__name__ in ("AnalysisException", "ParseException", "PySparkValueError", "PySparkTypeError")


def child_session(spark: Any) -> Any:
    """This thread's child session of ``spark``, with the user session's runtime settings copied in."""
    cache: dict[int, tuple[Any, Any, dict[str, str], Any]] = getattr(_sessions, "cache", None) or {}
    _sessions.cache = cache
    entry = cache.get(id(spark))
    if entry is None or entry[0] is not spark:
        entry = (spark, spark.newSession(), {}, None)
    _, child, copied, seen = entry
    version = _settings_hash(spark)
    if version is None or version != seen:  # reading every setting through py4j costs ~30 ms a write
        for key, value in spark.conf.getAll.items():
            if copied.get(key) != value and not key.startswith("spark.databricks.delta.write.txn"):
                try:
                    child.conf.set(key, value)
                except Exception as err:  # noqa: BLE001 - static settings cannot be set and are shared anyway
                    log.debug("not copied to the commit session: %s (%s)", key, err)
                copied[key] = value
    cache[id(spark)] = (spark, child, copied, version)
    return child


def _settings_hash(spark: Any) -> int | None:
    """A hash of the session's runtime settings, computed in the JVM (one round trip); None if unavailable."""
    try:
        return int(spark._jsparkSession.sessionState().conf().getAllConfs().hashCode())
    except Exception:  # noqa: BLE001 - Spark Connect has no JVM session: copy every time
        return None


def commit(
    spark: Any, request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, plan: MergePlan,
    metadata: dict[str, Any], evolve: bool, marker: Marker | None,
) -> CommitOutcome:
    try:
        if not snapshot.exists:
            return _create(request, prepared, metadata, marker)
        return _merge(spark, request, prepared, snapshot, plan, metadata, evolve, marker)
    except RetryableConflict:
        raise
    except Exception as err:
        conflict = spark_conflict(err)
        if conflict is not None:
            raise conflict from err
        condition = spark_error_class(err) or ""
        if condition.startswith(table_checks.SPARK_CONSTRAINT_CLASSES):
            found = table_checks.spark_violation(snapshot, _written_rows(prepared.data), request.keys) \
                if snapshot.exists else None
            what, row = found if found is not None else (None, None)
            raise table_checks.violation_error(request.target, request.keys, what, row, first_line(err)) from None
        if condition == "DELTA_CANNOT_MODIFY_APPEND_ONLY":
            raise TableNotWritableError(
                f"table {request.target} is append-only (delta.appendOnly=true): the sink updates and deletes rows "
                f"by key, which such a table refuses. Nothing was written."
            ) from None
        if analysis_error(err):
            raise SchemaMismatchError(f"the write into {request.target} was refused: {first_line(err)}") from err
        raise


def _written_rows(df: Any) -> Any:
    """The rows a MERGE of ``df`` writes (its delete rows write nothing), without the delete flag."""
    from upsertsink.sparkapi import F

    if DELETE_FLAG in df.columns:
        df = df.filter(~F.col(DELETE_FLAG)).drop(DELETE_FLAG)
    return df

def _create(
    request: WriteRequest, prepared: PreparedBatch, metadata: dict[str, Any], marker: Marker | None
) -> CommitOutcome:
    """The first batch: the table, its data and its marker in one commit (version 0)."""
    from upsertsink.sparkapi import F

    df = prepared.data
    if DELETE_FLAG in df.columns:  # a delete in a new table has nothing to delete
        df = df.filter(~F.col(DELETE_FLAG)).drop(DELETE_FLAG)
    writer = df.write.format("delta").mode("error").option("userMetadata", json.dumps(metadata))
    if marker is not None:
        writer = writer.option("txnAppId", marker.app_id).option("txnVersion", str(marker.version))
    if request.partition_by:
        writer = writer.partitionBy(*request.partition_by)
    if B.needs_column_mapping(df.columns):
        writer = writer.option("delta.columnMapping.mode", "name")
    writer.save(request.target)
    faults.point("table-created")
    commit = commit_log.read_commit_info(request.target, 0, request.storage_options) or {}
    inserted = int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))
    return CommitOutcome(version=0, inserted=inserted, updated=0, deleted=0, files_scanned=0)

_COMMIT_CONFS = (
    "spark.databricks.delta.commitInfo.userMetadata", "spark.databricks.delta.merge.materializeSource",
    "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion",
)
_connect_locks: dict[str, threading.Lock] = {}
_connect_locks_guard = threading.Lock()


def _commit_settings(metadata: dict[str, Any], marker: Marker | None, materialize: bool) -> dict[str, str | None]:
    return {
        "spark.databricks.delta.commitInfo.userMetadata": json.dumps(metadata),
        # Our sources are files or checkpoints, cheap and stable to read twice; a local relation is materialised.
        "spark.databricks.delta.merge.materializeSource": "auto" if materialize else "none",
        "spark.databricks.delta.write.txnAppId": None if marker is None else marker.app_id,
        "spark.databricks.delta.write.txnVersion": None if marker is None else str(marker.version),
    }


@contextmanager
def _session(
    spark: Any, metadata: dict[str, Any], marker: Marker | None, materialize: bool = False
) -> Iterator[Any]:
    """The session a commit runs in, with its metadata and marker set: a child session on classic Spark; the
    client's own session over Spark Connect (locked, and its settings put back afterwards)."""
    settings = _commit_settings(metadata, marker, materialize)
    if not is_connect(spark):
        session = child_session(spark)
        _apply(session, settings)
        yield session
        return
    with _connect_lock(spark):
        before = {key: spark.conf.get(key, None) for key in _COMMIT_CONFS}
        _apply(spark, settings)
        try:
            yield spark
        finally:
            try:
                _apply(spark, before)
            except Exception as err:  # noqa: BLE001 - the server is gone: the next write sets them again
                log.debug("could not restore the Connect session's settings: %s", err)


def _apply(session: Any, settings: dict[str, str | None]) -> None:
    for key, value in settings.items():
        if value is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, value)


def _connect_lock(spark: Any) -> threading.Lock:
    with _connect_locks_guard:
        return _connect_locks.setdefault(str(spark.session_id), threading.Lock())


def _merge_sql(session: Any, target: str, source: Any, plan: MergePlan, evolve: bool, extra_on: str | None) -> Any:
    """Run the plan as a SQL ``MERGE`` (Spark Connect, and every session in Spark-only mode). Over Spark
    Connect the source travels with the statement (``sql(text, src=df)``: no temp view to make and drop, two
    round trips fewer); a classic session registers it as a global temp view. ``target`` is a path, or
    ``catalog:<quoted name>`` (a ``catalog_table.NamedTable.table_uri``). Returns the metrics rows (none when
    Delta skipped the MERGE for its txn marker)."""
    view = f"upsertsink_source_{uuid.uuid4().hex}"
    target_sql = target.removeprefix("catalog:") if target.startswith("catalog:") else f"delta.{quote(target, 'spark')}"
    shared = not is_connect(session)  # a classic child session sees the user's views only as global ones
    on = plan.on("spark")
    if extra_on is not None:
        on = f"({on}) AND ({extra_on})"
    clauses = []
    if plan.deletes:
        clauses.append(f"WHEN MATCHED AND {plan.delete_condition('spark')} THEN DELETE")
    if plan.has_update:
        assignments = ", ".join(f"{c} = {v}" for c, v in plan.update_set("spark").items())
        clauses.append(f"WHEN MATCHED AND {plan.update_condition('spark')} THEN UPDATE SET {assignments}")
    if plan.upserts:
        values = plan.insert_values("spark")
        condition = plan.insert_condition("spark")
        clauses.append(
            f"WHEN NOT MATCHED{f' AND {condition}' if condition else ''} THEN INSERT ({', '.join(values)}) "
            f"VALUES ({', '.join(values.values())})"
        )
    text = (
        f"MERGE {'WITH SCHEMA EVOLUTION ' if evolve else ''}INTO {target_sql} AS {TARGET} "
        f"USING {_view_ref(session, view) if shared else view} AS {SOURCE} ON {on} " + " ".join(clauses)
    )
    if not shared:
        # pyspark formats the text with str.format: every other brace (in a name, a literal) is doubled
        text = text.replace("{", "{{").replace("}", "}}").replace(view, "{src}")
        return session.sql(text, src=source).collect()
    source.createOrReplaceGlobalTempView(view)
    try:
        return session.sql(text).collect()
    finally:
        try:
            session.catalog.dropGlobalTempView(view)
        except Exception as err:  # noqa: BLE001 - a session that is gone takes its views with it
            log.debug("temp view %s not dropped: %s", view, err)


def _view_ref(session: Any, view: str) -> str:
    return f"{quote(session.conf.get('spark.sql.globalTempDatabase', 'global_temp'), 'spark')}.{quote(view, 'spark')}"


# ---------------------------------------------------------------- Spark-only mode (catalog_table.py)


def _sql_target(request: WriteRequest) -> str | None:
    """The MERGE target in Spark-only mode (``catalog:<name>``), else None (a path, or the DeltaTable API)."""
    return None if request.catalog is None else request.catalog.table_uri


def _target_frame(spark: Any, request: WriteRequest) -> Any:
    """The target table as a DataFrame: by name in Spark-only mode, else from its path."""
    if request.catalog is not None:
        return spark.table(request.catalog.sql_name)
    return spark.read.format("delta").load(request.target)


def _find_write(request: WriteRequest, token: str | None, after: int, latest: int) -> int | None:
    if request.catalog is not None:
        return request.catalog.find_write(token, after, latest)
    return commit_log.find_write(request.target, token, after, latest, request.storage_options)


def _pruning_sql(ranges: dict[str, tuple[Any, Any]] | None, found: FileRanges | None) -> str | None:
    """``_pruning`` as SQL text over the target, for the SQL MERGE; only for integer bounds (``int`` renders
    exactly, and Delta's MERGE takes no parameter markers), else None: the condition only lets Delta skip files,
    and without it the MERGE reads the whole table (correct, and conflicting with more concurrent writes)."""
    def bound(value: Any) -> str:
        if type(value) is not int:
            raise TypeError(value)
        return str(value)

    def between(key: str, lo: Any, hi: Any) -> str:
        return f"{TARGET}.{quote(key, 'spark')} BETWEEN {bound(lo)} AND {bound(hi)}"

    try:
        if found is not None and found.narrows:
            if not found.ranges:
                return "FALSE"
            return "(" + " OR ".join(between(found.key, lo, hi) for lo, hi in found.ranges) + ")"
        parts = [between(k, lo, hi) for k, (lo, hi) in (ranges or {}).items()]
    except TypeError:
        return None
    return " AND ".join(parts) if parts else None


def _merge(
    spark: Any, request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, plan: MergePlan,
    metadata: dict[str, Any], evolve: bool, marker: Marker | None,
) -> CommitOutcome:
    from upsertsink.sparkapi import F

    # no file statistics in Spark-only mode: the MERGE then reads the whole table (correct, conflicts more)
    found = None if request.catalog is not None else file_ranges(
        snapshot.table, request.keys, prepared.key_values, request.sequence)
    prune = found is None or _worth_pruning(found)
    if found is not None:
        metadata = {**metadata, "files_scanned": found.files if prune else found.total_files}
    source = prepared.data
    if _all_newer(request, prepared, found):
        log.debug("no-op filter skipped: every row of batch %s is newer than the files it can touch", request.batch_id)
    else:
        source = _changed_rows(prepared.data, spark, request, plan, prepared.key_ranges, prepared.rows, found)
    materialize = prepared.materialize_source and source is prepared.data  # the no-op filter checkpoints its own
    before = snapshot.version
    with _session(spark, metadata, marker, materialize=materialize) as session:
        if is_connect(spark) or request.catalog is not None:
            extra = _pruning_sql(prepared.key_ranges, found) if prune else None
            rows = _merge_sql(session, _sql_target(request) or request.target, source, plan, evolve, extra)
            metrics = rows[0] if rows else None
        else:
            from delta.tables import DeltaTable

            on = F.expr(plan.on("spark"))
            pruning = _pruning(TARGET, prepared.key_ranges, found) if prune else None
            if pruning is not None:
                on = on & pruning  # lets Delta skip target files that cannot hold the batch's keys
            merge = DeltaTable.forPath(session, request.target).alias(TARGET).merge(source.alias(SOURCE), on)
            if evolve:
                merge = merge.withSchemaEvolution()
            metrics = _clauses(merge, plan).execute().first()
        return _after_merge(session, request, prepared, metadata, marker, metrics, before, evolve)


def _latest_and_mine(request: WriteRequest, token: str | None, before: int | None) -> tuple[int | None, int | None]:
    """The table's latest version and the one of this write (its ``write`` token), None when not found; in
    Spark-only mode from one read of the history."""
    if request.catalog is not None:
        return request.catalog.latest_and_write(token, before or 0)
    latest = _version(request)
    if latest == before:
        return latest, None
    return latest, _find_write(request, token, before or 0, latest or 0)


def _after_merge(
    session: Any, request: WriteRequest, prepared: PreparedBatch, metadata: dict[str, Any], marker: Marker | None,
    metrics: Any, before: int | None, evolve: bool = False,
) -> CommitOutcome:
    if metrics is None and marker is not None:
        # Delta ran no MERGE at all: the table's txn for the marker's app id had reached its version on the
        # snapshot the MERGE started from (a concurrent writer of the same app id committed meanwhile).
        raise RetryableConflict(f"{marker.app_id} reached version {marker.version} concurrently; nothing was merged")
    latest, mine = _latest_and_mine(request, metadata.get("write"), before)
    version = latest
    if latest != before:
        faults.point("data-committed")
        version = latest if mine is None else mine
        if request.catalog is not None and not evolve:
            request.catalog.note_own(mine)
    elif marker is not None:
        # No row changed and Delta made no commit: record the marker alone with an empty append.
        faults.point("marker-only-before")
        metadata = {**metadata, "marker_only": True}
        empty = session.createDataFrame([], prepared.data.drop(DELETE_FLAG).schema)
        writer = empty.write.format("delta").mode("append").option("txnAppId", marker.app_id).option(
            "txnVersion", str(marker.version)
        ).option("userMetadata", json.dumps(metadata))
        if request.catalog is not None:
            writer.saveAsTable(request.catalog.sql_name)
        else:
            writer.save(request.target)
        # Delta skips an append whose txn version the table already has: then no commit is ours.
        _, version = _latest_and_mine(request, metadata.get("write"), before)
        if version is None:
            raise RetryableConflict(f"{marker.app_id} reached version {marker.version} concurrently")
        if request.catalog is not None:
            request.catalog.note_own(version)
        faults.point("marker-only-committed")
    return CommitOutcome(
        version=version,
        inserted=int(metrics["num_inserted_rows"] or 0) if metrics else 0,
        updated=int(metrics["num_updated_rows"] or 0) if metrics else 0,
        deleted=int(metrics["num_deleted_rows"] or 0) if metrics else 0,
    )

def repair(spark: Any, request: WriteRequest, deletes: pa.Table, metadata: dict[str, Any]) -> CommitOutcome | None:
    from upsertsink.sparkapi import F

    assert request.sequence is not None
    kc = [key_column(i) for i in range(len(request.keys))]
    seq_type = _target_frame(spark, request).schema[request.sequence].dataType
    source = spark.createDataFrame(deletes.select([*kc, SEQUENCE])).select(
        *[F.col(c).alias(k) for c, k in zip(kc, request.keys, strict=True)],
        F.col(SEQUENCE).cast(seq_type).alias(request.sequence), F.lit(True).alias(DELETE_FLAG),
    )
    plan = MergePlan(request.keys, (*request.keys, request.sequence), request.sequence, deletes=True, upserts=False)
    try:
        with _session(spark, metadata, None) as session:
            if is_connect(spark) or request.catalog is not None:
                rows = _merge_sql(session, _sql_target(request) or request.target, source, plan, False, None)
                metrics = rows[0] if rows else None
            else:
                from delta.tables import DeltaTable

                merge = DeltaTable.forPath(session, request.target).alias(TARGET).merge(
                    source.alias(SOURCE), F.expr(plan.on("spark"))
                )
                metrics = _clauses(merge, plan).execute().first()
    except Exception as err:
        conflict = spark_conflict(err)
        if conflict is not None:
            raise conflict from err
        raise
    return CommitOutcome(_version(request) or 0, 0, 0, int(metrics["num_deleted_rows"] or 0) if metrics else 0)


# Delta's MERGE skips files by a target-only condition through a data-skipping query over the snapshot's file
# statistics, which costs about 0.15 s a MERGE here; reading the key column of the files it would skip costs
# less until they hold about this many rows (measured: bench/bench_streaming.py, bench/bench_scaling.py).
# Without the condition the MERGE's read predicate is the whole table, so racing inserts still conflict.
SPARK_PRUNE_MIN_SKIPPED_ROWS = 16_000_000


def _worth_pruning(found: FileRanges) -> bool:
    return found.skipped_rows is None or found.skipped_rows >= SPARK_PRUNE_MIN_SKIPPED_ROWS


def _all_newer(request: WriteRequest, prepared: PreparedBatch, found: FileRanges | None) -> bool:
    """True when no row of the batch can be a no-op: no file can hold its keys, or (with an integer sequence)
    every row is newer than anything the files it can touch hold. The no-op filter is then skipped."""
    if found is None:
        return False
    if found.files == 0:
        return True
    if request.sequence is None or found.max_sequence is None or prepared.sequence_range is None:
        return False
    return prepared.sequence_range[0] > found.max_sequence


def _clauses(merge: Any, plan: MergePlan) -> Any:
    if plan.deletes:
        merge = merge.whenMatchedDelete(condition=plan.delete_condition("spark"))
    if plan.has_update:
        merge = merge.whenMatchedUpdate(condition=plan.update_condition("spark"), set=plan.update_set("spark"))
    if plan.upserts:
        merge = merge.whenNotMatchedInsert(condition=plan.insert_condition("spark"), values=plan.insert_values("spark"))
    return merge


def _version(request: WriteRequest) -> int | None:
    """The table's latest version, through the handle kept between writes (``files.open_snapshot``); in
    Spark-only mode from its history."""
    if request.catalog is not None:
        return request.catalog.latest_version()
    return files.latest_version(request.target, request.storage_options)


def _pruning(alias: str | None, ranges: dict[str, tuple[Any, Any]] | None, found: FileRanges | None):
    """A condition on the target's keys that lets Delta skip files, as typed literals (never SQL text).

    With file ranges (pruning.py): ``key BETWEEN lo1 AND hi1 OR ...`` over the files that can hold a batch key;
    otherwise ``key BETWEEN batch-min AND batch-max`` for each ranged key.
    """
    from upsertsink.sparkapi import F

    def ref(key: str) -> Any:
        return F.col(f"{alias}.{quote(key, 'spark')}" if alias else quote(key, "spark"))

    if found is not None and found.narrows:
        if not found.ranges:
            return F.lit(False)
        parts = [ref(found.key).between(F.lit(lo), F.lit(hi)) for lo, hi in found.ranges]
        return functools.reduce(lambda a, b: a | b, parts)
    cond = None
    for key, (low, high) in (ranges or {}).items():
        part = ref(key).between(F.lit(low), F.lit(high))
        cond = part if cond is None else cond & part
    return cond


# Batches up to this many rows are broadcast when the no-op rows are looked up in the target.
BROADCAST_MAX_ROWS = 2_000_000


def _changed_rows(
    df: Any, spark: Any, request: WriteRequest, plan: MergePlan, ranges: dict[str, tuple[Any, Any]] | None, rows: int,
    found: FileRanges | None = None,
) -> Any:
    """Drop source rows the MERGE would not apply: identical to the stored row, or not newer.

    Delta's MERGE rewrites every file holding a matched key, even when the clause conditions leave the row
    as it was; filtering first keeps unchanged rows (and the files holding them) untouched.
    """
    from upsertsink.sparkapi import F

    target = _target_frame(spark, request)
    pruning = _pruning(None, ranges, found)
    if pruning is not None:
        target = target.filter(pruning)
    cols = [c for c in plan.columns if c in target.columns and c in df.columns]
    tgt = target.select(*[col(c).alias(f"__t{i}") for i, c in enumerate(cols)])
    idx = {c: i for i, c in enumerate(cols)}
    on = functools.reduce(lambda a, b: a & b, [col(k).eqNullSafe(F.col(f"__t{idx[k]}")) for k in plan.keys])
    def same(c: str) -> Any:  # maps cannot be compared in Spark: their JSON text is (see MergePlan.map_columns)
        if c in plan.map_columns:
            equal = F.to_json(col(c)).eqNullSafe(F.to_json(F.col(f"__t{idx[c]}")))
        else:
            equal = col(c).eqNullSafe(F.col(f"__t{idx[c]}"))
        if plan.ignore_nulls and c not in plan.new_columns and c != plan.sequence:
            return col(c).isNull() | equal  # a null keeps the stored value (ignore_null_updates)
        return equal

    unchanged = functools.reduce(lambda a, b: a & b, [same(c) for c in plan.value_columns if c in idx], F.lit(True))
    stale = F.lit(False)
    if plan.sequence is not None and plan.sequence in idx:
        t_seq = F.col(f"__t{idx[plan.sequence]}")
        stale = t_seq.isNotNull() & (col(plan.sequence) <= t_seq)
    noop = unchanged | stale
    if plan.deletes:
        # a delete is dropped only when it is not newer; its payload may well equal the stored row
        noop = (~F.col(DELETE_FLAG) & noop) | (F.col(DELETE_FLAG) & stale)
    if rows <= BROADCAST_MAX_ROWS:
        # Broadcast the batch and stream the target past it once: the keys of the no-op rows come out
        # (few columns, no shuffle of the target), and a broadcast anti-join drops them from the batch.
        noop_keys = tgt.join(F.broadcast(df), on=on & noop, how="left_semi").select(
            *[F.col(f"__t{idx[k]}").alias(f"__k{i}") for i, k in enumerate(plan.keys)]
        )
        match = functools.reduce(lambda a, b: a & b, [col(k) == F.col(f"__k{i}") for i, k in enumerate(plan.keys)])
        changed = df.join(F.broadcast(noop_keys), on=match, how="left_anti")
    else:
        changed = df.join(tgt, on=on & noop, how="left_anti")
    # Checkpointed lazily: the MERGE reads its source twice, its first read fills the checkpoint.
    return changed.localCheckpoint(eager=False)
