"""The merge-mode seam: what a merge engine other than ``upsert`` decides (issue #47).

A :class:`MergeMode` validates its options once (at the sink's construction: ``ValueError`` naming the option
or column), checks a batch's columns against the table's, turns the batch (Arrow, cast to the table's types) into
one row per key (``prepare``: the batch's rows of a key combined first) and says how the MERGE combines that row
with the stored one (``plan``: a :class:`ModePlan`, rendered in both SQL dialects of ``spec.py``). The protocol
runs every mode the same way (``protocol._attempt_mode``): marker, replay skip and content check stay its own,
so every mode is exactly once. ``upsert`` (and SCD2 history) keep their own path in the protocol.

Columns a mode adds:

- *hidden* columns are stored in the table (``__upsertsink_order_<col>``: the sequence of the value an
  ``aggregate`` ``first``/``last`` column holds, when ``sequence_by`` orders them);
- *helper* columns live only in the MERGE's source (``__upsertsink_at_<col>``: the group sequence of the value
  a ``partial_update`` column carries), never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from upsertsink import batch as B
from upsertsink.errors import DuplicateKeyError, InvalidInputError, MergeModeMismatchError, option
from upsertsink.spec import SOURCE, TARGET, Dialect, MergePlan, quote

HIDDEN_PREFIX = "__upsertsink_order_"
HELPER_PREFIX = "__upsertsink_at_"


def helper(column: str) -> str:
    return HELPER_PREFIX + column


def hidden(column: str) -> str:
    return HIDDEN_PREFIX + column


class MergeMode:
    """One merge engine. Subclasses set ``name`` and implement ``prepare`` and ``assignments``."""

    name: ClassVar[str]
    # Can the batch leave out a column the table has (it is then left as stored)?
    narrow_batches: ClassVar[bool] = True

    def __init__(self, keys: tuple[str, ...], sequence: str | None) -> None:
        self.keys = keys
        self.sequence = sequence

    # ------------------------------------------------------------ identity (stored with the table)

    def options(self) -> dict[str, Any]:
        """The options that must be equal for two sinks to share a table (stored in each commit's metadata)."""
        return {}

    def describe(self) -> str:
        opts = self.options()
        return f"merge_engine={self.name!r}" + "".join(f", {k}={v!r}" for k, v in opts.items())

    # ------------------------------------------------------------ a batch

    def check_columns(self, batch: list[str], table: list[str] | None, target: str) -> None:
        """Refuse a batch whose columns the mode cannot use (``ValueError`` naming the column)."""

    def lackable(self, table: list[str]) -> list[str]:
        """The table's columns a batch may leave out."""
        hidden_ = [c for c in table if c.startswith(HIDDEN_PREFIX)]
        if not self.narrow_batches:
            return hidden_
        return [c for c in table if c not in self.keys]

    def hidden_columns(self, source: pa.Schema) -> list[pa.Field]:
        """The hidden columns the table needs for ``source``'s columns (stored, never sent)."""
        return []

    def prepare(self, table: pa.Table) -> pa.Table:
        """The batch as one row per key (helper and hidden columns included); refuses what it cannot order."""
        raise NotImplementedError

    def assignments(self, column: str, dialect: Dialect, source: pa.Schema) -> str:
        """The UPDATE SET expression of ``column`` (the stored row ``t``, the prepared row ``s``)."""
        raise NotImplementedError

    def update_condition(self, dialect: Dialect, source: pa.Schema) -> str | None:
        """When a matched row is updated (None: always); a row it leaves out stays as it is, unrewritten."""
        return None

    def updates(self) -> bool:
        return True

    def plan(self, source: pa.Schema, table: list[str] | None, new_columns: tuple[str, ...]) -> ModePlan:
        written = tuple(c for c in source.names if not c.startswith(HELPER_PREFIX))
        return ModePlan(self.keys, written, None, new_columns=new_columns, mode=self, source_schema=source)


@dataclass(frozen=True)
class ModePlan(MergePlan):
    """A MergePlan whose UPDATE combines the stored row with the prepared one as the mode says."""

    mode: Any = None
    source_schema: Any = None

    @property
    def row_filterable(self) -> bool:
        return False

    @property
    def has_update(self) -> bool:
        return self.upserts and bool(self.value_columns) and self.mode.updates()

    def update_condition(self, dialect: Dialect) -> str | None:
        condition = self.mode.update_condition(dialect, self.source_schema) or "TRUE"  # Spark's SQL needs a text
        return self._unstored(condition, dialect)

    def _unstored(self, text: str, dialect: Dialect) -> str:
        for c in self.new_columns:  # not in the table yet (added by this MERGE): every stored value is null
            text = text.replace(t(c, dialect), "NULL")
        return text

    def update_set(self, dialect: Dialect) -> dict[str, str]:
        sets = {quote(c, dialect): self.mode.assignments(c, dialect, self.source_schema) for c in self.value_columns}
        return {k: self._unstored(v, dialect) for k, v in sets.items()}


# ---------------------------------------------------------------- SQL pieces


def ref(alias: str, column: str, dialect: Dialect) -> str:
    return f"{alias}.{quote(column, dialect)}"


def t(column: str, dialect: Dialect) -> str:
    return ref(TARGET, column, dialect)


def s(column: str, dialect: Dialect) -> str:
    return ref(SOURCE, column, dialect)


def newer(source_seq: str, target_seq: str, dialect: Dialect, lower: bool = False) -> str:
    """The incoming sequence ``s.source_seq`` is set and beyond the stored ``t.target_seq`` (a stored null is
    older than anything)."""
    op = "<" if lower else ">"
    return (f"({s(source_seq, dialect)} IS NOT NULL AND ({t(target_seq, dialect)} IS NULL OR "
            f"{s(source_seq, dialect)} {op} {t(target_seq, dialect)}))")


def pick(condition: str, column: str, dialect: Dialect, source_column: str | None = None) -> str:
    return f"CASE WHEN {condition} THEN {s(source_column or column, dialect)} ELSE {t(column, dialect)} END"


# ---------------------------------------------------------------- Arrow helpers


def unique_keys(table: pa.Table, keys: tuple[str, ...]) -> bool:
    """Does every key occur once in ``table``? (The common batch; a mode then has nothing to combine, and skips
    the group-bys over every column that would find and fold a key's rows: they cost time and Arrow's memory.)"""
    if len(keys) == 1:
        column = table[keys[0]]
        if column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_temporal(column.type)):
            values = np.sort(column.to_numpy())  # a sort needs far less memory than Arrow's hash table
            return not bool((values[1:] == values[:-1]).any())
        return pc.count_distinct(column, mode="all").as_py() == table.num_rows
    return table.select(list(keys)).group_by(list(keys), use_threads=False).aggregate([]).num_rows == table.num_rows


def distinct_per_key(table: pa.Table, keys: tuple[str, ...], columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """(the distinct rows of ``table`` over ``keys`` + ``columns``, how many there are per key)."""
    cols = list(dict.fromkeys([*keys, *columns]))
    try:
        distinct = table.select(cols).group_by(cols, use_threads=False).aggregate([])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        seen, kept = set(), []
        for i, row in enumerate(table.select(cols).to_pylist()):
            sig = repr(tuple(row[c] for c in cols))
            if sig not in seen:
                seen.add(sig)
                kept.append(i)
        distinct = table.select(cols).take(pa.array(kept, pa.int64()))
    counts = distinct.group_by(list(keys)).aggregate([([], "count_all")])
    return distinct, counts


def refuse_duplicates(counts: pa.Table, keys: tuple[str, ...], count: str, reason: str) -> None:
    over = counts.filter(pc.greater(counts[count], 1))
    if over.num_rows:
        examples = [tuple(r[k] for k in keys) for r in over.select(list(keys)).slice(0, B.MAX_NAMED_KEYS).to_pylist()]
        raise B.duplicate_error(keys, examples, reason)


def duplicate(keys: tuple[str, ...], table: pa.Table, reason: str) -> DuplicateKeyError:
    examples = [tuple(r[k] for k in keys) for r in table.select(list(keys)).slice(0, B.MAX_NAMED_KEYS).to_pylist()]
    return B.duplicate_error(keys, examples, reason)


def integer_bounds(kind: pa.DataType) -> tuple[int, int] | None:
    if pa.types.is_signed_integer(kind):
        bits = kind.bit_width
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if pa.types.is_unsigned_integer(kind):
        return 0, 2**kind.bit_width - 1
    return None


SQL_INT = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}


def check_names(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(c, str) and c for c in value):
        raise InvalidInputError(f"{option(what)} must list column names, got {value!r}")
    return list(value)
