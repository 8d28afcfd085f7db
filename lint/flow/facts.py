"""The facts of one module, extracted once by :mod:`upsertsink.lint.flow.collect` and frozen before any data flow
is computed: column writes, row choices, key declarations, sinks, MERGE conditions, joins, tables written.

A fact names syntax (the expression that computes a column, the condition that chooses rows) and never the
nondeterministic sources reaching it: those are :mod:`upsertsink.lint.flow.taint`'s answer, computed from the
frozen facts. The records every stage shares (spans, sources, what they reach) are :mod:`upsertsink.lint.base.types`.
"""

from __future__ import annotations

import ast
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..base.structs import field, struct
from ..base.types import Span, Src
from ..values import sql as sqlmod

if TYPE_CHECKING:
    from ..model.scopes import Scope
    from ..model.semantic import SemanticModel
    from ..values.evaluate import Values
    from ..values.strings import PosText

EMPTY: frozenset = frozenset()


def summary_sources(rows, span: Span, callee: str, label: str) -> list[Src]:
    """Sources another file's summary carries (``rows``), reported at ``span`` in this file: the use of
    ``callee``, defined in the file ``label``."""
    return [
        Src(r["rule"], *span, r["what"], via=f"`{callee}` ({r.get('path') or label}:{r['line']})")
        for r in rows
    ]


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
    if "." in c and not c.startswith("`") and "(" not in c:  # F.to_date(F.col("ts")): an expression
        c = c.rsplit(".", 1)[1]
    return c.strip('`"')


class Collector:
    """The facts of one module while they are collected: the collection pass (:mod:`.collect`) and the rules'
    extractors add to it, :meth:`freeze` makes the :class:`Facts`."""

    def __init__(self, model: SemanticModel, values: Values) -> None:
        self.model = model
        self.values = values
        self.writes: list[Write] = []
        self.rows: list[RowEffect] = []
        self.declared: list[KeyDecl] = []
        self.sink_calls: list[tuple[ast.Call, Scope]] = []
        # the MERGE calls (``.merge(source, condition)``) with their condition, if any
        self.merges: list[tuple[ast.Call, ast.AST | None, Scope]] = []
        self.seq_conds: list[tuple[ast.AST, Scope]] = []
        self.dbt_keys: list[tuple[ast.Call, Scope]] = []
        self.ext_keys: list[tuple[str, Scope, str | None]] = []  # (key, scope, table: None when not known)
        self.ddl_keys: list[tuple[str, str, str]] = []
        self.joins: list[tuple[ast.Call, Scope]] = []
        self.tables_written: set[str] = set()
        self.sql_writes: list[tuple[ast.Call, str, bool, tuple[str, ...]]] = []
        self.sql_views: list[tuple[ast.Call, str, tuple[str, ...]]] = []
        self.pipeline_flows: list[tuple[ast.Call, str | None, str | None]] = []  # (call, target, source)
        self.sql_udfs: dict[str, tuple[ast.AST, Scope]] = {}
        self.seeded: set[str] = set()
        self.writes_data = model.dbt_model
        self.rule_state: dict[str, object] = {}  # per-module scratch space of rule extractors, by rule
        self.widgets: dict[str, tuple[ast.AST, Scope]] = {}
        self.ext_frames: list[tuple[ast.AST, Scope, str | None]] = []
        self._current: ast.AST | None = None  # the call being read: the anchor of what it writes

    def freeze(self) -> Facts:
        """The facts collected, read-only from now on."""
        return Facts(
            writes=tuple(self.writes),
            rows=tuple(self.rows),
            declared=tuple(self.declared),
            sink_calls=tuple(self.sink_calls),
            merges=tuple(self.merges),
            seq_conds=tuple(self.seq_conds),
            dbt_keys=tuple(self.dbt_keys),
            ext_keys=tuple(self.ext_keys),
            ddl_keys=tuple(self.ddl_keys),
            joins=tuple(self.joins),
            tables_written=frozenset(self.tables_written),
            sql_writes=tuple(self.sql_writes),
            sql_views=tuple(self.sql_views),
            pipeline_flows=tuple(self.pipeline_flows),
            sql_udfs=MappingProxyType(dict(self.sql_udfs)),
            seeded=frozenset(self.seeded),
            writes_data=self.writes_data,
            rule_state=self.rule_state,
            widgets=MappingProxyType(dict(self.widgets)),
            ext_frames=tuple(self.ext_frames),
        )

    def add_row_effect(
        self,
        kind: str,
        scope: Scope,
        own: Src | None = None,
        subset: list[str] | None = None,
        expr: ast.AST | None = None,
    ) -> None:
        """Record that the code decides which rows are written (filter, limit, sample, dedup); ``expr``
        is an expression whose sources decide them too (the ordering before a limit)."""
        self._row(RowEffect(kind, scope, expr=expr, own=own, subset=subset))

    def declare(
        self,
        column: str,
        label: str,
        scope: Scope | None,
        sequence: bool = False,
        history: bool = False,
        table: str | None = None,
    ) -> None:
        """A key (or sequence) column the code declares (of ``table``, when known)."""
        self.declared.append(KeyDecl(strip_qualifier(column), label, scope, sequence, history, table))

    def _add_write(
        self,
        column: str,
        scope: Scope,
        expr: ast.AST | None = None,
        sql=None,
        node=None,
        rename: bool = False,
    ) -> None:
        self.writes.append(Write(column, scope, expr, sql, node, rename, anchor=self._current))

    def _row(self, effect: RowEffect) -> None:
        if effect.anchor is None:
            effect.anchor = self._current
        self.rows.append(effect)

    def _condition_effect(self, cond: ast.AST, scope: Scope, kind: str = "merge") -> None:
        """A condition that decides rows: ``merge`` (which keys are inserted, deleted, matched), ``update``
        (whether a matched row's values are updated: values only, the keys stay) or ``filter``."""
        text = self.values.sql_text(cond, scope) if self.values.may_be_text(cond, scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._row(RowEffect(kind, scope, sql=(part, text)))
        else:
            self._row(RowEffect(kind, scope, expr=cond))
