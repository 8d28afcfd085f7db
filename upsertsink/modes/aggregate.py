"""``merge_engine="aggregate"``: per key and column, the aggregate of every row of every batch applied.

``aggregates`` maps columns to ``sum``, ``count`` (rows seen), ``min``, ``max``, ``first``, ``last`` (non-null
values, ordered by ``sequence_by`` when given, else by commit order), ``bool_and``, ``bool_or``; other non-key
columns are ``last`` (the ``sequence_by`` column keeps its greatest value). The batch's rows of a key are
aggregated first (Arrow), then the MERGE's SET combines that with the stored value (``t.x + s.x``), so a batch
counts exactly once: its marker is in the same commit and a replay is skipped by the protocol. Nulls are
ignored as SQL does. An integer ``sum``/``count`` leaving its type's range is an error naming the column, in the
batch (here) or against the stored value (in the MERGE: it fails, nothing is committed), never a wrap.

With ``sequence_by``, a ``first``/``last`` column's value keeps the sequence it came with in a hidden column
``__upsertsink_order_<col>`` of the table, so a late value is placed by its own sequence.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from upsertsink.errors import AggregateOverflowError, InvalidInputError, option
from upsertsink.modes.base import (
    HIDDEN_PREFIX,
    SQL_INT,
    MergeMode,
    duplicate,
    hidden,
    integer_bounds,
    pick,
    s,
    t,
)
from upsertsink.spec import Dialect, quote

FUNCTIONS = ("sum", "count", "min", "max", "first", "last", "bool_and", "bool_or")
OVERFLOW_MARK = "upsertsink overflow in column "


def overflow_error(column: str, where: str) -> AggregateOverflowError:
    return AggregateOverflowError(
        f"aggregate column {column!r} overflows its integer type {where}: the sink never wraps. Widen the column "
        "(or aggregate in a wider one). Nothing was written.")


class Aggregate(MergeMode):
    name = "aggregate"

    def __init__(self, keys: tuple[str, ...], sequence: str | None, aggregates: Any = None) -> None:
        super().__init__(keys, sequence)
        if aggregates is not None and not isinstance(aggregates, dict):
            raise InvalidInputError(f"{option('aggregates')} must map columns to functions, got {aggregates!r}")
        funcs: dict[str, str] = {}
        for column, fn in (aggregates or {}).items():
            if not isinstance(column, str) or not column:
                raise InvalidInputError(f"{option('aggregates')}: {column!r} is not a column name")
            if fn not in FUNCTIONS:
                raise InvalidInputError(
                    f"{option('aggregates')}: unknown function {fn!r} for column {column!r}; the functions are "
                    f"{', '.join(FUNCTIONS)}")
            if column in keys:
                raise InvalidInputError(f"{option('aggregates')}: column {column!r} is a key column")
            if column == sequence:
                raise InvalidInputError(
                    f"{option('aggregates')}: column {column!r} is the {option('sequence_by')} column (it keeps "
                    "its greatest value)")
            funcs[column] = fn
        self.aggregates = funcs

    def options(self) -> dict[str, Any]:
        return {"aggregates": dict(sorted(self.aggregates.items()))}

    def function(self, column: str) -> str:
        if column == self.sequence:
            return "max"
        return self.aggregates.get(column, "last")

    def _ordered(self, column: str) -> bool:
        return self.sequence is not None and self.function(column) in ("first", "last")

    def hidden_columns(self, source: pa.Schema) -> list[pa.Field]:
        if self.sequence is None:
            return []
        kind = source.field(self.sequence).type
        return [pa.field(hidden(c), kind) for c in source.names
                if c not in self.keys and not c.startswith(HIDDEN_PREFIX) and self._ordered(c)]

    def prepare(self, table: pa.Table) -> pa.Table:
        keys = list(self.keys)
        columns = [c for c in table.column_names if c not in self.keys]
        work = table
        if self.sequence is not None:
            work = work.sort_by([(self.sequence, "ascending")])
        aggs: list[Any] = []
        names: list[str] = []
        checks: list[tuple[str, str]] = []  # (column, aggregate name) of first/last values to check for ties
        for c in columns:
            fn = self.function(c)
            kind = table.schema.field(c).type
            if fn == "sum":
                if integer_bounds(kind) is not None:
                    work = work.set_column(work.schema.get_field_index(c), c, pc.cast(work[c], pa.decimal128(38, 0)))
                aggs.append((c, "sum", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
            elif fn == "count":
                aggs.append((c, "count", pc.CountOptions(mode="all")))
            elif fn in ("min", "max"):
                aggs.append((c, fn))
            elif fn in ("bool_and", "bool_or"):
                aggs.append((c, "all" if fn == "bool_and" else "any",
                             pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
            else:  # first / last
                aggs.append((c, fn, pc.ScalarAggregateOptions(skip_nulls=True)))
                checks.append((c, fn))
                if self.sequence is not None:
                    order = hidden(c)
                    work = work.append_column(order, pc.if_else(
                        pc.is_valid(work[c]), work[self.sequence], pa.scalar(None, work[self.sequence].type)))
                    aggs.append((order, "min" if fn == "first" else "max"))
                    names.append(order)
            names.append(c)
        self._refuse_unordered(work, checks)
        got = work.group_by(keys, use_threads=False).aggregate(aggs)
        renamed = {}
        for (col, fn, *_) in aggs:
            renamed[f"{col}_{fn}"] = col
        got = got.rename_columns([renamed.get(n, n) for n in got.column_names])
        out = []
        for c in table.column_names:
            kind = table.schema.field(c).type
            column = got[c]
            if c not in self.keys and self.function(c) in ("sum", "count"):
                column = _fit(column, kind, c)
            out.append((c, column))
        for c in [n for n in got.column_names if n.startswith(HIDDEN_PREFIX)]:
            out.append((c, got[c]))
        return pa.table({name: col for name, col in out})

    def _refuse_unordered(self, work: pa.Table, checks: list[tuple[str, str]]) -> None:
        """Two different non-null first/last values of a key that cannot be ordered: at one sequence, or with
        no sequence at all (a Spark batch has no stable row order)."""
        if not checks:
            return
        by = [*self.keys, *([self.sequence] if self.sequence is not None else [])]
        counts = work.group_by(by).aggregate([(c, "count_distinct") for c, _ in checks])
        for c, fn in checks:
            over = counts.filter(pc.greater(counts[f"{c}_count_distinct"], 1))
            if over.num_rows:
                reason = (f"different {fn} values of column {c!r} at an equal {self.sequence!r}" if self.sequence
                          else f"different {fn} values of column {c!r} and no sequence_by to order them")
                raise duplicate(self.keys, over, reason)

    def assignments(self, column: str, dialect: Dialect, source: pa.Schema) -> str:
        sc, tc = s(column, dialect), t(column, dialect)
        if column.startswith(HIDDEN_PREFIX):
            value = column[len(HIDDEN_PREFIX):]
            return f"CASE WHEN {self._placed(value, dialect)} THEN {sc} ELSE {self._stored_order(value, dialect)} END"
        fn = self.function(column)
        if fn in ("sum", "count"):
            combined = f"{tc} + {sc}"
            bounds = integer_bounds(source.field(column).type)
            if bounds is not None:
                lo, hi = bounds
                over = f"(({sc} > 0 AND {tc} > {hi} - {sc}) OR ({sc} < 0 AND {tc} < {lo} - {sc}))"
                combined = f"CASE WHEN {over} THEN {_fail(column, dialect, source, self.keys[0])} ELSE {combined} END"
            return f"CASE WHEN {sc} IS NULL THEN {tc} WHEN {tc} IS NULL THEN {sc} ELSE {combined} END"
        if fn in ("min", "max"):
            op = "<" if fn == "min" else ">"
            return f"CASE WHEN {sc} IS NULL THEN {tc} WHEN {tc} IS NULL OR {sc} {op} {tc} THEN {sc} ELSE {tc} END"
        if fn in ("bool_and", "bool_or"):
            op = "AND" if fn == "bool_and" else "OR"
            return f"CASE WHEN {sc} IS NULL THEN {tc} WHEN {tc} IS NULL THEN {sc} ELSE ({tc} {op} {sc}) END"
        if self._ordered(column):
            return pick(self._placed(column, dialect), column, dialect)
        return f"coalesce({tc}, {sc})" if fn == "first" else f"coalesce({sc}, {tc})"


    def _stored_order(self, column: str, dialect: Dialect) -> str:
        """The sequence of the stored value of ``column``: its own, else (a row written without the sink's
        order column: a DDL's table, an older write) its row's."""
        assert self.sequence is not None
        return (f"coalesce({t(hidden(column), dialect)}, CASE WHEN {t(column, dialect)} IS NOT NULL THEN "
                f"{t(self.sequence, dialect)} END)")

    def _placed(self, column: str, dialect: Dialect) -> str:
        """The batch's value of a first/last ``column`` replaces the stored one: it has one, and the stored one
        is null or further from the end its function keeps (a later value for last, an earlier for first)."""
        op = "<" if self.function(column) == "first" else ">"
        mine = s(hidden(column), dialect)
        return (f"({mine} IS NOT NULL AND ({t(column, dialect)} IS NULL OR "
                f"{mine} {op} {self._stored_order(column, dialect)}))")


def _fail(column: str, dialect: Dialect, source: pa.Schema, key: str) -> str:
    """An expression that fails the MERGE with a message naming ``column`` (evaluated only when reached)."""
    text = (OVERFLOW_MARK + column + " at key ").replace("'", "''")
    if dialect == "spark":
        return f"raise_error('{text}')"
    kind = source.field(column).type
    sql_type = SQL_INT.get(kind.bit_width, "BIGINT")
    # DataFusion has no raise_error: a cast of this text to an integer fails (not constant: never folded early)
    return f"CAST(concat('{text}', CAST(s.{quote(key, dialect)} AS VARCHAR)) AS {sql_type})"


def _fit(column: pa.ChunkedArray, kind: pa.DataType, name: str) -> pa.ChunkedArray:
    bounds = integer_bounds(kind)
    if bounds is None:
        return column.cast(kind) if column.type != kind else column
    lo, hi = bounds
    if pa.types.is_decimal(column.type):
        low, high = pc.min_max(column).values() if len(column) else (None, None)
        low, high = (v.as_py() if v is not None else None for v in (low, high))
        if (low is not None and low < Decimal(lo)) or (high is not None and high > Decimal(hi)):
            raise overflow_error(name, "within the batch")
        return column.cast(kind)
    low, high = (v.as_py() for v in pc.min_max(column).values()) if len(column) else (None, None)
    if high is not None and high > hi:
        raise overflow_error(name, "within the batch")
    return column.cast(kind)
