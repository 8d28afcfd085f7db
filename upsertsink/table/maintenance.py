"""What ``upsertsink maintain PATH`` and ``UpsertSink.maintain()`` do: the sink's own housekeeping, on demand.

Writers already do all of it as they go (a scope of tombstones is compacted by the writer that finds it with
many files; both engines write Delta checkpoints at the table's interval). ``maintain`` does it at once, for
every key set that ever recorded a delete in the table, and reports what it did:

- tombstones: each scope's files compacted into one (the newest live tombstone per key), expired tombstones
  dropped, temp files of writers that died mid-write removed;
- the target: a checkpoint when the newest one is ``delta.checkpointInterval`` (default 100) versions or more
  behind, then Delta's own expired-log cleanup (commits older than ``delta.logRetentionDuration``, which
  Delta keeps 30 days by default, and only before a checkpoint).

It never touches the target's data files: VACUUM stays the user's (docs/user-guide.md says with what
retention), since it decides how far back time travel and a slow reader can go.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from upsertsink import faults
from upsertsink.sidecar.folder import LEGACY_DIR, Folder, deltalake_uri, folder_about, scopes
from upsertsink.sidecar.tombstones import TOMBSTONE_ROOT, TombstoneStore

log = logging.getLogger(__name__)

DEFAULT_CHECKPOINT_INTERVAL = 100


@dataclass
class MaintenanceReport:
    """What one ``maintain`` run did (``to_dict()`` is the CLI's ``--json``)."""

    path: str
    version: int | None
    tombstones: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_written: int | None = None  # the version checkpointed, when one was written
    log_files_removed: int = 0
    legacy_tombstone_table: bool = False  # upsertsink 0.1's table is still there (a copy source; never deleted)
    history: list[dict[str, Any]] = field(default_factory=list)  # event logs of history (SCD type 2) sinks
    clone_adopted: bool = False  # --adopt-clone: the clone is written from now on without its source's history

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [f"{self.path}  version {self.version}"]
        if not self.tombstones:
            out.append("  tombstones: none recorded")
        for scope in self.tombstones:
            out.append(
                f"  tombstones of keys {scope['keys']} (sequence {scope['sequence']!r}): "
                f"{scope['files_before']} file(s) -> {scope['files_after']}, {scope['tombstones']} kept, "
                f"{scope['expired']} expired dropped, {scope['temp_files_removed']} temp file(s) removed"
            )
        for scope in self.history:
            out.append(
                f"  history events of keys {scope['keys']} (sequence {scope['sequence']!r}): "
                f"{scope['files_before']} file(s) -> {scope['files_after']}"
            )
        if self.checkpoint_written is not None:
            out.append(f"  checkpoint written at version {self.checkpoint_written}")
        else:
            out.append("  checkpoint: up to date")
        out.append(f"  expired log files removed: {self.log_files_removed}")
        if self.clone_adopted:
            out.append("  clone adopted: written from now on without its source's batch records and deletes")
        return out


def maintain(path: str, storage_options: dict[str, str] | None = None, adopt_clone: bool = False) -> MaintenanceReport:
    """Compact and clean what the sink owns in the table at ``path``; checkpoint the table when due. With
    ``adopt_clone``, a clone whose source is gone is let be written without its source's history."""
    from deltalake import DeltaTable

    table = DeltaTable(deltalake_uri(path), storage_options=storage_options)
    report = MaintenanceReport(path=path, version=table.version())
    if adopt_clone:
        _adopt(path, storage_options, report)
    root = Folder(path, TOMBSTONE_ROOT, storage_options)
    for scope in sorted(scopes(root)):
        store = _store_for(path, scope, storage_options)
        if store is None:
            continue
        done = store.compact()
        report.tombstones.append({"scope": scope, "keys": sorted(store.keys), "sequence": store.sequence, **done})
    from upsertsink.sidecar import events
    from upsertsink.table.files import open_snapshot

    snapshot = open_snapshot(path, storage_options)
    for log_ in events.logs_of(path, storage_options, snapshot):
        before = len([n for n in log_.folder.names() if n.endswith(".parquet") and not n.startswith(".")])
        log_.compact(snapshot)
        after = len([n for n in log_.folder.names() if n.endswith(".parquet") and not n.startswith(".")])
        report.history.append({"keys": sorted(log_.keys), "sequence": log_.sequence, "files_before": before,
                               "files_after": after})
    legacy = Folder(path, LEGACY_DIR, storage_options)
    report.legacy_tombstone_table = bool(legacy.names()) if legacy.local is not None else False
    report.checkpoint_written = _checkpoint_if_due(table, storage_options)
    faults.point("maintain-checkpointed")
    report.log_files_removed = int(table.cleanup_metadata() or 0)
    log.info("maintained %s: %s", path, report)
    return report


def _adopt(path: str, storage_options: dict[str, str] | None, report: MaintenanceReport) -> None:
    from upsertsink.errors import InvalidInputError
    from upsertsink.table import clones
    from upsertsink.table.files import keep, open_snapshot

    snapshot = open_snapshot(path, storage_options)
    try:
        origin = snapshot.commit_info(0)
        if origin is None or origin.get("operation") != "CLONE":
            raise InvalidInputError(f"table {path} is not a clone (its first commit is not a CLONE): there is "
                                    "nothing to adopt")
        clones.adopt(snapshot)
    finally:
        keep(snapshot)
    report.clone_adopted = True


def _store_for(path: str, scope: str, storage_options: dict[str, str] | None) -> TombstoneStore | None:
    """The store of one scope, from what its files say about themselves (key and sequence columns)."""

    about = folder_about(Folder(path, f"{TOMBSTONE_ROOT}/{scope}", storage_options), "upsertsink.tombstones")
    if about is None:
        return None
    return TombstoneStore.for_scope(path, scope, tuple(about["keys"]), about["sequence"], storage_options)


def _checkpoint_if_due(table: Any, storage_options: dict[str, str] | None) -> int | None:
    """Write a checkpoint when the newest is an interval or more behind (a writer killed right before its
    checkpoint, or a table written by a tool that writes none)."""
    version = table.version()
    conf = table.metadata().configuration
    try:
        interval = int(conf.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    except ValueError:
        interval = DEFAULT_CHECKPOINT_INTERVAL
    last = _last_checkpoint(table, storage_options)
    if version - (last if last is not None else -1) < interval:
        return None
    table.create_checkpoint()
    return version


def _last_checkpoint(table: Any, storage_options: dict[str, str] | None) -> int | None:
    from upsertsink.table.commit_log import log_fs

    try:
        with log_fs(table.table_uri, storage_options).open_input_stream("_delta_log/_last_checkpoint") as f:
            return int(json.loads(f.read().decode())["version"])
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None


__all__ = ["MaintenanceReport", "maintain"]
