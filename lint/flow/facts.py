"""The facts of one module, extracted once by :mod:`upsertsink.lint.flow.collect` and frozen before any data flow
is computed: column writes, row choices, key declarations, sinks, MERGE conditions, joins, tables written.

A fact names syntax (the expression that computes a column, the condition that chooses rows) and never the
nondeterministic sources reaching it: those are :mod:`upsertsink.lint.flow.taint`'s answer, computed from the
frozen facts. The source and finding records shared by every stage are defined here too.
"""

from __future__ import annotations

import ast
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..base.structs import field, struct

if TYPE_CHECKING:
    from ..model.scopes import Scope
    from ..rules.rule import FixSpec
    from ..values import sql as sqlmod
    from ..values.strings import PosText

EMPTY: frozenset = frozenset()
Span = tuple[int, int, int, int]


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


def summary_sources(rows, span: Span, callee: str, label: str) -> list[Src]:
    """Sources another file's summary carries (``rows``), reported at ``span`` in this file: the use of
    ``callee``, defined in the file ``label``."""
    return [
        Src(r["rule"], *span, r["what"], via=f"`{callee}` ({r.get('path') or label}:{r['line']})")
        for r in rows
    ]


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


@struct
class Write:
    column: str
    scope: Scope
    expr: ast.AST | None = None
    sql: tuple[sqlmod.SqlPart, PosText] | None = None
    node: ast.AST | None = None
    rename: bool = False  # expr is a Constant holding the old column name
    own: Src | None = None  # a source the write itself introduces (``agg({"v": "first"})``)
    anchor: ast.AST | None = None  # the DataFrame method call that makes the write


@struct
class RowEffect:
    kind: str  # filter | limit | sample | dedup | merge
    scope: Scope
    expr: ast.AST | None = None
    sql: tuple[sqlmod.SqlPart, PosText] | None = None
    own: Src | None = None
    subset: list[str] | None = None
    anchor: ast.AST | None = None  # the DataFrame method call that makes the choice


# the label of a declarative pipeline's CDC flow sequence stored as SCD type 2 (``stored_as_scd_type=2``)
SCD2_FLOW_LABEL = "sequence column of an SCD type 2 flow"


@struct(frozen=True)
class KeyDecl:
    """A key or sequence column the code declares: a sink's ``keys``/``sequence_by``, a MERGE condition, a
    dbt ``unique_key``, a table's DDL, a join against a written table, another file's declaration."""

    column: str
    label: str  # how it was found, for the message ("merge key", "unique key of the dbt model"...)
    scope: Scope | None
    sequence: bool = False
    history: bool = False  # the sequence column of an SCD type 2 sink (every version's __START_AT/__END_AT)
    table: str | None = None  # the table it is a key of, as the code names it (None: not known)


@struct(frozen=True)
class Facts:
    """Everything the collection pass found in one module; read-only once built."""

    writes: tuple[Write, ...]
    rows: tuple[RowEffect, ...]
    declared: tuple[KeyDecl, ...]  # in the order the code declares them
    sink_calls: tuple[tuple[ast.Call, Scope], ...]
    # the MERGE calls with their condition (keys are read from it; None: no condition given)
    merges: tuple[tuple[ast.Call, ast.AST | None, Scope], ...]
    seq_conds: tuple[tuple[ast.AST, Scope], ...]  # whenMatchedUpdate(condition=...): which version wins
    dbt_keys: tuple[tuple[ast.Call, Scope], ...]
    ext_keys: tuple[tuple[str, Scope, str | None], ...]  # keys declared by other files' functions called here
    ddl_keys: tuple[tuple[str, str, str, Scope | None], ...]  # (column, table, label, scope)
    joins: tuple[tuple[ast.Call, Scope], ...]
    tables_written: frozenset[str]
    # (the spark.sql call, the table one of its statements writes, written without a key: INSERT, not MERGE,
    # the tables and views that statement reads)
    sql_writes: tuple[tuple[ast.Call, str, bool, tuple[str, ...]], ...]
    # the views its SQL text defines: (the spark.sql call, the view's name in lower case, the tables and views
    # the view's query reads)
    sql_views: tuple[tuple[ast.Call, str, tuple[str, ...]], ...]
    # a declarative pipeline's CDC flows: (the call, its target table, its source view or table by name)
    pipeline_flows: tuple[tuple[ast.Call, str | None, str | None], ...]
    sql_udfs: MappingProxyType  # lower-case SQL name -> (the registered function, its scope)
    seeded: frozenset[str]  # modules seeded with a constant (``random.seed(1)``)
    writes_data: bool  # the module stores data (a table, a dbt model): key-name patterns apply
    # rule code -> what its extractors found (and its memos): owned by that rule alone
    rule_state: dict = field(default_factory=dict)
    # notebook widget name -> (its default value, scope): what ``dbutils.widgets.get(name)`` may return
    widgets: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    # another file's write helper called here: (the DataFrame given to it, its scope, the table given or None)
    ext_frames: tuple[tuple[ast.AST, Scope, str | None], ...] = ()
    by_column: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        index: dict[str, list[Write]] = {}
        for w in self.writes:
            index.setdefault(norm(w.column), []).append(w)
        object.__setattr__(self, "by_column", MappingProxyType({k: tuple(v) for k, v in index.items()}))

    def keeping(self, writes: tuple[Write, ...], rows: tuple[RowEffect, ...]) -> Facts:
        """The same facts with only these writes and row choices (the others were thrown away)."""
        from ..base.structs import replace

        return replace(self, writes=writes, rows=rows)


def norm(column: str) -> str:
    """A column name as compared: without its qualifier and quotes, lower case."""
    return strip_qualifier(column).lower()


def strip_qualifier(column: str) -> str:
    """``t.id`` -> ``id``; ```a.b``` stays one name."""
    c = column.strip()
    if "." in c and not c.startswith("`"):
        c = c.rsplit(".", 1)[1]
    return c.strip('`"')
