"""The write protocol: one semantics, both engines (see DESIGN.md and docs/reliability.md).

    validate -> for each attempt on a fresh snapshot:
        marker check (a committed batch id is skipped after its content is checked)
        prepare (once)                                              crash point "prepared"
        tombstones: stale rows become deletes; this batch's deletes are remembered
                                                                    crash point "tombstones-recorded"
        one commit: data + marker + fingerprint (create, MERGE, or marker-only)
                                                                    crash points in the engines
        repair: a delete recorded concurrently for one of our keys, newer than what we wrote, is applied
    a lost commit race repeats the attempt (bounded, with backoff); anything else unexpected becomes
    WriteFailedError, so a caller only ever sees UpsertSinkError.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import batch as B
from upsertsink import faults, history, interrupts, modes
from upsertsink import fingerprint as fp
from upsertsink.conflicts import RetryableConflict, permission_denied
from upsertsink.engines.base import Engine, Marker, PreparedBatch, WriteRequest
from upsertsink.errors import (
    BatchIdBehindMarkerError,
    ConcurrentWriteError,
    DivergentBatchBehindMarkerError,
    ReplayDivergenceError,
    TableNotWritableError,
    UpsertSinkError,
    WriteFailedError,
    first_line,
    option,
)
from upsertsink.sidecar import events as event_log
from upsertsink.sidecar.tombstones import SEQUENCE, TombstoneStore, key_column
from upsertsink.spec import DELETE_FLAG, MergePlan
from upsertsink.table import checks as table_checks
from upsertsink.table import commit_log, files, lineage, records, replays

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """What one ``write`` did. ``skipped`` means the batch id was already committed: nothing changed.

    ``replay_check`` says how a skipped batch was compared with the commit that recorded it: ``"matched"``
    (same content: fingerprints equal), ``"rows-only"`` (committed with an older fingerprint algorithm;
    only the row counts could be compared), ``"unavailable"`` (its commit carries no fingerprint: written by
    another Delta writer with the same transaction identifier); None when the batch was written.
    ``late`` is True when the batch id was behind the app's marker, never committed, and applied because the
    sink allows late batches (``late_batches="apply"``). ``reapplied`` is True when the batch had been
    committed and a later RESTORE of the table undid it: sent again, it was applied again.

    Rows the MERGE left alone are counted by why: ``unchanged`` (equal to the stored row),
    ``ignored_equal_sequence`` (at the stored row's sequence with other content: the sequence rule keeps the
    stored row; send a correction with ``restate=True``, or at a higher sequence), ``older`` (older than the
    stored row), ``stale`` (older than a remembered delete). ``restated`` is True when the batch was committed
    before and this write applied its corrected content (``restate=True``). A dry run (``dry_run=True``)
    commits nothing: ``dry_run`` is True, ``version`` is the version it read, and ``refused`` says why the
    write would be refused (the error's message), else None.
    """

    version: int | None
    skipped: bool
    inserted: int
    updated: int
    deleted: int
    batch_id: int | None
    app_id: str
    engine: str
    rows: int = 0  # rows merged after duplicate resolution
    stale: int = 0  # rows older than a remembered delete: applied as that delete instead
    replay_check: str | None = None
    attempts: int = 1  # commit attempts this write took (more than one when concurrent writers won races)
    late: bool = False
    reapplied: bool = False
    unchanged: int = 0  # rows equal to the stored row of their key
    ignored_equal_sequence: int = 0  # rows at the stored sequence with other content: the stored row stays
    older: int = 0  # rows older than the stored row of their key: the stored row stays
    restated: bool = False
    dry_run: bool = False
    refused: str | None = None


@dataclass(frozen=True)
class Settings:
    schema_evolution: bool
    retention_us: int | None
    max_retries: int
    late_batches: str = "refuse"


def write(engine: Engine, request: WriteRequest, settings: Settings) -> WriteResult:
    """Run the protocol for one batch; every error raised is an UpsertSinkError."""
    interrupts.begin(request)
    try:
        return _write(engine, request, settings)
    except (BatchIdBehindMarkerError, ReplayDivergenceError) as err:
        if request.dry_run:  # what the write would refuse, and why
            return WriteResult(
                version=None, skipped=False, inserted=0, updated=0, deleted=0, batch_id=request.batch_id,
                app_id=request.app_id, engine=engine.name, dry_run=True, refused=str(err),
            )
        raise
    except UpsertSinkError:
        raise
    except Exception as err:
        denied = permission_denied(err)
        if denied is not None:  # retrying cannot help: say so, and what was denied
            raise TableNotWritableError(
                f"writing batch {request.batch_id} to {request.target} failed: permission denied ({denied}). "
                "This is not retryable as it is: the user running the write needs write access to the table's "
                "folder and everything under it (for a new table, to the folder it is created in); once it has "
                "it, sending the batch again is safe."
            ) from err
        raise WriteFailedError(
            f"writing batch {request.batch_id} to {request.target} failed: {type(err).__name__}: {first_line(err)}. "
            "The table holds this batch either completely or not at all; sending it again is safe."
        ) from err


def _write(engine: Engine, request: WriteRequest, settings: Settings) -> WriteResult:
    source = engine.columns()
    B.check_columns(source, None, request.keys, request.sequence, True, request.target)
    names = [c.name for c in source]
    missing = [c for c in request.partition_by or () if c not in names]
    if missing:
        raise B.SchemaMismatchError(f"partition_by column(s) {missing} missing from the batch")
    if request.delete_when is not None:
        request.delete_when.check_columns(names)

    prepared: PreparedBatch | None = None
    for attempt in range(settings.max_retries + 1):
        snapshot = None
        try:
            snapshot = _open(request)
            target = engine.target_columns(request, snapshot)
            if request.mode is not None:
                modes.check_table(request.mode, snapshot, request.target)
            state = _app_state(request, snapshot)
            late = reapplied = False
            verdict = None if request.batch_id is None else state.record.verdict(request.batch_id)
            if verdict == records.UNDONE:
                reapplied = True  # committed once, undone by a RESTORE: applied again
            elif request.restate and verdict in (records.COMMITTED, records.UNKNOWN):
                pass  # a committed batch's corrected content, sent on purpose: applied again
            elif verdict in (records.COMMITTED, records.UNKNOWN) or (
                    verdict == records.NEVER and state.marker is not None and request.batch_id <= state.marker):
                result = _behind_marker(engine, request, settings, snapshot, target, state, prepared)
                if result is not None:
                    return replace(result, attempts=attempt + 1)
                late = True  # never committed (or not known to be), and the sink applies late batches
            table_checks.check_writable(snapshot, engine.name, request.target)
            filled = table_checks.filled_columns(snapshot)
            if request.by_mode:  # the mode's own checks; the table's columns the batch may leave out
                stored = None if target is None else [c.name for c in target]
                request.mode.check_columns(names, stored, request.target)
                filled = {**{c: "mode" for c in request.mode.lackable(stored or [])}, **filled}
            new_columns, casts = B.check_columns(
                source, history.data_columns(target, request), request.keys, request.sequence,
                settings.schema_evolution, request.target, engine.null_counts, filled,
            )
            if prepared is None or prepared.casts != tuple(casts):
                prepared = _prepare(engine, request, target, casts)
                faults.point("prepared")
            attempt_fn = (_attempt_history if request.history is not None else _attempt_mode if request.by_mode
                          else _attempt)
            result = attempt_fn(engine, request, settings, snapshot, target, new_columns, prepared, state, late)
            restated = request.restate and verdict in (records.COMMITTED, records.UNKNOWN)
            return replace(result, attempts=attempt + 1, reapplied=reapplied, restated=restated)
        except RetryableConflict as err:
            if attempt == settings.max_retries:
                raise ConcurrentWriteError(
                    f"gave up writing batch {request.batch_id} to {request.target} after {attempt + 1} attempts: "
                    f"concurrent writers kept conflicting ({err}). Nothing of this batch was committed; "
                    "send it again."
                ) from err
            delay = min(5.0, 0.1 * 2**attempt) * (0.5 + random.random())
            log.info("concurrent commit on %s (attempt %d), retrying in %.2fs", request.target, attempt + 1, delay)
            time.sleep(delay)
        finally:
            if snapshot is not None:
                files.keep(snapshot)
    raise AssertionError("unreachable")


def _open(request: WriteRequest) -> Any:
    """The attempt's snapshot: of the files (deltalake), or, in Spark-only mode, of the table's history."""
    if request.catalog is not None:
        return request.catalog.snapshot()
    return files.open_snapshot(request.target, request.storage_options)


def _app_state(request: WriteRequest, snapshot: files.Snapshot) -> lineage.AppState:
    if request.batch_id is None or not snapshot.exists:
        return lineage.EMPTY
    return lineage.app_state(snapshot, request.app_id)


def _behind_marker(
    engine: Engine, request: WriteRequest, settings: Settings, snapshot: files.Snapshot,
    target: list[B.Column] | None, state: lineage.AppState, prepared: PreparedBatch | None,
) -> WriteResult | None:
    """A batch id at or below the app's marker: a replay (skipped after its content is checked), or a batch
    never committed (refused, or None: apply it late). Never a silent skip."""
    assert request.batch_id is not None
    verdict = state.record.verdict(request.batch_id)
    if verdict == records.COMMITTED:
        restated = state.record.was_restated(request.batch_id)
        committed = replays.committed_fingerprint(snapshot, request.app_id, request.batch_id, restated)
        if committed.state != "gone":
            return _replay(engine, request, snapshot, target, prepared, committed, state.marker)
        reason = "gone"
    else:
        reason = verdict
    if settings.late_batches == "apply":
        log.info("batch %s of %s is behind its marker %s (%s): applied late", request.batch_id,
                 request.app_id, state.marker, reason)
        return None
    raise _behind_error(request, state, reason)


def _behind_error(request: WriteRequest, state: lineage.AppState, reason: str) -> BatchIdBehindMarkerError:
    b, app = request.batch_id, request.app_id
    mark = "unknown" if state.marker is None else state.marker
    what = {
        records.NEVER: f"was never committed to {request.target} (committed ids: {state.record.describe()})",
        records.UNKNOWN: (
            f"may never have been committed to {request.target}: the log no longer holds the commits that "
            f"could tell ({_unknown_why(state.record)})"
        ),
        "gone": (
            f"was committed to {request.target}, but the log no longer holds that commit (Delta's log "
            "cleanup), so this batch cannot be compared with it: it may be a replay, or a new batch reusing "
            "the id"
        ),
    }[reason]
    return BatchIdBehindMarkerError(
        f"batch {b} of app {app!r} is behind the app's marker (last batch id {mark}) and {what}. Skipping it "
        f"could lose its data, so nothing was written. A new stream, a new checkpoint or another job needs its "
        f"own {option('app_id')}; to apply batches that arrive late (a backfill), set "
        f"{option('late_batches', repr('apply'), 'apply')} (rows then follow the {option('sequence_by')} rules)."
    )


def _unknown_why(record: records.Record) -> str:
    if record.unknown is not None:
        known = "no id is known" if record.floor == records.ALL else f"ids below {record.floor} are not known"
        return f"{record.unknown}; {known}"
    return f"Delta's log cleanup; ids below {record.floor} are not known"


def _attempt(
    engine: Engine, request: WriteRequest, settings: Settings, snapshot: files.Snapshot,
    target: list[B.Column] | None, new_columns: list[B.Column], prepared: PreparedBatch,
    state: lineage.AppState, late: bool,
) -> WriteResult:
    batch, stale, store, seen, seen_version = prepared, 0, None, None, None
    if request.tracks_deletes:
        store = _store(request, snapshot)
        before = store.version_before_read()
        seen = _matching(store, engine, request, prepared)
        batch, stale = engine.apply_tombstones(request, prepared, seen)
        deletes = _not_remembered(engine.deletes(request, batch), seen, store.key_columns)
        if deletes.num_rows and not request.dry_run:
            store.record(deletes, request.batch_id, settings.retention_us, request.app_id,
                         -1 if snapshot.version is None else snapshot.version)
            faults.point("tombstones-recorded")
        # the version the repair check compares with after the commit: it must not take in a delete another
        # writer recorded after ``seen`` was read (the check would then miss it)
        seen_version = store.version_seen(before, recorded=deletes.num_rows > 0)
    # the table's columns the batch carries (the others are ones Delta fills in: identity, generated)
    given = {c.name for c in engine.columns()}
    described = [*(c for c in target or engine.columns() if c.name in given), *new_columns]
    filled = table_checks.filled_columns(snapshot)
    plan = MergePlan(
        request.keys, tuple(c.name for c in described), request.sequence, deletes=request.delete_when is not None,
        new_columns=tuple(c.name for c in new_columns),
        map_columns=tuple(c.name for c in described if "map<" in c.type.lower()),
        insert_only=tuple(c.name for c in described if filled.get(c.name) == table_checks.IDENTITY_BY_DEFAULT),
        ignore_nulls=request.ignore_null_updates, restate=request.restate,
    )
    if request.dry_run:
        return _dry_run(engine, request, snapshot, plan, batch, stale, late)
    outcome = _commit(
        engine, request, request, batch, snapshot, plan, prepared, state, late, new_columns,
        tombstones_version=seen_version, write=uuid.uuid4().hex[:16],
    )
    log.info(
        "batch %s -> %s v%s%s: %d inserted, %d updated, %d deleted", request.batch_id, request.target,
        outcome.version, " (late)" if late else "", outcome.inserted, outcome.updated, outcome.deleted,
    )
    deleted = outcome.deleted
    version = outcome.version
    if store is not None and store.version() != seen_version:
        repaired = _repair(engine, request, store, batch, seen)
        if repaired is not None:
            deleted += repaired.deleted
            version = repaired.version
    if store is not None and store.needs_compaction():
        _compact(store)
    left = _left_alone(engine, request, snapshot, plan, batch, outcome)
    return WriteResult(
        version=version, skipped=False, inserted=outcome.inserted, updated=outcome.updated, deleted=deleted,
        batch_id=request.batch_id, app_id=request.app_id, engine=engine.name, rows=batch.rows, stale=stale,
        late=late, **left,
    )


LEFT_ALONE = ("unchanged", "ignored_equal_sequence", "older")


def _left_alone(
    engine: Engine, request: WriteRequest, snapshot: files.Snapshot, plan: MergePlan, batch: PreparedBatch,
    outcome: Any,
) -> dict[str, int]:
    """The rows the MERGE left alone, by why (``WriteResult.unchanged`` ...). Counted only when there are
    any (the batch has more rows than the MERGE inserted, updated and deleted), against the version the write
    read: the MERGE's own metrics do not count rows it leaves alone. A count that cannot be made (the version
    read is gone) is left at 0, logged: the write itself is committed."""
    quiet = batch.rows - outcome.inserted - outcome.updated - outcome.deleted
    if quiet <= 0 or not snapshot.exists:
        return {}
    try:
        counts = engine.outcomes(request, batch, snapshot, plan)
    except Exception as err:  # noqa: BLE001 - the batch is committed; only its report is the poorer
        log.warning("batch %s is committed; counting the rows it left alone failed: %s", request.batch_id, err)
        return {}
    return {k: counts[k] for k in LEFT_ALONE}


def _dry_run(
    engine: Engine, request: WriteRequest, snapshot: files.Snapshot, plan: MergePlan, batch: PreparedBatch,
    stale: int, late: bool,
) -> WriteResult:
    """What the write would do, counted against the snapshot; nothing committed, nothing recorded."""
    if snapshot.exists:
        counts = engine.outcomes(request, batch, snapshot, plan)
    else:
        deletes = engine.deletes(request, batch).num_rows if request.delete_when is not None else 0
        counts = {"inserted": batch.rows - deletes, "updated": 0, "deleted": 0}
    log.info("dry run of batch %s -> %s at v%s: %s", request.batch_id, request.target, snapshot.version, counts)
    return WriteResult(
        version=snapshot.version, skipped=False, inserted=counts["inserted"], updated=counts["updated"],
        deleted=counts["deleted"], batch_id=request.batch_id, app_id=request.app_id, engine=engine.name,
        rows=batch.rows, stale=stale, late=late, dry_run=True, **{k: counts.get(k, 0) for k in LEFT_ALONE},
    )


def _prepare(engine: Engine, request: WriteRequest, target: list[B.Column] | None, casts: list[str]) -> PreparedBatch:
    if request.history is None and not request.by_mode:
        return engine.prepare(request, target, casts)
    table = engine.history_batch(request, target, casts)
    checked = [*request.keys, *([request.sequence] if request.sequence else [])]
    nulls = {c: table[c].null_count for c in checked}
    nans = {c: int(pc.sum(pc.is_nan(table[c])).as_py() or 0) for c in checked if pa.types.is_floating(table[c].type)}
    B.check_stats(request.keys, request.sequence, nulls, nans)
    fingerprint = fp.fingerprint(table, exclude=[DELETE_FLAG])
    if request.by_mode:  # one row per key, as the mode combines a key's rows (no delete flag: modes never delete)
        merged = request.mode.prepare(table)
        return PreparedBatch(merged, fingerprint, merged.num_rows, casts=tuple(casts),
                             key_values=merged.select(list(request.keys)))
    assert request.sequence is not None
    flags = table[DELETE_FLAG] if DELETE_FLAG in table.column_names else None
    if flags is not None:
        table = table.drop_columns([DELETE_FLAG])
    events = history.prepare_events(table, request.keys, request.sequence, flags)
    return PreparedBatch(events, fingerprint, events.num_rows, casts=tuple(casts), key_values=events.select(list(request.keys)))


def _attempt_history(
    engine: Engine, request: WriteRequest, settings: Settings, snapshot: files.Snapshot,
    target: list[B.Column] | None, new_columns: list[B.Column], prepared: PreparedBatch,
    state: lineage.AppState, late: bool,
) -> WriteResult:
    """A history (SCD type 2) write: the versions of the batch's keys refolded from every event of those keys
    (the logged ones and the batch's), and the difference MERGEd on (key, __START_AT) with the marker."""
    spec = request.history
    assert spec is not None and request.sequence is not None
    keys, sequence = request.keys, request.sequence
    events: pa.Table = prepared.data
    batch_columns = [c for c in events.column_names if c != DELETE_FLAG]
    table_columns = [c.name for c in target or () if c.name not in history.HISTORY_COLUMNS]
    columns = [*table_columns, *(c for c in batch_columns if c not in table_columns)]
    in_effect = lineage.InEffect(snapshot) if snapshot.exists else None
    log_ = event_log.EventLog(request.target, keys, sequence, request.storage_options, snapshot, in_effect)
    past = log_.events_for(events.select(list(keys)), snapshot)

    def filled(table: pa.Table) -> pa.Table:  # a column the batch or older events lack: null in those events
        for c in columns:
            if c not in table.column_names:
                kind = events.schema.field(c).type if c in events.column_names else pa.null()
                table = table.append_column(c, pa.nulls(table.num_rows, kind))
        return table

    seq_type = events.schema.field(sequence).type
    tracked = spec.tracked(columns, keys, sequence)
    before = None if past is None else event_log.unique_events(filled(past), keys, sequence)
    every = filled(events) if before is None else pa.concat_tables([before, filled(events)], promote_options="permissive")
    every = event_log.unique_events(every, keys, sequence)
    new = history.fold(every, keys, sequence, columns, tracked, spec.ignore_null_updates, seq_type)
    # the versions the logged events alone give: what the table holds for these keys (its invariant), so
    # versions equal in both are left out of the MERGE, which then rewrites only what changed
    known = (new.slice(0, 0) if before is None else
             history.fold(before, keys, sequence, columns, tracked, spec.ignore_null_updates, seq_type))
    if snapshot.exists:
        stored_schema = pa.schema(snapshot.table.schema().to_arrow())
        want = pa.schema([stored_schema.field(c) if c in stored_schema.names else new.schema.field(c)
                          for c in new.column_names])
        new, known = new.cast(want), known.cast(want)
        stored = history.stored_versions(snapshot.table, keys, events.select(list(keys)),
                                         [*keys, *history.HISTORY_COLUMNS])
    else:
        stored = new.select([*keys, *history.HISTORY_COLUMNS]).slice(0, 0)
    source = history.source_rows(new, known, stored, keys)
    token = event_log.new_token()
    log_.record(events, token, snapshot.version, request.app_id, request.batch_id)
    faults.point("events-recorded")
    hrequest = replace(request, keys=(*keys, history.START), sequence=None)
    plan = MergePlan(
        hrequest.keys, tuple(source.column_names[:-1]), None, deletes=True,
        new_columns=tuple(c.name for c in new_columns),
    )
    batch = engine.history_source(PreparedBatch(
        source, prepared.fingerprint, source.num_rows, casts=prepared.casts,
        key_values=source.select(list(hrequest.keys)),
    ))
    outcome = _commit(
        engine, request, hrequest, batch, snapshot, plan, prepared, state, late, new_columns, write=token, scd_type=2,
    )
    log_.promote(events, token)
    faults.point("events-promoted")
    if log_.committed_files() >= event_log.COMPACT_AT_FILES:
        try:
            log_.compact()
        except Exception as err:  # noqa: BLE001 - never fail a committed write for its housekeeping
            log.warning("compacting the history events of %s failed (the write is committed): %s", request.target, err)
    log.info(
        "batch %s -> %s v%s (history): %d version(s) inserted, %d updated, %d deleted", request.batch_id,
        request.target, outcome.version, outcome.inserted, outcome.updated, outcome.deleted,
    )
    return WriteResult(
        version=outcome.version, skipped=False, inserted=outcome.inserted, updated=outcome.updated,
        deleted=outcome.deleted, batch_id=request.batch_id, app_id=request.app_id, engine=engine.name,
        rows=prepared.rows, late=late,
    )


def _attempt_mode(
    engine: Engine, request: WriteRequest, settings: Settings, snapshot: files.Snapshot,
    target: list[B.Column] | None, new_columns: list[B.Column], prepared: PreparedBatch,
    state: lineage.AppState, late: bool,
) -> WriteResult:
    """A merge engine's write (modes/): the batch prepared as one row per key, MERGEd with the SET clauses the
    mode gives, with the marker and the mode (stored with the table) in the same commit."""
    mode = request.mode
    source: pa.Table = prepared.data
    stored = {c.name for c in target or ()}
    added = [f for f in mode.hidden_columns(source.schema) if snapshot.exists and f.name not in stored]
    if not snapshot.exists:  # created from the rows as they are: the helper columns only serve an UPDATE
        source = source.drop_columns([c for c in source.column_names if c.startswith(modes.base.HELPER_PREFIX)])
    evolve = [*new_columns, *(B.Column(f.name, "other", str(f.type), f.type) for f in added)]
    plan = mode.plan(source.schema, sorted(stored), tuple(c.name for c in evolve))
    batch = engine.history_source(replace(prepared, data=source, key_values=source.select(list(request.keys))))
    try:
        outcome = _commit(
            engine, request, request, batch, snapshot, plan, prepared, state, late, evolve,
            write=uuid.uuid4().hex[:16], merge_engine=mode.name, merge_options=mode.options(),
        )
    except UpsertSinkError:
        raise
    except Exception as err:
        overflow = modes.overflowed(err)
        if overflow is not None:
            raise overflow from None
        raise
    log.info("batch %s -> %s v%s (%s): %d inserted, %d updated", request.batch_id, request.target, outcome.version,
             mode.name, outcome.inserted, outcome.updated)
    return WriteResult(
        version=outcome.version, skipped=False, inserted=outcome.inserted, updated=outcome.updated, deleted=0,
        batch_id=request.batch_id, app_id=request.app_id, engine=engine.name, rows=prepared.rows, late=late,
    )


def _commit(
    engine: Engine, request: WriteRequest, commit_request: WriteRequest, batch: PreparedBatch,
    snapshot: files.Snapshot, plan: MergePlan, prepared: PreparedBatch, state: lineage.AppState, late: bool,
    new_columns: list[B.Column], **metadata: Any,
) -> Any:
    """The one commit of a write: data, marker (the app's, or its late counter's) and metadata together; then
    the ledger and the marker cache learn of it. ``commit_request`` is what the engine MERGEs by (a history
    write's keys include __START_AT)."""
    marker, extra, record = None, {}, None
    if request.batch_id is not None:
        restating = request.restate and state.record.verdict(request.batch_id) in (records.COMMITTED, records.UNKNOWN)
        # late ids are part of the record (issue #48), and so are restated ones (issue #45)
        record = state.record.add(request.batch_id, late, restated=restating)
        extra = {**record.encode(), "read_version": -1 if snapshot.version is None else snapshot.version,
                 "table_id": snapshot.table_id}
        if late or not state.normal_chain(request.batch_id):
            # below Delta's marker of the app (late, applied again after a RESTORE, or sent to a table that
            # was replaced): delta-spark would skip it on the normal chain
            marker = Marker(records.late_app(request.app_id), state.next_late)
            extra["late"] = state.next_late
            extra["late_batch"] = late
        else:
            marker = Marker(request.app_id, request.batch_id)
        if state.record.verdict(request.batch_id) == records.UNDONE:
            extra["reapplied"] = True
        if restating:
            extra["restated"] = True
        if state.txn is None and state.late_counter is None and request.catalog is None:
            lineage.note_app(snapshot, request.target, request.storage_options, request.app_id)
    meta = commit_log.encode_metadata(
        request.app_id, request.batch_id, prepared.fingerprint, engine.name, **metadata, **extra,
    )
    interrupts.attempting(snapshot.version, metadata.get("write"))  # found in the log after an interrupt
    faults.point("before-commit")
    if not snapshot.exists:
        files.mark_create(request.target)
    outcome = engine.commit(commit_request, batch, snapshot, plan, meta, new_columns, marker)
    if request.mode is not None:
        modes.note_commit(snapshot, outcome.version, request.mode)
    if marker is not None:
        files.note_commit(snapshot, outcome.version, {marker.app_id: marker.version})
    if record is not None:
        lineage.remember_commit(snapshot, request.app_id, outcome.version, record)
    return outcome


def _compact(store: TombstoneStore) -> None:
    """The writer's share of maintenance; the batch is committed, so a failure here only leaves more files."""
    try:
        store.compact()
    except Exception as err:  # noqa: BLE001 - never fail a committed write for its housekeeping
        log.warning("compacting the tombstones of %s failed (the write is committed): %s", store.path, err)


def _not_remembered(deletes: pa.Table, seen: pa.Table | None, kc: list[str]) -> pa.Table:
    """Deletes not already remembered at their sequence or a newer one (a stale row turned delete is)."""
    if deletes.num_rows == 0 or seen is None or seen.num_rows == 0:
        return deletes
    import pyarrow.compute as pc

    try:
        known = seen.select([*kc, SEQUENCE]).rename_columns([*kc, "_known"])
        joined = deletes.append_column("_i", pa.array(range(deletes.num_rows))).join(known, keys=kc)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return deletes  # keys of types the join cannot compare: record them all (duplicates are harmless)
    covered = joined.filter(
        pc.fill_null(pc.greater_equal(pc.cast(joined["_known"], joined[SEQUENCE].type), joined[SEQUENCE]), False)
    )
    if covered.num_rows == 0:
        return deletes
    drop = np.zeros(deletes.num_rows, dtype=bool)
    drop[covered["_i"].to_numpy()] = True
    return deletes.filter(pa.array(~drop))


def _store(request: WriteRequest, snapshot: Any) -> TombstoneStore:
    """The tombstones of the request's key set, as they act on the table at ``snapshot``."""
    assert request.sequence is not None
    if request.catalog is not None:  # Spark-only mode: the companion table (catalog_table.py)
        from upsertsink.table.named import NamedTombstoneStore

        return NamedTombstoneStore(request.catalog, request.keys, request.sequence, snapshot, lineage.InEffect(snapshot))
    in_effect = lineage.InEffect(snapshot) if snapshot.exists else None
    return TombstoneStore(request.target, request.keys, request.sequence, request.storage_options, snapshot, in_effect)


def _matching(store: TombstoneStore, engine: Engine, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
    return store.matching_prepared(prepared, engine.key_sample(request, prepared))


# ---------------------------------------------------------------- replays


def _replay(
    engine: Engine, request: WriteRequest, snapshot: files.Snapshot, target: list[B.Column] | None,
    prepared: PreparedBatch | None, committed: replays.Committed, marker: int | None,
) -> WriteResult:
    """A committed batch sent again: check its content against its commit, then skip it."""
    assert request.batch_id is not None
    check = "unavailable"
    casts = B.replay_casts(engine.columns(), target)
    if committed.state == "found":
        assert committed.fingerprint is not None
        ours = prepared.fingerprint if prepared is not None else engine.fingerprint(request, target, casts)
        same = ours.matches(committed.fingerprint)
        if same is False and committed.version is not None:
            same = _matches_before_rename(engine, request, snapshot, target, casts, committed)
        if same is False:
            # Below the marker, a batch that is not the one committed under its id is also a batch id behind
            # the marker: a stream restarted with a new checkpoint or a reused app id looks exactly like this.
            behind = marker is not None and request.batch_id < marker
            raise (DivergentBatchBehindMarkerError if behind else ReplayDivergenceError)(
                f"batch {request.batch_id} of app {request.app_id!r} was already committed to {request.target} "
                f"(version {committed.version}) with different content ({committed.fingerprint.rows} rows, "
                f"fingerprint {committed.fingerprint.value}; now {ours.rows} rows, fingerprint {ours.value}). "
                "The job that produced it is not deterministic (run `upsertsink lint` on it), or another job "
                f"reuses app id {request.app_id!r} (give each stream and checkpoint its own "
                f"{option('app_id')}). Nothing was written."
            )
        check = "matched" if same else "rows-only"
    if check != "matched":
        log.warning(
            "batch %s of %s skipped; its content could not be fully checked (%s: %s)",
            request.batch_id, request.app_id, check, committed.state,
        )
    if request.tracks_deletes and not request.dry_run:
        store = _store(request, snapshot)
        recorded = committed.tombstones_version if committed.state == "found" else -1
        if store.version() not in (None, recorded):
            batch = prepared if prepared is not None else engine.prepare(request, target, casts)
            _repair(engine, request, store, batch, None)
    log.info("batch %s already committed for %s: skipped", request.batch_id, request.app_id)
    return WriteResult(
        version=snapshot.version, skipped=True, inserted=0, updated=0, deleted=0, batch_id=request.batch_id,
        app_id=request.app_id, engine=engine.name, replay_check=check, dry_run=request.dry_run,
    )


def _matches_before_rename(
    engine: Engine, request: WriteRequest, snapshot: Any, target: list[B.Column] | None, casts: list[str],
    committed: replays.Committed,
) -> bool:
    """Does the batch match its commit once the columns renamed since (column mapping) take the names they had
    then? A rename keeps the column; the commit's fingerprint was taken under the old names."""
    names_at = getattr(snapshot, "names_at", None)
    names = names_at(committed.version) if names_at is not None else {}
    given = {c.name for c in engine.columns()}
    names = {now: then for now, then in names.items() if now in given}
    if not names:
        return False
    other = engine.renamed(names)
    try:
        then_request = replace(
            request, keys=tuple(names.get(k, k) for k in request.keys), delete_when=None,
            sequence=None if request.sequence is None else names.get(request.sequence, request.sequence),
        )
        then_target = None if target is None else [replace(c, name=names.get(c.name, c.name)) for c in target]
        ours = other.fingerprint(then_request, then_target, [names.get(c, c) for c in casts])
    finally:
        other.close()
    assert committed.fingerprint is not None
    return ours.matches(committed.fingerprint) is True


# ---------------------------------------------------------------- repair (tombstones rule 4)


def _repair(
    engine: Engine, request: WriteRequest, store: TombstoneStore, batch: PreparedBatch, seen: pa.Table | None
) -> Any:
    """Apply tombstones newer than rows this batch upserted, where the table still holds an older row."""
    current = _matching(store, engine, request, batch)
    if seen is not None and seen.num_rows:
        current = _newer_than_seen(current, seen, store.key_columns)
    if current.num_rows == 0:
        return None
    upserted = engine.upserted_keys(request, batch)
    kc = store.key_columns
    joined = current.join(upserted.rename_columns([*kc, "_ours"]), keys=kc, join_type="inner")
    import pyarrow.compute as pc

    overtaken = joined.filter(pc.greater(joined[SEQUENCE], pc.cast(joined["_ours"], joined[SEQUENCE].type)))
    if overtaken.num_rows == 0:
        return None
    stored = _open(request).stored_sequences(request.keys, request.sequence, overtaken.select(kc))
    both = overtaken.select([*kc, SEQUENCE]).join(stored.rename_columns([*kc, "_stored"]), keys=kc)
    older = both.filter(pc.fill_null(pc.less(pc.cast(both["_stored"], both[SEQUENCE].type), both[SEQUENCE]), False))
    if older.num_rows == 0:
        return None
    faults.point("repair-before")
    log.info("applying %d delete(s) recorded concurrently to %s", older.num_rows, request.target)
    meta = {"upsertsink": 1, "app_id": request.app_id, "repair_of_batch": request.batch_id}
    outcome = engine.repair(request, older.select([*kc, SEQUENCE]), meta)
    faults.point("repair-committed")
    return outcome


def _newer_than_seen(current: pa.Table, seen: pa.Table, kc: list[str]) -> pa.Table:
    """Rows of ``current`` (tombstones now) that are new or higher than in ``seen`` (when we read them)."""
    import pyarrow.compute as pc

    before = seen.select([*kc, SEQUENCE]).rename_columns([*kc, "_seen"])
    joined = current.join(before, keys=kc, join_type="left outer")
    newer = pc.or_(pc.is_null(joined["_seen"]), pc.greater(joined[SEQUENCE], pc.cast(joined["_seen"], joined[SEQUENCE].type)))
    return joined.filter(newer).select([*kc, SEQUENCE])


__all__ = ["Settings", "WriteResult", "key_column", "write"]
