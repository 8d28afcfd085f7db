"""The one text form of a :class:`DiffResult`: ``str(result)``, the CLI and the pytest helpers print it.

Comparison and presentation are apart (as in chispa): the engines only produce counts and sample rows,
and this module alone turns them into text. The report names both sides, gives the one-line summary and
then one entry per differing key, in key order: a changed key lists only the columns that differ, as
``left -> right``; a key on one side only shows that side's row. The text is plain; a ``style`` callable
may decorate parts of it by role (the CLI colours them on a terminal), without changing a character.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

#: ``style(text, role) -> text``; roles: equal, different, changed, only_in_left, only_in_right,
#: duplicate_key, left, right.
Styler = Callable[[str, str], str]

_LABELS = {
    "changed": "changed",
    "only_in_left": "only in left",
    "only_in_right": "only in right",
    "duplicate_key": "duplicate key",
}
_WIDTH = max(len(v) for v in _LABELS.values()) + 2


def _plain(text: str, role: str) -> str:
    return text


def show(value: Any) -> str:
    """A value as the report shows it: ``null``, quoted strings, ISO dates, plain numbers."""
    if value is None:
        return "null"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return repr(value)


def render(result: Any, limit: int = 10, style: Styler | None = None) -> str:
    """The report of ``result`` (a ``DiffResult``, which calls this from ``format_text``: this module imports
    none of it) with up to ``limit`` differing keys."""
    s = style or _plain
    lines = [
        f"left:  {result.left_label} ({result.rows_left} rows)",
        f"right: {result.right_label} ({result.rows_right} rows)",
        s(result.summary(), "equal" if result.equal else "different"),
    ]
    if result.equal or limit <= 0:
        return "\n".join(lines)
    samples = result.samples(limit)
    if len(samples):
        lines.append(f"first {len(samples)} of {result.differences} differing keys, in key order:")
    indent = " " * (2 + _WIDTH)
    for rec in samples.to_dict(orient="records"):
        status = rec["status"]
        key = ", ".join(f"{k}={show(rec[k])}" for k in result.keys)
        head = "  " + s(_LABELS[status].ljust(_WIDTH), status) + key
        if status == "changed":
            lines.append(head)
            width = max((len(c) for c in rec["differs"]), default=0) + 1
            for col in rec["differs"]:
                left, right = s(show(rec[f"left_{col}"]), "left"), s(show(rec[f"right_{col}"]), "right")
                lines.append(f"{indent}{(col + ':').ljust(width)} {left} -> {right}")
        elif status == "duplicate_key":
            lines.append(f"{head}: {rec['count_left']} rows in left, {rec['count_right']} in right")
        else:
            side = "left" if status == "only_in_left" else "right"
            values = ", ".join(f"{c}={s(show(rec[f'{side}_{c}']), side)}" for c in result.columns)
            lines.append(head + (f": {values}" if values else ""))
    if len(samples) < result.differences:
        lines.append(f"({result.differences - len(samples)} more differing keys not shown)")
    return "\n".join(lines)
