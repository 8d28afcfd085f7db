"""``merge_engine="partial_update"``: a null, or a column the batch does not carry, never overwrites.

``sequence_groups={"pay_seq": ["paid_at", "amount"], ...}`` gives each group of columns its own sequence: a
group's columns are updated only by a row whose group sequence is greater than the stored one (a null group
sequence updates nothing of its group). Columns in no group follow ``sequence_by`` the same way when given, else
the newest batch. Rows of one key in one batch apply in their sequence's order, as if each came alone: the
prepared row carries, per column, the newest non-null value and the sequence it came with (a helper column),
so the MERGE takes a value only when *that* sequence is beyond the stored group sequence.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from upsertsink.errors import DuplicateKeyError, InvalidInputError, option
from upsertsink.modes.base import (
    HELPER_PREFIX,
    MergeMode,
    check_names,
    distinct_per_key,
    helper,
    newer,
    pick,
    s,
    t,
    unique_keys,
)
from upsertsink.spec import Dialect


class PartialUpdate(MergeMode):
    name = "partial_update"

    def __init__(self, keys: tuple[str, ...], sequence: str | None, sequence_groups: Any = None) -> None:
        super().__init__(keys, sequence)
        groups: dict[str, list[str]] = {}
        if sequence_groups is not None and not isinstance(sequence_groups, dict):
            raise InvalidInputError(f"{option('sequence_groups')} must map a sequence column to a list of columns, "
                                    f"got {sequence_groups!r}")
        owner: dict[str, str] = {}
        for seq, cols in (sequence_groups or {}).items():
            if not isinstance(seq, str) or not seq:
                raise InvalidInputError(f"{option('sequence_groups')}: {seq!r} is not a column name")
            if seq in keys:
                raise InvalidInputError(f"{option('sequence_groups')}: group sequence {seq!r} is a key column")
            if seq == sequence:
                raise InvalidInputError(
                    f"{option('sequence_groups')}: group sequence {seq!r} is the {option('sequence_by')} column")
            cols = check_names(cols, "sequence_groups")
            for c in cols:
                if c in keys:
                    raise InvalidInputError(f"{option('sequence_groups')}: column {c!r} of group {seq!r} is a key")
                if c == sequence:
                    raise InvalidInputError(
                        f"{option('sequence_groups')}: column {c!r} of group {seq!r} is the "
                        f"{option('sequence_by')} column")
                if c in owner or c in (sequence_groups or {}):
                    other = owner.get(c, c)
                    raise InvalidInputError(
                        f"{option('sequence_groups')}: column {c!r} is in two groups ({other!r} and {seq!r}), or is "
                        "a group sequence too; a column follows one sequence")
                owner[c] = seq
            groups[seq] = cols
        self.groups = groups

    def options(self) -> dict[str, Any]:
        return {"sequence_groups": {g: list(cs) for g, cs in sorted(self.groups.items())}}

    def check_columns(self, batch: list[str], table: list[str] | None, target: str) -> None:
        known = set(batch) | set(table or ())
        for seq, cols in self.groups.items():
            for c in [seq, *cols]:
                if c not in known:
                    raise InvalidInputError(
                        f"{option('sequence_groups')}: column {c!r} of group {seq!r} is neither in the batch nor in "
                        f"table {target}. Nothing was written.")
            carried = [c for c in cols if c in batch]
            if carried and seq not in batch:
                raise InvalidInputError(
                    f"{option('sequence_groups')}: the batch carries {carried} of group {seq!r} but not its sequence "
                    f"column {seq!r}: a group is only updated with its sequence. Nothing was written.")

    def _ordered(self, columns: list[str]) -> list[tuple[str, list[str]]]:
        """(sequence, its columns in the batch) for each group the batch carries, and the ungrouped columns
        under ``sequence_by`` when given."""
        out = [(seq, [c for c in cols if c in columns]) for seq, cols in self.groups.items() if seq in columns]
        if self.sequence is not None:
            out.append((self.sequence, self._ungrouped(columns)))
        return out

    def _ungrouped(self, columns: list[str]) -> list[str]:
        grouped = {c for cs in self.groups.values() for c in cs} | set(self.groups)
        return [c for c in columns if c not in self.keys and c not in grouped and c != self.sequence]

    def prepare(self, table: pa.Table) -> pa.Table:
        if unique_keys(table, self.keys):
            try:
                return self._one_row_a_key(table)
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass  # a column type if_else does not take: the general path below
        keys = list(self.keys)
        columns = table.column_names
        out = table.group_by(keys).aggregate([])
        for seq, cols in self._ordered(columns):
            rows = table.filter(pc.is_valid(table[seq]))
            distinct, _ = distinct_per_key(rows, self.keys, [seq, *cols])
            per = distinct.group_by([*keys, seq]).aggregate([([], "count_all")])
            over = per.filter(pc.greater(per["count_all"], 1))
            if over.num_rows:
                raise _dup(self.keys, over, f"different rows at an equal {seq!r}")
            ordered = distinct.sort_by([(seq, "ascending")])
            for c in cols:
                ordered = ordered.append_column(helper(c), pc.if_else(pc.is_valid(ordered[c]), ordered[seq], pa.scalar(None, ordered[seq].type)))
            aggs = [(seq, "max"), *((c, "last") for c in cols), *((helper(c), "max") for c in cols)]
            got = ordered.group_by(keys, use_threads=False).aggregate(aggs)
            got = got.rename_columns(_names(got, keys))
            out = out.join(got, keys=keys, join_type="left outer")
        if self.sequence is None:
            plain = self._ungrouped(columns)
            if plain:
                counts = table.group_by(keys).aggregate([(c, "count_distinct") for c in plain])
                for c in plain:
                    over = counts.filter(pc.greater(counts[f"{c}_count_distinct"], 1))
                    if over.num_rows:
                        raise _dup(self.keys, over, f"different values of {c!r} and no sequence_by to order them")
                got = table.group_by(keys).aggregate([(c, "max") for c in plain])
                out = out.join(got.rename_columns(_names(got, keys)), keys=keys, join_type="left outer")
        order = [c for c in columns if c in out.column_names]
        rest = [c for c in out.column_names if c not in order]
        return out.select([*order, *rest]).cast(_schema(out.select([*order, *rest]).schema, table.schema))

    def _one_row_a_key(self, table: pa.Table) -> pa.Table:
        """``prepare`` of a batch with one row a key, without its group-bys: a row whose group sequence is null
        brings nothing of that group, and each value carries its group's sequence when it is not null."""
        out, helpers = table, []
        for seq, cols in self._ordered(table.column_names):
            valid = pc.is_valid(table[seq])
            no_seq = pa.scalar(None, table[seq].type)
            for c in cols:
                value = pc.if_else(valid, table[c], pa.scalar(None, table[c].type))
                out = out.set_column(out.schema.get_field_index(c), c, value)
                helpers.append((helper(c), pc.if_else(pc.and_(valid, pc.is_valid(table[c])), table[seq], no_seq)))
        for name, values in helpers:
            out = out.append_column(name, values)
        return out

    def update_condition(self, dialect: Dialect, source: pa.Schema) -> str | None:
        """A row changes only when one of its sequences grows, or (no sequence) a non-null value differs: a
        batch sent again under a new id rewrites nothing (its commit holds only the marker)."""
        columns = [c for c in source.names if not c.startswith(HELPER_PREFIX)]
        parts = [newer(seq, seq, dialect) for seq, _ in self._ordered(columns)]
        if self.sequence is None:
            for c in self._ungrouped(columns):
                differs = (f"NOT ({t(c, dialect)} <=> {s(c, dialect)})" if dialect == "spark"
                           else f"({t(c, dialect)} IS DISTINCT FROM {s(c, dialect)})")
                parts.append(f"({s(c, dialect)} IS NOT NULL AND {differs})")
        return "(" + " OR ".join(parts) + ")" if parts else "FALSE"

    def assignments(self, column: str, dialect: Dialect, source: pa.Schema) -> str:
        if column in self.groups or column == self.sequence:
            return f"CASE WHEN {newer(column, column, dialect)} THEN {s(column, dialect)} ELSE {t(column, dialect)} END"
        for seq, cols in self.groups.items():
            if column in cols:
                return pick(newer(helper(column), seq, dialect), column, dialect)
        if self.sequence is not None:
            return pick(newer(helper(column), self.sequence, dialect), column, dialect)
        return f"coalesce({s(column, dialect)}, {t(column, dialect)})"


def _names(table: pa.Table, keys: list[str]) -> list[str]:
    """Arrow's ``<col>_<fn>`` names back to the column names (keys come last from group_by)."""
    names = []
    for n in table.column_names:
        if n in keys:
            names.append(n)
        else:
            names.append(n.rsplit("_", 1)[0])
    return names


def _schema(got: pa.Schema, given: pa.Schema) -> pa.Schema:
    return pa.schema([given.field(n) if n in given.names else got.field(n) for n in got.names])


def _dup(keys: tuple[str, ...], over: pa.Table, reason: str) -> DuplicateKeyError:
    from upsertsink.modes.base import duplicate

    return duplicate(keys, over, reason)
