"""The record of committed batch ids per app id, read along the table's lineage.

Delta's transaction identifier (``txn``: app id -> version) is a high-water mark, and not even a reliable
one: it says the highest batch id an app committed, not which ids below it were committed; a ``RESTORE``
leaves it where it was although the commits that set it are undone; and Delta drops it after
``delta.setTransactionRetentionDuration``. So the sink keeps its own record, and that record is the source
of truth (DESIGN.md: "The sink's record of committed batch ids is its source of truth").

Every commit the sink makes for an app carries, in its commit metadata, a compact :class:`Record` of that
app: the batch ids committed so far, its own included (``"batches": [[0, 41], [43, 43]]``), a ``floor``
below which an id outside the ranges is *unknown* rather than *never committed* (a table whose early
history the log no longer holds), the ids a ``RESTORE`` undid (``"undone": [[lo, hi, version]]``) and, of
the committed ids, those applied late (``"batches_late"``, issue #48's ledger; absent when none). It
also carries the version the writer read (``read_version``) and the table's identity (``table_id``,
Delta's ``metaData.id``).

The app's record at a version V is the fold of its commits along V's *lineage*: from V down, a RESTORE
commit jumps to the version it went back to (the commits in between are undone), a commit that replaced the
table (``CREATE OR REPLACE``, or a commit of another identity) ends it, and a ``CLONE`` continues in the
source at the cloned version. The fold needs no old log entries in the common case: the newest commit of
the app carries the whole record, exact when its writer read the version right before it; when other
commits came in between (a racing commit of the app's other chain, a RESTORE), the walk goes on down to
the previous exact record and adds what it passed. Results are kept per (table, identity, app, version), so
a stream reads no history between its own batches.

Two chains of commits set ``txn`` markers:

- the **normal chain**: ``txn(app id) = batch id``, for a batch above Delta's ``txn`` of the app;
- the **late chain**: ``txn(upsertsink-late:<app id>) = counter``, for every other batch: applied below the
  marker (``late_batches="apply"``), applied again after a RESTORE undid it, or sent to a table that was
  replaced while Delta kept the app's ``txn``. delta-spark skips a ``txnVersion`` at or below the table's,
  so such a batch cannot move the normal chain.

Commits of one chain conflict with each other (Delta's check on a shared ``txn`` app id); the two chains do
not, which is why a record is exact only when its writer read the version right before it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

LATE_PREFIX = "upsertsink-late:"
MAX_RANGES = 256  # beyond this, the oldest ranges are dropped and the floor rises above them (bounded metadata)
ALL = 2**63 - 1  # a floor meaning "no id is known"

COMMITTED, NEVER, UNKNOWN, UNDONE = "committed", "never", "unknown", "undone"

# Operations that give a table a new identity in its own log (a catalog table replaced by name).
REPLACE_OPERATIONS = frozenset({
    "CREATE OR REPLACE TABLE", "REPLACE TABLE", "CREATE OR REPLACE TABLE AS SELECT", "REPLACE TABLE AS SELECT",
})

Ranges = tuple[tuple[int, int], ...]


def late_app(app_id: str) -> str:
    """The transaction identifier that counts an app's commits off the normal chain."""
    return LATE_PREFIX + app_id


# ---------------------------------------------------------------- sets of ids as sorted, disjoint ranges


def _merged(ranges: Any) -> Ranges:
    out: list[list[int]] = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _minus(ranges: Ranges, removed: Ranges) -> Ranges:
    """Ids of ``ranges`` not in ``removed`` (both sorted and disjoint)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        start = lo
        for rlo, rhi in removed:
            if rhi < start or rlo > hi:
                continue
            if rlo > start:
                out.append((start, rlo - 1))
            start = max(start, rhi + 1)
            if start > hi:
                break
        if start <= hi:
            out.append((start, hi))
    return tuple(out)


def _holds(ranges: Ranges, batch_id: int) -> bool:
    i = bisect.bisect_right(ranges, (batch_id, ALL)) - 1
    return i >= 0 and ranges[i][0] <= batch_id <= ranges[i][1]


def describe_ranges(ranges: Ranges, last: int | None = 5) -> str:
    shown = ranges if last is None else ranges[-last:]
    text = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in shown)
    return ("..., " if len(shown) < len(ranges) else "") + text


@dataclass(frozen=True)
class Record:
    """Batch ids of one app: committed (``ranges``), undone by a RESTORE and not committed since (``undone``:
    (lo, hi, the RESTORE's version)); below ``floor`` an id in neither is unknown (``unknown`` says why).
    ``late``: the committed ids that were applied late (below the app's marker), as far as records say (commits
    made before the sink recorded them carry none)."""

    ranges: Ranges = ()
    floor: int = 0
    undone: tuple[tuple[int, int, int], ...] = ()
    unknown: str | None = None
    late: Ranges = ()

    def __contains__(self, batch_id: int) -> bool:
        return _holds(self.ranges, batch_id)

    def undone_by(self, batch_id: int) -> int | None:
        """The version of the RESTORE that undid ``batch_id`` (not committed since), else None."""
        for lo, hi, at in self.undone:
            if lo <= batch_id <= hi:
                return at
        return None

    def verdict(self, batch_id: int) -> str:
        if batch_id in self:
            return COMMITTED
        if self.undone_by(batch_id) is not None:
            return UNDONE
        return NEVER if batch_id >= self.floor else UNKNOWN

    @property
    def marker(self) -> int | None:
        """The highest batch id committed (or, below an unknown floor, possibly committed); None if none."""
        top = self.ranges[-1][1] if self.ranges else None
        if self.floor and self.floor != ALL and (top is None or self.floor - 1 > top):
            top = self.floor - 1
        return top

    def add(self, batch_id: int, late: bool = False) -> Record:
        one = ((batch_id, batch_id),)
        undone = tuple((lo, hi, at) for lo, hi, at in _split_undone(self.undone, one))
        lates = _merged((*self.late, *one)) if late else _minus(self.late, one)
        return Record(_merged((*self.ranges, *one)), self.floor, undone, self.unknown, lates)._bounded()

    def restored(self, before: Record, at: int, to: int) -> Record:
        """This record (the state a RESTORE at version ``at`` went back to, version ``to``) after that RESTORE,
        from ``before`` (the state right before it): ids committed then and not now are undone at ``at``."""
        known_lost = _minus(before.ranges, self.ranges)
        if self.floor:
            known_lost = _minus(known_lost, ((0, self.floor - 1),))
        still = _split_undone(before.undone, self.ranges)
        undone = [*self.undone, *still, *((lo, hi, at) for lo, hi in known_lost)]
        unknown = self.unknown
        if unknown is not None:
            unknown = f"a RESTORE at version {at} went back to version {to}, and {unknown}"
        return Record(self.ranges, self.floor, _tidy_undone(undone), unknown, self.late)._bounded()

    def _bounded(self) -> Record:
        """At most MAX_RANGES committed ranges (the oldest become unknown) and as many undone and late ones."""
        ranges, floor = self.ranges, self.floor
        if len(ranges) > MAX_RANGES:
            dropped = ranges[: len(ranges) - MAX_RANGES]
            ranges = ranges[len(ranges) - MAX_RANGES:]
            floor = max(floor, dropped[-1][1] + 1)
        undone = self.undone[-MAX_RANGES:]
        late = self.late[-MAX_RANGES:]
        if floor and late and late[0][0] < floor:
            late = _minus(late, ((0, floor - 1),))  # below the floor nothing is known, late or not
        if (ranges, floor, undone, late) == (self.ranges, self.floor, self.undone, self.late):
            return self
        return Record(ranges, floor, undone, self.unknown, late)

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batches": [list(r) for r in self.ranges]}
        if self.floor:
            out["batches_floor"] = self.floor
        if self.undone:
            out["undone"] = [list(u) for u in self.undone]
        if self.late:
            out["batches_late"] = [list(r) for r in self.late]
        return out

    @staticmethod
    def decode(meta: dict[str, Any] | None) -> Record | None:
        """The record in a commit's upsertsink metadata; None when the commit carries none (older versions)."""
        if not meta or not isinstance(meta.get("batches"), list):
            return None
        try:
            ranges = _merged((int(lo), int(hi)) for lo, hi in meta["batches"])
            floor = int(meta.get("batches_floor") or 0)
            undone = _tidy_undone((int(lo), int(hi), int(at)) for lo, hi, at in meta.get("undone") or ())
            late = _merged((int(lo), int(hi)) for lo, hi in meta.get("batches_late") or ())
        except (TypeError, ValueError):
            return None
        return Record(ranges, floor, undone, None, late)._bounded()

    def describe(self) -> str:
        return f"[{describe_ranges(self.ranges)}]" if self.ranges else "none"


def _split_undone(undone: Any, removed: Ranges) -> list[tuple[int, int, int]]:
    out = []
    for lo, hi, at in undone:
        out.extend((a, b, at) for a, b in _minus(((lo, hi),), removed))
    return out


def _tidy_undone(undone: Any) -> tuple[tuple[int, int, int], ...]:
    """Undone ranges sorted and disjoint; where two overlap, the newer RESTORE's version stays."""
    out: list[tuple[int, int, int]] = []
    for lo, hi, at in sorted(undone, key=lambda u: -u[2]):
        for a, b in _minus(((lo, hi),), _merged((x, y) for x, y, _ in out)):
            out.append((a, b, at))
    return tuple(sorted(out))


# ---------------------------------------------------------------- an app's state at one version


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
    """The app's record and markers at ``snapshot`` (a :class:`upsertsink.markers.Snapshot`, or a table known
    by name only)."""
    if not snapshot.exists:
        return EMPTY
    txn = snapshot.last_batch(app_id)
    late = snapshot.last_batch(late_app(app_id))
    if txn is None and late is None and not _may_have_written(snapshot, app_id):
        return EMPTY
    record = _Walk(snapshot, app_id, txn).state(snapshot.version)
    return AppState(record, txn, late)


# ---------------------------------------------------------------- apps a table has seen

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
    from upsertsink.tombstones import _Folder

    key = (snapshot.uri, app_id)
    if key in _KNOWN_APPS:
        return
    folder = _Folder(target, APPS_DIR, storage_options)
    name = _app_file(app_id)
    if folder.local is None or name not in folder.names():
        folder.write_bytes(name, json.dumps({"app_id": app_id}).encode())
    with _lock:
        _KNOWN_APPS.add(key)


# ---------------------------------------------------------------- which recorded writes act


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


# ---------------------------------------------------------------- the walk along a lineage


class _Walk:
    """The fold of one app's commits along the lineage of a snapshot's table."""

    def __init__(self, snapshot: Any, app_id: str, txn: int | None):
        self.snapshot = snapshot
        self.app_id = app_id
        self.txn = txn
        self.uri = snapshot.uri
        self.table_id = snapshot.table_id

    def state(self, top: int) -> Record:
        # (id, late) of commits passed whose writers may not have seen everything below
        pending: list[tuple[int, bool]] = []
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
                pending.append((int(meta["batch_id"]), _late(meta)))
            v -= 1
        record = base
        for batch_id, late in reversed(pending):
            record = record.add(batch_id, late)
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


def _late(meta: dict[str, Any]) -> bool:
    from upsertsink.markers import late_batch

    return late_batch(meta)


def _metadata(info: dict[str, Any]) -> dict[str, Any] | None:
    from upsertsink.markers import decode_metadata

    return decode_metadata(info)


__all__ = [
    "COMMITTED", "NEVER", "UNDONE", "UNKNOWN", "AppState", "Record", "app_state", "forget", "late_app",
    "remember_commit",
]
