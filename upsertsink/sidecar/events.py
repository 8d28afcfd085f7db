"""The events of history tables (SCD type 2), kept beside the table: what lets a late event be placed.

A version row keeps only its latest event's untracked values, so the sink keeps every event it was sent in
immutable parquet files under ``<target>/_upsertsink/history/<scope>/``: ``p-<write token>.parquet`` written
before the data commit (pending), ``c-<write token>.parquet`` once a commit carrying that token is in the
table's log (promoted by the writer after its commit, or by any later reader that finds the token in the
log). So the commit is still the single point of truth: events of a write that never committed never count,
and events of one that did always do. Compaction merges the committed files into one.
"""

from __future__ import annotations

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

from upsertsink import batch as B
from upsertsink import fingerprint as fp
from upsertsink.sidecar.folder import Folder, folder_about, scope_id, scopes

log = logging.getLogger(__name__)


HISTORY_ROOT = "_upsertsink/history"


PENDING_PREFIX = "p-"


COMMITTED_PREFIX = "c-"


ABOUT = "upsertsink.history"  # parquet metadata key: the log's key and sequence columns


# A pending event file whose write is not in the log this long after it was written belongs to a writer that
# died before its commit (no attempt lives that long); readers ignore it until then, and delete it after.
PENDING_GRACE_S = 3600


# A log with this many committed files is compacted into one by the next writer (the environment variable is
# for the fault-injection tests, which want compactions inside short feeds).
COMPACT_AT_FILES = int(os.environ.get("UPSERTSINK_COMPACT_HISTORY_AT", "32"))


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

    ``snapshot`` gives the table's identity and its column mapping; ``in_effect`` (``table.lineage.InEffect``) says
    which logged writes count for the table as it is (not those of another table at this place, nor those of
    a batch a RESTORE undid). Without them (maintenance) every committed event counts."""

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
        self._physical = {} if snapshot is None else snapshot.column_mapping()  # logical -> physical, for a column-mapped table
        named = None if snapshot is None else snapshot.physical_names((*self.keys, sequence))
        filed = named if named is not None else (*self.keys, sequence)
        self.folder = Folder(target, f"{HISTORY_ROOT}/{scope_id(filed[:-1], filed[-1], history=2)}", storage_options)
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
        table = self._read_raw(name)
        if table is None:
            return
        raw = table.schema.metadata or {}
        base = raw.get(b"upsertsink.base_version", b"").decode()
        start = int(base) + 1 if base else 0
        end = snapshot.version if snapshot is not None and snapshot.exists else None
        found = None
        if end is not None and end >= start:
            found = snapshot.find_write(token, start - 1, end)
        if found is not None:
            log.info("promoting the events of committed write %s in %s", token, self.folder.uri)
            self.promote(table, token)
            known.parts.append(self._read_part(f"{COMMITTED_PREFIX}{token}.parquet"))
            known.files.add(f"{COMMITTED_PREFIX}{token}.parquet")
            return
        if time.time() - mtime > PENDING_GRACE_S:
            log.info("removing the events of write %s, never committed, from %s", token, self.folder.uri)
            self.folder.delete(name)


def logs_of(target: str, storage_options: dict[str, str] | None, snapshot: Any = None) -> list[EventLog]:
    """Every event log kept in a target (one per key set of a history sink that wrote it)."""
    out = []
    for scope in sorted(scopes(Folder(target, HISTORY_ROOT, storage_options))):
        folder = Folder(target, f"{HISTORY_ROOT}/{scope}", storage_options)
        about = folder_about(folder, ABOUT)
        if about is not None:
            events = EventLog(target, tuple(about["keys"]), about["sequence"], storage_options, snapshot)
            events.folder = folder  # as it is filed (by physical names in a column-mapped table)
            out.append(events)
    return out


def new_token() -> str:
    return uuid.uuid4().hex[:16]


__all__ = ["EventLog", "forget", "logs_of", "new_token", "unique_events"]
