"""Preparing a batch, the engine-neutral part: settings, schema and predicate checks, and error texts.

The engines describe their columns as :class:`Column` (name, a coarse type category, the engine's own
type text); everything here decides on those, so both engines accept and refuse the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from upsertsink.errors import DuplicateKeyError, InvalidInputError, SchemaMismatchError
from upsertsink.spec import DELETE_FLAG

MAX_NAMED_KEYS = 5

# Spark's Delta writer refuses these characters in column names unless column mapping is on.
SPARK_UNSAFE_NAME_CHARS = set(" ,;{}()\n\t=")


@dataclass(frozen=True)
class Column:
    name: str
    category: str  # integer, float, decimal, string, boolean, date, timestamp, binary, null, or other:<t>
    type: str  # the engine's own type text, for messages


def normalize_keys(keys: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(keys, str):
        keys = [keys]
    keys = tuple(keys or ())
    if not keys:
        raise InvalidInputError("keys must name at least one column")
    for k in keys:
        if not isinstance(k, str) or not k:
            raise InvalidInputError(f"keys must be column names (non-empty strings), got {k!r}")
    if len(set(keys)) != len(keys):
        raise InvalidInputError(f"keys name a column twice: {list(keys)}")
    return keys


def check_batch_id(batch_id: object) -> int | None:
    if batch_id is None:
        return None
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise InvalidInputError(f"batch_id must be an int >= 0 or None, got {batch_id!r}")
    return batch_id


def _compatible(src: Column, tgt: Column) -> bool:
    if src.category == tgt.category or src.category == "null":
        return True
    return src.category == "integer" and tgt.category in ("float", "decimal")


def check_columns(
    source: list[Column],
    target: list[Column] | None,
    keys: tuple[str, ...],
    sequence: str | None,
    schema_evolution: bool,
    target_name: str,
) -> tuple[list[Column], list[str]]:
    """Validate the batch's columns against the table's.

    Returns (columns to add to the table, names of source columns whose type must be cast to the table's).
    Raises a SchemaMismatchError naming the columns at fault.
    """
    names = [c.name for c in source]
    if DELETE_FLAG in names:
        raise SchemaMismatchError(f"column {DELETE_FLAG!r} is reserved by upsertsink; rename it")
    dup_names = sorted({n for n in names if names.count(n) > 1})
    if dup_names:
        raise SchemaMismatchError(f"the batch has several columns named {dup_names}")
    missing = [k for k in keys if k not in names]
    if missing:
        raise SchemaMismatchError(
            f"key column(s) {missing} missing from the batch; batch columns are {names}"
        )
    if sequence is not None and sequence not in names:
        raise SchemaMismatchError(
            f"sequence_by column {sequence!r} missing from the batch; batch columns are {names}"
        )
    for c in source:
        if c.category == "null" and (c.name in keys or c.name == sequence):
            raise SchemaMismatchError(f"column {c.name!r} has no type (all values null)")
    if target is None:
        return [], []
    by_name = {c.name: c for c in target}
    extra = [c for c in source if c.name not in by_name]
    if extra and not schema_evolution:
        raise SchemaMismatchError(
            f"the batch has column(s) {[c.name for c in extra]} that table {target_name} does not have; "
            "pass schema_evolution=True to add them, or drop them from the batch"
        )
    absent = [c.name for c in target if c.name not in names]
    if absent:
        raise SchemaMismatchError(
            f"the batch lacks column(s) {absent} of table {target_name}; send every column of the table"
        )
    casts = []
    for c in source:
        t = by_name.get(c.name)
        if t is None:
            continue
        if not _compatible(c, t):
            raise SchemaMismatchError(
                f"column {c.name!r} has type {c.type} in the batch but {t.type} in table {target_name}; "
                "cast it to the table's type before writing"
            )
        if c.type != t.type:
            casts.append(c.name)
    return [c for c in extra if c.category != "null"], casts


def parse_predicate(predicate: str, columns: list[str], option: str = "delete_when") -> exp.Expression:
    """Parse a SQL predicate (Spark dialect) and check every column it names exists in the batch."""
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidInputError(f"{option} must be a non-empty SQL predicate string, got {predicate!r}")
    try:
        tree = sqlglot.parse_one(predicate, read="spark")
    except sqlglot.errors.ParseError as err:
        raise InvalidInputError(f"{option} is not a valid SQL predicate: {predicate!r} ({err})") from None
    if tree is None or isinstance(tree, (exp.Select, exp.Command)) or tree.find(exp.Subquery, exp.Select):
        raise InvalidInputError(f"{option} must be a predicate over the batch's columns: {predicate!r}")
    unknown = sorted({c.name for c in tree.find_all(exp.Column) if c.name not in columns})
    if unknown:
        raise InvalidInputError(
            f"{option} {predicate!r} names column(s) {unknown} that the batch does not have; "
            f"batch columns are {columns}"
        )
    return tree


def needs_column_mapping(columns: list[str]) -> bool:
    return any(SPARK_UNSAFE_NAME_CHARS & set(c) for c in columns)


def null_error(column: str, count: int, role: str) -> InvalidInputError:
    return InvalidInputError(
        f"{role} column {column!r} has {count} null value(s) in this batch; {role} values must not be null "
        "(drop or fill those rows before writing). Nothing was written."
    )


def duplicate_error(keys: tuple[str, ...], examples: list[tuple], reason: str) -> DuplicateKeyError:
    shown = ", ".join(
        "{" + ", ".join(f"{k}={v!r}" for k, v in zip(keys, row, strict=True)) + "}"
        for row in examples[:MAX_NAMED_KEYS]
    )
    return DuplicateKeyError(f"the batch holds the same key more than once ({reason}): {shown}. Nothing was written.")
