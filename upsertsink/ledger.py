"""The record of committed batch ids per app id: what tells a replay from a batch that was never written.

Delta's transaction identifier (``txn``: app id -> version) is a high-water mark: it says the highest batch
id an app committed, not which ids below it were committed. A stream restarted with a new checkpoint, a
reused app id or a backfill sends ids below the mark that were never written; skipping them loses data.

So every commit the sink makes for an app carries, in its commit metadata, a compact :class:`Record` of the
batch ids committed for that app so far, its own included: ranges (``"batches": [[0, 41], [43, 43]]``) and a
``floor`` below which an id outside the ranges is *unknown* rather than *never committed* (for tables whose
early history the log no longer holds). Reading it takes the newest commit of the app, not old log entries,
so the answer stays exact after Delta's log cleanup.

Two chains of commits carry records:

- the **normal chain**: commits that move the app's marker, ``txn(app id) = batch id``;
- the **late chain**: batches applied below the marker (``late_batches="apply"``). They cannot move the
  marker (delta-spark skips a ``txnVersion`` at or below the table's), so they are committed under a second
  transaction identifier, ``upsertsink-late:<app id>``, whose version counts late commits.

Commits of one chain conflict with each other (Delta's check on a shared ``txn`` app id), so each chain's
newest record includes every id its chain committed. The app's record is the union of both chains' newest
records: an id in neither is never committed when it is at or above the normal chain's floor.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

LATE_PREFIX = "upsertsink-late:"
MAX_RANGES = 256  # beyond this, the oldest ranges are dropped and the floor rises above them (bounded metadata)

COMMITTED, NEVER, UNKNOWN = "committed", "never", "unknown"


def late_app(app_id: str) -> str:
    """The transaction identifier that counts an app's late commits."""
    return LATE_PREFIX + app_id


@dataclass(frozen=True)
class Record:
    """Batch ids committed for one app: sorted, disjoint, non-adjacent ``ranges``; below ``floor``, an id
    outside the ranges is unknown (the log that could tell is gone)."""

    ranges: tuple[tuple[int, int], ...] = ()
    floor: int = 0

    def __contains__(self, batch_id: int) -> bool:
        i = bisect.bisect_right(self.ranges, (batch_id, float("inf"))) - 1
        return i >= 0 and self.ranges[i][0] <= batch_id <= self.ranges[i][1]

    def verdict(self, batch_id: int) -> str:
        if batch_id in self:
            return COMMITTED
        return NEVER if batch_id >= self.floor else UNKNOWN

    def add(self, batch_id: int) -> Record:
        return self.union(Record(((batch_id, batch_id),), self.floor))

    def union(self, other: Record, floor: int | None = None) -> Record:
        """Ids committed in either; the floor is ``floor`` when given, else this record's."""
        merged: list[list[int]] = []
        for lo, hi in sorted((*self.ranges, *other.ranges)):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        new_floor = self.floor if floor is None else floor
        if len(merged) > MAX_RANGES:  # keep the metadata small: the oldest ids become unknown
            dropped = merged[: len(merged) - MAX_RANGES]
            merged = merged[len(merged) - MAX_RANGES :]
            new_floor = max(new_floor, dropped[-1][1] + 1)
        return Record(tuple((lo, hi) for lo, hi in merged), new_floor)

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batches": [list(r) for r in self.ranges]}
        if self.floor:
            out["batches_floor"] = self.floor
        return out

    @staticmethod
    def decode(meta: dict[str, Any] | None) -> Record | None:
        """The record in a commit's upsertsink metadata; None when the commit carries none (older versions)."""
        if not meta or not isinstance(meta.get("batches"), list):
            return None
        try:
            ranges = tuple(sorted((int(lo), int(hi)) for lo, hi in meta["batches"]))
            floor = int(meta.get("batches_floor") or 0)
        except (TypeError, ValueError):
            return None
        return Record().union(Record(ranges, floor), floor=floor)

    def describe(self) -> str:
        shown = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges[-5:])
        more = "..., " if len(self.ranges) > 5 else ""
        return f"[{more}{shown}]" if self.ranges else "none"


@dataclass(frozen=True)
class AppState:
    """What the table says about one app at one snapshot: its marker, late counter and record."""

    marker: int | None  # the last batch id of the normal chain (the txn version), None if none
    late_counter: int | None  # the late chain's txn version, None if no late batch was ever applied
    record: Record

    @property
    def next_late(self) -> int:
        return 0 if self.late_counter is None else self.late_counter + 1


# (table uri, app id, marker, late counter) -> record. A marker and a counter name one commit each, so an
# entry never goes stale; the sink's own commits fill it, so a stream reads no history between its batches.
_CACHE: OrderedDict[tuple[str, str, int | None, int | None], Record] = OrderedDict()
_CACHE_SIZE = 1024
_lock = threading.Lock()


def remember(uri: str, app_id: str, marker: int | None, late_counter: int | None, record: Record) -> None:
    with _lock:
        _CACHE[(uri, app_id, marker, late_counter)] = record
        _CACHE.move_to_end((uri, app_id, marker, late_counter))
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def app_state(snapshot: Any, app_id: str) -> AppState:
    """The app's marker, late counter and record at ``snapshot`` (a :class:`upsertsink.markers.Snapshot`)."""
    marker = snapshot.last_batch(app_id)
    late = snapshot.last_batch(late_app(app_id))
    if marker is None and late is None:
        return AppState(None, None, Record())
    key = (snapshot.uri, app_id, marker, late)
    with _lock:
        cached = _CACHE.get(key)
    if cached is not None:
        return AppState(marker, late, cached)
    record = _read_record(snapshot, app_id, marker, late)
    remember(snapshot.uri, app_id, marker, late, record)
    return AppState(marker, late, record)


def _read_record(snapshot: Any, app_id: str, marker: int | None, late: int | None) -> Record:
    normal = _chain_record(snapshot, app_id, app_id, marker) if marker is not None else Record()
    if late is None:
        return normal if normal is not None else _rebuild(snapshot, app_id, marker)
    late_record = _chain_record(snapshot, app_id, late_app(app_id), late)
    if normal is None or late_record is None:
        return _rebuild(snapshot, app_id, marker)
    # The late chain holds every late id; the normal chain vouches for its own ids from its floor up.
    return normal.union(late_record, floor=normal.floor)


def _is_chain_commit(meta: dict[str, Any] | None, app_id: str, txn_app: str, version: int) -> bool:
    if not meta or meta.get("app_id") != app_id:
        return False
    if txn_app == app_id:
        return meta.get("late") is None and meta.get("batch_id") == version
    return meta.get("late") == version


def _chain_record(snapshot: Any, app_id: str, txn_app: str, version: int) -> Record | None:
    """The record in the commit that set ``txn(txn_app) = version``; None when that commit is gone or
    carries no record (written by an older upsertsink or by another Delta writer)."""
    from upsertsink.markers import decode_metadata

    for commit in snapshot.recent_commits():
        meta = decode_metadata(commit)
        if _is_chain_commit(meta, app_id, txn_app, version):
            return Record.decode(meta)
    try:
        found = snapshot.first_version_reaching(txn_app, version)
    except Exception as err:  # noqa: BLE001 - a version the log can no longer rebuild
        log.debug("searching the log of %s for %s=%s: %s", snapshot.uri, txn_app, version, err)
        return None
    if found is None:
        return None
    meta = decode_metadata(snapshot.commit_info(found) or {})
    return Record.decode(meta) if _is_chain_commit(meta, app_id, txn_app, version) else None


def _rebuild(snapshot: Any, app_id: str, marker: int | None) -> Record:
    """The record from every commit the log still holds (tables written before records existed, or whose
    newest commit for the app was cleaned up): exact when the log reaches back to version 0; otherwise ids
    at or below the marker that no retained commit names are unknown."""
    from upsertsink.markers import decode_metadata

    record = Record()
    for commit in snapshot.all_commits():
        meta = decode_metadata(commit)
        if not meta or meta.get("app_id") != app_id:
            continue
        if isinstance(meta.get("batch_id"), int):
            record = record.add(meta["batch_id"])
        found = Record.decode(meta)
        if found is not None:
            record = record.union(found)
    complete = snapshot.earliest_version() == 0
    floor = 0 if complete else (marker + 1 if marker is not None else 0)
    log.info(
        "rebuilt the batch record of %s on %s from its log (%s): %s",
        app_id, snapshot.uri, "complete" if complete else f"ids up to {floor - 1} not named are unknown",
        record.describe(),
    )
    return Record(record.ranges, floor)


__all__ = ["COMMITTED", "NEVER", "UNKNOWN", "AppState", "Record", "app_state", "late_app", "remember"]
