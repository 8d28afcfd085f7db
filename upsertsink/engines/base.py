"""The seam between the write protocol and the two engines: one request type, one protocol, shared types.

The protocol (``upsertsink/protocol.py``) decides; an engine executes. An engine holds one batch (a Spark
DataFrame or an Arrow table) and answers a fixed set of questions about it, each taking the
:class:`WriteRequest` (what the sink was asked to do) and, where the table matters, the attempt's
:class:`~upsertsink.table.files.Snapshot`. Neither engine imports the other; what they share lives in
``fingerprint.py`` (row hashes), ``tombstones.py`` (remembered deletes), ``conflicts.py`` (lost races),
``predicate.py`` (``delete_when``) and ``spec.py`` (the MERGE plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa

from upsertsink.batch import Column
from upsertsink.fingerprint import Fingerprint
from upsertsink.predicate import Predicate
from upsertsink.spec import MergePlan
from upsertsink.table.files import Snapshot


@dataclass(frozen=True)
class WriteRequest:
    """One ``write()`` call: the sink's settings and the batch id, fixed for every attempt."""

    target: str
    keys: tuple[str, ...]
    sequence: str | None
    delete_when: Predicate | None
    app_id: str
    batch_id: int | None
    partition_by: tuple[str, ...] | None = None
    storage_options: dict[str, str] | None = None
    history: Any = None  # a history.HistorySpec for a type-2 (history) sink, else None
    ignore_null_updates: bool = False
    # Spark-only mode (a table named in the catalog whose files the job does not read): the
    # catalog_table.NamedTable every read and write of the protocol goes through; ``target`` is then its name
    catalog: Any = None

    @property
    def tracks_deletes(self) -> bool:
        """Deletes are remembered (tombstones) only when a sequence orders them against later rows (a history
        table keeps every event instead: history.EventLog)."""
        return self.delete_when is not None and self.sequence is not None and self.history is None


@dataclass(frozen=True)
class Marker:
    """The Delta transaction identifier a commit records: ``txn(app_id) = version``."""

    app_id: str
    version: int


@dataclass
class PreparedBatch:
    """A validated batch: cast to the table's types, duplicates resolved, delete flag added.

    ``fingerprint`` is of the batch as sent (before duplicate resolution); ``key_hashes`` are the canonical
    key hashes of ``data``'s rows (None when the batch is too large to hold them in one process);
    ``key_ranges`` the batch's (min, max) per orderable key, for file skipping.
    """

    data: Any  # pyarrow.Table or Spark DataFrame, with the delete flag column when delete_when is set
    fingerprint: Fingerprint
    rows: int
    key_hashes: np.ndarray | None = None
    key_ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    casts: tuple[str, ...] = ()
    delete_count: int | None = None  # rows flagged as deletes, when known without another pass
    key_values: pa.Table | None = None  # the key columns' values (Arrow), when small enough to hold
    sequence_range: tuple[Any, Any] | None = None  # (min, max) of the sequence column, when known
    materialize_source: bool = False  # Spark: ``data`` is a local relation that the MERGE should materialise
    local: pa.Table | None = None  # Spark: ``data``'s rows as Arrow on the driver (a micro-batch prepared there)
    # Spark: the key, sequence and delete-flag columns of ``data``'s rows on the driver (a batch kept on the
    # server over Spark Connect: its tombstones are matched and its delete keys read here, with no Spark job)
    keys_local: pa.Table | None = None

    def with_data(self, data: Any, rows: int | None = None, added_deletes: int = 0) -> PreparedBatch:
        deletes = None if self.delete_count is None else self.delete_count + added_deletes
        return replace(
            self, data=data, rows=self.rows if rows is None else rows, delete_count=deletes, materialize_source=False,
            local=None, keys_local=None,
        )


@dataclass(frozen=True)
class CommitOutcome:
    version: int
    inserted: int
    updated: int
    deleted: int
    files_scanned: int | None = None
    files_rewritten: int | None = None


class Engine(Protocol):
    """What the write protocol asks of an engine, for one batch."""

    name: ClassVar[str]
    storage_options: dict[str, str] | None

    def columns(self) -> list[Column]:
        """The batch's columns (names, type categories, the engine's type text)."""

    def target_columns(self, request: WriteRequest, snapshot: Snapshot) -> list[Column] | None:
        """The table's columns as this engine reads them; None when there is no table yet."""

    def null_counts(self, columns: list[str]) -> dict[str, int]:
        """Null values per column of the batch as sent (only asked on an error path)."""

    def fingerprint(self, request: WriteRequest, target: list[Column] | None, casts: list[str]) -> Fingerprint:
        """The fingerprint of the batch as it would be prepared (for checking a replay without preparing it)."""

    def prepare(self, request: WriteRequest, target: list[Column] | None, casts: list[str]) -> PreparedBatch:
        """Cast, check nulls/NaNs/overflows, resolve duplicate keys, add the delete flag, take the fingerprint."""

    def history_batch(self, request: WriteRequest, target: list[Column] | None, casts: list[str]) -> pa.Table:
        """The whole batch as Arrow, cast to the table's types, with the delete flag (a history write folds
        events on the driver)."""

    def history_source(self, prepared: PreparedBatch) -> PreparedBatch:
        """``prepared`` (an Arrow MERGE source of versions) as this engine's MERGE source."""

    def key_sample(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        """A zero-row Arrow table with the batch's key columns (their types, for matching tombstones)."""

    def apply_tombstones(
        self, request: WriteRequest, prepared: PreparedBatch, tombstones: pa.Table
    ) -> tuple[PreparedBatch, int]:
        """Turn rows made stale by ``tombstones`` (k0..kN, sequence) into deletes; returns (batch, stale rows)."""

    def deletes(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        """The batch's delete rows as (k0..kN, sequence), to remember them."""

    def upserted_keys(self, request: WriteRequest, prepared: PreparedBatch) -> pa.Table:
        """The batch's non-delete rows as (k0..kN, sequence): what a concurrent delete could have overtaken."""

    def commit(
        self, request: WriteRequest, prepared: PreparedBatch, snapshot: Snapshot, plan: MergePlan,
        metadata: dict[str, Any], new_columns: list[Column], marker: Marker | None,
    ) -> CommitOutcome:
        """Create the table or MERGE into it, with ``marker`` (when not None) and the metadata in the same
        commit; a MERGE that changes no row still commits the marker.

        Raises RetryableConflict when a concurrent commit won (or took the marker's version).
        """

    def repair(self, request: WriteRequest, deletes: pa.Table, metadata: dict[str, Any]) -> CommitOutcome | None:
        """Delete stored rows older than ``deletes`` (k0..kN, sequence); no marker. None when nothing changed."""

    def close(self) -> None:
        """Release what the write held (the Spark engine's scratch files); called once the write is over."""

    def renamed(self, names: dict[str, str]) -> Engine:
        """An engine for the same batch with columns renamed (``names``: old -> new), for checking a replay
        against a commit made before a column-mapping rename; closed by the caller."""
