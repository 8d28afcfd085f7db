"""Reference models of the merge engines of issue #47 (``first_row``, ``partial_update``, ``aggregate``), and
seeded random feeds for them. Pure Python: no upsertsink, no pyarrow (the tests and the benchmark import it).

Every model takes the batches *as applied, in commit order* (a replay skipped by its batch id is not applied;
a re-send under a new batch id is; a late batch applied with ``late_batches="apply"`` is applied where it was
committed), each batch a list of row dicts, and returns the table the sink must hold: ``{key tuple: row
dict}`` sorted by key, every row holding every column (``None`` for null). :func:`rows` turns that into
sorted tuples. A batch the sink must refuse raises :class:`ModelDuplicateKeyError` or
:class:`ModelOverflowError` (with the batch's position), and nothing of it is applied.

Rules the issue leaves open, decided here (each model's docstring repeats its own):

- **Nulls.** A null is "no value": it never overwrites (``partial_update``), SQL aggregates ignore it (``sum``,
  ``min``, ``max``, ``bool_and``, ``bool_or`` of nulls only are null), ``first``/``last`` take non-null values
  only, ``count`` counts rows seen whatever the column holds. A column a batch does not carry is null in it.
- **Rows of one key in one batch.** Identical rows are one row for ``first_row`` and ``partial_update`` (an
  exact duplicate of a retried producer); for ``aggregate`` every row counts (two identical click events are two
  clicks; exactly-once is per batch, by its id). Rows that must be ordered and cannot be (no sequence, or equal
  sequences with different content) are a ``DuplicateKeyError``: never "the batch's row order", because a
  Spark batch has no stable row order and the sink's batch fingerprint is order-independent (a replay in
  another order is "the same batch").
- **Ties in sequence across batches** keep the stored value (equal is a no-op, as for ``upsert``).
- **A stored null sequence** (a group never set) is older than any non-null incoming sequence.
- **Overflow.** ``sum`` and ``count`` of an integer column outside its type's range (int64 unless told) is an
  error naming the column (:class:`ModelOverflowError`), never a wrap; floats are not checked.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Row = dict[str, Any]
Batch = list[Row]
Table = dict[tuple, Row]

FUNCTIONS = ("sum", "count", "min", "max", "first", "last", "bool_and", "bool_or")
# What ``unordered`` (rows of one key in one batch whose ``first``/``last`` values cannot be ordered) does:
# "error" (the decision above) or "row_order" (the batch's row order: the alternative the brief offered).
UNORDERED_FIRST_LAST = "error"


class ModelDuplicateKeyError(ValueError):
    """A batch the sink must refuse with ``DuplicateKeyError``: rows of one key it cannot order."""

    def __init__(self, batch: int, key: tuple, column: str | None, reason: str):
        self.batch, self.key, self.column, self.reason = batch, key, column, reason
        where = f" (column {column!r})" if column else ""
        super().__init__(f"batch {batch}: key {key}{where}: {reason}")


class ModelOverflowError(ArithmeticError):
    """A batch the sink must refuse: an integer ``sum``/``count`` leaves its column's range."""

    def __init__(self, batch: int, key: tuple, column: str):
        self.batch, self.key, self.column = batch, key, column
        super().__init__(f"batch {batch}: key {key}: column {column!r} overflows")


# ---------------------------------------------------------------- helpers


def key_of(row: Mapping[str, Any], keys: Sequence[str]) -> tuple:
    return tuple(row[k] for k in keys)


def columns_of(batches: Iterable[Batch], first: Sequence[str] = ()) -> list[str]:
    """Every column of the batches, ``first`` first, then in the order they first appear."""
    out = list(first)
    for batch in batches:
        for row in batch:
            for c in row:
                if c not in out:
                    out.append(c)
    return out


def rows(table: Table, columns: Sequence[str]) -> list[tuple]:
    """The model's table as sorted tuples of ``columns``."""
    return sorted((tuple(r.get(c) for c in columns) for r in table.values()), key=_sort_key)


def _sort_key(t: tuple) -> tuple:
    return tuple((v is None, v) for v in t)


def _by_key(batch: Batch, keys: Sequence[str]) -> dict[tuple, list[Row]]:
    grouped: dict[tuple, list[Row]] = {}
    for row in batch:
        grouped.setdefault(key_of(row, keys), []).append(row)
    return grouped


def _distinct(rows_: list[Row], columns: Sequence[str]) -> list[Row]:
    """Rows of ``rows_`` with distinct ``columns`` projections (a missing column is null), first seen kept."""
    seen, out = set(), []
    for r in rows_:
        sig = tuple(repr(r.get(c)) for c in columns)
        if sig not in seen:
            seen.add(sig)
            out.append(r)
    return out


def _finish(table: Table, columns: Sequence[str]) -> Table:
    return {k: {c: table[k].get(c) for c in columns} for k in sorted(table, key=_sort_key)}


# ---------------------------------------------------------------- first_row


def first_row(batches: Sequence[Batch], keys: Sequence[str], sequence: str | None = None,
              columns: Sequence[str] | None = None) -> Table:
    """``merge_engine="first_row"``: per key, the first row wins; later rows of the key are ignored.

    Without ``sequence``: the first committed batch holding the key wins; in one batch, rows of a key that
    differ are a ``DuplicateKeyError`` (identical rows are one row). With ``sequence``: the row with the lowest
    sequence wins even when it arrives late (it replaces the stored row, every column); an equal sequence is a
    no-op (the stored row stays); in one batch, the lowest sequence wins and different rows at that lowest
    sequence are a ``DuplicateKeyError``.
    """
    columns = list(columns or columns_of(batches, keys))
    table: Table = {}
    for b, batch in enumerate(batches):
        chosen: dict[tuple, Row] = {}
        for key, group in _by_key(batch, keys).items():
            if sequence is not None:
                low = min(r[sequence] for r in group)
                group = [r for r in group if r[sequence] == low]
            group = _distinct(group, columns)
            if len(group) > 1:
                reason = (f"different rows at the lowest {sequence!r}" if sequence
                          else "different rows and no sequence_by to order them")
                raise ModelDuplicateKeyError(b, key, None, reason)
            chosen[key] = group[0]
        for key, row in chosen.items():
            stored = table.get(key)
            if stored is None or (sequence is not None and row[sequence] < stored[sequence]):
                table[key] = dict(row)
    return _finish(table, columns)


# ---------------------------------------------------------------- partial_update


def partial_update(batches: Sequence[Batch], keys: Sequence[str], sequence: str | None = None,
                   sequence_groups: Mapping[str, Sequence[str]] | None = None,
                   columns: Sequence[str] | None = None) -> Table:
    """``merge_engine="partial_update"``: a null, or a column the batch does not carry, never overwrites.

    Each group ``{group_sequence: [columns]}`` is updated only when the incoming group sequence is greater than
    the stored one (a stored null is older than any value; a null incoming group sequence updates nothing of
    the group, **on an insert too**: the group's columns stay null). Then each of its non-null columns
    overwrites, and the group sequence takes the incoming value. Columns in no group follow ``sequence`` the
    same way when given (the sequence column keeps the greatest value), else the newest batch (a non-null value
    overwrites). A new key is an update of an all-null row.

    Rows of one key in one batch apply one after another in their sequence's order, as if each came in a batch
    of its own: per group by the group sequence, for the ungrouped columns by ``sequence``. Identical rows are
    one row; rows that differ at an equal sequence (on that sequence's columns), or, without ``sequence``, two
    different non-null values of an ungrouped column, are a ``DuplicateKeyError``.

    ``columns``: the table's columns (default: every column of the batches); the returned rows hold them all.
    """
    groups = {g: list(cs) for g, cs in (sequence_groups or {}).items()}
    columns = list(columns or columns_of(batches, keys))
    in_group = {c for cs in groups.values() for c in cs} | set(groups)
    ungrouped = [c for c in columns if c not in keys and c not in in_group and c != sequence]
    table: Table = {}
    for b, batch in enumerate(batches):
        updated: Table = {}
        for key, group_rows in _by_key(batch, keys).items():
            group_rows = _distinct(group_rows, columns)
            state = dict(table.get(key) or {c: None for c in columns})
            for k, v in zip(keys, key, strict=True):
                state[k] = v
            for gseq, gcols in groups.items():
                _apply_ordered(state, group_rows, gseq, gcols, b, key)
            if sequence is not None:
                _apply_ordered(state, group_rows, sequence, ungrouped, b, key)
            else:
                for c in ungrouped:
                    values = {repr(r.get(c)): r.get(c) for r in group_rows if r.get(c) is not None}
                    if len(values) > 1:
                        raise ModelDuplicateKeyError(b, key, c, "different values and no sequence_by to order them")
                    if values:
                        state[c] = next(iter(values.values()))
            updated[key] = state
        table.update(updated)
    return _finish(table, columns)


def _apply_ordered(state: Row, group_rows: list[Row], seq: str, cols: Sequence[str], batch: int, key: tuple) -> None:
    """Apply ``group_rows`` to ``state`` for ``cols`` guarded by ``seq``, lowest sequence first."""
    candidates = [r for r in group_rows if r.get(seq) is not None]
    by_seq: dict[Any, list[Row]] = {}
    for r in candidates:
        by_seq.setdefault(r[seq], []).append(r)
    for s in sorted(by_seq):
        same = _distinct(by_seq[s], [seq, *cols])
        if len(same) > 1:
            raise ModelDuplicateKeyError(batch, key, seq, f"different rows at an equal {seq!r}")
        row = same[0]
        if state.get(seq) is None or s > state[seq]:
            for c in cols:
                if row.get(c) is not None:
                    state[c] = row[c]
            state[seq] = s


# ---------------------------------------------------------------- aggregate


INT_BITS_DEFAULT = 64


def aggregate(batches: Sequence[Batch], keys: Sequence[str], aggregates: Mapping[str, str],
              sequence: str | None = None, columns: Sequence[str] | None = None,
              int_bits: Mapping[str, int] | None = None, unordered: str | None = None) -> Table:
    """``merge_engine="aggregate"``: per key and column, the aggregate of every row of every applied batch.

    ``aggregates`` maps columns to ``sum``, ``count`` (rows seen, whatever the column holds), ``min``, ``max``,
    ``first``, ``last``, ``bool_and``, ``bool_or``; other non-key columns are ``last`` (with ``sequence``, the
    sequence column's ``last`` is its greatest value). Nulls are ignored as SQL does: an aggregate over nulls
    only is null (``count`` is never null). Every row counts, identical ones too.

    ``first``/``last``: non-null values ordered by ``sequence`` when given (an equal sequence across batches
    keeps the stored value; two different non-null values at one sequence in one batch are a
    ``DuplicateKeyError``), else by commit order; in one batch without ``sequence``, two different non-null
    values of one key cannot be ordered: a ``DuplicateKeyError`` (``unordered="row_order"``: the batch's row
    order instead). With ``sequence`` and nulls, a late non-null value is placed by its own sequence, not by the
    stored row's (the model keeps each value's sequence).

    ``int_bits``: integer width per ``sum``/``count`` column (default 64); a result outside it is an overflow
    (:class:`ModelOverflowError`), the batch is not applied. Columns whose values are floats are not checked.
    """
    unordered = unordered or UNORDERED_FIRST_LAST
    for c, fn in aggregates.items():
        if fn not in FUNCTIONS:
            raise ValueError(f"unknown aggregate function {fn!r} for column {c!r}")
    columns = list(columns or columns_of(batches, keys))
    funcs = {c: aggregates.get(c, "last") for c in columns if c not in keys}
    bits = dict(int_bits or {})
    table: Table = {}
    orders: dict[tuple, dict[str, Any]] = {}  # per key, per first/last column: the order of the stored value
    for b, batch in enumerate(batches):
        new_table: Table = {}
        new_orders: dict[tuple, dict[str, Any]] = {}
        for key, group_rows in _by_key(batch, keys).items():
            stored = table.get(key)
            state = dict(stored) if stored is not None else {c: None for c in columns}
            order = dict(orders.get(key, {}))
            for k, v in zip(keys, key, strict=True):
                state[k] = v
            for c, fn in funcs.items():
                values = [r.get(c) for r in group_rows]
                present = [v for v in values if v is not None]
                old = state.get(c) if stored is not None else None
                if fn == "count":
                    state[c] = _checked((old or 0) + len(group_rows), c, bits, b, key)
                elif fn == "sum":
                    part = _checked(sum(present), c, bits, b, key) if present else None
                    if part is not None:
                        state[c] = part if old is None else _checked(old + part, c, bits, b, key)
                elif fn in ("min", "max"):
                    pick = min if fn == "min" else max
                    cands = present + ([old] if old is not None else [])
                    state[c] = pick(cands) if cands else None
                elif fn in ("bool_and", "bool_or"):
                    cands = present + ([old] if old is not None else [])
                    state[c] = (all(cands) if fn == "bool_and" else any(cands)) if cands else None
                else:  # first / last
                    state[c], order[c] = _first_last(fn, c, group_rows, old, order.get(c), sequence, b, key,
                                                     unordered)
            new_table[key] = state
            new_orders[key] = order
        table.update(new_table)
        orders.update(new_orders)
    return _finish(table, columns)


def _checked(value: Any, column: str, bits: Mapping[str, int], batch: int, key: tuple) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    width = bits.get(column, INT_BITS_DEFAULT)
    if not -(2 ** (width - 1)) <= value < 2 ** (width - 1):
        raise ModelOverflowError(batch, key, column)
    return value


def _first_last(fn: str, column: str, group_rows: list[Row], old: Any, old_order: Any, sequence: str | None,
                batch: int, key: tuple, unordered: str) -> tuple[Any, Any]:
    """The new value of a ``first``/``last`` column and the order it holds (its sequence, or its batch)."""
    present = [r for r in group_rows if r.get(column) is not None]
    if not present:
        return old, old_order
    if sequence is None:
        distinct = {repr(r[column]) for r in present}
        if len(distinct) > 1 and unordered == "error":
            raise ModelDuplicateKeyError(batch, key, column, f"different {fn} values and no sequence_by to order them")
        mine = present[0][column] if fn == "first" else present[-1][column]
        if old is None:
            return mine, batch
        return (old, old_order) if fn == "first" else (mine, batch)
    pick = min if fn == "first" else max
    at = pick(r[sequence] for r in present)
    values = {repr(r[column]): r[column] for r in present if r[sequence] == at}
    if len(values) > 1:
        raise ModelDuplicateKeyError(batch, key, column, f"different {fn} values at an equal {sequence!r}")
    mine = next(iter(values.values()))
    if old is None:
        return mine, at
    better = at < old_order if fn == "first" else at > old_order
    return (mine, at) if better else (old, old_order)


# ---------------------------------------------------------------- random feeds

# The feeds' columns and their types (names of Arrow types; the tests map them).
FIRST_ROW_SCHEMA = {"id": "int64", "val": "string", "n": "int64", "seq": "int64"}
PARTIAL_GROUPS = {"pay_seq": ["paid_at", "amount"], "ship_seq": ["shipped_at", "carrier"]}
PARTIAL_SCHEMA = {"id": "int64", "pay_seq": "int64", "paid_at": "int64", "amount": "float64",
                  "ship_seq": "int64", "shipped_at": "int64", "carrier": "string", "note": "string", "seq": "int64"}
# What each stream of the partial_update feed carries (besides the key, ``note`` and, with a sequence, ``seq``).
PARTIAL_STREAMS = {"pay": ["pay_seq", "paid_at", "amount"], "ship": ["ship_seq", "shipped_at", "carrier"]}
AGGREGATES = {"clicks": "sum", "revenue": "sum", "first_seen": "min", "last_seen": "max", "events": "count",
              "status": "last", "source": "first", "all_ok": "bool_and", "any_err": "bool_or"}
AGGREGATE_SCHEMA = {"id": "int64", "clicks": "int64", "revenue": "float64", "first_seen": "int64",
                    "last_seen": "int64", "events": "int64", "status": "string", "source": "string",
                    "all_ok": "bool", "any_err": "bool", "page": "string", "seq": "int64"}


def first_row_feed(seed: int, batches: int = 6, keys: int = 5, sequence: bool = True, size: tuple[int, int] = (1, 6),
                   late: float = 0.3, nulls: float = 0.2, duplicates: float = 0.15) -> list[Batch]:
    """Batches of ``{id, val, n[, seq]}``. Every (key, sequence) has one content, so only the order decides;
    exact duplicates in a batch; with ``sequence``, late rows (lower than a key's earlier ones) and several
    rows of one key in a batch; without, a key at most once per batch (plus exact duplicates)."""
    rng = random.Random(seed)
    clock, used = 0, set()
    feed: list[Batch] = []
    for _ in range(batches):
        batch: Batch = []
        seen: set[int] = set()
        for _ in range(rng.randint(*size)):
            k = rng.randrange(keys)
            clock += 10
            s = clock - rng.randint(1, clock - 1) if rng.random() < late and clock > 10 else clock
            if sequence and (k, s) in used or not sequence and k in seen:
                continue
            used.add((k, s))
            seen.add(k)
            row = {"id": k, "val": None if rng.random() < nulls else f"v{k}-{s}", "n": rng.randint(-3, 3)}
            if sequence:
                row["seq"] = s
            batch.append(row)
            if rng.random() < duplicates:
                batch.append(dict(row))
        rng.shuffle(batch)
        feed.append(batch)
    return feed


def partial_update_feeds(seed: int, batches: int = 4, keys: int = 5, size: tuple[int, int] = (1, 5),
                         sequence: bool = False, partial_nulls: bool = True, null_group_seq: float = 0.1,
                         note: bool = True, wide: bool = False, late: float = 0.3) -> dict[str, list[Batch]]:
    """Two streams' batches, ``pay`` and ``ship``, each writing its own group (``PARTIAL_GROUPS``) of one wide
    table keyed by ``id``; each stream's group sequence grows with occasional late (lower) values, and every
    (key, group sequence) has one content. ``partial_nulls``: a row may hold nulls among its group's columns
    (the final table then depends on the order the rows arrive in: compare with the model of the commit
    order); without them, a group's columns come whole and any order converges to one table.
    ``null_group_seq``: the share of rows whose group sequence is null (their group must be left alone).
    ``note``: an ungrouped column both streams write (newest batch wins, or ``seq`` with ``sequence``).
    ``wide``: every row carries every column (the other stream's as nulls) instead of its stream's only."""
    rng = random.Random(seed)
    feeds: dict[str, list[Batch]] = {}
    clock = 0  # one global event sequence for ``seq``, unique per row
    for stream, cols in PARTIAL_STREAMS.items():
        gseq = cols[0]
        used: set[tuple[int, int]] = set()
        gclock = 0
        feed: list[Batch] = []
        for _ in range(batches):
            batch: Batch = []
            for _ in range(rng.randint(*size)):
                k = rng.randrange(keys)
                gclock += 10
                s = gclock - rng.randint(1, gclock - 1) if rng.random() < late and gclock > 10 else gclock
                if (k, s) in used:
                    continue
                used.add((k, s))
                clock += 1
                row: Row = {"id": k, gseq: None if rng.random() < null_group_seq else s}
                for c in cols[1:]:
                    row[c] = None if partial_nulls and rng.random() < 0.3 else _value(c, k, s)
                if note:
                    row["note"] = None if rng.random() < 0.3 else f"{stream}-{k}-{clock}"
                if sequence:
                    row["seq"] = clock
                if wide:
                    for c in PARTIAL_SCHEMA:
                        row.setdefault(c, None)
                batch.append(row)
                if rng.random() < 0.1:
                    batch.append(dict(row))
            rng.shuffle(batch)
            feed.append(batch)
        feeds[stream] = feed
    if note and not sequence:
        # without a sequence, two different notes of one key in one batch cannot be ordered: keep one per key
        for feed in feeds.values():
            for batch in feed:
                first: dict[int, Any] = {}
                for row in batch:
                    if row.get("note") is not None:
                        row["note"] = first.setdefault(row["id"], row["note"])
    return feeds


def _value(column: str, key: int, s: int) -> Any:
    if column == "amount":
        return (key * 7 + s) / 4  # exact in binary: no float noise between engines
    if column == "carrier":
        return f"c{(key + s) % 4}"
    return 1_000 * key + s  # paid_at, shipped_at


def interleave(feeds: Mapping[str, list[Batch]], seed: int) -> list[tuple[str, int]]:
    """A random send order of several streams' batches keeping each stream's own order: [(stream, index)]."""
    rng = random.Random(seed)
    left = {s: list(range(len(f))) for s, f in feeds.items()}
    out = []
    while any(left.values()):
        stream = rng.choice([s for s, v in left.items() if v])
        out.append((stream, left[stream].pop(0)))
    return out


def aggregate_feed(seed: int, batches: int = 5, keys: int = 4, size: tuple[int, int] = (1, 8),
                   sequence: bool = True, nulls: float = 0.2, late: float = 0.3) -> list[Batch]:
    """Batches of ``AGGREGATE_SCHEMA`` rows, several per key in a batch (identical ones too). Every (key,
    sequence) has one content; without ``sequence``, the rows of a key in one batch agree on their non-null
    ``status``/``source``/``page`` (``first``/``last`` values it could not order). ``revenue`` holds multiples
    of 0.25 (sums are exact on every engine); ``events`` holds arbitrary values (``count`` ignores them)."""
    rng = random.Random(seed)
    clock = 0
    used: set[tuple[int, int]] = set()
    feed: list[Batch] = []

    def maybe(v: Any) -> Any:
        return None if rng.random() < nulls else v

    for _ in range(batches):
        batch: Batch = []
        fixed: dict[int, dict[str, Any]] = {}
        for _ in range(rng.randint(*size)):
            k = rng.randrange(keys)
            clock += 10
            s = clock - rng.randint(1, clock - 1) if rng.random() < late and clock > 10 else clock
            if sequence and (k, s) in used:
                continue
            used.add((k, s))
            ts = 1_000 + s
            row = {"id": k, "clicks": maybe(rng.randint(0, 5)), "revenue": maybe(rng.randint(0, 40) / 4),
                   "first_seen": maybe(ts), "last_seen": maybe(ts), "events": maybe(rng.randint(0, 9)),
                   "status": maybe(rng.choice(["new", "open", "done"])), "source": maybe(rng.choice(["web", "app"])),
                   "all_ok": maybe(rng.random() < 0.8), "any_err": maybe(rng.random() < 0.2),
                   "page": maybe(f"p{rng.randrange(3)}")}
            if sequence:
                row["seq"] = s
            else:
                pinned = fixed.setdefault(k, {})
                for c in ("status", "source", "page"):
                    if row[c] is not None:
                        row[c] = pinned.setdefault(c, row[c])
            batch.append(row)
            if rng.random() < 0.15:
                batch.append(dict(row))  # an identical row: counts again
        rng.shuffle(batch)
        feed.append(batch)
    return feed
