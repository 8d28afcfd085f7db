"""A table reached through its files (deltalake): the snapshot an attempt works on, and what is kept between
writes (open handles, markers per version, log entries), keyed by location *and* identity (``metaData.id``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from upsertsink.errors import NotADeltaTableError
from upsertsink.sidecar.folder import HELPER_DIRS, ROOT_DIR, deltalake_uri
from upsertsink.table.commit_log import (
    RECENT_COMMITS,
    commit_file_stamp,
    commit_times,
    find_write,
    history,
    identity,
    local_path,
    log_fs,
    metadata_id,
    read_commit_info,
    restored_version,
)

log = logging.getLogger(__name__)


# The name of the files Delta writers give table data (delta-rs and Spark alike), and of partition folders.
# While delta-rs writes one (object_store's local file system) it is staged as "<name>#<n>" and renamed into
# place, so a create in progress can show that name too.
_DATA_FILE = re.compile(r"^part-\d{5}-[0-9a-fA-F-]{36}-c\d{3}(\.[A-Za-z0-9]+)*\.parquet(#\d+)?$")


_PARTITION_DIR = re.compile(r"^[^=]+=.*$")


CREATING = "creating"


def mark_create(path: str) -> None:
    """Leave the sink's trace in a local target before it creates the table there: the data files a create
    writes appear before its log does, so another writer (or the same one, restarted after a crash) must tell
    a create in progress from a folder of foreign data."""
    local = local_path(path)
    if local is None:
        return
    folder = os.path.join(local, ROOT_DIR)
    os.makedirs(folder, exist_ok=True)
    marker = os.path.join(folder, CREATING)
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("a writer of upsertsink created the table here; data files without a _delta_log are its own\n")


def _create_leftovers(local: str, entries: list[str]) -> bool:
    """Are ``entries`` the data files of a table create that has not committed yet (still running, or killed
    before its log was written), by the sink's own trace? They are referenced by no log: the table is new."""
    if not os.path.exists(os.path.join(local, ROOT_DIR, CREATING)):
        return False
    return _create_leftovers_in(local, entries)


def _create_leftovers_in(folder: str, entries: list[str]) -> bool:
    """Every entry a Delta data file, or a partition folder holding only such files and folders."""
    for e in entries:
        full = os.path.join(folder, e)
        if os.path.isdir(full):
            if not _PARTITION_DIR.match(e) or not _create_leftovers_in(full, [n for n in os.listdir(full) if not n.startswith(".")]):
                return False
        elif not _DATA_FILE.match(e):
            return False
    return True


def check_target_path(path: str) -> None:
    """Refuse a local target that is a file, or a folder holding data that is not a Delta table.

    A folder that holds nothing but the sink's own helper data (a crash before the first data commit) is a
    new table, and so is one that holds the data files of the sink's own create beside them (a create racing
    this write, or one killed before its log was written: :func:`mark_create`).
    """
    local = local_path(path)
    if local is None:
        return
    if os.path.isfile(local):
        raise NotADeltaTableError(f"target {path} is a file, not a Delta table folder")
    if os.path.isdir(local) and not os.path.isdir(os.path.join(local, "_delta_log")):
        entries = [e for e in os.listdir(local) if not e.startswith(".") and e not in HELPER_DIRS]
        if entries and not _create_leftovers(local, entries):
            raise NotADeltaTableError(
                f"target {path} exists but is not a Delta table (no _delta_log; it holds {sorted(entries)[:5]}); "
                "choose an empty or new path, or convert it to Delta first"
            )


@dataclass
class Snapshot:
    """The target table at one version (deltalake), or no table yet, and the log questions the protocol asks.

    The lineage (``lineage.py``) and the replay check read the log only through these methods, so another
    kind of snapshot (a table known only by name, through Spark SQL) can answer them too.
    """

    path: str
    table: Any | None
    storage_options: dict[str, str] | None = None
    _recent: list[dict[str, Any]] | None = field(default=None, repr=False)
    _all: list[dict[str, Any]] | None = field(default=None, repr=False)
    _at: int | None = field(default=None, repr=False)
    _id: str | None = field(default=None, repr=False)
    _identity: str | None = field(default=None, repr=False)
    _infos: dict[int, dict[str, Any] | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.table is not None:
            self._at = self.table.version()
            self._id = self.table.metadata().id

    @property
    def exists(self) -> bool:
        return self.table is not None

    @property
    def version(self) -> int | None:
        """The version this snapshot was taken at (the handle itself moves on with the sink's own commits)."""
        return self._at

    @property
    def table_id(self) -> str | None:
        """The table's identity (the ``metaData.id`` it was created with): a table re-created at the same place,
        replaced or cloned has another; a write that changed its schema has not (:func:`commit_log.identity`)."""
        if self.table is None:
            return None
        if self._identity is None:
            key = (self.uri, self._id, -2)
            with _TXNS_LOCK:
                known = _ORIGINS.get(key)
            if known is None:
                known = identity(self, self._id, lambda v: metadata_id(self.uri, v, self.storage_options))
                with _TXNS_LOCK:
                    _ORIGINS[key] = known
            self._identity = known
        return self._identity

    @property
    def uri(self) -> str:
        return self.path if self.table is None else self.table.table_uri

    def last_batch(self, app_id: str) -> int | None:
        """The version of the table's ``txn`` for ``app_id`` (Delta's marker of the app), None if none.

        deltalake finds it by reading every commit since the last checkpoint, on every call (up to ~1.3 ms);
        markers are kept per table version instead, and carried over the sink's own commits (note_commit)."""
        if self.table is None:
            return None
        key = (self.uri, self._id, self._at)
        known = _TXNS.get(key)
        if known is not None and app_id in known:
            return known[app_id]
        value = self.table.transaction_version(app_id) if self.table.version() == self._at else self.txn_at(
            app_id, self._at)
        with _TXNS_LOCK:
            _TXNS.setdefault(key, {})[app_id] = value
            _TXNS.move_to_end(key)
            while len(_TXNS) > 4096:
                _TXNS.popitem(last=False)
        return value

    def stored_sequences(self, keys: tuple[str, ...], sequence: str | None, wanted: Any) -> Any:
        """The table's (k0..kN, sequence) for the keys in ``wanted`` (k0..kN), read with deltalake."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kc = [f"k{i}" for i in range(len(keys))]
        condition = None
        for k, c in zip(keys, kc, strict=True):
            part = pc.field(k).isin(wanted[c].combine_chunks())
            condition = part if condition is None else condition & part
        table = self.table
        if self.column_mapping():
            from deltalake import QueryBuilder

            # deltalake's Arrow reader returns nulls for column-mapped tables; DataFusion reads them right.
            cols = ", ".join('"' + c.replace('"', '""') + '"' for c in (*keys, sequence))
            rows = pa.table(QueryBuilder().register("t", table).execute(f"SELECT {cols} FROM t").read_all())
            rows = rows.filter(condition)
        else:
            rows = table.to_pyarrow_dataset().to_table(columns=[*keys, sequence], filter=condition)
        return rows.rename_columns([*kc, "sequence"])

    def column_mapping(self) -> dict[str, str]:
        """Logical -> physical column names of a column-mapped table; empty when the table maps no columns."""
        if self.table is None:
            return {}
        try:
            if self.table.metadata().configuration.get("delta.columnMapping.mode", "none") == "none":
                return {}
            return {f.name: str((f.metadata or {}).get("delta.columnMapping.physicalName") or f.name)
                    for f in self.table.schema().fields}
        except Exception:  # noqa: BLE001 - a schema deltalake cannot read: names as they are
            return {}

    def physical_names(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The physical names of ``names`` in a column-mapped table; None when the table maps no columns (or
        one of them is not a column of the table)."""
        mapping = self.column_mapping()
        if not mapping or any(n not in mapping for n in names):
            return None
        return tuple(mapping[n] for n in names)

    def find_write(self, token: str | None, after: int, latest: int) -> int | None:
        """The version in (after, latest] whose metadata carries write token ``token``."""
        return find_write(self.uri, token, after, latest, self.storage_options)

    def recent_commits(self) -> list[dict[str, Any]]:
        """The newest RECENT_COMMITS commit infos, newest first (each with its ``version``)."""
        if self.table is None:
            return []
        if self._recent is None:
            self._recent = history(self.table, RECENT_COMMITS, self.storage_options, self._at)
            for c in self._recent:
                self._infos.setdefault(c["version"], c)
        return self._recent

    def all_commits(self) -> list[dict[str, Any]]:
        """Every commit info the log still holds, newest first."""
        if self.table is None:
            return []
        if self._all is None:
            self._all = history(self.table, None, self.storage_options, self._at)
        return self._all

    def txn_at(self, app_id: str, version: int) -> int | None:
        from deltalake import DeltaTable

        table = DeltaTable(deltalake_uri(self.path), version=version, storage_options=self.storage_options)
        return table.transaction_version(app_id)

    def first_version_reaching(self, app_id: str, at_least: int) -> int | None:
        """The first table version whose ``txn`` for app_id is >= ``at_least`` (a binary search: the txn
        version of one app only grows); None when the log holds no such version. Raises when a version the
        search needs cannot be rebuilt any more (log cleanup)."""
        low, high = self.earliest_version(), self.version
        if low is None or high is None:
            return None
        reached = self.last_batch(app_id) if self.table.version() == high else self.txn_at(app_id, high)
        if reached is None or reached < at_least:
            return None
        while low < high:
            mid = (low + high) // 2
            reached = self.txn_at(app_id, mid)
            if reached is not None and reached >= at_least:
                high = mid
            else:
                low = mid + 1
        return high

    def earliest_version(self) -> int | None:
        versions = [int(n.split(".")[0]) for n in _log_files(self) if n.endswith(".json") and n[:20].isdigit()]
        return min(versions) if versions else None

    def commit_info(self, version: int) -> dict[str, Any] | None:
        """The commitInfo of one version, read from its log file; None when the log no longer holds it."""
        if self.table is None or self._at is None or version > self._at or version < 0:
            return None
        if version not in self._infos:
            if self._recent is None and version > self._at - RECENT_COMMITS:
                self.recent_commits()  # one read of the newest commits answers the usual questions
            if version not in self._infos:
                info = _cached_info(self.uri, self._id, version)
                if info is None:
                    found = read_commit_info(self.uri, version, self.storage_options)
                    info = None if found is None else {**found, "version": version}
                    if info is not None:
                        _keep_info(self.uri, self._id, version, info)
                self._infos[version] = info
        return self._infos[version]

    def restored_version(self, info: dict[str, Any], at: int) -> int | None:
        """The version the RESTORE commit ``info`` (at version ``at``) went back to; None when the log cannot
        say. A RESTORE to a version names it; one to a timestamp names the timestamp, resolved here as Delta
        resolves it (the latest commit at or before it, by commit time) and checked against the file count
        the RESTORE reported."""
        return restored_version(self, info, at)

    def origin_id(self) -> str | None:
        """The identity the table had at version 0 (another than now after a catalog REPLACE); None when the
        log no longer holds version 0."""
        if self.table is None:
            return None
        key = (self.uri, self._id, -1)
        with _TXNS_LOCK:
            known = _ORIGINS.get(key, "")
        if known != "":
            return known
        from deltalake import DeltaTable

        try:
            found = DeltaTable(deltalake_uri(self.path), version=0, storage_options=self.storage_options).metadata().id
        except Exception:  # noqa: BLE001 - version 0 cleaned up: nothing says the table was replaced since
            found = None
        with _TXNS_LOCK:
            _ORIGINS[key] = found
        return found

    def commit_times(self, up_to: int) -> dict[int, int]:
        return commit_times(self, up_to)

    def names_at(self, version: int) -> dict[str, str]:
        """Column names now -> their names at ``version``, for the columns of a column-mapped table renamed
        since (the same physical column); empty when none was, or the table maps no columns."""
        from deltalake import DeltaTable

        if self.table is None or self.table.metadata().configuration.get("delta.columnMapping.mode", "none") == "none":
            return {}
        try:
            then = DeltaTable(deltalake_uri(self.path), version=version, storage_options=self.storage_options)
        except Exception:  # noqa: BLE001 - the version is gone (log cleanup): no names to go by
            return {}

        def physical(table: Any) -> dict[str, str]:
            return {str((f.metadata or {}).get("delta.columnMapping.physicalName") or f.name): f.name
                    for f in table.schema().fields}

        now, before = physical(self.table), physical(then)
        return {name: before[p] for p, name in now.items() if p in before and before[p] != name}

    def files_at(self, version: int) -> int:
        from deltalake import DeltaTable

        return len(DeltaTable(deltalake_uri(self.path), version=version, storage_options=self.storage_options).files())

    def clone_state(self, info: dict[str, Any], app_id: str) -> Any:
        """What a CLONE commit gives an app: its source's record at the cloned version (a ledger Record), or
        a sentence saying why it cannot be known."""
        from upsertsink.table import clones

        return clones.inherited_record(self, info, app_id)

    def clone_source(self) -> Snapshot | None:
        """The source of a clone as it was at the cloned version (None: not a clone, or not readable)."""
        origin = self.commit_info(0)
        if origin is None or origin.get("operation") != "CLONE":
            return None
        from upsertsink.table.clones import _open, source_of

        path, version, _ = source_of(origin)
        if path is None or version is None:
            return None
        try:
            return _open(path, version, self.storage_options)
        except Exception:  # noqa: BLE001 - a source gone: its commits cannot be read
            return None

    def sidecar(self, relative: str) -> Any:
        """A folder the sink keeps beside the table (``_upsertsink/...``)."""
        from upsertsink.sidecar.folder import Folder

        return Folder(self.path, relative, self.storage_options)


# (table uri, identity, -1) -> the identity at version 0
_ORIGINS: dict[tuple[str, str | None, int], str | None] = {}


# (table uri, identity, version) -> commit info: a log entry never changes once written.
_INFOS: OrderedDict[tuple[str, str | None, int], dict[str, Any]] = OrderedDict()


def _cached_info(uri: str, table_id: str | None, version: int) -> dict[str, Any] | None:
    with _TXNS_LOCK:
        return _INFOS.get((uri, table_id, version))


def _keep_info(uri: str, table_id: str | None, version: int, info: dict[str, Any]) -> None:
    with _TXNS_LOCK:
        _INFOS[(uri, table_id, version)] = info
        _INFOS.move_to_end((uri, table_id, version))
        while len(_INFOS) > 8192:
            _INFOS.popitem(last=False)


# (table uri, identity, version) -> {app id: txn version}: markers as each version has them.
_TXNS: OrderedDict[tuple[str, str | None, int | None], dict[str, int | None]] = OrderedDict()


_TXNS_LOCK = threading.Lock()


def note_commit(snapshot: Snapshot, version: int | None, markers: dict[str, int]) -> None:
    """The sink committed ``version`` on top of ``snapshot``: when nothing came in between, the markers at
    ``version`` are the snapshot's with ``markers`` set, and need not be read from the log again."""
    if version is None or snapshot.version is None or version != snapshot.version + 1:
        return
    with _TXNS_LOCK:
        before = _TXNS.get((snapshot.uri, snapshot.table_id, snapshot.version))
        if before is None:
            return
        _TXNS[(snapshot.uri, snapshot.table_id, version)] = {**before, **markers}


# Open table handles, per thread (a DeltaTable is not shared between threads), kept between writes: a stream
# reads only the log entries written since its last batch (deltalake's incremental update), not the log from
# its last checkpoint on every batch.
_handles = threading.local()


MAX_HANDLES = 64


def _cache() -> OrderedDict[tuple[str, str], tuple[Any, int, tuple[int, float] | None]]:
    cache = getattr(_handles, "tables", None)
    if cache is None:
        cache = _handles.tables = OrderedDict()
    return cache


def forget_handles() -> None:
    """Drop this thread's open table handles and the markers and log entries kept (tests use it to read as a
    new process would)."""
    _cache().clear()
    with _TXNS_LOCK:
        _TXNS.clear()
        _INFOS.clear()
        _ORIGINS.clear()


def open_snapshot(path: str, storage_options: dict[str, str] | None = None) -> Snapshot:
    """The target's latest snapshot; refuses a path that is neither a Delta table nor new.

    A handle kept from an earlier write on this thread is *checked out* (taken from the cache) and brought up
    to date incrementally, unless the commit file of the version it held changed or went away (the table was
    replaced): then the table is opened again. The attempt owns the handle until it calls :func:`keep`, so
    nothing else on the thread moves the snapshot it commits on (Delta's conflict check relies on that).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    check_target_path(path)
    key = _key(path, storage_options)
    held = _cache().pop(key, None)
    if held is not None:
        table, stamped, stamp = held
        try:
            # the handle may have moved on by its own commits since; the version stamped then must be unchanged
            if stamp is not None and commit_file_stamp(table.table_uri, stamped, storage_options) == stamp:
                # deltalake's incremental update lists the whole _delta_log (2.9 ms at 2,000 entries, and Delta
                # keeps 30 days of them): when the next version's file does not exist, nothing is newer
                if commit_file_stamp(table.table_uri, table.version() + 1, storage_options) is not None:
                    table.update_incremental()
                return Snapshot(path, table, storage_options)
        except Exception as err:  # noqa: BLE001 - any doubt about a kept handle: open the table again
            log.debug("reopening %s: %s", path, err)
    try:  # opened directly: asking is_deltatable first read the log's listing twice
        table = DeltaTable(deltalake_uri(path), storage_options=storage_options)
    except TableNotFoundError:
        return Snapshot(path, None, storage_options)
    except Exception:
        if not DeltaTable.is_deltatable(deltalake_uri(path), storage_options=storage_options):
            return Snapshot(path, None, storage_options)
        raise
    return Snapshot(path, table, storage_options)


def keep(snapshot: Snapshot) -> None:
    """Give the snapshot's handle back for the next write on this thread (the newest one wins)."""
    table = snapshot.table
    if table is None or getattr(snapshot, "spark_only", False):  # a snapshot of a table's history (by name)
        return
    key = _key(snapshot.path, snapshot.storage_options)
    cache = _cache()
    held = cache.get(key)
    try:
        version = table.version()
        if held is not None and held[1] > version:
            return
        cache[key] = (table, version, commit_file_stamp(table.table_uri, version, snapshot.storage_options))
        cache.move_to_end(key)
    except Exception as err:  # noqa: BLE001 - a handle that cannot say its version is not kept
        log.debug("not keeping the handle of %s: %s", snapshot.path, err)
        return
    while len(cache) > MAX_HANDLES:
        cache.popitem(last=False)


def _key(path: str, storage_options: dict[str, str] | None) -> tuple[str, str]:
    return path, json.dumps(storage_options, sort_keys=True) if storage_options else ""


def latest_version(path: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The table's latest version (None: no table), through the kept handle."""
    snapshot = open_snapshot(path, storage_options)
    try:
        return snapshot.version
    finally:
        keep(snapshot)


def table_exists(path: str, storage_options: dict[str, str] | None = None) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(deltalake_uri(path), storage_options=storage_options)


def last_batch_id(path: str, app_id: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The last batch id committed for app_id as the table is now (the sink's record: a RESTORE moves it
    back, Delta's expiry of its ``txn`` does not), None if none or no table."""
    from upsertsink.table import lineage

    snapshot = open_snapshot(path, storage_options)
    try:
        return lineage.app_state(snapshot, app_id).marker
    finally:
        keep(snapshot)


def _log_files(snapshot: Snapshot) -> list[str]:
    import pyarrow.fs as pafs

    fs = log_fs(snapshot.uri, snapshot.storage_options)
    return [info.base_name for info in fs.get_file_info(pafs.FileSelector("_delta_log"))]


__all__ = ['Snapshot', 'check_target_path', 'forget_handles', 'keep', 'last_batch_id', 'latest_version', 'mark_create', 'note_commit', 'open_snapshot', 'table_exists']
