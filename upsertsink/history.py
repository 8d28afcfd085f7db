"""History tables (SCD type 2): every version of a key as a row, exactly once whatever the arrival order.

A history table holds every batch column plus ``__START_AT`` and ``__END_AT`` (both of ``sequence_by``'s type).
Per key, the versions are a function of every event ever sent for that key, ordered by sequence (``fold``):

* an upsert whose tracked columns equal the open version's extends it (the other columns, and the sequence
  column, take the latest event's values); one whose tracked columns differ closes the open version at its
  sequence and opens a new one (``__START_AT`` = its sequence);
* a delete closes the version open at its sequence and opens nothing; with no version open it changes nothing
  (but it is remembered: an upsert sent later with a lower sequence opens a version that this delete closes);
* an upsert after a delete opens a new version;
* two different events with one key and one sequence are a ``DuplicateKeyError`` (an upsert and a delete at
  the same sequence included); the same event sent twice counts once.

Late events need the events a version absorbed, which the rows no longer hold (a version keeps only its latest
event's untracked values), so the sink keeps its own log of the events (:class:`EventLog`): immutable parquet
files under ``<target>/_upsertsink/history/<scope>/``, one per write, recorded before the data commit and
counted only once the write that recorded them is committed. A write reads the logged events of its own keys,
folds them with the batch's, and MERGEs the difference into the table's versions of those keys (on the key and
``__START_AT``): versions that changed are updated, new ones inserted, ones that no longer exist deleted, in
one commit with the batch's marker.
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

from upsertsink import batch as B
from upsertsink import fingerprint as fp
from upsertsink.errors import InvalidInputError, SchemaMismatchError, option
from upsertsink.spec import DELETE_FLAG

log = logging.getLogger(__name__)

START = "__START_AT"
END = "__END_AT"
HISTORY_COLUMNS = (START, END)
HISTORY_ROOT = "_upsertsink/history"
SCD_TYPES = (1, 2)
PENDING_PREFIX = "p-"
COMMITTED_PREFIX = "c-"
ABOUT = "upsertsink.history"  # parquet metadata key: the log's key and sequence columns
# A pending event file whose write is not in the log this long after it was written belongs to a writer that
# died before its commit (no attempt lives that long); readers ignore it until then, and delete it after.
PENDING_GRACE_S = 3600
# A log with this many committed files is compacted into one by the next writer (the environment variable is
# for the fault-injection tests, which want compactions inside short feeds).
COMPACT_AT_FILES = int(os.environ.get("UPSERTSINK_COMPACT_HISTORY_AT", "32"))


@dataclass(frozen=True)
class HistorySpec:
    """How a type-2 sink tracks history: which columns open a new version, and how nulls in updates count."""

    track: tuple[str, ...] | None = None
    track_except: tuple[str, ...] | None = None
    ignore_null_updates: bool = False

    def tracked(self, columns: list[str], keys: tuple[str, ...], sequence: str) -> list[str]:
        """The tracked columns of a batch with ``columns`` (checked: each named column must be there)."""
        payload = [c for c in columns if c not in keys and c != sequence and c != DELETE_FLAG]
        if self.track is not None:
            missing = [c for c in self.track if c not in columns]
            if missing:
                raise SchemaMismatchError(f"{option('track_history')} names column(s) {missing} the batch does not have")
            return [c for c in payload if c in self.track]
        if self.track_except is not None:
            missing = [c for c in self.track_except if c not in columns]
            if missing:
                raise SchemaMismatchError(
                    f"{option('track_history_except')} names column(s) {missing} the batch does not have"
                )
            return [c for c in payload if c not in self.track_except]
        return payload


def check_options(
    scd_type: Any, sequence_by: str | None, keys: tuple[str, ...], track: Any, track_except: Any,
) -> tuple[int, HistorySpec | None]:
    """Validate the history options of a sink (a ValueError, as InvalidInputError, for a bad combination)."""
    if isinstance(scd_type, bool) or scd_type not in SCD_TYPES:
        raise InvalidInputError(f"{option('scd_type')} must be 1 or 2, got {scd_type!r}")
    if track is not None and track_except is not None:
        raise InvalidInputError(
            f"give {option('track_history')} or {option('track_history_except')}, not both"
        )
    lists = {}
    for name, value in (("track_history", track), ("track_history_except", track_except)):
        if value is None:
            lists[name] = None
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(c, str) and c for c in value):
            raise InvalidInputError(f"{option(name)} must be a list of column names, got {value!r}")
        bad = [c for c in value if c in keys or c == sequence_by]
        if bad:
            raise InvalidInputError(
                f"{option(name)} names key or sequence column(s) {bad}: a version is of one key, and its sequence "
                "always changes"
            )
        lists[name] = tuple(value)
    if scd_type == 1:
        if track is not None or track_except is not None:
            raise InvalidInputError(
                f"{option('track_history')} and {option('track_history_except')} need {option('scd_type')}=2"
            )
        return 1, None
    if sequence_by is None:
        raise InvalidInputError(
            f"{option('scd_type')}=2 needs {option('sequence_by')}: versions are ordered by it, and late events are "
            "placed inside the history by it"
        )
    for name in HISTORY_COLUMNS:
        if name in keys or name == sequence_by:
            raise InvalidInputError(f"{name} is the history table's own column; it cannot be a key or the sequence")
    return 2, HistorySpec(lists["track_history"], lists["track_history_except"])


def data_columns(target: list[Any] | None, request: Any) -> list[Any] | None:
    """The table's columns a batch is checked against: a history table's own START/END left out. A history
    sink needs a history table, and a latest-row sink refuses one (it would write rows without versions)."""
    if target is None:
        return None
    names = {c.name for c in target}
    is_history = START in names and END in names
    if request.history is not None and not is_history:
        raise SchemaMismatchError(
            f"table {request.target} is not a history table (it has no {START}/{END} columns): a sink with "
            f"{option('scd_type')}=2 writes a table of its own. Nothing was written."
        )
    if request.history is None and is_history:
        raise SchemaMismatchError(
            f"table {request.target} is a history table (SCD type 2: it has {START} and {END}); write it with "
            f"{option('scd_type')}=2 and its {option('sequence_by')}. Nothing was written."
        )
    return [c for c in target if c.name not in HISTORY_COLUMNS] if is_history else target


# ---------------------------------------------------------------- the events of one batch


def prepare_events(table: pa.Table, keys: tuple[str, ...], sequence: str, flags: pa.ChunkedArray | None) -> pa.Table:
    """The batch's events (its rows with the delete flag), the same event sent twice counting once; two
    different events with one key and one sequence are a DuplicateKeyError."""
    for name in HISTORY_COLUMNS:
        if name in table.column_names:
            raise SchemaMismatchError(
                f"the batch has a column {name!r}: the history table keeps that column itself (it is filled from "
                f"{sequence!r}). Drop it from the batch; nothing was written."
            )
    if DELETE_FLAG not in table.column_names:
        if flags is None:
            flags = pa.chunked_array([pa.array(np.zeros(table.num_rows, bool))])
        table = table.append_column(pa.field(DELETE_FLAG, pa.bool_()), flags)
    return unique_events(table, keys, sequence)


def unique_events(events: pa.Table, keys: Any, sequence: str, by: Any = ()) -> pa.Table:
    """One row per (key, sequence): exact repeats collapse; different events at one (key, sequence) raise.
    With ``by`` (columns saying which write logged an event), per (key, sequence, those columns): the same
    event logged by two writes stays twice, compared without them."""
    if events.num_rows < 2:
        return events
    hasher = fp.Hasher(events, exclude=list(by))
    rows = hasher.rows()
    ids = fp.combine([fp.column_hash(events[c]) for c in (*keys, sequence, *by)], events.num_rows)
    order = np.lexsort((rows, ids))
    ids_sorted, rows_sorted = ids[order], rows[order]
    same_row = np.zeros(len(order), bool)
    same_row[1:] = (ids_sorted[1:] == ids_sorted[:-1]) & (rows_sorted[1:] == rows_sorted[:-1])
    keep = order[~same_row]
    if len(keep) == events.num_rows:
        kept_ids = ids
    else:
        events, kept_ids = events.take(pa.array(np.sort(keep))), ids[np.sort(keep)]
    uniq, counts = np.unique(kept_ids, return_counts=True)
    if (counts > 1).any():
        clash = np.isin(kept_ids, uniq[counts > 1])
        rows = events.filter(pa.array(clash)).select([*keys, sequence]).to_pylist()
        examples = sorted({(*(r[k] for k in keys), r[sequence]) for r in rows}, key=repr)
        raise B.duplicate_error(
            (*keys, sequence), examples,
            f"two different events for one key at one {sequence!r} (an upsert and a delete included): the history "
            "cannot order them",
        )
    return events


# ---------------------------------------------------------------- the history of keys


def fold(
    events: pa.Table, keys: tuple[str, ...], sequence: str, columns: list[str], tracked: list[str],
    ignore_null_updates: bool, seq_type: pa.DataType,
) -> pa.Table:
    """The versions (``columns`` plus START and END) that in-order arrival of ``events`` produces, per key.

    Vectorised over the events sorted by (key, sequence): an upsert opens a version when it is the key's first
    event, follows a delete, or its tracked columns differ from the event before it (an extension has the open
    version's tracked values, so the event before is as good as the open version); a version's row is its last
    upsert, its END the sequence of the key's next event (a delete, or the next version's opener).
    """
    fields = [events.schema.field(c) for c in columns] + [pa.field(START, seq_type), pa.field(END, seq_type)]
    schema = pa.schema(fields)
    n = events.num_rows
    if n == 0:
        return schema.empty_table()
    ev = events.take(_order(events, keys, sequence))
    kh = fp.combine([fp.column_hash(ev[k]) for k in keys], n)
    first = np.ones(n, bool)
    first[1:] = kh[1:] != kh[:-1]
    is_del = np.asarray(pc.fill_null(ev[DELETE_FLAG], False).to_numpy(zero_copy_only=False), bool)
    ups = ~is_del
    after_delete = np.r_[True, is_del[:-1]]
    seg_start = ups & (first | after_delete)
    positions = np.arange(n)
    if ignore_null_updates:  # a null keeps the open version's value: forward fill within runs of upserts
        seg_begin = np.maximum.accumulate(np.where(seg_start, positions, -1))
        for c in columns:
            if c in keys or c == sequence or ev[c].null_count == 0:
                continue
            valid = np.asarray(pc.is_valid(ev[c]).to_numpy(zero_copy_only=False), bool)
            last_valid = np.maximum.accumulate(np.where(valid, positions, -1))
            take = np.where((last_valid >= seg_begin) & (last_valid >= 0), last_valid, positions)
            ev = ev.set_column(ev.schema.get_field_index(c), ev.schema.field(c), ev[c].take(pa.array(take)))
    differs = np.zeros(n, bool)
    if tracked:
        th = fp.combine([fp.column_hash(ev[c]) for c in tracked], n)
        differs[1:] = th[1:] != th[:-1]
    opener = ups & (seg_start | differs)
    ends_here = np.r_[opener[1:] | is_del[1:] | first[1:], True]
    lasts = np.nonzero(ups & ends_here)[0]
    starts = np.maximum.accumulate(np.where(opener, positions, -1))[lasts]
    closed = np.r_[~first[1:], False][lasts]
    seq = pc.cast(ev[sequence], seq_type)
    end_at = seq.take(pa.array(np.minimum(lasts + 1, n - 1)))
    end_at = pc.if_else(pa.array(closed), end_at, pa.nulls(len(lasts), seq_type))
    out = ev.take(pa.array(lasts)).select(columns)
    out = out.append_column(fields[-2], seq.take(pa.array(starts))).append_column(fields[-1], end_at)
    return out.cast(schema)


def _order(events: pa.Table, keys: tuple[str, ...], sequence: str) -> pa.Array:
    """Row order by key, then sequence (Arrow sorts every type a key column may have)."""
    return pc.sort_indices(events, sort_keys=[*((k, "ascending") for k in keys), (sequence, "ascending")])


def source_rows(new: pa.Table, known: pa.Table, stored: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The MERGE source: the versions of ``new`` that changed, plus the delete of every stored version of these
    keys whose (key, START) is gone from ``new``.

    A version of ``new`` is unchanged when ``known`` (the versions the logged events alone give) holds it
    exactly and the table stores it with the same START and END (``stored``: the keys, START and END of the
    stored versions of these keys): a version whose boundaries moved is always sent."""
    ident = [*keys, START]
    bounds = [*keys, START, END]

    def ids(table: pa.Table, cols: list[str]) -> np.ndarray:
        if table.num_rows == 0:
            return np.zeros(0, np.uint64)
        return fp.combine([fp.column_hash(pc.cast(table[c], new.schema.field(c).type)) for c in cols], table.num_rows)

    same = np.isin(fp.Hasher(new, exclude=[]).rows(), fp.Hasher(known, exclude=[]).rows()) if (
        new.num_rows and known.num_rows) else np.zeros(new.num_rows, bool)
    same &= np.isin(ids(new, bounds), ids(stored, bounds))
    upserts = new.filter(pa.array(~same))
    upserts = upserts.append_column(pa.field(DELETE_FLAG, pa.bool_()), pa.array(np.zeros(upserts.num_rows, bool)))
    if stored.num_rows == 0:
        return upserts
    gone = stored.filter(pa.array(~np.isin(ids(stored, ident), ids(new, ident))))
    if gone.num_rows == 0:
        return upserts
    rows = pa.table({
        c: (pc.cast(gone[c], new.schema.field(c).type) if c in ident else pa.nulls(gone.num_rows, new.schema.field(c).type))
        for c in new.column_names
    })
    rows = rows.append_column(pa.field(DELETE_FLAG, pa.bool_()), pa.array(np.ones(gone.num_rows, bool)))
    return pa.concat_tables([upserts, rows.cast(upserts.schema)])


def stored_versions(table: Any, keys: tuple[str, ...], wanted: pa.Table, columns: list[str]) -> pa.Table:
    """The table's stored versions (``columns``) of the keys in ``wanted`` (a table of the key columns)."""
    condition = None
    for k in keys:
        part = pc.field(k).isin(wanted[k].combine_chunks().unique())
        condition = part if condition is None else condition & part
    if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        from deltalake import QueryBuilder

        cols = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        rows = pa.table(QueryBuilder().register("t", table).execute(f"SELECT {cols} FROM t").read_all())
        rows = rows.filter(condition)
    else:
        rows = table.to_pyarrow_dataset().to_table(columns=columns, filter=condition)
    if len(keys) > 1 and rows.num_rows:  # the per-column filter lets through key combinations not asked for
        rows = rows.join(wanted.select(list(keys)).group_by(list(keys)).aggregate([]), keys=list(keys), join_type="left semi")
        rows = rows.select(columns)
    return rows


# ---------------------------------------------------------------- the event log


def scope_id(keys: tuple[str, ...], sequence: str) -> str:
    """The folder of a key set's events: by the columns' names, or in a column-mapped table by their physical
    names (stable under ``RENAME COLUMN``)."""
    text = json.dumps({"keys": sorted(keys), "sequence": sequence, "history": 2}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Which write logged an event (events of earlier versions lack them, and always count): its app id and batch
# id, the table's identity, the version it read. They travel with the rows, through compaction.
P_APP, P_BATCH, P_TABLE, P_READ = "__upsertsink_app", "__upsertsink_batch", "__upsertsink_table", "__upsertsink_read"
PROVENANCE = {P_APP: "app", P_BATCH: "batch_id", P_TABLE: "table_id", P_READ: "read_version"}
# parquet metadata: how an event file names its columns ("physical": by physical name; a JSON object: its
# logical names then -> physical names; absent: by the names the table had, which an earlier version wrote)
NAMES = "upsertsink.names"


@dataclass
class _Known:
    """The committed event files of one log this process has read (columns by physical name)."""

    files: set[str] = field(default_factory=set)
    parts: list[pa.Table] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_KNOWN: dict[tuple[str, str], _Known] = {}
_KNOWN_LOCK = threading.Lock()


def forget() -> None:
    with _KNOWN_LOCK:
        _KNOWN.clear()


class EventLog:
    """The events of one history table for one key set: ``c-<write>.parquet`` files of committed writes, and
    ``p-<write>.parquet`` files of writes not known to be committed yet.

    ``snapshot`` gives the table's identity and its column mapping; ``in_effect`` (``ledger.InEffect``) says
    which logged writes count for the table as it is (not those of another table at this place, nor those of
    a batch a RESTORE undid). Without them (maintenance) every committed event counts."""

    def __init__(
        self, target: str, keys: tuple[str, ...], sequence: str, storage_options: dict[str, str] | None,
        snapshot: Any = None, in_effect: Any = None,
    ):
        from upsertsink.tombstones import _Folder, physical_names

        self.target = target
        self.keys = tuple(keys)
        self.sequence = sequence
        self.storage_options = storage_options
        self.table_id = None if snapshot is None else snapshot.table_id
        self.in_effect = in_effect
        self._physical = _mapping(snapshot)  # logical -> physical, for a column-mapped table
        named = physical_names(snapshot, (*self.keys, sequence)) if snapshot is not None else None
        filed = named if named is not None else (*self.keys, sequence)
        self.folder = _Folder(target, f"{HISTORY_ROOT}/{scope_id(filed[:-1], filed[-1])}", storage_options)
        self._own: _Known | None = None

    def _known(self) -> _Known:
        if self.table_id is None:  # no identity yet (maintenance): nothing kept for other writes
            if self._own is None:
                self._own = _Known()
            return self._own
        with _KNOWN_LOCK:
            return _KNOWN.setdefault((self.folder.uri, self.table_id), _Known())

    def record(
        self, events: pa.Table, token: str, base_version: int | None, app_id: str | None = None,
        batch_id: int | None = None,
    ) -> None:
        """Write the events of the write ``token`` as pending (before its data commit)."""
        n = events.num_rows
        events = events.append_column(P_APP, pa.array([app_id] * n, pa.string())) \
            .append_column(P_BATCH, pa.array([batch_id] * n, pa.int64())) \
            .append_column(P_TABLE, pa.array([self.table_id] * n, pa.string())) \
            .append_column(P_READ, pa.array([-1 if base_version is None else base_version] * n, pa.int64()))
        meta = {"upsertsink.base_version": "" if base_version is None else str(base_version),
                "upsertsink.written_at": str(time.time()), NAMES: json.dumps(self._physical), **self._about()}
        self.folder.write(f"{PENDING_PREFIX}{token}.parquet", events, meta)

    def promote(self, events: pa.Table, token: str) -> None:
        """The write ``token`` is committed: its events count from now on (a crash before this leaves the
        pending file, which a reader promotes when it finds the write in the log)."""
        pending, committed = f"{PENDING_PREFIX}{token}.parquet", f"{COMMITTED_PREFIX}{token}.parquet"
        if self.folder.local is not None:  # a rename: atomic, and no second write of the events
            try:
                os.replace(os.path.join(self.folder.local, pending), os.path.join(self.folder.local, committed))
                return
            except FileNotFoundError:
                pass  # a reader promoted it first (it writes the committed file, then removes this one)
        table = self.folder.read(pending)
        if table is None:
            table = events
        self.folder.write(committed, table, {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()})
        self.folder.delete(pending)

    def _about(self) -> dict[str, str]:
        """What every event file says of its log (``upsertsink maintain`` finds the logs by it)."""
        return {ABOUT: json.dumps({"keys": list(self.keys), "sequence": self.sequence})}

    def events_for(self, wanted: pa.Table, snapshot: Any) -> pa.Table | None:
        """Every committed event that counts of the keys in ``wanted`` (a table of the key columns), under the
        table's column names now; None when none."""
        known = self._refresh(snapshot)
        with known.lock:
            parts = list(known.parts)
        if not parts:
            return None
        logical = {p: name for name, p in self._physical.items()}
        keys = [self._physical.get(k, k) for k in self.keys]
        probe = wanted.select(list(self.keys)).rename_columns(keys).group_by(keys).aggregate([])
        found = []
        for part in parts:  # the events' keys have the table's types, as the batch's do (both cast to them)
            hit = part.join(probe, keys=keys, join_type="left semi")
            if hit.num_rows:
                found.append(hit)
        if not found:
            return None
        events = pa.concat_tables(found, promote_options="permissive")
        if self.in_effect is not None and P_APP in events.column_names:
            view = events.select(list(PROVENANCE)).rename_columns(list(PROVENANCE.values()))
            events = events.filter(pa.array(self.in_effect.mask(view)))
        events = events.drop_columns([c for c in PROVENANCE if c in events.column_names])
        if events.num_rows == 0:
            return None
        return events.rename_columns([logical.get(c, c) for c in events.column_names])

    def _read_part(self, name: str) -> pa.Table | None:
        """One event file, its columns by physical name (FileNotFoundError propagates: listed again)."""
        table = self.folder.read(name)
        if table is None:
            return None
        raw = (table.schema.metadata or {}).get(NAMES.encode())
        table = table.replace_schema_metadata(None)
        said = json.loads(raw) if raw else None
        if said == "physical":
            return table
        mapping = said if isinstance(said, dict) else self._physical  # an earlier version's: the names now
        return table.rename_columns([mapping.get(c, c) for c in table.column_names])

    def _refresh(self, snapshot: Any) -> _Known:
        known = self._known()
        for attempt in range(5):
            listing = self.folder.list()
            with known.lock:
                if any(name not in listing for name in known.files):
                    known.files, known.parts = set(), []  # compacted by another writer: read the log again
                try:
                    for name in sorted(listing):
                        if not name.endswith(".parquet") or name in known.files:
                            continue
                        if name.startswith(COMMITTED_PREFIX):
                            table = self._read_part(name)
                            if table is not None:
                                known.parts.append(table)
                            known.files.add(name)
                        elif name.startswith(PENDING_PREFIX):
                            token = name[len(PENDING_PREFIX):-len(".parquet")]
                            if f"{COMMITTED_PREFIX}{token}.parquet" in listing:
                                continue  # promoted; the pending file is being removed
                            self._settle(name, token, listing[name], snapshot, known)
                except FileNotFoundError:
                    if attempt == 4:
                        raise
                    continue  # promoted or compacted between the listing and the read: list again
            return known
        raise AssertionError("unreachable")

    def committed_files(self) -> int:
        with _KNOWN_LOCK:
            known = _KNOWN.get((self.folder.uri, self.table_id)) if self.table_id is not None else self._own
        return 0 if known is None else len(known.files)

    def compact(self, snapshot: Any = None) -> int:
        """Write every committed event in one file, then delete the files it replaces (a crash in between
        leaves each event twice, which counts once); returns the number of files replaced. With the target's
        ``snapshot``, pending files of committed writes are promoted first. Every event is kept, whichever
        write logged it (which writes count can change: a RESTORE undoes one)."""
        from upsertsink import faults

        known = self._refresh(snapshot)
        with known.lock:
            files, parts = sorted(known.files), list(known.parts)
        if len(files) < 2:
            return 0
        keys = [self._physical.get(k, k) for k in self.keys]
        sequence = self._physical.get(self.sequence, self.sequence)
        merged = unique_events(pa.concat_tables(parts, promote_options="permissive"), keys, sequence,
                               by=[c for c in PROVENANCE if any(c in p.column_names for p in parts)])
        name = f"{COMMITTED_PREFIX}{new_token()}.parquet"
        self.folder.write(name, merged, {**self._about(), NAMES: json.dumps("physical")})
        faults.point("events-compacted")
        for old in files:
            self.folder.delete(old)
        with known.lock:
            known.files, known.parts = {name}, [merged]
        log.info("compacted %d event files of %s into one", len(files), self.folder.uri)
        return len(files)

    def _read_raw(self, name: str) -> pa.Table | None:
        # FileNotFoundError propagates: the file was promoted (or compacted) meanwhile, and the listing is
        # read again, where its committed file is (skipping it would lose a committed write's events)
        return self.folder.read(name)

    def _settle(self, name: str, token: str, mtime: float, snapshot: Any, known: _Known) -> None:
        """A pending file: promote it when its write is in the log, delete it when its writer is long dead."""
        from upsertsink import markers

        table = self._read_raw(name)
        if table is None:
            return
        raw = table.schema.metadata or {}
        base = raw.get(b"upsertsink.base_version", b"").decode()
        start = int(base) + 1 if base else 0
        end = snapshot.version if snapshot is not None and snapshot.exists else None
        found = None
        if end is not None and end >= start:
            found = markers.find_write(snapshot.uri, token, start - 1, end, self.storage_options)
        if found is not None:
            log.info("promoting the events of committed write %s in %s", token, self.folder.uri)
            self.promote(table, token)
            known.parts.append(self._read_part(f"{COMMITTED_PREFIX}{token}.parquet"))
            known.files.add(f"{COMMITTED_PREFIX}{token}.parquet")
            return
        if time.time() - mtime > PENDING_GRACE_S:
            log.info("removing the events of write %s, never committed, from %s", token, self.folder.uri)
            self.folder.delete(name)


def _mapping(snapshot: Any) -> dict[str, str]:
    """Logical -> physical column names of a column-mapped table (empty otherwise)."""
    table = getattr(snapshot, "table", None)
    if table is None or getattr(snapshot, "spark_only", False):
        return {}
    try:
        if table.metadata().configuration.get("delta.columnMapping.mode", "none") == "none":
            return {}
        return {f.name: str((f.metadata or {}).get("delta.columnMapping.physicalName") or f.name)
                for f in table.schema().fields}
    except Exception:  # noqa: BLE001 - a schema deltalake cannot read: names as they are
        return {}


def logs_of(target: str, storage_options: dict[str, str] | None, snapshot: Any = None) -> list[EventLog]:
    """Every event log kept in a target (one per key set of a history sink that wrote it)."""
    from upsertsink.maintenance import _scopes, folder_about
    from upsertsink.tombstones import _Folder

    out = []
    for scope in sorted(_scopes(_Folder(target, HISTORY_ROOT, storage_options))):
        folder = _Folder(target, f"{HISTORY_ROOT}/{scope}", storage_options)
        about = folder_about(folder, ABOUT)
        if about is not None:
            events = EventLog(target, tuple(about["keys"]), about["sequence"], storage_options, snapshot)
            events.folder = folder  # as it is filed (by physical names in a column-mapped table)
            out.append(events)
    return out


def new_token() -> str:
    return uuid.uuid4().hex[:16]
