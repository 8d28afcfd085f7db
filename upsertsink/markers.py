"""Batch markers: Delta transaction identifiers plus the commit metadata written with them.

A committed batch leaves two things in the one commit that also holds its data:

- a ``txn`` action (appId = the sink's app id, version = the batch id): the marker Delta itself knows, which
  both delta-spark and deltalake read and write, so a table can move between engines;
- ``commitInfo.userMetadata``: a JSON object ``{"upsertsink": 1, "app_id", "batch_id", "fingerprint",
  "rows", "algorithm", "engine", "inserted", "updated", "deleted"}`` used to detect divergent replays and
  by ``upsertsink status``.

Both are read with deltalake (no JVM), whichever engine wrote them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

METADATA_MARK = "upsertsink"
HISTORY_SEARCH_LIMIT = 500


@dataclass(frozen=True)
class Fingerprint:
    """An order-independent digest of a batch's rows. ``algorithm`` names the engine's hashing."""

    algorithm: str
    rows: int
    value: str

    def matches(self, other: Fingerprint) -> bool | None:
        """True/False when comparable; None when the algorithms differ and only row counts agree."""
        if self.algorithm != other.algorithm:
            return None if self.rows == other.rows else False
        return self.rows == other.rows and self.value == other.value


def encode_metadata(app_id: str, batch_id: int | None, fp: Fingerprint, engine: str) -> dict[str, Any]:
    return {
        METADATA_MARK: 1,
        "app_id": app_id,
        "batch_id": batch_id,
        "engine": engine,
        "algorithm": fp.algorithm,
        "rows": fp.rows,
        "fingerprint": fp.value,
    }


def decode_metadata(commit: dict[str, Any]) -> dict[str, Any] | None:
    """The upsertsink metadata of one history entry, or None when the commit is not ours."""
    raw = commit.get("userMetadata")
    if not raw or not isinstance(raw, str):
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and meta.get(METADATA_MARK) == 1 else None


def _open(path: str, storage_options: dict[str, str] | None = None):
    from deltalake import DeltaTable

    return DeltaTable(path, storage_options=storage_options)


def table_exists(path: str, storage_options: dict[str, str] | None = None) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(path, storage_options=storage_options)


def last_batch_id(path: str, app_id: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The last batch id committed for app_id (the Delta ``txn`` version), None if none or no table."""
    if not table_exists(path, storage_options):
        return None
    return _open(path, storage_options).transaction_version(app_id)


def open_table(path: str, storage_options: dict[str, str] | None = None):
    """The deltalake DeltaTable at path, or None when there is no Delta table there."""
    return _open(path, storage_options) if table_exists(path, storage_options) else None


def committed_fingerprint(table, app_id: str, batch_id: int) -> Fingerprint | None:
    """The fingerprint recorded with batch_id for app_id, searching recent history; None if not found."""
    for commit in table.history(HISTORY_SEARCH_LIMIT):
        meta = decode_metadata(commit)
        if meta and meta.get("app_id") == app_id and meta.get("batch_id") == batch_id:
            return Fingerprint(meta["algorithm"], int(meta["rows"]), meta["fingerprint"])
    return None


def status(path: str, limit: int = 10, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """Table version, last batch id per app id seen in history, and the recent commits with counts."""
    table = _open(path, storage_options)
    history = table.history(HISTORY_SEARCH_LIMIT)
    app_ids: list[str] = []
    commits = []
    for commit in history:
        meta = decode_metadata(commit)
        if meta and meta.get("app_id") not in app_ids:
            app_ids.append(meta["app_id"])
        if len(commits) < limit:
            metrics = commit.get("operationMetrics") or {}
            commits.append(
                {
                    "version": commit.get("version"),
                    "timestamp": commit.get("timestamp"),
                    "operation": commit.get("operation"),
                    "app_id": meta.get("app_id") if meta else None,
                    "batch_id": meta.get("batch_id") if meta else None,
                    "inserted": _metric(metrics, "num_target_rows_inserted", "numTargetRowsInserted"),
                    "updated": _metric(metrics, "num_target_rows_updated", "numTargetRowsUpdated"),
                    "deleted": _metric(metrics, "num_target_rows_deleted", "numTargetRowsDeleted"),
                }
            )
    return {
        "path": path,
        "version": table.version(),
        "batches": {a: table.transaction_version(a) for a in app_ids},
        "commits": commits,
    }


def _metric(metrics: dict[str, Any], *names: str) -> int | None:
    for name in names:
        if name in metrics and metrics[name] is not None:
            return int(metrics[name])
    return None
