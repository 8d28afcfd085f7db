"""Which files of the target can hold the batch's keys: file skipping that follows the batch, not the table.

Delta keeps each file's min/max per column. A batch usually touches a few narrow key ranges (updates of recent
keys, inserts of new ones beyond the end), yet one ``key BETWEEN batch-min AND batch-max`` spans everything in
between. This module reads the file statistics (with deltalake, on both engines), finds the files whose
[min, max] contains at least one of the batch's key values, and returns their ranges, merged: the engines add
``(key BETWEEN lo1 AND hi1 OR key BETWEEN lo2 AND hi2 ...)`` to the MERGE condition, so the MERGE (and, on
Spark, the no-op filter) reads only those files, while new keys outside every file are inserted unread (Spark's
MERGE gets the condition only when the files it skips hold enough rows to pay for Delta's data-skipping query:
``spark_merge.SPARK_PRUNE_MIN_SKIPPED_ROWS``). The
ranges always cover every batch key (keys beyond every file get the range of the gap they fall in), so that a
racing writer's insert of the same key is matched or makes the commit conflict.

The ranges are computed from exact file statistics only: a file without statistics for the key, a string
statistic that may be truncated, or a key type we do not prune on disables pruning (the MERGE then reads what
it always read). Results are tested by ``tests/test_pruning.py`` against the files each commit rewrote.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

MAX_RANGES = 32  # more touched files than this: neighbouring ranges are merged (a superset stays correct)
STRING_STATS_PREFIX = 32  # Delta writers may truncate string statistics beyond this many characters


@dataclass(frozen=True)
class FileRanges:
    """The key ranges of the files a batch can touch: ``key`` -> sorted, disjoint (low, high) pairs."""

    key: str
    ranges: tuple[tuple[Any, Any], ...]
    files: int  # files those ranges cover (the files the MERGE may read)
    total_files: int
    max_sequence: Any = None  # the highest sequence value those files hold (from statistics), when known
    skipped_rows: int | None = None  # rows in the files left out (from statistics), when known

    @property
    def narrows(self) -> bool:
        """True when the ranges leave some file out (else a predicate would only cost time)."""
        return self.files < self.total_files


def _prunable(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def _stats(actions: pa.Table, key: str) -> tuple[pa.Array, pa.Array] | None:
    lo, hi = f"min.{key}", f"max.{key}"
    if actions.num_rows == 0 or lo not in actions.column_names or hi not in actions.column_names:
        return None
    mins, maxs = actions[lo].combine_chunks(), actions[hi].combine_chunks()
    if mins.null_count or maxs.null_count:
        return None  # a file without statistics could hold any key
    return mins, maxs


def file_ranges(
    table: Any, keys: tuple[str, ...], batch_keys: pa.Table | None, sequence: str | None = None
) -> FileRanges | None:
    """The ranges of the target files that can hold any key of ``batch_keys`` (a table of key columns).

    None when pruning does not apply (no statistics, a key type not pruned on, column mapping, no batch keys).
    """
    if batch_keys is None or batch_keys.num_rows == 0:
        return None
    if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        return None  # statistics are kept under physical names
    actions = pa.table(table.get_add_actions(flatten=True))  # one read of the snapshot's file list
    for key in keys:
        values = batch_keys[key]
        if not _prunable(values.type) or values.null_count:
            continue
        stats = _stats(actions, key)
        if stats is None:
            continue
        mins, maxs = stats
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            longest = pc.max(pc.utf8_length(pa.concat_arrays([mins.cast(pa.string()), maxs.cast(pa.string())])))
            if (longest.as_py() or 0) >= STRING_STATS_PREFIX:
                continue
        try:
            mins, maxs = mins.cast(values.type), maxs.cast(values.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        found, hits = _ranges(key, values, mins, maxs)
        found = replace(found, skipped_rows=_skipped_rows(actions, hits))
        return replace(found, max_sequence=_max_sequence(actions, sequence, hits)) if sequence else found
    return None


def _skipped_rows(actions: pa.Table, reads: np.ndarray) -> int | None:
    if "num_records" not in actions.column_names:
        return None
    counts = actions["num_records"].combine_chunks().filter(pa.array(~reads))
    return None if counts.null_count else int(pc.sum(counts).as_py() or 0)


def _max_sequence(actions: pa.Table, sequence: str, hits: np.ndarray) -> Any:
    """The largest ``sequence`` value in the files selected by ``hits``, from their statistics (None if unknown)."""
    name = f"max.{sequence}"
    if name not in actions.column_names:
        return None
    values = actions[name].combine_chunks().filter(pa.array(hits))
    if values.null_count or not pa.types.is_integer(values.type):
        return None  # integer sequences only: other statistics may be rounded or truncated
    return pc.max(values).as_py() if len(values) else None


def _as_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_date(arr.type):
        arr = arr.cast(pa.int32()) if pa.types.is_date32(arr.type) else arr.cast(pa.date32()).cast(pa.int32())
    return arr.to_numpy(zero_copy_only=False)


def _ranges(key: str, values: pa.ChunkedArray, mins: pa.Array, maxs: pa.Array) -> tuple[FileRanges, np.ndarray]:
    lo, hi = _as_numpy(mins), _as_numpy(maxs)
    sorted_values = _as_numpy(values)  # repeats do no harm to the searches below
    if len(sorted_values) > 1 and not (sorted_values[1:] >= sorted_values[:-1]).all():  # batches often come in order
        sorted_values = np.sort(sorted_values)
    # the files that hold at least one batch key in their [min, max]
    hits = np.searchsorted(sorted_values, lo, side="left") < np.searchsorted(sorted_values, hi, side="right")
    spans = _merge(sorted(zip(lo[hits], hi[hits]), key=lambda p: p[0]))
    # Keys outside every file are inserted unread, but the condition must still cover them: the MERGE may run
    # on a newer snapshot than the statistics (Spark reads the latest version), and the commit's read predicate
    # is what the conflict check tests a racing writer's new files against. Such keys lie in the gaps between
    # the files' ranges; each gap gets the range of its own new keys, which holds no file of this snapshot.
    everything = _merge(sorted(zip(lo, hi), key=lambda p: p[0]))
    starts = np.array([a for a, _ in spans], dtype=sorted_values.dtype)
    ends = np.array([b for _, b in spans], dtype=sorted_values.dtype)
    at = np.searchsorted(starts, sorted_values, side="right") - 1
    covered = np.zeros(len(sorted_values), bool)
    if len(spans):
        covered = (at >= 0) & (sorted_values <= ends[np.maximum(at, 0)])
    outside = sorted_values[~covered]
    if len(outside):
        gap = np.searchsorted(np.array([a for a, _ in everything], dtype=sorted_values.dtype), outside, side="right")
        cuts = np.flatnonzero(np.diff(gap)) + 1
        for group in np.split(outside, cuts):
            spans.append((group[0], group[-1]))
        spans = _merge(sorted(spans, key=lambda p: p[0]))
    while len(spans) > MAX_RANGES:  # join the two neighbours with the smallest gap between them
        gaps = [_gap(spans[i][1], spans[i + 1][0]) for i in range(len(spans) - 1)]
        i = int(np.argmin(gaps))
        spans[i : i + 2] = [(spans[i][0], spans[i + 1][1])]
    # the files the MERGE may read: those overlapping a range (joined neighbours can take in a file between them)
    reads = np.zeros(len(lo), bool)
    for a, b in spans:
        reads |= (lo <= b) & (hi >= a)
    to_py = mins.type
    ranges = tuple((_py(a, to_py), _py(b, to_py)) for a, b in spans)
    return FileRanges(key, ranges, int(reads.sum()), len(lo)), reads


def _merge(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Overlapping (low, high) pairs, sorted by low, joined into disjoint ones."""
    merged: list[tuple[Any, Any]] = []
    for a, b in pairs:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _gap(a: Any, b: Any) -> float:
    try:
        return float(b - a)
    except TypeError:  # strings: no distance; merge in order
        return 0.0


def _py(value: Any, t: pa.DataType) -> Any:
    if pa.types.is_date(t):
        return pa.scalar(int(value), pa.int32()).cast(pa.date32()).as_py()
    return value.item() if hasattr(value, "item") else value


def sql_literal(value: Any) -> str:
    """A DataFusion literal for a range bound computed here from typed values (an int, a date, a str)."""
    import datetime

    if isinstance(value, bool) or not isinstance(value, (int, str, datetime.date)):
        raise TypeError(f"no literal for {type(value).__name__}")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, datetime.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    return "'" + value.replace("'", "''") + "'"  # DataFusion takes backslashes literally; quotes are doubled
