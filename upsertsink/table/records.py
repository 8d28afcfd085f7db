"""The record of an app's committed batch ids, as every commit the sink makes carries it.

Delta's transaction identifier (``txn``: app id -> version) is a high-water mark, and not even a reliable
one: it says the highest batch id an app committed, not which ids below it were committed; a ``RESTORE``
leaves it where it was although the commits that set it are undone; and Delta drops it after
``delta.setTransactionRetentionDuration``. So the sink keeps its own record, and that record is the source of
truth: a :class:`Record` in the commit metadata of every commit the sink makes for an app (the batch ids
committed so far, its own included; a ``floor`` below which an id outside them is unknown; the ids a RESTORE
undid; of the committed ids, those applied late, ``"batches_late"``, issue #48's ledger, absent when none).
``lineage.py`` reads it along the table's lineage.

Two chains of commits set ``txn`` markers: the **normal chain**, ``txn(app id) = batch id``, for a batch above
Delta's ``txn`` of the app; the **late chain**, ``txn(upsertsink-late:<app id>) = counter``, for every other
batch (applied below the marker, applied again after a RESTORE undid it, or sent to a replaced table):
delta-spark skips a ``txnVersion`` at or below the table's. Commits of one chain conflict with each other
(Delta's check on a shared ``txn`` app id); the two chains do not.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

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
    restated: Ranges = ()  # committed ids whose content a later commit restated (``write(..., restate=True)``)

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

    def add(self, batch_id: int, late: bool = False, restated: bool = False) -> Record:
        one = ((batch_id, batch_id),)
        undone = tuple((lo, hi, at) for lo, hi, at in _split_undone(self.undone, one))
        lates = _merged((*self.late, *one)) if late else _minus(self.late, one)
        again = _merged((*self.restated, *one)) if restated else self.restated
        return Record(_merged((*self.ranges, *one)), self.floor, undone, self.unknown, lates, again)._bounded()

    def was_restated(self, batch_id: int) -> bool:
        return _holds(self.restated, batch_id)

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
        return Record(self.ranges, self.floor, _tidy_undone(undone), unknown, self.late, self.restated)._bounded()

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
        restated = self.restated[-MAX_RANGES:]
        if (ranges, floor, undone, late, restated) == (self.ranges, self.floor, self.undone, self.late, self.restated):
            return self
        return Record(ranges, floor, undone, self.unknown, late, restated)

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batches": [list(r) for r in self.ranges]}
        if self.floor:
            out["batches_floor"] = self.floor
        if self.undone:
            out["undone"] = [list(u) for u in self.undone]
        if self.late:
            out["batches_late"] = [list(r) for r in self.late]
        if self.restated:
            out["batches_restated"] = [list(r) for r in self.restated]
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
            restated = _merged((int(lo), int(hi)) for lo, hi in meta.get("batches_restated") or ())
        except (TypeError, ValueError):
            return None
        return Record(ranges, floor, undone, None, late, restated)._bounded()

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


__all__ = ["ALL", "COMMITTED", "LATE_PREFIX", "MAX_RANGES", "NEVER", "REPLACE_OPERATIONS", "UNDONE", "UNKNOWN", "Record", "describe_ranges", "late_app"]
