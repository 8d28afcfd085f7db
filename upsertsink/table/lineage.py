"""An app's record at a version of a table, read along the table's *lineage*; which recorded writes act.

The app's record at version V is the fold of its commits along V's lineage: from V down, a RESTORE commit
jumps to the version it went back to (the commits in between are undone), a commit that replaced the table
(``CREATE OR REPLACE``, or a commit of another identity) ends it, and a ``CLONE`` continues in the source at
the cloned version. The fold needs no old log entries in the common case: the newest commit of the app
carries the whole record, exact when its writer read the version right before it; when other commits came in
between (a racing commit of the app's other chain, a RESTORE), the walk goes on down to the previous exact
record and adds what it passed. Results are kept per (table, identity, app, version), so a stream reads no
history between its own batches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from upsertsink.table.commit_log import decode_metadata, late_batch
from upsertsink.table.records import ALL, REPLACE_OPERATIONS, Record, late_app

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppState:
    """What the table says about one app at one snapshot: its record, and Delta's own markers (which decide
    the chain of its next commit)."""

    record: Record
    txn: int | None = None  # Delta's txn version of the app (the normal chain), None if none
    late_counter: int | None = None  # the late chain's txn version, None if none

    @property
    def marker(self) -> int | None:
        """The app's last batch id as the table is now (a RESTORE moves it back; Delta's expiry does not)."""
        return self.record.marker

    @property
    def next_late(self) -> int:
        return 0 if self.late_counter is None else self.late_counter + 1

    def normal_chain(self, batch_id: int) -> bool:
        """Can ``batch_id`` move the app's Delta marker (delta-spark skips a txn version not above it)?"""
        return self.txn is None or batch_id > self.txn


EMPTY = AppState(Record())


# (table uri, table identity, app id, version) -> the app's record there. Lineages never change once
# written, so an entry never goes stale; the sink's own commits fill it, so a stream reads no history between
# its batches.
_CACHE: OrderedDict[tuple[str, str | None, str, int], Record] = OrderedDict()


_CACHE_SIZE = 4096


_lock = threading.Lock()


def forget() -> None:
    """Drop every record kept in this process (tests use it to read as a new process would)."""
    with _lock:
        _CACHE.clear()
        _KNOWN_APPS.clear()


def _remember(key: tuple[str, str | None, str, int], record: Record) -> None:
    with _lock:
        _CACHE[key] = record
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def _cached(key: tuple[str, str | None, str, int]) -> Record | None:
    with _lock:
        return _CACHE.get(key)


def remember_commit(snapshot: Any, app_id: str, version: int | None, record: Record) -> None:
    """The sink committed ``record`` for ``app_id`` at ``version`` on top of ``snapshot``: when nothing came
    in between, that is the app's record at ``version``."""
    if version is not None and snapshot.exists and version == snapshot.version + 1:
        _remember((snapshot.uri, snapshot.table_id, app_id, version), record)


def app_state(snapshot: Any, app_id: str) -> AppState:
    """The app's record and markers at ``snapshot`` (a :class:`upsertsink.table.files.Snapshot`, or a table known
    by name only)."""
    if not snapshot.exists:
        return EMPTY
    txn = snapshot.last_batch(app_id)
    late = snapshot.last_batch(late_app(app_id))
    if txn is None and late is None and not _may_have_written(snapshot, app_id):
        return EMPTY
    record = _Walk(snapshot, app_id, txn).state(snapshot.version)
    return AppState(record, txn, late)


APPS_DIR = "_upsertsink/apps"


_KNOWN_APPS: set[tuple[str, str]] = set()  # (table uri, app) whose entry this process wrote or saw


def _app_file(app_id: str) -> str:
    return hashlib.sha256(app_id.encode()).hexdigest()[:24] + ".json"


def _may_have_written(snapshot: Any, app_id: str) -> bool:
    """Has the app written this table although Delta shows no marker of it? Delta drops a marker after
    ``delta.setTransactionRetentionDuration``, and a clone carries none of its source's: the sink's list of
    apps (a small file per app beside the table) and the table's first commit tell."""
    folder = snapshot.sidecar(APPS_DIR)
    # a table known by name only has its markers read from the history (never expired) and no folder
    if folder is not None and ((snapshot.uri, app_id) in _KNOWN_APPS or _app_file(app_id) in folder.names()):
        return True
    origin = snapshot.commit_info(0)
    return origin is not None and origin.get("operation") == "CLONE"


def note_app(snapshot: Any, target: str, storage_options: dict[str, str] | None, app_id: str) -> None:
    """Before an app's first commit to a table (as far as Delta's markers show), list it beside the table, so
    that its record is found after Delta forgets its marker."""
    from upsertsink.sidecar.folder import Folder

    key = (snapshot.uri, app_id)
    if key in _KNOWN_APPS:
        return
    folder = Folder(target, APPS_DIR, storage_options)
    name = _app_file(app_id)
    if folder.local is None or name not in folder.names():
        folder.write_bytes(name, json.dumps({"app_id": app_id}).encode())
    with _lock:
        _KNOWN_APPS.add(key)


class InEffect:
    """Which writes recorded beside the table (tombstones, history events) act on the table as it is at
    ``snapshot``: not those of another table that stood at this place (another ``metaData.id``; a write that
    created a table records none, and belongs to the identity the table had at version 0), and not those of a
    batch a RESTORE undid, recorded before that RESTORE (re-sent, the batch records them again)."""

    def __init__(self, snapshot: Any):
        self.snapshot = snapshot
        self._records: dict[str, Record] = {}
        self._first: bool | None = None

    def record(self, app_id: str) -> Record:
        if app_id not in self._records:
            self._records[app_id] = app_state(self.snapshot, app_id).record
        return self._records[app_id]

    def _created_this_table(self) -> bool:
        """Is the identity the table had at version 0 its identity now (no REPLACE since)?"""
        if self._first is None:
            origin = self.snapshot.origin_id()
            self._first = origin is None or origin == self.snapshot.table_id
        return self._first

    def mask(self, rows: Any) -> Any:
        """True for each row (with ``app``, ``table_id``, ``read_version``, ``batch_id``) that acts."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = rows.num_rows
        keep = np.ones(n, dtype=bool)
        if n == 0 or "app" not in rows.column_names:
            return keep
        apps, tables, reads, batches = rows["app"], rows["table_id"], rows["read_version"], rows["batch_id"]
        ours = pc.is_valid(apps).to_numpy(zero_copy_only=False)
        if not ours.any():
            return keep  # every row recorded by an earlier version of the sink: they act
        current = self.snapshot.table_id
        same = pc.fill_null(pc.equal(tables, pa.scalar(current, pa.string())), False).to_numpy(zero_copy_only=False)
        unnamed = pc.is_null(tables).to_numpy(zero_copy_only=False)
        if unnamed.any() and ours[unnamed].any() and not self._created_this_table():
            keep &= ~(unnamed & ours)
        keep &= same | unnamed | ~ours
        for app in pc.unique(apps.combine_chunks().drop_null()).to_pylist():
            undone = self.record(app).undone
            if not undone:
                continue
            of_app = pc.fill_null(pc.equal(apps, pa.scalar(app, pa.string())), False).to_numpy(zero_copy_only=False)
            batch = pc.fill_null(batches, -1).to_numpy(zero_copy_only=False)
            read = pc.fill_null(reads, -1).to_numpy(zero_copy_only=False)
            for lo, hi, at in undone:
                keep &= ~(of_app & (batch >= lo) & (batch <= hi) & (read < at))
        return keep


class _Walk:
    """The fold of one app's commits along the lineage of a snapshot's table."""

    def __init__(self, snapshot: Any, app_id: str, txn: int | None):
        self.snapshot = snapshot
        self.app_id = app_id
        self.txn = txn
        self.uri = snapshot.uri
        self.table_id = snapshot.table_id

    def state(self, top: int) -> Record:
        # (id, late, restated) of commits passed whose writers may not have seen everything below
        pending: list[tuple[int, bool, bool]] = []
        v = top
        while True:
            key = (self.uri, self.table_id, self.app_id, v)
            cached = _cached(key)
            if cached is not None:
                base = cached
                break
            if v < 0:
                base = Record()
                break
            info = self.snapshot.commit_info(v)
            if info is None:
                base = self._unknown(v)
                break
            operation = info.get("operation")
            if operation == "RESTORE":
                base = self._restore(v, info)
                _remember(key, base)
                break
            if operation == "CLONE":
                base = self._clone(info)
                _remember(key, base)
                break
            if operation in REPLACE_OPERATIONS:
                base = Record()  # a new identity of the table begins here
                break
            meta = _metadata(info)
            if meta is not None and meta.get("app_id") == self.app_id and isinstance(meta.get("batch_id"), int):
                if meta.get("table_id") not in (None, self.table_id):
                    base = Record()  # a commit of an earlier table at this location
                    break
                claim = Record.decode(meta)
                read = meta.get("read_version")
                if claim is not None and (read is None or read == v - 1):
                    base = claim
                    break
                pending.append((int(meta["batch_id"]), late_batch(meta), bool(meta.get("restated"))))
            v -= 1
        record = base
        for batch_id, late, restated in reversed(pending):
            record = record.add(batch_id, late, restated)
        _remember((self.uri, self.table_id, self.app_id, top), record)
        return record

    def _unknown(self, v: int) -> Record:
        """The log no longer holds version ``v`` (Delta's log cleanup): ids Delta's marker covers are unknown."""
        gone = f"Delta's log cleanup removed the commits up to version {v}"
        if self.txn is not None:
            return Record((), self.txn + 1, (), gone)
        return Record((), ALL, (), f"{gone}, and Delta no longer keeps this app's marker "
                      "(delta.setTransactionRetentionDuration)")

    def _restore(self, v: int, info: dict[str, Any]) -> Record:
        before = self.state(v - 1)
        to = self.snapshot.restored_version(info, v)
        if to is None:
            return Record((), ALL, (), f"a RESTORE at version {v} went back to a version the log does not name")
        return self.state(to).restored(before, v, to)

    def _clone(self, info: dict[str, Any]) -> Record:
        inherited = self.snapshot.clone_state(info, self.app_id)
        if isinstance(inherited, Record):
            return inherited
        from upsertsink.errors import TableNotWritableError

        raise TableNotWritableError(f"table {self.snapshot.path} cannot take this sink's writes: {inherited}. "
                                    "Nothing was written.")


def _metadata(info: dict[str, Any]) -> dict[str, Any] | None:
    return decode_metadata(info)


__all__ = ["EMPTY", "AppState", "InEffect", "app_state", "forget", "note_app", "remember_commit"]
