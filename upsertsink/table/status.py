"""``upsertsink status``: a table's version, each app's last batch id as the table is now, recent commits."""

from __future__ import annotations

import logging
from typing import Any

from upsertsink.sidecar.folder import deltalake_uri
from upsertsink.table.commit_log import (
    STATUS_HISTORY,
    decode_metadata,
    history,
    late_batch,
    marker_only,
    metric,
)
from upsertsink.table.files import Snapshot

log = logging.getLogger(__name__)


def status(
    path: str, limit: int = 10, storage_options: dict[str, str] | None = None, version: int | None = None
) -> dict[str, Any]:
    """Table version, last batch id per app id seen in history, and the recent commits with counts; with
    ``version``, the table as it was at that version."""
    from deltalake import DeltaTable

    table = DeltaTable(deltalake_uri(path), version=version, storage_options=storage_options)
    at = table.version()
    listed = history(table, max(limit, STATUS_HISTORY), storage_options)
    app_ids: list[str] = []
    commits = []
    for commit in listed:
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
                    # a commit that records a batch's marker and changes no row (the batch changed nothing)
                    "marker_only": marker_only(meta, commit, metrics),
                    "late": late_batch(meta),
                    "restated": bool(meta and meta.get("restated")),
                    "reapplied": bool(meta and meta.get("reapplied")),
                    "inserted": metric(
                        metrics, "num_target_rows_inserted", "numTargetRowsInserted", "num_added_rows", "numOutputRows"
                    ),
                    "updated": metric(metrics, "num_target_rows_updated", "numTargetRowsUpdated"),
                    "deleted": metric(metrics, "num_target_rows_deleted", "numTargetRowsDeleted"),
                    # files the write could read (the sink's file pruning), and files it rewrote
                    "files_scanned": meta.get("files_scanned") if meta else None,
                    "files_rewritten": metric(
                        metrics, "num_target_files_removed", "numTargetFilesRemoved", "num_removed_files",
                        "numRemovedFiles",
                    ),
                }
            )
    names = set(table.schema().to_arrow().names)
    history_table = {"__START_AT", "__END_AT"} <= names  # upsertsink.history's own columns
    return {
        "path": path,
        "version": at,
        # 2: a history table (SCD type 2, one row per version of a key, keyed by the key and __START_AT)
        "scd_type": 2 if history_table else 1,
        "merge_engine": merge_engine(listed),
        "latest_version": None if version is None else DeltaTable(
            deltalake_uri(path), storage_options=storage_options).version(),
        **_app_markers(Snapshot(path, table, storage_options), app_ids),
        "commits": commits,
    }


def merge_engine(commits: list[dict[str, Any]]) -> str | None:
    """The merge engine (upsertsink.modes) of the newest sink commit among ``commits`` (newest first); None when
    none of them is a sink's."""
    for commit in commits:
        meta = decode_metadata(commit)
        if meta and "app_id" in meta and "repair_of_batch" not in meta:
            return str(meta.get("merge_engine") or "upsert")
    return None


def _app_markers(snapshot: Any, app_ids: list[str]) -> dict[str, Any]:
    """``batches`` (app -> last batch id as the table is at ``snapshot``), ``undone`` (app -> the batch
    ids a RESTORE undid and nothing committed since, as [low, high] ranges; apps with none left out) and
    ``ledger`` (app -> the summary of its batch ledger: committed ranges, how many ids are missing among them,
    undone, late; ``upsertsink batches`` shows the rest)."""
    from upsertsink.table import lineage
    from upsertsink.table.batch_ledger import AppLedger

    batches, undone, summaries = {}, {}, {}
    for app in app_ids:
        record = lineage.app_state(snapshot, app).record
        batches[app] = record.marker
        if record.undone:
            undone[app] = [[lo, hi] for lo, hi, _ in record.undone]
        summaries[app] = AppLedger.from_record(app, record).summary_dict()
    return {"batches": batches, "undone": undone, "ledger": summaries}


# ---------------------------------------------------------------- status (the CLI's status --table, Spark-only)


def named_status(spark: Any, name: str, limit: int = 10, version: int | None = None) -> dict[str, Any]:
    """``status.status`` of the table ``name`` from ``DESCRIBE HISTORY`` on its name (no file access): its
    version (or ``version``), the last batch id of each app id in the listed history, the recent commits."""
    from upsertsink.table.named import (
        CatalogTableError,
        NamedTable,
        _chain_value,
        _millis,
        named_errors,
        named_snapshot,
    )

    named = NamedTable(spark, name)
    listed = named.history(None if version is not None else max(limit, STATUS_HISTORY))
    latest = listed[0]["version"] if listed else None
    if version is not None:
        if latest is None or version > latest:
            raise CatalogTableError(f"table {name} has no version {version} (latest is {latest})")
        listed = [c for c in listed if c["version"] <= version]
    at = listed[0]["version"] if listed else None
    batches: dict[str, int] = {}
    commits = []
    for commit in listed:
        meta = decode_metadata(commit)
        if meta and meta.get("app_id") and meta["app_id"] not in batches:
            value = _chain_value(meta, str(meta["app_id"]))  # the app's newest commit: its marker
            if value is not None:
                batches[str(meta["app_id"])] = value
        if len(commits) < limit:
            metrics = commit.get("operationMetrics") or {}
            commits.append({
                "version": commit["version"], "timestamp": _millis(commit.get("timestamp")),
                "operation": commit.get("operation"),
                "app_id": meta.get("app_id") if meta else None, "batch_id": meta.get("batch_id") if meta else None,
                "marker_only": marker_only(meta, commit, metrics), "late": late_batch(meta),
                "reapplied": bool(meta and meta.get("reapplied")),
                "restated": bool(meta and meta.get("restated")),
                "inserted": metric(metrics, "numTargetRowsInserted", "numOutputRows"),
                "updated": metric(metrics, "numTargetRowsUpdated"),
                "deleted": metric(metrics, "numTargetRowsDeleted"),
                "files_scanned": meta.get("files_scanned") if meta else None,
                "files_rewritten": metric(metrics, "numTargetFilesRemoved", "numRemovedFiles"),
            })
    undone: dict[str, Any] = {}
    summaries: dict[str, Any] = {}  # the batch ledger's summary per app (issue #48)
    if batches:  # the apps' records along the lineage of the table as it is (or was at ``version``)
        found = _app_markers(named_snapshot(spark, name, version), list(batches))
        batches, undone, summaries = found["batches"], found["undone"], found["ledger"]
    with named_errors(name, "reading the schema of"):
        names = set(spark.table(named.sql_name).schema.names)
    return {
        "path": named.table_uri, "version": at, "scd_type": 2 if {"__START_AT", "__END_AT"} <= names else 1,
        "merge_engine": merge_engine(listed),
        "latest_version": None if version is None else latest, "batches": batches, "undone": undone,
        "ledger": summaries, "commits": commits,
    }


__all__ = ['named_status', 'status']
