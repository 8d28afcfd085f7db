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

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import fingerprint as fp
from upsertsink.errors import InvalidInputError, SchemaMismatchError, option
from upsertsink.sidecar.events import unique_events
from upsertsink.spec import DELETE_FLAG

log = logging.getLogger(__name__)

START = "__START_AT"
END = "__END_AT"
HISTORY_COLUMNS = (START, END)
SCD_TYPES = (1, 2)


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


