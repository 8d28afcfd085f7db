"""What the two sides of a diff are, which engine compares them, and which columns are compared."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from upsertsink import io, session
from upsertsink.errors import InvalidInputError, SchemaMismatchError, option

log = logging.getLogger(__name__)

#: Inputs on disk larger than this (data files of the version read) are compared on Spark by
#: ``engine="auto"`` when Spark is installed.
SPARK_THRESHOLD_BYTES = 64 * 1024 * 1024

ENGINES = ("auto", "spark", "embedded")


@dataclass(frozen=True)
class Request:
    """What to compare, checked: the keys, the column selection, the tolerance and the sample size."""

    keys: list[str]
    columns: list[str] | None
    ignore: list[str] | None
    tolerance: float | None
    sample_size: int


@dataclass
class Side:
    """One side of a diff: a path (Delta table or data files) or a frame in memory."""

    name: str  # "left" | "right"
    kind: str  # delta | files | spark | pandas | arrow
    label: str
    obj: Any = None  # the frame, for in-memory inputs
    path: io.PathInput | None = None


def resolve(value: Any, name: str) -> Side:
    """Check one input of ``diff()`` and say what it is (an ``io.PathInput`` is one checked already)."""
    if isinstance(value, io.PathInput):
        return Side(name, value.kind, value.spec, path=value)
    if isinstance(value, (str, os.PathLike)):
        src = io.resolve_path(value, name)
        return Side(name, src.kind, src.spec, path=src)
    kind = io.frame_kind(value)
    if kind == "arrow":
        return Side(name, kind, f"<pyarrow Table ({name})>", io.to_arrow_table(value))
    if kind is not None:
        return Side(name, kind, f"<{'Spark' if kind == 'spark' else 'pandas'} DataFrame ({name})>", value)
    raise InvalidInputError(
        f"{name}: cannot compare a {type(value).__name__}; pass a Delta table path (PATH or PATH@VERSION), "
        "a parquet/csv/json file or folder, a Spark DataFrame, a pandas DataFrame or a pyarrow Table"
    )


def choose_engine(engine: str, sides: Sequence[Side]) -> str:
    """``spark`` or ``embedded`` for ``engine`` (``auto`` decides by input kind and size)."""
    if engine not in ENGINES:
        raise InvalidInputError(f"{option('engine')} must be 'auto', 'spark' or 'embedded', got {engine!r}")
    has_spark = any(s.kind == "spark" for s in sides)
    if engine == "embedded" and has_spark:
        raise InvalidInputError(
            f"{option('engine', repr('embedded'))} cannot compare a Spark DataFrame; "
            f"use {option('engine', repr('spark'))}"
        )
    if engine != "auto":
        return engine
    if has_spark:
        return "spark"
    large = [s for s in sides if s.path is not None and s.path.size_bytes() > SPARK_THRESHOLD_BYTES]
    if large and session.spark_installed():
        return "spark"
    if large:
        log.info("%s is larger than %d bytes but Spark is not installed: comparing without Spark",
                 large[0].label, SPARK_THRESHOLD_BYTES)  # fmt: skip
    return "embedded"


def as_list(value: str | Sequence[str] | None, name: str) -> list[str] | None:
    """A column name or names as a list (None stays None); ``name`` is the parameter, for messages."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    out = list(value)
    for item in out:
        if not isinstance(item, str):
            raise InvalidInputError(f"{option(name)} must be column names (str), got {item!r}")
    return out


HISTORY_START, HISTORY_END = "__START_AT", "__END_AT"


def history_keys(left: Sequence[str], right: Sequence[str], keys: list[str]) -> list[str]:
    """Two history tables (SCD type 2: both have __START_AT and __END_AT) are compared version by version: the
    keys plus __START_AT, unless the caller named it."""
    both = set(left) & set(right)
    if HISTORY_START in both and HISTORY_END in both and keys and HISTORY_START not in keys:
        return [*keys, HISTORY_START]
    return keys


def plan_columns(
    left: Sequence[str],
    right: Sequence[str],
    keys: list[str],
    columns: list[str] | None,
    ignore: list[str] | None,
) -> list[str]:
    """Check keys and column selections against both sides; return the compared non-key columns."""
    lset, rset = set(left), set(right)
    if not keys:
        raise InvalidInputError(f"diff needs at least one key column ({option('keys')})")
    for k in keys:
        for side, names in (("left", left), ("right", right)):
            if k not in names:
                raise InvalidInputError(
                    f"key column {k!r} is not in the {side} input (columns: {', '.join(names)})"
                )
    ignore = ignore or []
    for c in ignore:
        if c in keys:
            raise InvalidInputError(f"key column {c!r} cannot be ignored ({option('ignore_columns')})")
        if c not in lset and c not in rset:
            raise InvalidInputError(f"{option('ignore_columns')}: unknown column {c!r} (in neither input)")
    if columns is not None:
        compared: list[str] = []
        for c in columns:
            for side, names in (("left", lset), ("right", rset)):
                if c not in names:
                    # "columns" is not named: its CLI flag is --column, which option() cannot spell yet
                    raise InvalidInputError(f"unknown column {c!r} to compare (not in the {side} input)")
            if c not in keys and c not in ignore and c not in compared:
                compared.append(c)
        return compared
    skip = set(keys) | set(ignore)
    only_left = [c for c in left if c not in rset and c not in skip]
    only_right = [c for c in right if c not in lset and c not in skip]
    if only_left or only_right:
        parts = []
        if only_left:
            parts.append(f"only in left: {', '.join(only_left)}")
        if only_right:
            parts.append(f"only in right: {', '.join(only_right)}")
        raise SchemaMismatchError(
            f"the inputs have different columns ({'; '.join(parts)}); leave them out with "
            f"{option('ignore_columns', '[...]')}"
        )
    return [c for c in left if c not in skip]


def type_mismatch(name: str, left: str, right: str) -> SchemaMismatchError:
    """The error for a compared column whose types cannot be unified."""
    return SchemaMismatchError(
        f"column {name!r} has type {left} on the left and {right} on the right; "
        f"cast one side, or leave it out with {option('ignore_columns', repr([name]))}"
    )


def check_tolerance(tolerance: float | None) -> float | None:
    """The tolerance as a float >= 0 (None: exact)."""
    if tolerance is None:
        return None
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{option('tolerance')} must be a number, got {tolerance!r}") from None
    if not tol >= 0 or math.isinf(tol):
        raise InvalidInputError(f"{option('tolerance')} must be a finite number >= 0, got {tolerance!r}")
    return tol
