"""Types shared by the engines: a prepared batch, a commit's outcome, and where tombstones live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from upsertsink.markers import Fingerprint

# Tombstones live in a small Delta table inside the target folder. Its columns have neutral names, so any
# key column name works there: k0..kN (the key values), then these.
TOMBSTONE_DIR = "_upsertsink_tombstones"
TOMBSTONE_SEQUENCE = "sequence"
TOMBSTONE_DELETED_AT = "deleted_at_us"
TOMBSTONE_BATCH = "batch_id"


def tombstone_key(i: int) -> str:
    return f"k{i}"


def tombstone_path(target: str) -> str:
    return target.rstrip("/") + "/" + TOMBSTONE_DIR


@dataclass
class PreparedBatch:
    """A validated batch: duplicates resolved, delete flag added, and the fingerprint of what was sent."""

    data: Any  # pyarrow.Table or Spark DataFrame
    fingerprint: Fingerprint
    rows: int
    key_ranges: dict[str, tuple[Any, Any]] | None = None  # per key: (min, max) in the batch, when orderable


@dataclass(frozen=True)
class CommitOutcome:
    version: int
    inserted: int
    updated: int
    deleted: int


@dataclass(frozen=True)
class TombstoneSpec:
    path: str
    keys: tuple[str, ...]
    sequence: str
    batch_id: int | None
    retention_us: int | None
