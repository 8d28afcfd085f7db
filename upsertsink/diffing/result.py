"""What a keyed comparison found: :class:`DiffResult`, and the sample rows both engines hand it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from upsertsink.errors import InvalidInputError

STATUSES = ("only_in_left", "only_in_right", "changed", "duplicate_key")


@dataclass
class DiffResult:
    """What ``diff()`` found: counts, per-column change counts and a few differing rows."""

    keys: list[str]
    columns: list[str]
    equal: bool
    only_in_left: int
    only_in_right: int
    changed: int
    changed_columns: dict[str, int]
    duplicate_keys_left: int
    duplicate_keys_right: int
    rows_left: int
    rows_right: int
    engine: str
    fingerprint_match: bool
    duplicate_keys: int = 0  # distinct keys held more than once by either side, each counted once
    left_label: str = "left"
    right_label: str = "right"
    _samples: Any = field(default=None, repr=False)
    _more_samples: Callable[[int], Any] | None = field(default=None, repr=False)

    @property
    def differences(self) -> int:
        """Number of keys that differ in any way (missing on a side, changed, or duplicated)."""
        return self.only_in_left + self.only_in_right + self.changed + self.duplicate_keys

    def samples(self, n: int = 10) -> Any:
        """Up to ``n`` differing keys in key order, as a pandas DataFrame (object columns, None for null).

        Columns: the key columns, ``status`` (only_in_left, only_in_right, changed, duplicate_key),
        ``differs`` (the changed column names), ``count_left``/``count_right`` (rows with that key on each
        side), then ``left_<col>`` and ``right_<col>`` for every compared column.
        """
        import pandas as pd

        if n < 0:
            raise InvalidInputError(f"samples(n): n must be >= 0, got {n}")
        stored = self._samples if self._samples is not None else pd.DataFrame()
        if n > len(stored) and self._more_samples is not None and len(stored) < self.differences:
            stored = self._more_samples(n)
        return stored.head(n).reset_index(drop=True)

    def summary(self) -> str:
        """One line: equal, or the counts that make the inputs differ."""
        if self.equal:
            return f"equal: {self.rows_left} rows, keyed by {', '.join(self.keys)}"
        parts = [
            f"{self.only_in_left} only in left",
            f"{self.only_in_right} only in right",
            f"{self.changed} changed",
        ]
        if self.duplicate_keys_left or self.duplicate_keys_right:
            parts.append(
                f"duplicate keys: {self.duplicate_keys_left} in left, {self.duplicate_keys_right} in right"
            )
        text = f"different: {', '.join(parts)} (rows: {self.rows_left} left, {self.rows_right} right)"
        if self.changed_columns:
            cols = ", ".join(f"{c}={n}" for c, n in self.changed_columns.items())
            text += f"; changed columns: {cols}"
        return text

    def to_dict(self, limit: int = 10) -> dict[str, Any]:
        """A JSON-ready dict of the result with up to ``limit`` sample rows (values made JSON-safe)."""
        samples = self.samples(limit) if not self.equal else None
        records = []
        if samples is not None:
            for rec in samples.to_dict(orient="records"):
                records.append({k: json_value(v) for k, v in rec.items()})
        return {
            "equal": self.equal,
            "left": self.left_label,
            "right": self.right_label,
            "keys": list(self.keys),
            "columns": list(self.columns),
            "rows_left": self.rows_left,
            "rows_right": self.rows_right,
            "only_in_left": self.only_in_left,
            "only_in_right": self.only_in_right,
            "changed": self.changed,
            "changed_columns": dict(self.changed_columns),
            "duplicate_keys_left": self.duplicate_keys_left,
            "duplicate_keys_right": self.duplicate_keys_right,
            "engine": self.engine,
            "fingerprint_match": self.fingerprint_match,
            "samples": records,
        }

    def to_json(self, limit: int = 10) -> str:
        """``to_dict(limit)`` as one JSON object."""
        return json.dumps(self.to_dict(limit), allow_nan=False)

    def format_text(self, limit: int = 10) -> str:
        """The plain-text report (both sides, the summary, up to ``limit`` differing rows): the same text
        the CLI prints and the pytest helpers raise."""
        from upsertsink.diffing.render import render

        return render(self, limit)

    def __str__(self) -> str:
        return self.format_text()


def json_value(value: Any) -> Any:
    """A sample value as JSON can hold it: ISO dates, decimals as strings, bytes as hex."""
    import datetime
    import decimal

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if hasattr(value, "tolist"):
        return json_value(value.tolist())
    return str(value)


def equal_result(keys: list[str], compared: list[str], rows: int, engine: str) -> DiffResult:
    """The result of two inputs proven equal (same fingerprint, unique keys)."""
    return DiffResult(
        keys=keys, columns=compared, equal=True, only_in_left=0, only_in_right=0, changed=0,
        changed_columns={}, duplicate_keys_left=0, duplicate_keys_right=0, rows_left=rows, rows_right=rows,
        engine=engine, fingerprint_match=True, _samples=sample_frame([], keys, compared),
    )  # fmt: skip


def sample_records(
    rows: Sequence[dict[str, Any]], keys: list[str], compared: list[str]
) -> list[dict[str, Any]]:
    """Engine rows (``__k*``, ``__status``, ``__nl``, ``__nr``, ``__l*``, ``__r*``, ``__d*``) -> the public
    records documented in ``DiffResult.samples``."""
    out = []
    for row in rows:
        status = row["__status"]
        nl, nr = row["__nl"] or 0, row["__nr"] or 0
        rec: dict[str, Any] = {k: row[f"__k{i}"] for i, k in enumerate(keys)}
        rec["status"] = status
        rec["differs"] = [c for j, c in enumerate(compared) if row[f"__d{j}"]] if status == "changed" else []
        rec["count_left"], rec["count_right"] = int(nl), int(nr)
        for j, c in enumerate(compared):
            show = status != "duplicate_key"
            rec[f"left_{c}"] = row[f"__l{j}"] if show and nl else None
            rec[f"right_{c}"] = row[f"__r{j}"] if show and nr else None
        out.append(rec)
    return out


def sample_frame(records: list[dict[str, Any]], keys: list[str], compared: list[str]) -> Any:
    """The records as ``samples()`` returns them: a pandas DataFrame of object columns (ints stay ints)."""
    import pandas as pd

    names = [*keys, "status", "differs", "count_left", "count_right"]
    for c in compared:
        names += [f"left_{c}", f"right_{c}"]
    return pd.DataFrame({n: pd.Series([r[n] for r in records], dtype=object) for n in names}, columns=names)
