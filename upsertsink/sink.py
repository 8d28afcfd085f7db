"""UpsertSink: an idempotent, replay-safe MERGE into a Delta table, on Spark or on deltalake.

The write protocol (see DESIGN.md): prepare -> marker check -> MERGE with marker and fingerprint in one
commit. Settings are validated once, in the constructor.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from upsertsink import batch as B
from upsertsink import markers, storage
from upsertsink.engines.base import TombstoneSpec, tombstone_path
from upsertsink.errors import ConcurrentWriteError, InvalidInputError, ReplayDivergenceError
from upsertsink.spec import MergePlan

log = logging.getLogger(__name__)

DEFAULT_TOMBSTONE_RETENTION = timedelta(days=7)


@dataclass(frozen=True)
class WriteResult:
    """What one ``write`` did. ``skipped`` means the batch id was already committed: nothing changed."""

    version: int | None
    skipped: bool
    inserted: int
    updated: int
    deleted: int
    batch_id: int | None
    app_id: str
    engine: str
    rows: int = 0  # rows merged after duplicate resolution
    stale: int = 0  # rows dropped because a remembered delete (tombstone) is newer


def _default_app_id(target: str) -> str:
    name = os.path.basename(target.rstrip("/")) or target
    return f"upsertsink:{name}"


def _is_spark_dataframe(data: Any) -> bool:
    for cls in type(data).__mro__:
        if cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.sql"):
            return True
    return False


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
    ):
        if not isinstance(target, str) or not target:
            raise InvalidInputError(f"target must be a Delta table path or URI, got {target!r}")
        self.target = target
        self.keys = B.normalize_keys(keys)
        if sequence_by is not None and (not isinstance(sequence_by, str) or not sequence_by):
            raise InvalidInputError(f"sequence_by must be a column name, got {sequence_by!r}")
        if sequence_by in self.keys:
            raise InvalidInputError(f"sequence_by {sequence_by!r} cannot also be a key column")
        self.sequence_by = sequence_by
        if delete_when is not None and (not isinstance(delete_when, str) or not delete_when.strip()):
            raise InvalidInputError(f"delete_when must be a SQL predicate string, got {delete_when!r}")
        self.delete_when = delete_when
        self.app_id = app_id if app_id is not None else _default_app_id(target)
        if not isinstance(self.app_id, str) or not self.app_id:
            raise InvalidInputError(f"app_id must be a non-empty string, got {app_id!r}")
        if isinstance(partition_by, str):
            partition_by = [partition_by]
        self.partition_by = list(partition_by) if partition_by else None
        self.schema_evolution = bool(schema_evolution)
        if tombstone_retention is not None and tombstone_retention.total_seconds() <= 0:
            raise InvalidInputError("tombstone_retention must be a positive timedelta, or None to keep forever")
        self.tombstone_retention = tombstone_retention
        self.max_retries = max_retries
        self.storage_options = storage_options

    # ------------------------------------------------------------------ public

    def write(self, data: Any, batch_id: int | None = None) -> WriteResult:
        """Upsert one batch. A batch id at or below the last committed one is skipped without a commit."""
        batch_id = B.check_batch_id(batch_id)
        engine = self._engine_for(data)
        source_cols = engine.columns()
        B.check_columns(source_cols, None, self.keys, self.sequence_by, True, self.target)
        if self.partition_by:
            missing = [c for c in self.partition_by if c not in {c.name for c in source_cols}]
            if missing:
                raise InvalidInputError(f"partition_by column(s) {missing} missing from the batch")
        delete_tree = None
        if self.delete_when is not None:
            delete_tree = B.parse_predicate(self.delete_when, [c.name for c in source_cols])

        options = storage.deltalake_options(self.target, self.storage_options, getattr(engine, "spark", None))
        prepared = None
        for attempt in range(self.max_retries + 1):
            # One deltalake snapshot per attempt answers the schema and marker questions (and, on the
            # embedded engine, is the table the MERGE commits against: a concurrent commit makes it conflict).
            snapshot = markers.open_table(self.target, options)
            target_cols = engine.target_columns(self.target, snapshot)
            new_cols, casts = B.check_columns(
                source_cols, target_cols, self.keys, self.sequence_by, self.schema_evolution, self.target
            )
            if attempt == 0:
                engine.cast_to(self.target, casts)
            skipped = self._check_marker(engine, batch_id, prepared, snapshot)
            if skipped is not None:
                return skipped
            if prepared is None:
                prepared = engine.prepare(self.keys, self.sequence_by, delete_tree, self.delete_when or "")
            stale = 0
            if delete_tree is not None and self.sequence_by is not None:
                stale = engine.apply_tombstones(prepared, self._tombstones(batch_id))
            columns = tuple(c.name for c in (target_cols or source_cols)) + tuple(
                c.name for c in new_cols if target_cols is not None
            )
            plan = MergePlan(self.keys, columns, self.sequence_by, deletes=delete_tree is not None)
            meta = markers.encode_metadata(self.app_id, batch_id, prepared.fingerprint, engine.engine)
            try:
                outcome = engine.commit(
                    self.target, prepared, plan, self.app_id, batch_id, meta,
                    create=target_cols is None, partition_by=self.partition_by, new_columns=new_cols,
                )
            except engine.RetryableConflict as err:
                if attempt == self.max_retries:
                    raise ConcurrentWriteError(
                        f"gave up writing batch {batch_id} to {self.target} after {attempt + 1} attempts: "
                        f"concurrent writers kept conflicting ({err})"
                    ) from err
                delay = min(5.0, 0.1 * 2**attempt) * (0.5 + random.random())
                log.info("concurrent commit on %s (attempt %d), retrying in %.2fs", self.target, attempt + 1, delay)
                time.sleep(delay)
                continue
            log.info(
                "batch %s -> %s v%s: %d inserted, %d updated, %d deleted",
                batch_id, self.target, outcome.version, outcome.inserted, outcome.updated, outcome.deleted,
            )
            return WriteResult(
                version=outcome.version, skipped=False, inserted=outcome.inserted, updated=outcome.updated,
                deleted=outcome.deleted, batch_id=batch_id, app_id=self.app_id, engine=engine.engine,
                rows=prepared.rows, stale=stale,
            )
        raise AssertionError("unreachable")

    def last_batch_id(self) -> int | None:
        """The last batch id committed to the table for this sink's app_id, or None."""
        options = storage.deltalake_options(self.target, self.storage_options)
        return markers.last_batch_id(self.target, self.app_id, options)

    def foreach_batch(self, df: Any, epoch_id: int) -> None:
        """For ``df.writeStream.foreachBatch(sink.foreach_batch)``: the epoch id is the batch id."""
        self.write(df, batch_id=int(epoch_id))

    def __repr__(self) -> str:
        return f"UpsertSink({self.target!r}, keys={list(self.keys)!r}, app_id={self.app_id!r})"

    # ------------------------------------------------------------------ internals

    def _engine_for(self, data: Any):
        if _is_spark_dataframe(data):
            from upsertsink.engines.spark import SparkBatch

            return SparkBatch(data, self.storage_options)
        from upsertsink.engines.embedded import EmbeddedBatch

        return EmbeddedBatch(data, self.storage_options)

    def _tombstones(self, batch_id: int | None) -> TombstoneSpec:
        assert self.sequence_by is not None
        retention = None
        if self.tombstone_retention is not None:
            retention = int(self.tombstone_retention.total_seconds() * 1_000_000)
        return TombstoneSpec(tombstone_path(self.target), self.keys, self.sequence_by, batch_id, retention)

    def _check_marker(self, engine: Any, batch_id: int | None, prepared: Any, table: Any) -> WriteResult | None:
        """A WriteResult(skipped=True) when batch_id is already committed; raises on a divergent replay."""
        if batch_id is None:
            return None
        last = None if table is None else table.transaction_version(self.app_id)
        if last is None or batch_id > last:
            return None
        if batch_id == last:
            recorded = markers.committed_fingerprint(table, self.app_id, batch_id)
            if recorded is None:
                log.warning("batch %s of %s has no recorded fingerprint; skipped unchecked", batch_id, self.app_id)
            else:
                ours = prepared.fingerprint if prepared is not None else engine.fingerprint()
                same = ours.matches(recorded)
                if same is False:
                    raise ReplayDivergenceError(
                        f"batch {batch_id} of app {self.app_id!r} was already committed to {self.target} with "
                        f"different content ({recorded.rows} rows, fingerprint {recorded.value}; now "
                        f"{ours.rows} rows, fingerprint {ours.value}). The job that produced it is not "
                        "deterministic: run `upsertsink lint` on it. Nothing was written."
                    )
                if same is None:
                    log.warning(
                        "batch %s was committed by the %s engine; only its row count could be compared",
                        batch_id, recorded.algorithm,
                    )
        log.info("batch %s already committed for %s (last %s): skipped", batch_id, self.app_id, last)
        return WriteResult(
            version=table.version(), skipped=True, inserted=0, updated=0, deleted=0,
            batch_id=batch_id, app_id=self.app_id, engine=engine.engine,
        )
