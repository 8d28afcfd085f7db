"""The batch ledger (issue #48): which batch ids each app committed to a table, which are missing, which a
RESTORE undid, which were applied late, and, per batch, the commit that holds it.

The summary of an app is the sink's own record (:func:`upsertsink.table.lineage.app_state`): the committed ranges,
the floor below which ids are unknown, the ids a RESTORE undid and the ids applied late travel in the app's
newest commit, so reading them never replays the log (a stream's table with 100k commits, or one whose early
log Delta's cleanup removed, costs the same). The per-batch detail (version, commit time, row counts, late,
marker only, fingerprint) comes from the commits themselves: they are read along the table's lineage (a
RESTORE jumps to the version it went back to; what lay between is undone), newest first, in growing windows,
only as far back as the batches asked for need; a batch whose commit the log no longer holds is listed as
the record says (committed, no detail).

Which apps wrote a table: the sink's list beside it (``_upsertsink/apps/``), the apps a clone took over from
its source, and the apps of the recent commits; a table known by name only (Spark-only mode) has no files
beside it, so its whole history (``DESCRIBE HISTORY``) names them. The late chain's transaction ids
(``upsertsink-late:<app>``) are not apps of their own: every commit's metadata names its app.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from upsertsink.errors import InvalidInputError, NotADeltaTableError
from upsertsink.table import records as rec
from upsertsink.table.commit_log import decode_metadata, late_batch, marker_only, metric
from upsertsink.table.lineage import APPS_DIR, app_state

log = logging.getLogger(__name__)

DETAIL_DEFAULT = 50  # per app, the newest batch ids that get a per-batch record unless more are asked for
ALL = "all"

Ranges = tuple[tuple[int, int], ...]

__all__ = [
    "ALL", "DETAIL_DEFAULT", "AppLedger", "BatchLedger", "BatchRecord", "batches", "count_ids", "format_ranges",
    "parse_dates", "parse_ids", "read_ledger",
]


# ---------------------------------------------------------------- sets of ids as sorted, disjoint ranges


def _as_ranges(ids: Any) -> Ranges:
    """Batch ids (a ``range`` of step 1, ranges ``((lo, hi), ...)`` or any iterable of ints) as ranges."""
    if isinstance(ids, range) and ids.step == 1:
        return ((ids.start, ids.stop - 1),) if len(ids) else ()
    if isinstance(ids, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in ids):
        return rec._merged(ids)
    out = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidInputError(f"expected batch ids must be integers, got {i!r}")
        out.append((i, i))
    return rec._merged(out)


def count_ids(ranges: Ranges) -> int:
    """How many ids ``ranges`` hold."""
    return sum(hi - lo + 1 for lo, hi in ranges)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return rec._minus(a, rec._minus(a, b))


def _expand(ranges: Ranges) -> list[int]:
    return [i for lo, hi in ranges for i in range(lo, hi + 1)]


def format_ranges(ranges: Iterable[tuple[int, int]], empty: str = "none") -> str:
    """``((0, 39), (41, 41))`` as ``0..39, 41``."""
    text = ", ".join(f"{lo}" if lo == hi else f"{lo}..{hi}" for lo, hi in ranges)
    return text or empty


def _newest(ranges: Ranges, n: int) -> Ranges:
    """The ``n`` highest ids of ``ranges``."""
    out: list[tuple[int, int]] = []
    for lo, hi in reversed(ranges):
        if n <= 0:
            break
        take = min(n, hi - lo + 1)
        out.append((hi - take + 1, hi))
        n -= take
    return tuple(reversed(out))


# ---------------------------------------------------------------- expected ids (--expect, --expect-dates)


def parse_ids(text: str) -> Ranges:
    """``0..99``, ``7``, ``0..9,12,20..29`` as ranges of batch ids (integers >= 0, low end first)."""
    out = []
    for part in _parts(text, "0..99"):
        lo, hi = _ends(part)
        a, b = _integer(lo, part), _integer(hi, part)
        out.append(_ordered(a, b, part))
    return rec._merged(out)


def parse_dates(text: str) -> Ranges:
    """``2026-11-01..2026-11-30`` (or ``20261101..20261130``, a single date, a comma-separated list of these)
    as the batch ids of those days written ``YYYYMMDD`` (``20261101``..``20261130``), as ranges."""
    out = []
    for part in _parts(text, "2026-11-01..2026-11-30"):
        lo, hi = _ends(part)
        first, last = _date(lo, part), _date(hi, part)
        if first > last:
            raise InvalidInputError(f"{part!r}: the first date is after the last; write the earlier one first")
        day = first
        while day <= last:
            ident = int(day.strftime("%Y%m%d"))
            if out and out[-1][1] == ident - 1:
                out[-1] = (out[-1][0], ident)
            else:
                out.append((ident, ident))
            day += datetime.timedelta(days=1)
    return rec._merged(out)


def _parts(text: str, example: str) -> list[str]:
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(not p for p in parts):
        raise InvalidInputError(f"{text!r} is not a range: write e.g. {example}")
    return parts


def _ends(part: str) -> tuple[str, str]:
    if ".." in part:
        lo, _, hi = part.partition("..")
        if not lo.strip() or not hi.strip() or ".." in hi:
            raise InvalidInputError(f"{part!r} is not a range: write LOW..HIGH")
        return lo.strip(), hi.strip()
    return part, part


def _integer(text: str, part: str) -> int:
    if not text.isdigit():
        raise InvalidInputError(f"{part!r}: {text!r} is not a batch id (an integer >= 0)")
    return int(text)


def _ordered(a: int, b: int, part: str) -> tuple[int, int]:
    if a > b:
        raise InvalidInputError(f"{part!r}: the range is reversed; write the lower id first ({b}..{a})")
    return a, b


def _date(text: str, part: str) -> datetime.date:
    try:
        if len(text) == 8 and text.isdigit():
            return datetime.date(int(text[:4]), int(text[4:6]), int(text[6:]))
        if len(text) == 10 and text[4] == "-" and text[7] == "-":
            return datetime.date.fromisoformat(text)
    except ValueError as err:
        raise InvalidInputError(f"{part!r}: {text!r} is not a date ({err})") from None
    raise InvalidInputError(f"{part!r}: {text!r} is not a date: write YYYY-MM-DD or YYYYMMDD")


# ---------------------------------------------------------------- what the ledger says


@dataclass(frozen=True)
class BatchRecord:
    """One committed batch: its commit (``version`` None when the log no longer holds it, or the walk did not
    reach it: then only the record says it is committed), the commit's time (ms since the epoch, UTC), its
    row counts, whether it was applied late or applied again after a RESTORE, whether the commit only moved
    the marker (the batch changed no row), and the batch's content fingerprint."""

    batch_id: int
    version: int | None = None
    timestamp: int | None = None
    operation: str | None = None
    inserted: int | None = None
    updated: int | None = None
    deleted: int | None = None
    late: bool = False
    reapplied: bool = False
    marker_only: bool = False
    fingerprint: str | None = None
    rows: int | None = None
    engine: str | None = None

    @property
    def in_log(self) -> bool:
        """Is the batch's commit in the log (and its detail known)?"""
        return self.version is not None

    @property
    def time(self) -> str | None:
        """The commit time as UTC text (``2026-11-22 05:41:23Z``)."""
        if self.timestamp is None:
            return None
        moment = datetime.datetime.fromtimestamp(self.timestamp / 1000, tz=datetime.UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%SZ")

    def to_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "in_log": self.in_log, "version": self.version,
                "timestamp": self.timestamp, "time": self.time, "operation": self.operation,
                "inserted": self.inserted, "updated": self.updated, "deleted": self.deleted, "late": self.late,
                "reapplied": self.reapplied, "marker_only": self.marker_only, "fingerprint": self.fingerprint,
                "rows": self.rows, "engine": self.engine}


@dataclass(frozen=True)
class AppLedger:
    """The batch ids of one app as the table is at the ledger's version.

    ``committed``: ranges of committed ids; ``floor``: below it an id outside them is unknown (``unknown``
    says why), 0 when every id is known; ``undone``: (lo, hi, the RESTORE's version) of ids a RESTORE undid
    and not committed since; ``late``: committed ids applied late; ``records``: per-batch records of the ids
    the read asked for (``detail``), ascending."""

    app_id: str
    committed: Ranges = ()
    floor: int = 0
    unknown: str | None = None
    undone: tuple[tuple[int, int, int], ...] = ()
    late: Ranges = ()
    records: tuple[BatchRecord, ...] = ()

    @staticmethod
    def from_record(app_id: str, record: rec.Record, late: Iterable[int] = (),
                    records: tuple[BatchRecord, ...] = ()) -> AppLedger:
        lates = rec._merged((*record.late, *((b, b) for b in late)))
        return AppLedger(app_id, record.ranges, record.floor, record.unknown, record.undone,
                         _intersect(lates, record.ranges), records)

    @property
    def marker(self) -> int | None:
        """The highest committed id (None: none)."""
        return self.committed[-1][1] if self.committed else None

    @property
    def count(self) -> int:
        """How many ids are committed."""
        return count_ids(self.committed)

    @property
    def unknown_below(self) -> int | None:
        """The floor when ids below it are unknown (None when every id is known; ``records.ALL``: none is)."""
        return self.floor or None

    @property
    def gaps(self) -> Ranges:
        """Ids between the lowest and the highest committed id (at or above the floor) not committed."""
        if not self.committed:
            return ()
        lo = max(self.committed[0][0], self.floor)
        return rec._minus(((lo, self.committed[-1][1]),), self.committed)

    @property
    def undone_ids(self) -> Ranges:
        return tuple((lo, hi) for lo, hi, _ in self.undone)

    def verdict(self, batch_id: int) -> str:
        """``committed``, ``undone`` (a RESTORE undid it), ``never`` or ``unknown`` (below the floor)."""
        return rec.Record(self.committed, self.floor, self.undone).verdict(batch_id)

    def missing_ranges(self, expected: Any) -> Ranges:
        """The ``expected`` ids (a range, ranges or ids) that are not committed, as ranges."""
        return rec._minus(_as_ranges(expected), self.committed)

    def missing(self, expected: Any) -> list[int]:
        """The ``expected`` ids (e.g. ``range(0, 100)``) that are not committed: never committed, undone by a
        RESTORE, or unknown (below the floor, where nothing proves them committed)."""
        return _expand(self.missing_ranges(expected))

    def explain_missing(self, expected: Any) -> dict[str, Ranges]:
        """The missing ids of ``expected`` by why: ``undone`` (by a RESTORE), ``unknown`` (below the floor),
        ``never`` (not committed)."""
        missing = self.missing_ranges(expected)
        undone = _intersect(missing, rec._merged(self.undone_ids))
        unknown = rec._minus(_intersect(missing, ((0, self.floor - 1),)) if self.floor else (), undone)
        never = rec._minus(rec._minus(missing, undone), unknown)
        return {"missing": missing, "undone": undone, "unknown": unknown, "never": never}

    def record(self, batch_id: int) -> BatchRecord | None:
        """The per-batch record of ``batch_id`` when the read asked for it."""
        for r in self.records:
            if r.batch_id == batch_id:
                return r
        return None

    def summary(self) -> str:
        """One line: ``committed 0..41, 2 missing, 1 undone`` (the lowest and highest committed id, how many
        ids between them are not committed, how many a RESTORE undid; late and unknown ones when any)."""
        return summary_text(self.summary_dict())

    def summary_dict(self) -> dict[str, Any]:
        return {"committed": [list(r) for r in self.committed], "missing": count_ids(self.gaps),
                "undone": count_ids(self.undone_ids), "late": count_ids(self.late), "unknown_below": self.unknown_below}

    def to_dict(self) -> dict[str, Any]:
        return {
            "app_id": self.app_id, "committed": [list(r) for r in self.committed], "count": self.count,
            "marker": self.marker, "gaps": [list(r) for r in self.gaps],
            "undone": [{"from": lo, "to": hi, "restore_version": at} for lo, hi, at in self.undone],
            "late": [list(r) for r in self.late], "unknown_below": self.unknown_below, "unknown": self.unknown,
            "records": [r.to_dict() for r in self.records],
        }


def summary_text(summary: dict[str, Any]) -> str:
    """The one-line summary of :meth:`AppLedger.summary_dict` (``upsertsink status`` prints it per app)."""
    committed = summary.get("committed") or []
    text = f"committed {committed[0][0]}..{committed[-1][1]}" if committed else "nothing committed"
    text += f", {summary.get('missing', 0)} missing, {summary.get('undone', 0)} undone"
    if summary.get("late"):
        text += f", {summary['late']} late"
    below = summary.get("unknown_below")
    if below is not None:
        text += ", every id unknown" if below == rec.ALL else f", unknown below {below}"
    return text


@dataclass(frozen=True)
class BatchLedger:
    """The ledger of a table at one version: per app id (``apps``), its :class:`AppLedger`.

    A ledger of one app (read for an app id, or a table only one app wrote) answers that app's questions
    directly: ``committed``, ``gaps``, ``undone``, ``late``, ``records``, ``missing(expected)``."""

    table: str
    version: int | None
    apps: dict[str, AppLedger] = field(default_factory=dict)

    def __getitem__(self, app_id: str) -> AppLedger:
        if app_id not in self.apps:
            raise KeyError(f"no app {app_id!r} in the ledger of {self.table} (apps: {sorted(self.apps) or 'none'})")
        return self.apps[app_id]

    def __iter__(self) -> Any:
        return iter(self.apps.values())

    def _one(self) -> AppLedger:
        if len(self.apps) == 1:
            return next(iter(self.apps.values()))
        if not self.apps:
            raise InvalidInputError(f"no app has committed batches to {self.table}: read the ledger for an app id "
                                    "(upsertsink.batches(path, app_id=...)) to check its expected ids")
        raise InvalidInputError(f"{self.table} was written by {len(self.apps)} apps ({', '.join(sorted(self.apps))}):"
                                " read the ledger for one of them (upsertsink.batches(path, app_id=...)), or "
                                "use ledger[app_id]")

    @property
    def app_id(self) -> str:
        return self._one().app_id

    @property
    def committed(self) -> Ranges:
        return self._one().committed

    @property
    def gaps(self) -> Ranges:
        return self._one().gaps

    @property
    def undone(self) -> tuple[tuple[int, int, int], ...]:
        return self._one().undone

    @property
    def late(self) -> Ranges:
        return self._one().late

    @property
    def records(self) -> tuple[BatchRecord, ...]:
        return self._one().records

    @property
    def marker(self) -> int | None:
        return self._one().marker

    @property
    def floor(self) -> int:
        return self._one().floor

    def missing(self, expected: Any) -> list[int]:
        return self._one().missing(expected)

    def verdict(self, batch_id: int) -> str:
        return self._one().verdict(batch_id)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "version": self.version,
                "apps": {app: a.to_dict() for app, a in self.apps.items()}}


# ---------------------------------------------------------------- reading it


def read_ledger(snapshot: Any, label: str | None = None, app_id: str | None = None, detail: Any = 0) -> BatchLedger:
    """The ledger of ``snapshot`` (a :class:`upsertsink.table.files.Snapshot` or a table known by name only), for
    ``app_id`` or every app that wrote the table. ``detail``: which committed ids get a per-batch record, per
    app: a number (the newest N; 0 none), ``"all"``, or ids (a range, ranges or an iterable)."""
    label = label or snapshot.path
    if not snapshot.exists:
        apps = {app_id: AppLedger(app_id)} if app_id is not None else {}
        return BatchLedger(label, None, apps)
    names = [app_id] if app_id is not None else app_ids(snapshot)
    records: dict[str, rec.Record] = {}
    for name in names:
        record = app_state(snapshot, name).record
        if app_id is not None or record != rec.Record():
            records[name] = record
    wanted = {name: set(_expand(_wanted(record.ranges, detail))) for name, record in records.items()}
    found, late = _walk(snapshot, records, wanted)
    apps = {}
    for name in sorted(records):
        record = records[name]
        rows = tuple(found[name].get(b) or BatchRecord(b, late=_holds(record.late, b) or b in late[name])
                     for b in sorted(wanted[name]))
        apps[name] = AppLedger.from_record(name, record, late.get(name, ()), rows)
    return BatchLedger(label, snapshot.version, apps)


def _holds(ranges: Ranges, batch_id: int) -> bool:
    return rec._holds(ranges, batch_id)


def check_detail(detail: Any) -> Any:
    """``detail`` as :func:`read_ledger` takes it: None or False (0), True (the default number), a number >= 0,
    ``"all"``, or batch ids (kept as ranges)."""
    if detail is None or detail is False:
        return 0
    if detail is True:
        return DETAIL_DEFAULT
    if detail == ALL:
        return ALL
    if isinstance(detail, int) and detail >= 0:
        return detail
    if isinstance(detail, int | str | float):
        raise InvalidInputError(f"detail must be a number >= 0, 'all' or batch ids, got {detail!r}")
    return _as_ranges(detail)


def _wanted(committed: Ranges, detail: Any) -> Ranges:
    detail = check_detail(detail)
    if detail == ALL:
        return committed
    if isinstance(detail, int):
        return _newest(committed, detail)
    return _intersect(detail, committed)


def app_ids(snapshot: Any) -> list[str]:
    """The apps that wrote the table: listed beside it, taken over by a clone, in the recent commits (a table
    known by name only: in its whole history)."""
    found: set[str] = set()
    folder = snapshot.sidecar(APPS_DIR)
    commits = snapshot.recent_commits()
    if folder is None:  # no files beside the table: the history names the apps
        commits = snapshot.all_commits()
    else:
        for name in folder.names():
            if name.endswith(".json"):
                found.update(_app_in(folder.read_bytes(name)))
        found.update(_cloned_apps(snapshot))
    for commit in commits:
        meta = decode_metadata(commit)
        if meta and isinstance(meta.get("app_id"), str) and commit.get("version", -1) <= (snapshot.version or 0):
            found.add(meta["app_id"])
    return sorted(found)


def _app_in(raw: bytes | None) -> list[str]:
    try:
        app = json.loads(raw or b"{}").get("app_id")
    except (ValueError, AttributeError):
        return []
    return [app] if isinstance(app, str) else []


def _cloned_apps(snapshot: Any) -> list[str]:
    """The apps whose records a clone took over from its source (``_upsertsink/clone.json``)."""
    from upsertsink.sidecar.folder import ROOT_DIR

    raw = snapshot.sidecar(ROOT_DIR).read_bytes("clone.json")
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return []
    if not isinstance(data, dict) or data.get("table_id") != snapshot.table_id:
        return []
    return [a for a in (data.get("apps") or {}) if isinstance(a, str)]


class _Log:
    """The commit infos of a snapshot's table, newest first, read in growing windows from its version down."""

    def __init__(self, snapshot: Any):
        self.snapshot = snapshot
        self.top = snapshot.version
        recent = [c for c in snapshot.recent_commits() if 0 <= c.get("version", -1) <= self.top]
        self.infos: dict[int, dict[str, Any]] = {c["version"]: c for c in recent}
        self.reach = min(self.infos, default=self.top + 1)  # every version from here to the top is read
        self.ended = False
        self.window = max(len(recent), 1)
        self.read = len(recent)

    def get(self, version: int) -> dict[str, Any] | None:
        while version < self.reach and not self.ended:
            self._grow()
        return self.infos.get(version)

    def _grow(self) -> None:
        self.window *= 4
        limit = self.top - self.reach + 1 + self.window
        listed = [c for c in self._history(limit) if 0 <= c.get("version", -1) <= self.top]
        self.read += len(listed)
        for c in listed:
            self.infos.setdefault(c["version"], c)
        lowest = min((c["version"] for c in listed), default=self.reach)
        if len(listed) < limit or lowest == 0:
            self.ended = True  # the log holds no more (version 0 reached, or cleanup removed the rest)
        self.reach = min(self.reach, lowest)

    def _history(self, limit: int) -> list[dict[str, Any]]:
        if getattr(self.snapshot, "spark_only", False):
            return self.snapshot.named.history(limit + max(0, (self.snapshot.named.version() or 0) - self.top))
        from upsertsink.table.commit_log import history

        return history(self.snapshot.table, limit, self.snapshot.storage_options, self.top)


def _walk(snapshot: Any, records: dict[str, rec.Record], wanted: dict[str, set[int]]
          ) -> tuple[dict[str, dict[int, BatchRecord]], dict[str, set[int]]]:
    """Follow the table's lineage down from the snapshot's version: the recent commits always, further only
    while an app's wanted ids are not all found. Returns the records found per app, and the committed ids of
    the commits passed that were applied late (commits made before records carried them)."""
    found: dict[str, dict[int, BatchRecord]] = {app: {} for app in records}
    late: dict[str, set[int]] = {app: set() for app in records}
    remaining = {app: set(ids) for app, ids in wanted.items() if ids}
    log_ = _Log(snapshot)
    recent_floor = log_.reach
    v = snapshot.version
    while v is not None and v >= 0 and (remaining or v >= recent_floor):
        info = log_.get(v)
        if info is None:
            break  # the log no longer holds it
        operation = info.get("operation")
        if operation == "RESTORE":
            to = snapshot.restored_version(info, v)
            if to is None:
                break
            v = to
            continue
        if operation == "CLONE" or operation in rec.REPLACE_OPERATIONS:
            break  # the lineage goes on in another table, or began here
        meta = decode_metadata(info)
        app = meta.get("app_id") if meta else None
        if app in records and isinstance(meta.get("batch_id"), int):
            if meta.get("table_id") not in (None, snapshot.table_id):
                break  # a commit of an earlier table at this location
            batch_id = int(meta["batch_id"])
            if batch_id in records[app]:
                if late_batch(meta):
                    late[app].add(batch_id)
                pending = remaining.get(app)
                if pending is not None and batch_id in pending:  # the newest commit of the id in the lineage
                    found[app][batch_id] = _batch_record(batch_id, v, info, meta)
                    pending.discard(batch_id)
                    if not pending:
                        del remaining[app]
        v -= 1
    log.debug("ledger of %s: %d commit infos read", snapshot.path, log_.read)
    return found, late


def _batch_record(batch_id: int, version: int, info: dict[str, Any], meta: dict[str, Any]) -> BatchRecord:
    metrics = info.get("operationMetrics") or {}
    only = marker_only(meta, {**info, "version": version}, metrics)
    counts = [0, 0, 0] if only else [
        metric(metrics, "num_target_rows_inserted", "numTargetRowsInserted", "num_added_rows", "numOutputRows"),
        metric(metrics, "num_target_rows_updated", "numTargetRowsUpdated"),
        metric(metrics, "num_target_rows_deleted", "numTargetRowsDeleted"),
    ]
    # delta-spark commits a MERGE that changed no row (delta-rs makes none, and the sink then commits the marker
    # alone): either way the batch's commit only moved the marker
    only = only or (bool(metrics) and counts == [0, 0, 0])
    stamp = info.get("timestamp")
    if hasattr(stamp, "timestamp"):  # Spark's DESCRIBE HISTORY: a datetime
        stamp = int(stamp.timestamp() * 1000)
    rows = meta.get("rows")
    return BatchRecord(
        batch_id, version, int(stamp) if isinstance(stamp, int | float) else None, info.get("operation"),
        *(0 if c is None else c for c in counts), late=late_batch(meta), reapplied=bool(meta.get("reapplied")),
        marker_only=only, fingerprint=meta.get("fingerprint"), rows=rows if isinstance(rows, int) else None,
        engine=meta.get("engine"),
    )


# ---------------------------------------------------------------- entry points


def batches(
    path: str | None = None, app_id: str | None = None, *, table: str | None = None, version: int | None = None,
    detail: Any = DETAIL_DEFAULT, storage_options: dict[str, str] | None = None, spark_only: bool | None = None,
) -> BatchLedger:
    """The batch ledger of the Delta table at ``path`` (or the table named ``table`` in Spark's catalog, read
    through the active Spark session), at ``version`` (default: the latest), for ``app_id`` or every app that
    wrote it. ``detail``: how many of each app's newest batches get a per-batch record (default 50; 0 none,
    ``"all"`` every one, or the batch ids wanted). ``spark_only`` (with ``table``): read the table through
    Spark SQL on its name only (None: when its files cannot be read here)."""
    if (path is None) == (table is None):
        raise InvalidInputError("give the table's path or its name (table=...), not both" if path is not None
                                else "give the table's path, or its name in Spark's catalog (table=...)")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise InvalidInputError(f"version must be a table version (an integer >= 0), got {version!r}")
    detail = check_detail(detail)
    if table is not None:
        return _named_batches(table, app_id, version, detail, spark_only, storage_options)
    from upsertsink.storage import deltalake_options

    assert path is not None
    return read_path(str(path), app_id, version, detail, deltalake_options(str(path), storage_options))


def read_path(path: str, app_id: str | None, version: int | None, detail: Any,
              storage_options: dict[str, str] | None, label: str | None = None) -> BatchLedger:
    """The ledger of the Delta table at ``path`` (at ``version``), read with deltalake."""
    from upsertsink.table import files

    label = label or path
    if version is None:
        snapshot = files.open_snapshot(path, storage_options)
        try:
            if not snapshot.exists:
                raise NotADeltaTableError(f"{label} is not a Delta table (no _delta_log): there is no ledger to read")
            return read_ledger(snapshot, label, app_id, detail)
        finally:
            files.keep(snapshot)
    from deltalake import DeltaTable

    from upsertsink.sidecar.folder import deltalake_uri

    if not files.table_exists(path, storage_options):
        raise NotADeltaTableError(f"{label} is not a Delta table (no _delta_log): there is no ledger to read")
    latest = files.latest_version(path, storage_options)
    if latest is not None and version > latest:
        raise InvalidInputError(f"{label} has no version {version} (latest is {latest})")
    try:
        table = DeltaTable(deltalake_uri(path), version=version, storage_options=storage_options)
    except Exception as err:  # noqa: BLE001 - a version the log no longer holds: say so
        raise InvalidInputError(f"{label} cannot be read at version {version}: {str(err).splitlines()[0]}") from None
    return read_ledger(files.Snapshot(path, table, storage_options), label, app_id, detail)


def _named_batches(table: str, app_id: str | None, version: int | None, detail: Any, spark_only: bool | None,
                   storage_options: dict[str, str] | None) -> BatchLedger:
    from upsertsink.table import catalog
    from upsertsink.table.named import files_readable, named_errors

    name = catalog.check_name(table)
    spark = catalog.active_session(f"upsertsink.batches(table={name!r})")
    location = catalog.location(spark, name)
    if location is None:
        raise InvalidInputError(f"table {name} does not exist in Spark's catalog")
    if spark_only is None:
        spark_only = not files_readable(location, storage_options)[0]
    if not spark_only:
        return read_path(location, app_id, version, detail, storage_options, label=f"table {name}")
    from upsertsink.table.named import named_snapshot

    snapshot = named_snapshot(spark, name, version)
    with named_errors(name, "reading the ledger of"):
        return read_ledger(snapshot, f"table {name}", app_id, detail)


def for_sink(sink: Any, app_id: str | None = None, detail: Any = DETAIL_DEFAULT) -> BatchLedger:
    """``UpsertSink.batches()``: the ledger of the sink's table for its app id (or ``app_id``); before the
    table exists, an empty ledger of that app."""
    from upsertsink.storage import deltalake_options

    app = sink.app_id if app_id is None else app_id
    if not isinstance(app, str) or not app:
        raise InvalidInputError(f"app_id must be a non-empty string, got {app_id!r}")
    detail = check_detail(detail)
    if sink.table_name is not None:
        label = f"table {sink.table_name}"
        if not sink._locate(None, None):
            return BatchLedger(label, None, {app: AppLedger(app)})
        if sink.spark_only:
            from upsertsink.table.named import named_errors

            with named_errors(sink.table_name, "reading the ledger of"):
                return read_ledger(sink._named.snapshot(), label, app, detail)
    else:
        label = sink.target
    from upsertsink.table import files

    options = deltalake_options(sink.target, sink.storage_options)
    snapshot = files.open_snapshot(sink.target, options)
    try:
        return read_ledger(snapshot, label, app, detail)
    finally:
        files.keep(snapshot)
