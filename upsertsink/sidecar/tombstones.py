"""Remembered deletes ("tombstones"): what keeps an older row, sent again later, from bringing a key back.

With ``delete_when`` and ``sequence_by``, every delete the sink applies is remembered as (key, sequence). The
tombstones of one key set (and sequence column) live in immutable parquet files inside the target folder,
``<target>/_upsertsink/tombstones/<scope>/``, where ``scope`` names the key columns and the sequence column
that recorded them: two sinks with different keys on one table never read each other's tombstones (issue
#22). Each file holds columns ``k0..kN`` (the key values, key columns in sorted-name order), ``sequence``,
``deleted_at_us``, ``expires_at_us`` (null: kept forever) and ``batch_id``. There is no log: a file is
written whole (a local file is renamed into place; an object-store PUT appears whole) and is never changed.

Why files and not a Delta table: a micro-batch that deletes something would otherwise pay a second Delta
commit, which costs as much as its MERGE (about 10 ms on delta-rs), and the table's log would grow by one
entry a batch. A file costs one small write, and a process keeps every tombstone of a scope in memory
(:class:`_Index`), reading only files it has not seen: a batch whose keys meet no tombstone reads nothing.

The rules (docs/reliability.md argues them in full):

1. A batch's deletes are recorded *before* its data commit. A writer that dies in between leaves a
   tombstone whose delete is not applied yet; re-sending the batch applies it.
2. A tombstone never suppresses the delete that recorded it: a delete at sequence S passes a tombstone at S.
3. A row of a later batch whose sequence is below a tombstone's (or equal to it, for a non-delete) is
   *stale*: it becomes a delete at the tombstone's sequence instead of an upsert.
4. After its data commit a writer looks again: a tombstone recorded concurrently for one of its keys, newer
   than the row it wrote, is applied at once by a repair commit (and again on a re-send of the batch).

Compaction (:meth:`TombstoneStore.compact`, run by writers when a scope holds many files, and by
``upsertsink maintain``) writes one file with the newest tombstone per key, leaving out expired ones, and
only then deletes the files it read: a crash in between leaves duplicates, never a gap; a file written
concurrently is not among those it deletes. Each tombstone expires by the retention of the sink that
recorded it, so one sink's shorter retention never purges another's tombstones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import faults
from upsertsink import fingerprint as fp
from upsertsink.sidecar.folder import LEGACY_DIR, ROOT_DIR, Folder, deltalake_uri, now_us, scope_id

log = logging.getLogger(__name__)

TOMBSTONE_ROOT = f"{ROOT_DIR}/tombstones"

SEQUENCE = "sequence"
DELETED_AT = "deleted_at_us"
EXPIRES_AT = "expires_at_us"
BATCH = "batch_id"
# Which write recorded a tombstone (files of earlier versions lack them: such tombstones always act): the app
# id, the table's identity (Delta's metaData.id; null for a write that created the table) and the version the
# write read. A tombstone stops acting when its table is not this one, or when a RESTORE undid its batch.
APP = "app"
TABLE = "table_id"
READ = "read_version"
PROVENANCE = (APP, TABLE, READ)
_HASH = "__hash"

# A scope with this many files is compacted by the next writer that records into it (the environment variable
# is for the fault-injection tests, which want compactions inside short feeds).
COMPACT_AT_FILES = int(os.environ.get("UPSERTSINK_COMPACT_TOMBSTONES_AT", "48"))
TEMP_GRACE_S = 3600  # a temp file older than this is a dead writer's; compaction removes it
LEGACY_MARK = "legacy-migrated.json"


def key_column(i: int) -> str:
    return f"k{i}"


# ---------------------------------------------------------------- a folder of files, local or on a store


# ---------------------------------------------------------------- what one process knows of a scope


@dataclass
class _Index:
    """Every tombstone of one scope this process has read (canonical columns plus a key hash), and the files
    they came from. Reads only files it has not seen; tombstones of files compacted away stay (the compacted
    file holds them too; duplicates and expired rows are dropped when the index grows)."""

    files: set[str] = field(default_factory=set)
    table: pa.Table | None = None
    rows_at_prune: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    by_hash: dict[int, list[int]] | None = None  # key hash -> rows of ``table`` (built on first lookup)

    def add(self, rows: pa.Table) -> None:
        start = 0 if self.table is None else self.table.num_rows
        self.table = rows if self.table is None else pa.concat_tables([self.table, rows], promote_options="permissive")
        if self.by_hash is not None:
            for i, h in enumerate(rows[_HASH].to_numpy().tolist(), start):
                self.by_hash.setdefault(h, []).append(i)

    def rows_for(self, key_hashes: np.ndarray) -> np.ndarray:
        """Rows of ``table`` whose key hash is one of ``key_hashes``."""
        assert self.table is not None
        if len(key_hashes) > 1000:  # a large batch: one hashed pass over the index (3x np.isin's sort at 200k)
            hit = pc.is_in(self.table[_HASH], value_set=pa.array(key_hashes, pa.uint64()))
            return np.flatnonzero(hit.to_numpy())
        if self.by_hash is None:
            self.by_hash = {}
            for i, h in enumerate(self.table[_HASH].to_numpy().tolist()):
                self.by_hash.setdefault(h, []).append(i)
        found = self.by_hash
        return np.array([i for h in key_hashes.tolist() for i in found.get(h, ())], dtype=np.int64)


_INDEXES: dict[tuple[str, str], _Index] = {}
_INDEXES_LOCK = threading.Lock()


def _index(uri: str, table_id: str) -> _Index:
    """The index of one scope folder for one table identity."""
    with _INDEXES_LOCK:
        return _INDEXES.setdefault((uri, table_id), _Index())


def forget_indexes() -> None:
    """Drop every in-memory index (tests use this to read as a new process would)."""
    with _INDEXES_LOCK:
        _INDEXES.clear()


def _identity(names: list[str]) -> str | None:
    """A scope's version: an identity of its data files (None when it has none)."""
    if not names:
        return None
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def _data_files(listing: Any) -> list[str]:
    return sorted(n for n in listing if n.endswith(".parquet") and not n.startswith("."))


class TombstoneStore:
    """The tombstones of one target for one sink's key and sequence columns.

    ``snapshot`` (the attempt's view of the table) gives the table's identity and, for a column-mapped table,
    the physical names the scope is filed under; ``in_effect`` (``table.lineage.InEffect``) says which recorded
    tombstones act on the table as it is now (rows of another table at this place, or of a batch a RESTORE
    undid, do not). Without them (maintenance) every tombstone counts.
    """

    def __init__(
        self, target: str, keys: tuple[str, ...], sequence: str, storage_options: dict[str, str] | None,
        snapshot: Any = None, in_effect: Any = None,
    ):
        self.target = target
        self.keys = tuple(keys)
        self.sequence = sequence
        self.storage_options = storage_options
        self.table_id = None if snapshot is None else snapshot.table_id
        self.in_effect = in_effect
        self.key_columns = [key_column(i) for i in range(len(keys))]
        physical = None if snapshot is None else snapshot.physical_names((*self.keys, sequence))
        logical = _Scope(target, self.keys, sequence, storage_options)
        if physical is None or physical == (*self.keys, sequence):
            self.scopes = [logical]
        else:  # filed by physical names; the scope by names (an earlier version's) is still read
            self.scopes = [_Scope(target, physical[:-1], physical[-1], storage_options), logical]
        primary = self.scopes[0]
        self.scope = primary.id
        self.folder = primary.folder
        self.path = self.folder.uri
        self._order = primary.order
        self._listing: list[str] | None = None
        self._seen_names: set[str] | None = None  # the data files the write's tombstone read came from
        self._recorded_name: str | None = None  # the file this write recorded its deletes in
        # a store without a table identity (a write creating the table, maintenance) keeps its index to
        # itself: a folder re-used by a new table never sees the old one's rows
        self._own: dict[str, _Index] = {}

    def _index(self, uri: str) -> _Index:
        if self.table_id is None:
            return self._own.setdefault(uri, _Index())
        return _index(uri, self.table_id)

    @classmethod
    def for_scope(
        cls, target: str, scope: str, keys: tuple[str, ...], sequence: str, storage_options: dict[str, str] | None,
    ) -> TombstoneStore:
        """The store of one scope folder as it is filed (maintenance: compaction works on canonical rows and
        needs no names)."""
        store = cls(target, keys, sequence, storage_options)
        folder = _Scope.__new__(_Scope)
        folder.id, folder.folder, folder.order = scope, Folder(target, f"{TOMBSTONE_ROOT}/{scope}", storage_options), \
            list(range(len(keys)))
        store.scopes = [folder]
        store.scope, store.folder, store.path, store._order = scope, folder.folder, folder.folder.uri, folder.order
        return store

    # ------------------------------------------------------------ reading

    def refresh(self) -> list[str]:
        """List the scopes' files and read those this process has not seen yet; returns the primary listing
        (the other scopes' files as ``<scope>/<name>``)."""
        out: list[str] = []
        for i, scope in enumerate(self.scopes):
            listing = self._refresh_scope(scope)
            out.extend(listing if i == 0 else (f"{scope.id}/{n}" for n in listing))
        self._listing = out
        return out

    def _refresh_scope(self, scope: _Scope) -> list[str]:
        index = self._index(scope.folder.uri)
        for attempt in range(5):
            listing = scope.folder.names()
            if not listing and scope is self.scopes[0]:
                self._migrate_legacy()
                listing = scope.folder.names()
            names = _data_files(listing)
            with index.lock:
                new = [n for n in names if n not in index.files]
                try:
                    parts = [self._canonical_read(scope, n) for n in new]
                except FileNotFoundError:
                    if attempt == 4:
                        raise
                    continue  # compacted away between the listing and the read: list again
                for part in parts:
                    if part is not None:
                        index.add(part)
                index.files = set(names)
                self._prune(index)
            return listing
        raise AssertionError("unreachable")

    def _canonical_read(self, scope: _Scope, name: str) -> pa.Table | None:
        table = scope.folder.read(name)
        if table is None:
            log.warning("ignoring the empty tombstone file %s/%s (the trace of a failed write)", scope.folder.uri, name)
            return None
        table = _with_columns(table)
        if scope.order != self._order:  # another scope's canonical key order: as this store's
            table = table.rename_columns([
                key_column(self._order[scope.order.index(int(c[1:]))]) if c in self.key_columns else c
                for c in table.column_names])
        table = table.select([*self.key_columns, *_COLUMNS]).replace_schema_metadata(None)
        hashes = fp.combine([fp.column_hash(table[c]) for c in self.key_columns], table.num_rows)
        return table.append_column(_HASH, pa.array(hashes, pa.uint64()))

    def _prune(self, index: _Index) -> None:
        """Keep the index small: when it doubled since the last time, drop expired and superseded rows."""
        table = index.table
        if table is None or table.num_rows < max(1024, 2 * index.rows_at_prune):
            return
        index.table = _newest_per_key(_live(table, now_us()), self.key_columns, keep_all_columns=True, by_write=True)
        index.rows_at_prune = index.table.num_rows
        index.by_hash = None

    def version(self) -> str | None:
        """An identity of the scopes' current files (None when they have none): it changes when any writer
        records or compacts; equal identities mean the same tombstones."""
        return _identity(_data_files(self.refresh()))

    def version_before_read(self) -> object:
        """Called before a write reads its tombstones; what it returns goes to :meth:`version_seen`. The file
        store needs nothing here (None)."""
        return None

    def version_seen(self, before: object, recorded: bool) -> object:
        """The store's version that the write's post-commit repair check compares with: the store as the write
        read it plus its own record. When the files now are exactly those the write read plus the one it
        recorded, that is the current version; otherwise (another writer recorded or compacted since the read)
        the identity of the files it read, which the check after the commit cannot meet, so the repair runs: a
        delete recorded between the read and now is applied, never outlived by this write's older upsert."""
        seen = self._seen_names
        if seen is None:
            return self.version()
        now = set(_data_files(self.refresh()))
        mine = {self._recorded_name} if recorded and self._recorded_name else set()
        return _identity(sorted(now)) if now == seen | mine else _identity(sorted(seen))

    def _rows(self) -> pa.Table | None:
        """Every row the scopes' indexes hold (this store's canonical columns)."""
        parts = []
        for scope in self.scopes:
            table = self._index(scope.folder.uri).table
            if table is not None and table.num_rows:
                parts.append(table)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="permissive")

    def _acting(self, rows: pa.Table) -> pa.Table:
        """The live rows that act on the table as it is now, newest per key."""
        rows = _live(rows, now_us())
        if self.in_effect is not None and rows.num_rows:
            rows = rows.filter(pa.array(self.in_effect.mask(rows)))
        return _newest_per_key(rows, self.key_columns)

    def read(self, ranges: dict[str, tuple[object, object]] | None = None) -> pa.Table:
        """Every live tombstone (``k0..kN`` in this sink's key order, ``sequence``), newest per key, whose keys
        fall in ``ranges`` (key -> (min, max))."""
        self._seen_names = set(_data_files(self.refresh()))
        table = self._rows()
        if table is None or table.num_rows == 0:
            return self._empty()
        out = self._to_sink_order(self._acting(table))
        for i, key in enumerate(self.keys):
            if ranges and key in ranges and ranges[key][0] is not None:
                low, high = ranges[key]
                try:
                    col = out[key_column(i)]
                    keep = pc.and_(pc.greater_equal(col, pa.scalar(low, col.type)),
                                   pc.less_equal(col, pa.scalar(high, col.type)))
                    out = out.filter(keep)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    pass  # a range of a type the keys cannot compare with: keep them all (a superset)
        return out

    def matching(
        self, key_hashes: np.ndarray | None, sample: pa.Table | None = None,
        ranges: dict[str, tuple[object, object]] | None = None,
    ) -> pa.Table:
        """The live tombstones whose key hash is among ``key_hashes`` (the batch's), newest per key; exact
        matching is the engine's join. With ``key_hashes`` None, every live tombstone in ``ranges``.

        ``sample`` (a table with the batch's key columns) gives the key types the tombstone keys are cast to.
        """
        if key_hashes is None:
            tombs = self.read(ranges)
        else:
            self._seen_names = set(_data_files(self.refresh()))
            hits = []
            for scope in self.scopes:
                index = self._index(scope.folder.uri)
                with index.lock:
                    if index.table is None or index.table.num_rows == 0 or len(key_hashes) == 0:
                        continue
                    rows = index.rows_for(key_hashes)
                    if len(rows):
                        hits.append(index.table.take(pa.array(rows)))
            if not hits:
                return self._empty()  # this batch meets no remembered delete
            found = hits[0] if len(hits) == 1 else pa.concat_tables(hits, promote_options="permissive")
            tombs = self._to_sink_order(self._acting(found))
        if sample is not None and tombs.num_rows:
            tombs = self._cast_keys(tombs, sample)
        return tombs

    def matching_prepared(self, prepared: Any, sample: pa.Table | None) -> pa.Table:
        """The live tombstones a prepared batch can meet: by its key hashes (or, without them, its key ranges)."""
        return self.matching(prepared.key_hashes, sample, prepared.key_ranges)

    def _empty(self) -> pa.Table:
        return pa.table({c: pa.array([], pa.null()) for c in [*self.key_columns, SEQUENCE]})

    def _to_sink_order(self, canonical: pa.Table) -> pa.Table:
        cols = [canonical[key_column(self._order[i])] for i in range(len(self.keys))]
        return pa.table([*cols, canonical[SEQUENCE]], names=[*self.key_columns, SEQUENCE])

    def _cast_keys(self, tombs: pa.Table, sample: pa.Table) -> pa.Table:
        for i, (kc, key) in enumerate(zip(self.key_columns, self.keys, strict=True)):
            want = sample.schema.field(key).type
            if tombs.schema.field(kc).type != want:
                try:
                    tombs = tombs.set_column(i, kc, pc.cast(tombs[kc], want))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue  # a remembered key that cannot be of this type cannot match this batch
        return tombs

    # ------------------------------------------------------------ writing

    def record(
        self, rows: pa.Table, batch_id: int | None, retention_us: int | None, app_id: str | None = None,
        read_version: int | None = None,
    ) -> None:
        """Remember deletes: ``rows`` has ``k0..kN`` (this sink's key order) and ``sequence``. One new file;
        the newest tombstone of a key wins when they are read. ``app_id`` and ``read_version`` say which write
        recorded them (with the store's table identity)."""
        if rows.num_rows == 0:
            return
        now = now_us()
        n = rows.num_rows
        canonical = [None] * len(self.keys)
        for i in range(len(self.keys)):
            canonical[self._order[i]] = rows[key_column(i)]
        table = pa.table(
            [*canonical, rows[SEQUENCE], pa.array([now] * n, pa.int64()),
             pa.array([None if retention_us is None else now + retention_us] * n, pa.int64()),
             pa.array([batch_id] * n, pa.int64()), pa.array([app_id] * n, pa.string()),
             pa.array([self.table_id] * n, pa.string()), pa.array([read_version] * n, pa.int64())],
            names=[*self.key_columns, *_COLUMNS],
        )
        name = f"t-{now:020d}-{uuid.uuid4().hex[:12]}.parquet"
        self.folder.write(name, table, self._file_metadata())
        self._recorded_name = name
        # into the index as written (not read back); then the files other writers added meanwhile
        index = self._index(self.path)
        hashes = fp.combine([fp.column_hash(table[c]) for c in self.key_columns], n)
        with index.lock:
            index.add(table.append_column(_HASH, pa.array(hashes, pa.uint64())))
            index.files.add(name)
        self.refresh()

    def copy_in(self, rows: pa.Table, name: str) -> None:
        """Write canonical rows (``k0..kN`` in canonical order, the other columns as stored) as file ``name``:
        tombstones a clone takes over from its source."""
        self.folder.write(name, _with_columns(rows).select([*self.key_columns, *_COLUMNS]), self._file_metadata())

    def all_rows(self) -> pa.Table | None:
        """Every stored row of this store's scopes, canonical, with provenance (read fresh from the files)."""
        self.refresh()
        rows = self._rows()
        return None if rows is None else rows.drop_columns([_HASH])

    def _file_metadata(self) -> dict[str, str]:
        return {"upsertsink.tombstones": json.dumps({"keys": sorted(self.keys), "sequence": self.sequence})}

    def needs_compaction(self) -> bool:
        listing = self._listing if self._listing is not None else self.folder.names()
        return len(_data_files(listing)) >= COMPACT_AT_FILES

    def compact(self) -> dict[str, int]:
        """Rewrite the scope's files as one: the newest live tombstone per key and write. The new file is written
        before the files it replaces are deleted, and only files it read are deleted (crash- and race-safe)."""
        listing = self.folder.list()
        names = _data_files(listing)
        temps = [n for n, mtime in listing.items() if n.startswith(".tmp-") and time.time() - mtime > TEMP_GRACE_S]
        report = {"files_before": len(names), "files_after": len(names), "tombstones": 0, "expired": 0,
                  "temp_files_removed": 0}
        for name in temps:
            self.folder.delete(name)
            report["temp_files_removed"] += 1
        primary = self.scopes[0]
        if len(names) <= 1:
            only = self._canonical_read(primary, names[0]) if names else None
            report["tombstones"] = 0 if only is None else only.num_rows
            return report
        index = self._index(self.path)
        with index.lock:
            # Every file listed is already in this process's index: its tombstones (and perhaps some of files
            # compacted away before, which those files' successors hold too) are all in memory.
            known = index.table if set(names) <= index.files and index.table is not None else None
        if known is not None:
            table = known
        else:
            parts = []
            for name in names:
                try:
                    part = self._canonical_read(primary, name)
                except FileNotFoundError:  # another compaction is at work: leave it to that one
                    log.info("tombstone compaction of %s skipped: a concurrent compaction removed %s", self.path, name)
                    return report
                if part is not None:
                    parts.append(part)
            if not parts:  # only empty files, the traces of failed writes: nothing to keep
                for old in names:
                    self.folder.delete(old)
                report["files_after"] = len(_data_files(self.folder.list()))
                return report
            table = pa.concat_tables(parts, promote_options="permissive")
        live = _live(table, now_us())
        # newest per key *and write*: which writes act can change (a RESTORE undoes one), so a tombstone is
        # never dropped for a newer one of another write
        newest = _newest_per_key(live, self.key_columns, keep_all_columns=True, by_write=True)
        report["expired"] = table.num_rows - live.num_rows
        report["tombstones"] = newest.num_rows
        name = f"c-{now_us():020d}-{uuid.uuid4().hex[:12]}.parquet"
        if newest.num_rows:
            self.folder.write(name, newest.drop_columns([_HASH]), self._file_metadata())
        faults.point("tombstones-compacted")
        for old in names:
            self.folder.delete(old)
        report["files_after"] = len(_data_files(self.folder.list()))
        log.info("compacted the tombstones of %s: %s", self.path, report)
        return report

    # ------------------------------------------------------------ upsertsink 0.1's tombstone table

    def _migrate_legacy(self) -> None:
        """Copy the tombstones of upsertsink 0.1's ``_upsertsink_tombstones`` Delta table into this scope,
        once (0.1 kept every key set's tombstones there; each scope now takes a copy of those that fit)."""
        legacy = Folder(self.target, LEGACY_DIR, self.storage_options)
        if legacy.local is not None and not os.path.isdir(os.path.join(legacy.local, "_delta_log")):
            return
        if LEGACY_MARK in self.folder.names():
            return
        from deltalake import DeltaTable

        try:
            table = DeltaTable(deltalake_uri(legacy.uri), storage_options=self.storage_options).to_pyarrow_table()
        except Exception:  # noqa: BLE001 - no legacy table (object stores: nothing to list first)
            return
        names = [*self.key_columns, SEQUENCE]
        if all(c in table.column_names for c in names) and f"k{len(self.keys)}" not in table.column_names:
            rows = table.select(names)
            if DELETED_AT in table.column_names:
                deleted = table[DELETED_AT]
            else:
                deleted = pa.array([now_us()] * table.num_rows, pa.int64())
            canonical = [None] * len(self.keys)
            for i in range(len(self.keys)):
                canonical[self._order[i]] = rows[key_column(i)]
            out = pa.table(
                [*canonical, rows[SEQUENCE], deleted, pa.nulls(table.num_rows, pa.int64()),
                 pa.nulls(table.num_rows, pa.int64())],
                names=[*self.key_columns, SEQUENCE, DELETED_AT, EXPIRES_AT, BATCH],
            )
            if out.num_rows:
                self.folder.write(f"c-{0:020d}-legacy.parquet", out, self._file_metadata())
        self.folder.write(LEGACY_MARK, pa.table({"migrated_at_us": [now_us()]}), {})
        log.info("copied %d tombstone(s) of upsertsink 0.1 into %s", table.num_rows, self.path)


# every column of a stored tombstone after its key columns
_COLUMNS = (SEQUENCE, DELETED_AT, EXPIRES_AT, BATCH, *PROVENANCE)
_TYPES = {EXPIRES_AT: pa.int64(), BATCH: pa.int64(), APP: pa.string(), TABLE: pa.string(), READ: pa.int64()}


def _with_columns(table: pa.Table) -> pa.Table:
    """A stored file's rows with every column of this version (a file of an earlier one lacks some)."""
    for c, kind in _TYPES.items():
        if c not in table.column_names:
            table = table.append_column(c, pa.nulls(table.num_rows, kind))
    return table


class _Scope:
    """One folder of tombstones: the key set it is filed under, and its canonical key order (``order[i]``:
    the canonical position of the store's i-th key)."""

    def __init__(self, target: str, keys: tuple[str, ...], sequence: str, storage_options: dict[str, str] | None):
        self.id = scope_id(tuple(keys), sequence)
        self.folder = Folder(target, f"{TOMBSTONE_ROOT}/{self.id}", storage_options)
        ordered = sorted(keys)
        self.order = [ordered.index(k) for k in keys]


def _live(table: pa.Table, now_us: int) -> pa.Table:
    expires = table[EXPIRES_AT]
    if expires.null_count == len(expires):
        return table
    return table.filter(pc.fill_null(pc.greater(expires, now_us), True))


def _newest_per_key(
    table: pa.Table, key_columns: list[str], keep_all_columns: bool = False, by_write: bool = False,
) -> pa.Table:
    """One row per key (with ``by_write``, per key and recording write: app, batch, table): the highest
    sequence (its longest expiry when equal, then the latest read version)."""
    if table.num_rows <= 1:
        return table
    group = [*key_columns, *((APP, BATCH, TABLE) if by_write else ())]
    key_columns = group
    order = [(c, "ascending") for c in key_columns] + [(SEQUENCE, "descending")]
    if by_write and READ in table.column_names:
        order.append((READ, "descending"))
    if EXPIRES_AT in table.column_names:
        table = table.set_column(
            table.schema.get_field_index(EXPIRES_AT), EXPIRES_AT,
            pc.fill_null(table[EXPIRES_AT], np.iinfo(np.int64).max),
        )
        order.append((EXPIRES_AT, "descending"))
    table = table.sort_by(order)
    keys = [table[c].combine_chunks() for c in key_columns]
    first = np.ones(table.num_rows, dtype=bool)
    same = np.ones(table.num_rows - 1, dtype=bool)
    for col in keys:
        a, b = col.slice(1), col.slice(0, table.num_rows - 1)
        eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
        same &= eq | both_null
    first[1:] = ~same
    out = table.filter(pa.array(first))
    if EXPIRES_AT in out.column_names:
        never = pc.equal(out[EXPIRES_AT], np.iinfo(np.int64).max)
        out = out.set_column(
            out.schema.get_field_index(EXPIRES_AT), EXPIRES_AT,
            pc.if_else(never, pa.scalar(None, pa.int64()), out[EXPIRES_AT]),
        )
    return out


def stale_mask(seq: pa.ChunkedArray, is_delete: pa.ChunkedArray, tomb_seq: pa.ChunkedArray) -> pa.ChunkedArray:
    """Rule 3 on Arrow: rows older than their key's tombstone, or as old and not themselves a delete."""
    older = pc.less(seq, tomb_seq)
    same_not_delete = pc.and_(pc.equal(seq, tomb_seq), pc.invert(is_delete))
    return pc.fill_null(pc.or_(older, same_not_delete), False)


