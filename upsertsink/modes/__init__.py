"""Merge engines: how a batch's row of a key combines with the stored row (see ``modes/base.py``).

Adding a mode: a module with a :class:`~upsertsink.modes.base.MergeMode` subclass, and a line in ``MODES``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from upsertsink.errors import InvalidInputError, option
from upsertsink.modes.aggregate import Aggregate
from upsertsink.modes.base import MergeMode, MergeModeMismatchError
from upsertsink.modes.first_row import FirstRow
from upsertsink.modes.partial_update import PartialUpdate
from upsertsink.modes.upsert import Upsert

MODES: dict[str, type[MergeMode]] = {m.name: m for m in (Upsert, FirstRow, PartialUpdate, Aggregate)}
DEFAULT = "upsert"
LOOK_BACK = 20  # commits looked at for the last sink commit (its metadata names the mode)


def make(
    name: Any, keys: tuple[str, ...], sequence: str | None, *, aggregates: Any = None, sequence_groups: Any = None,
    delete_when: Any = None, scd_type: int = 1, ignore_null_updates: bool = False,
) -> MergeMode:
    """The sink's merge mode from its options; ``ValueError`` (InvalidInputError) naming what is wrong."""
    if name not in MODES:
        raise InvalidInputError(
            f"{option('merge_engine')} must be one of {', '.join(map(repr, MODES))}, got {name!r}")
    if aggregates is not None and name != "aggregate":
        raise InvalidInputError(
            f"{option('aggregates')} is only used by {option('merge_engine', repr('aggregate'), 'aggregate')}; "
            f"this sink has {option('merge_engine')} {name!r}")
    if sequence_groups is not None and name != "partial_update":
        raise InvalidInputError(
            f"{option('sequence_groups')} is only used by "
            f"{option('merge_engine', repr('partial_update'), 'partial_update')}; this sink has "
            f"{option('merge_engine')} {name!r}")
    if name != DEFAULT:
        if delete_when is not None:
            raise InvalidInputError(
                f"{option('delete_when')} cannot be used with {option('merge_engine')} {name!r}: only 'upsert' "
                "deletes rows")
        if scd_type != 1:
            raise InvalidInputError(
                f"scd_type={scd_type} is only valid with {option('merge_engine')} 'upsert', not {name!r}")
        if ignore_null_updates:
            raise InvalidInputError(
                f"{option('ignore_null_updates')} is only valid with {option('merge_engine')} 'upsert' (use "
                f"'partial_update', where a null never overwrites)")
    if name == "aggregate":
        return Aggregate(keys, sequence, aggregates)
    if name == "partial_update":
        return PartialUpdate(keys, sequence, sequence_groups)
    return MODES[name](keys, sequence)


def stored_mode(meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(mode, options) a sink commit's metadata records; commits without them were written by ``upsert``."""
    return str(meta.get("merge_engine") or DEFAULT), dict(meta.get("merge_options") or {})


def table_mode(snapshot: Any) -> tuple[str, dict[str, Any]] | None:
    """The mode the table's newest sink commit (among the last LOOK_BACK) was written with; None when none of
    them is a sink's (a table made by a DDL or another writer: any mode may take it)."""
    from upsertsink.table.commit_log import decode_metadata

    if not snapshot.exists or snapshot.version is None:
        return None
    top = snapshot.version
    for version in range(top, max(-1, top - LOOK_BACK), -1):  # the newest commit is most often the sink's own
        key = (str(getattr(snapshot, "uri", "")), snapshot.table_id, version)
        if key in _KNOWN:
            return _KNOWN[key]
        meta = decode_metadata(_commit_info(snapshot, version) or {})
        if meta is not None and "app_id" in meta and "repair_of_batch" not in meta:
            _remember(key, stored_mode(meta))
            return _KNOWN[key]
    return None


def note_commit(snapshot: Any, version: int | None, mode: MergeMode) -> None:
    """The sink committed ``version`` with ``mode``: the next write's check needs no read of the log."""
    if version is not None:
        _remember((str(getattr(snapshot, "uri", "")), snapshot.table_id, version), (mode.name, mode.options()))


def _commit_info(snapshot: Any, version: int) -> dict[str, Any] | None:
    """One commit's info: for a table's files, read from its log file alone (not the recent history)."""
    from upsertsink.table.files import Snapshot

    if isinstance(snapshot, Snapshot):
        from upsertsink.table.commit_log import read_commit_info

        return read_commit_info(snapshot.uri, version, snapshot.storage_options)
    return snapshot.commit_info(version)


_KNOWN: OrderedDict[tuple[str, str | None, int], tuple[str, dict[str, Any]]] = OrderedDict()
_LOCK = threading.Lock()


def _remember(key: tuple[str, str | None, int], mode: tuple[str, dict[str, Any]]) -> None:
    with _LOCK:
        _KNOWN[key] = mode
        while len(_KNOWN) > 1024:
            _KNOWN.popitem(last=False)


def check_table(mode: MergeMode, snapshot: Any, target: str) -> None:
    """Refuse a sink whose mode or mode options differ from those the table was written with, naming both."""
    stored = table_mode(snapshot)
    if stored is None:
        return
    name, opts = stored
    mine = mode.options()
    if name == mode.name and opts == mine:
        return
    theirs = f"merge_engine={name!r}" + "".join(f", {k}={v!r}" for k, v in opts.items())
    raise MergeModeMismatchError(
        f"table {target} is written with {theirs}; this sink has {mode.describe()}. One table has one merge "
        "engine (its rows mean what that engine made of them): use the table's settings, or another table. "
        "Nothing was written.")


def overflowed(err: BaseException) -> Exception | None:
    """The overflow error (naming the column) when a MERGE failed on an aggregate's overflow guard."""
    from upsertsink.modes.aggregate import OVERFLOW_MARK, overflow_error

    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        at = text.find(OVERFLOW_MARK)
        if at >= 0:
            rest = text[at + len(OVERFLOW_MARK):]
            column = rest.split("'")[0].split('"')[0].split("\n")[0]
            for other in (" at key", "\\"):
                column = column.split(other)[0]
            return overflow_error(column.strip(), "with the value the table holds")
        seen = seen.__cause__ or seen.__context__
    return None


__all__ = ["DEFAULT", "MODES", "MergeMode", "MergeModeMismatchError", "check_table", "make", "table_mode"]
