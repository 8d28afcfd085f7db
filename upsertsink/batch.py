"""Preparing a batch, the engine-neutral part: settings, schema and predicate checks, and error texts.

The engines describe their columns as :class:`Column` (name, a coarse type category, the engine's own
type text); everything here decides on those, so both engines accept and refuse the same batches.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field

from upsertsink.errors import DuplicateKeyError, InvalidInputError, SchemaMismatchError, option
from upsertsink.spec import DELETE_FLAG

MAX_NAMED_KEYS = 5

# Spark's Delta writer refuses these characters in column names unless column mapping is on.
SPARK_UNSAFE_NAME_CHARS = set(" ,;{}()\n\t=")


@dataclass(frozen=True)
class Column:
    name: str
    category: str  # integer, float, decimal, string, boolean, date, timestamp, binary, null, or other:<t>
    type: str  # the engine's own type text, for messages
    dtype: object = field(default=None, compare=False)  # the engine's own type object (Arrow or Spark)


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


MAX_BATCH_ID = 2**63 - 1  # a Delta transaction identifier's version is a signed 64-bit number


def check_batch_id(batch_id: object) -> int | None:
    """The batch id as a Python int (numpy and other integer types accepted); None stays None."""
    if batch_id is None:
        return None
    if not isinstance(batch_id, bool) and not isinstance(batch_id, int):
        try:  # numpy.int64, a pandas scalar ...: anything that is an integer by __index__
            batch_id = operator.index(batch_id)  # type: ignore[call-overload]
        except TypeError:
            pass
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or not 0 <= batch_id <= MAX_BATCH_ID:
        raise InvalidInputError(
            f"{option('batch_id')} must be an integer from 0 to 2**63-1 (a Delta transaction version), or "
            f"None; got {batch_id!r}"
        )
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
    null_counts: Callable[[list[str]], dict[str, int]] | None = None,
    filled: dict[str, str] | None = None,
) -> tuple[list[Column], list[str]]:
    """Validate the batch's columns against the table's.

    Returns (columns to add to the table, names of source columns whose type must be cast to the table's).
    Raises a SchemaMismatchError naming the columns at fault. ``null_counts`` (the engine's) is asked about
    key and sequence columns whose type does not fit, so that nulls are named as nulls: pandas turns None in
    an integer column into NaN, which makes the column a float one. ``filled`` names the table's columns
    that Delta fills in (``table_checks.filled_columns``): the batch may leave those out, and must leave out
    a ``GENERATED ALWAYS AS IDENTITY`` column, whose values only Delta assigns.
    """
    names = [c.name for c in source]
    if DELETE_FLAG in names:
        raise SchemaMismatchError(f"column {DELETE_FLAG!r} is reserved by upsertsink; rename it")
    dup_names = sorted({n for n in names if names.count(n) > 1})
    if dup_names:
        raise SchemaMismatchError(f"the batch has several columns named {dup_names}")
    by_fold: dict[str, list[str]] = {}
    for n in names:
        by_fold.setdefault(n.casefold(), []).append(n)
    clashes = [group for group in by_fold.values() if len(group) > 1]
    if clashes:
        raise SchemaMismatchError(
            f"the batch has columns whose names differ only in case: {clashes[0]}; Delta column names are "
            "case-insensitive, so a table cannot hold both. Rename or drop one. Nothing was written."
        )
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
    filled = filled or {}
    given = [n for n in names if filled.get(n) == "identity"]  # table_checks.IDENTITY
    if given:
        role = " (a key column: key the sink on columns the batch carries)" if given[0] in keys else ""
        raise SchemaMismatchError(
            f"the batch carries column {given[0]!r}{role}, which table {target_name} declares GENERATED ALWAYS AS "
            "IDENTITY: Delta assigns its values on insert and keeps them on update, and refuses any value a "
            "write gives it. Drop the column from the batch. Nothing was written."
        )
    by_name = {c.name: c for c in target}
    folded = {c.name.casefold(): c.name for c in target}
    for c in source:
        if c.name not in by_name and c.name.casefold() in folded:
            raise SchemaMismatchError(
                f"the batch's column {c.name!r} differs from column {folded[c.name.casefold()]!r} of table "
                f"{target_name} only in case; Delta column names are case-insensitive. Spell it as the table "
                "does. Nothing was written."
            )
    extra = [c for c in source if c.name not in by_name]
    if extra and not schema_evolution:
        raise SchemaMismatchError(
            f"the batch has column(s) {[c.name for c in extra]} that table {target_name} does not have; "
            f"pass {option('schema_evolution', 'True')} to add them, or drop them from the batch"
        )
    absent = [c.name for c in target if c.name not in names and c.name not in filled]
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
            role = "key" if c.name in keys else "sequence_by" if c.name == sequence else None
            if role and null_counts is not None and c.category == "float":
                nulls = null_counts([c.name]).get(c.name, 0)
                if nulls:
                    raise null_error(
                        c.name, nulls, role,
                        " (pandas turns None in an integer column into NaN, which makes it a float column)",
                    )
            raise SchemaMismatchError(
                f"column {c.name!r} has type {c.type} in the batch but {t.type} in table {target_name}; "
                "cast it to the table's type before writing"
            )
        if c.type != t.type:
            casts.append(c.name)
    return [c for c in extra if c.category != "null"], casts


def replay_casts(source: list[Column], target: list[Column] | None) -> list[str]:
    """For checking a replay: the batch's columns that the table holds with another compatible type (cast to
    it, as when the batch was written); missing, extra or incompatible columns are left as sent."""
    by_name = {c.name: c for c in target or ()}
    return [
        c.name for c in source
        if c.name in by_name and c.type != by_name[c.name].type and _compatible(c, by_name[c.name])
        and c.category != "null"
    ]


def needs_column_mapping(columns: list[str]) -> bool:
    return any(SPARK_UNSAFE_NAME_CHARS & set(c) for c in columns)


def null_error(column: str, count: int, role: str, hint: str = "") -> InvalidInputError:
    return InvalidInputError(
        f"{role} column {column!r} has {count} null value(s) in this batch{hint}; {role} values must not be null "
        "(drop or fill those rows before writing). Nothing was written."
    )


def nan_error(column: str, count: int, role: str) -> InvalidInputError:
    return InvalidInputError(
        f"{role} column {column!r} has {count} NaN value(s) in this batch; a NaN {role} never compares "
        "equal or greater, so such a row could never be updated again (drop or fill those rows before "
        "writing). Nothing was written."
    )


def check_stats(keys: tuple[str, ...], sequence: str | None, nulls: dict[str, int], nans: dict[str, int]) -> None:
    """Raise for null or NaN key and sequence values, naming the first column at fault."""
    for name, role in [*((k, "key") for k in keys), *(((sequence, "sequence_by"),) if sequence else ())]:
        if nulls.get(name):
            raise null_error(name, nulls[name], role)
        if nans.get(name):
            raise nan_error(name, nans[name], role)


def cast_overflow_error(column: str, count: int, source_type: str, target_type: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"column {column!r}: {count} value(s) of the batch's {source_type} do not fit the table's {target_type}"
        + (" (too large, or more decimal places than it holds: the sink never rounds, on either engine)"
           if "decimal" in target_type.lower() else "")
        + "; fix those values or widen the table's column. Nothing was written."
    )


def duplicate_error(keys: tuple[str, ...], examples: list[tuple], reason: str) -> DuplicateKeyError:
    shown = ", ".join(
        "{" + ", ".join(f"{k}={v!r}" for k, v in zip(keys, row, strict=True)) + "}"
        for row in examples[:MAX_NAMED_KEYS]
    )
    return DuplicateKeyError(f"the batch holds the same key more than once ({reason}): {shown}. Nothing was written.")
