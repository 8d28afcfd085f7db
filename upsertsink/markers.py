"""Batch markers: Delta transaction identifiers plus the commit metadata written with them.

A committed batch leaves two things in the one commit that also holds its data:

- a ``txn`` action (appId = the sink's app id, version = the batch id): the marker Delta itself knows, which
  both delta-spark and deltalake read and write, so a table can move between engines;
- ``commitInfo.userMetadata``: a JSON object ``{"upsertsink": 1, "app_id", "batch_id", "fingerprint",
  "rows", "algorithm", "engine"}`` used to detect divergent replays and by ``upsertsink status``.

Both are read with deltalake (no JVM), whichever engine wrote them. The commit that recorded a batch is found
by a binary search over table versions on the ``txn`` version (which only grows for one app id), so finding
it costs the same however many commits other writers made since.
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
from upsertsink.fingerprint import Fingerprint
from upsertsink.tombstones import HELPER_DIRS, ROOT_DIR, deltalake_uri, stored_sequences

log = logging.getLogger(__name__)

METADATA_MARK = "upsertsink"
RECENT_COMMITS = 20  # looked at first: a replay is most often of one of the last batches
STATUS_HISTORY = 200

__all__ = ["Fingerprint", "Snapshot", "committed_fingerprint", "open_snapshot", "status"]


def encode_metadata(app_id: str, batch_id: int | None, fp: Fingerprint, engine: str, **extra: Any) -> dict[str, Any]:
    return {
        METADATA_MARK: 1,
        "app_id": app_id,
        "batch_id": batch_id,
        "engine": engine,
        "algorithm": fp.algorithm,
        "rows": fp.rows,
        "fingerprint": fp.value,
        **extra,
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


def _fingerprint_of(meta: dict[str, Any]) -> Fingerprint | None:
    try:
        return Fingerprint(str(meta["algorithm"]), int(meta["rows"]), str(meta["fingerprint"]))
    except (KeyError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------- the target as one attempt sees it


def _local(path: str) -> str | None:
    """The local folder of a path or file URI; None on object storage. deltalake's table URIs are
    percent-encoded (``hash#tag`` is ``file:///.../hash%23tag/``); a target given as a file URI holds no ``%``
    (refused by the sink), so decoding it changes nothing."""
    if "://" in path and not path.startswith("file://"):
        return None
    if path.startswith("file://"):
        from urllib.parse import unquote

        return unquote(path.removeprefix("file://"))
    return path


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
    local = _local(path)
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
    local = _local(path)
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

    The ledger (``ledger.py``) and the replay check read the log only through these methods, so another
    kind of snapshot (a table known only by name, through Spark SQL) can answer them too.
    """

    path: str
    table: Any | None
    storage_options: dict[str, str] | None = None
    _recent: list[dict[str, Any]] | None = field(default=None, repr=False)
    _all: list[dict[str, Any]] | None = field(default=None, repr=False)
    _at: int | None = field(default=None, repr=False)
    _id: str | None = field(default=None, repr=False)
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
        """The table's identity (Delta's ``metaData.id``): a table re-created at the same place has another."""
        return self._id

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
        return stored_sequences(self, keys, sequence, wanted)

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
        from upsertsink import clones

        return clones.inherited_record(self, info, app_id)

    def clone_source(self) -> Snapshot | None:
        """The source of a clone as it was at the cloned version (None: not a clone, or not readable)."""
        origin = self.commit_info(0)
        if origin is None or origin.get("operation") != "CLONE":
            return None
        from upsertsink.clones import _open, source_of

        path, version, _ = source_of(origin)
        if path is None or version is None:
            return None
        try:
            return _open(path, version, self.storage_options)
        except Exception:  # noqa: BLE001 - a source gone: its commits cannot be read
            return None

    def sidecar(self, relative: str) -> Any:
        """A folder the sink keeps beside the table (``_upsertsink/...``)."""
        from upsertsink.tombstones import _Folder

        return _Folder(self.path, relative, self.storage_options)


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


def _commit_file_stamp(uri: str, version: int, storage_options: dict[str, str] | None) -> tuple[int, float] | None:
    """(size, mtime) of one commit file: tells the handle's history from a table replaced at the same path."""
    local = _local(uri)
    try:
        if local is not None:
            st = os.stat(os.path.join(local, "_delta_log", f"{version:020d}.json"))
            return st.st_size, st.st_mtime
        info = _log_fs(uri, storage_options).get_file_info(f"_delta_log/{version:020d}.json")
        return (info.size, info.mtime.timestamp() if info.mtime else 0.0) if info.size is not None else None
    except (FileNotFoundError, OSError):
        return None


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
            if stamp is not None and _commit_file_stamp(table.table_uri, stamped, storage_options) == stamp:
                # deltalake's incremental update lists the whole _delta_log (2.9 ms at 2,000 entries, and Delta
                # keeps 30 days of them): when the next version's file does not exist, nothing is newer
                if _commit_file_stamp(table.table_uri, table.version() + 1, storage_options) is not None:
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
        cache[key] = (table, version, _commit_file_stamp(table.table_uri, version, snapshot.storage_options))
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
    from upsertsink import ledger

    snapshot = open_snapshot(path, storage_options)
    try:
        return ledger.app_state(snapshot, app_id).marker
    finally:
        keep(snapshot)


# ---------------------------------------------------------------- finding a committed batch's commit


@dataclass(frozen=True)
class Committed:
    """What the log says about one committed (app id, batch id): ``state`` is one of

    ``found`` (its commit and fingerprint are here), ``no-fingerprint`` (its commit carries none: an older
    algorithm, or another Delta writer), ``gone`` (the log no longer holds its commit).
    """

    state: str
    fingerprint: Fingerprint | None = None
    version: int | None = None
    tombstones_version: int | None = None  # the tombstone table's version the batch's writer had seen


def _ours(commit: dict[str, Any] | None, app_id: str, batch_id: int) -> dict[str, Any] | None:
    meta = decode_metadata(commit) if commit else None
    return meta if meta and meta.get("app_id") == app_id and meta.get("batch_id") == batch_id else None


def _committed(meta: dict[str, Any], version: int | None) -> Committed:
    found = _fingerprint_of(meta)
    return Committed("found" if found else "no-fingerprint", found, version, meta.get("tombstones_version"))


def committed_fingerprint(snapshot: Snapshot, app_id: str, batch_id: int) -> Committed:
    """Find the newest commit that recorded ``batch_id`` for ``app_id`` and its fingerprint (metadata only):
    the recent commits first, then the commit that moved the marker to it (a binary search), then, for a
    batch applied late (which does not move the marker), every commit the log holds."""
    for commit in snapshot.recent_commits():
        meta = _ours(commit, app_id, batch_id)
        if meta:
            return _committed(meta, commit.get("version"))
    try:
        version = snapshot.first_version_reaching(app_id, batch_id)
    except Exception as err:  # noqa: BLE001 - a version the log can no longer rebuild
        log.debug("searching the log of %s for batch %s: %s", snapshot.path, batch_id, err)
        version = None
    if version is not None:
        meta = _ours(snapshot.commit_info(version), app_id, batch_id)
        if meta:
            return _committed(meta, version)
    for commit in snapshot.all_commits():
        meta = _ours(commit, app_id, batch_id)
        if meta:
            return _committed(meta, commit.get("version"))
    if version is not None and snapshot.txn_at(app_id, version) == batch_id:
        return Committed("no-fingerprint", version=version)  # its marker, written by another Delta writer
    source = snapshot.clone_source() if hasattr(snapshot, "clone_source") else None
    if source is not None:  # a batch the clone took over: its commit is in the source's log
        found = committed_fingerprint(source, app_id, batch_id)
        if found.state != "gone":
            return Committed(found.state, found.fingerprint, None, None)
    return Committed("gone")


def _log_fs(uri: str, storage_options: dict[str, str] | None) -> Any:
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    if "://" not in uri:  # a local path: as the file URI deltalake itself gives (``#`` and ``?`` escaped)
        from pathlib import Path

        uri = Path(uri).absolute().as_uri()
    uri = deltalake_uri(uri)  # a target URI as given (the Spark engine's): its '#' is a character
    return pafs.PyFileSystem(DeltaStorageHandler(uri, storage_options))


def _log_files(snapshot: Snapshot) -> list[str]:
    import pyarrow.fs as pafs

    fs = _log_fs(snapshot.uri, snapshot.storage_options)
    return [info.base_name for info in fs.get_file_info(pafs.FileSelector("_delta_log"))]


def read_commit_info(uri: str, version: int, storage_options: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The commitInfo action of one table version, read from its log file; None when the log lacks it."""
    try:
        with _log_fs(uri, storage_options).open_input_stream(f"_delta_log/{version:020d}.json") as f:
            text = f.read().decode()
    except (FileNotFoundError, OSError):
        return None
    for line in text.splitlines():
        if line.strip().startswith('{"commitInfo"'):
            return json.loads(line)["commitInfo"]
    return None


def history(
    table: Any, limit: int | None, storage_options: dict[str, str] | None = None, at: int | None = None,
) -> list[dict[str, Any]]:
    """The commit infos of ``table`` from version ``at`` (default: the handle's) down (``limit`` of them, or all
    the log holds), newest first, each with its ``version``. deltalake's ``history()`` finds nothing for a
    folder whose name holds a ``#`` (a URL fragment to it), and fails on commit infos it cannot parse (Spark's
    SHALLOW CLONE writes statistics of -1): the log files are then read directly."""
    top = table.version() if at is None else at
    if top is None or top < 0:
        return []
    found: list[dict[str, Any]] = []
    # deltalake lists a handle's history from the table's *latest* commit, numbered down from the handle's
    # version: only a handle at the latest version can use it (no commit file after it)
    if top == table.version() and _commit_file_stamp(table.table_uri, top + 1, storage_options) is None:
        try:
            found = table.history(limit)
        except Exception as err:  # noqa: BLE001 - read the files ourselves
            log.debug("deltalake could not list the history of %s (%s): reading its log files", table.table_uri, err)
            found = []
    if found:
        return found
    out = []
    stop = -1 if limit is None else max(-1, top - limit)
    for version in range(top, stop, -1):
        info = read_commit_info(table.table_uri, version, storage_options)
        if info is None:
            if version < top and not out:
                continue
            break  # log cleanup removed the older ones
        out.append({**info, "version": version})
    return out


def restored_version(snapshot: Any, info: dict[str, Any], at: int) -> int | None:
    """The version the RESTORE commit ``info`` at version ``at`` went back to; None when the log cannot say.

    Both engines record ``operationParameters.version`` for a RESTORE to a version. Spark records a RESTORE
    to a timestamp as that timestamp in its session's time zone, and went back to the latest commit at or
    before it (Delta's rule: by commit time, the file's modification time made monotonic, or the commit's
    in-commit timestamp). That is resolved here for UTC and for this process's zone, and a candidate counts
    only when the number of files at it is the one the RESTORE reported (``numOfFilesAfterRestore``)."""
    params = info.get("operationParameters") or {}
    version = params.get("version")
    if version not in (None, "", "null"):
        try:
            found = int(version)
        except (TypeError, ValueError):
            return None
        return found if 0 <= found < at else None
    stamp = params.get("timestamp") or params.get("datetime")
    if not stamp:
        return None
    times = snapshot.commit_times(at - 1)
    metrics = info.get("operationMetrics") or {}
    expected = metrics.get("numOfFilesAfterRestore")
    for moment in _instants(str(stamp)):
        before = [v for v, t in times.items() if t <= moment]
        if not before:
            continue
        candidate = max(before)
        if expected is None or snapshot.files_at(candidate) == int(expected):
            return candidate
    return None


def _instants(stamp: str) -> list[int]:
    """Milliseconds since the epoch that a RESTORE's timestamp text may mean: UTC, then this process's zone."""
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(stamp.strip().replace(" ", "T", 1))
    except ValueError:
        return []
    if parsed.tzinfo is not None:
        return [int(parsed.timestamp() * 1000)]
    return list(dict.fromkeys([int(parsed.replace(tzinfo=UTC).timestamp() * 1000),
                               int(parsed.timestamp() * 1000)]))


def commit_times(snapshot: Snapshot, up_to: int) -> dict[int, int]:
    """Version -> commit time in milliseconds, as Delta orders commits for time travel (file modification
    times made strictly increasing), for the versions the log holds up to ``up_to``."""
    import pyarrow.fs as pafs

    fs = _log_fs(snapshot.uri, snapshot.storage_options)
    raw = {}
    for entry in fs.get_file_info(pafs.FileSelector("_delta_log")):
        name = entry.base_name
        if name.endswith(".json") and name[:20].isdigit() and int(name[:20]) <= up_to and entry.mtime is not None:
            raw[int(name[:20])] = int(entry.mtime.timestamp() * 1000)
    out, last = {}, None
    for version in sorted(raw):
        t = raw[version]
        info = snapshot.commit_info(version) or {}
        if isinstance(info.get("inCommitTimestamp"), int):
            t = info["inCommitTimestamp"]
        elif last is not None and t <= last:
            t = last + 1
        out[version] = last = t
    return out


def find_write(
    uri: str, token: str | None, after: int, latest: int, storage_options: dict[str, str] | None = None
) -> int | None:
    """The version in (after, latest] whose upsertsink metadata carries write token ``token``, newest last
    searched first from the oldest (a commit usually lands right after the version it read)."""
    if token is None:
        return None
    for version in range(after + 1, latest + 1):
        meta = decode_metadata(read_commit_info(uri, version, storage_options) or {})
        if meta and meta.get("write") == token:
            return version
    return None


# ---------------------------------------------------------------- status


def status(
    path: str, limit: int = 10, storage_options: dict[str, str] | None = None, version: int | None = None
) -> dict[str, Any]:
    """Table version, last batch id per app id seen in history, and the recent commits with counts; with
    ``version``, the table as it was at that version."""
    from deltalake import DeltaTable

    table = DeltaTable(deltalake_uri(path), version=version, storage_options=storage_options)
    at = table.version()
    # deltalake lists history from the opened version down (an old version's listing can end in a stray
    # entry numbered -1): keep real versions up to the one shown
    listed = [c for c in history(table, max(limit, STATUS_HISTORY), storage_options) if 0 <= c.get("version", 0) <= at]
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
                    "marker_only": _marker_only(meta, commit, metrics),
                    "late": late_batch(meta),
                    "reapplied": bool(meta and meta.get("reapplied")),
                    "inserted": _metric(
                        metrics, "num_target_rows_inserted", "numTargetRowsInserted", "num_added_rows", "numOutputRows"
                    ),
                    "updated": _metric(metrics, "num_target_rows_updated", "numTargetRowsUpdated"),
                    "deleted": _metric(metrics, "num_target_rows_deleted", "numTargetRowsDeleted"),
                    # files the write could read (the sink's file pruning), and files it rewrote
                    "files_scanned": meta.get("files_scanned") if meta else None,
                    "files_rewritten": _metric(
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
        "latest_version": None if version is None else DeltaTable(
            deltalake_uri(path), storage_options=storage_options).version(),
        **_app_markers(Snapshot(path, table, storage_options), app_ids),
        "commits": commits,
    }


def _app_markers(snapshot: Any, app_ids: list[str]) -> dict[str, Any]:
    """``batches`` (app -> last batch id as the table is at ``snapshot``), ``undone`` (app -> the batch
    ids a RESTORE undid and nothing committed since, as [low, high] ranges; apps with none left out) and
    ``ledger`` (app -> the summary of its batch ledger: committed ranges, how many ids are missing among them,
    undone, late; ``upsertsink batches`` shows the rest)."""
    from upsertsink import ledger
    from upsertsink.batch_ledger import AppLedger

    batches, undone, summaries = {}, {}, {}
    for app in app_ids:
        record = ledger.app_state(snapshot, app).record
        batches[app] = record.marker
        if record.undone:
            undone[app] = [[lo, hi] for lo, hi, _ in record.undone]
        summaries[app] = AppLedger.from_record(app, record).summary_dict()
    return {"batches": batches, "undone": undone, "ledger": summaries}


def late_batch(meta: dict[str, Any] | None) -> bool:
    """Was the commit's batch applied late (behind its app's marker, ``late_batches="apply"``)?"""
    if not meta:
        return False
    if "late_batch" in meta:
        return bool(meta["late_batch"])
    return meta.get("late") is not None  # commits made before the flag: every late-chain commit was late


def _marker_only(meta: dict[str, Any] | None, commit: dict[str, Any], metrics: dict[str, Any]) -> bool:
    if not meta or meta.get("batch_id") is None:
        return False
    if meta.get("marker_only"):
        return True
    # commits made before the flag existed: an append of no file
    added = _metric(metrics, "num_added_files", "numFiles")
    return commit.get("operation") == "WRITE" and (added == 0 or (not metrics and commit.get("version", 0) > 0))


def _metric(metrics: dict[str, Any], *names: str) -> int | None:
    for name in names:
        if name in metrics and metrics[name] is not None:
            return int(metrics[name])
    return None
