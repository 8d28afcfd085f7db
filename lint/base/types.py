"""The records every stage of the linter passes on: a span in the file, a nondeterministic source found there
(:class:`Src`), what it reaches (:class:`Reach`, a finding before its message) and the fix it offers
(:class:`FixSpec`). They import nothing of the linter but its data classes, so the model, the values, the
facts, the rules and the checker all share them without importing each other.
"""

from __future__ import annotations

from .structs import struct

Span = tuple[int, int, int, int]  # 1-based line and column of a node's start and end, end exclusive


@struct(frozen=True)
class FixSpec:
    """A fix a finding offers: what to rewrite (``kind``) at which node (``span``: 1-based line and character
    column of the node's start and end, end exclusive), whether it is ``safe`` or ``unsafe`` (ruff's
    applicability: an unsafe fix may change what the code means beyond the finding), the one-line
    ``message`` shown with it, and the kind's parameters. The rewriting itself is done with libcst by
    :mod:`upsertsink.lint.command.rewrite`; the analysis only says where and what."""

    kind: str
    span: tuple[int, int, int, int]
    applicability: str
    message: str
    params: tuple[tuple[str, str], ...] = ()

    def param(self, name: str, default: str = "") -> str:
        """One parameter's value."""
        return dict(self.params).get(name, default)

    def to_dict(self) -> dict:
        """Plain data for the cache (and the inverse of :meth:`from_dict`)."""
        return {
            "kind": self.kind,
            "span": list(self.span),
            "applicability": self.applicability,
            "message": self.message,
            "params": [list(p) for p in self.params],
        }

    @classmethod
    def from_dict(cls, data: dict) -> FixSpec:
        """Rebuild a fix from :meth:`to_dict`'s data; raises KeyError/TypeError/ValueError on other data."""
        line, col, end_line, end_col = (int(x) for x in data["span"])
        params = tuple((str(k), str(v)) for k, v in data["params"])
        return cls(
            str(data["kind"]),
            (line, col, end_line, end_col),
            str(data["applicability"]),
            str(data["message"]),
            params,
        )


@struct(frozen=True)
class Src:
    """One nondeterministic source occurrence: rule, 1-based span (end exclusive), what it is."""

    rule: str
    line: int
    col: int
    end_line: int
    end_col: int
    what: str
    via: str = ""
    alt_line: int = 0  # a second line where a noqa comment is honoured (end of a multi-line SQL string)
    fix: FixSpec | None = None  # the fix this occurrence offers, if any
    # a numbering over a window (ND006): the window's partition columns, normalized; None for other sources
    partition: frozenset[str] | None = None
    # an array aggregate whose elements are right and only their order is arbitrary (``collect_list``): a
    # count of the array (``size``) does not depend on it, wherever the array is read from
    order_only: bool = False


@struct(frozen=True)
class Reach:
    """What one source reaches: the target it is reported against and the other columns it reaches."""

    source: Src
    target: str  # key | sequence | column
    column: str  # the column's name, or "*" (all columns) for a row choice with no known key
    others: tuple[str, ...] = ()
    rows: bool = False  # the source decides which rows are written, not a value
    key_label: str = "merge key"  # how the key was learned, for the message
    level: str | None = None  # the severity, when a rule decides it (the write rules); else by target
    note: str = ""  # what a write rule found, in words (the start of its message)
    advice: str = ""  # which of the rule's fix texts applies (write rules)
    # the sequence column is that of an SCD type 2 sink (``scd_type=2``): every version's __START_AT/__END_AT
    history: bool = False
    history_of: str = ""  # what keeps that history, for the message (default: an ``scd_type=2`` sink)
    table: str | None = None  # the table the reached column or rows are written to, when known

    @property
    def severity(self) -> str:
        if self.level is not None:
            return self.level
        if self.history:
            return "error"  # a replay rewrites the table's history
        return "error" if self.target in ("key", "sequence") else "warning"
