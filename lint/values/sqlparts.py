"""One piece of SQL text, read with sqlglot's Spark dialect: the nondeterministic functions and clauses in
it (with their character offsets, found on the nodes or, failing that, in the token stream), the columns it
reads, the placeholders it holds and the functions Spark does not know (UDFs). :mod:`upsertsink.lint.values.sql`
puts the pieces of expressions and statements together.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..base.sources import (
    ORDER_INSENSITIVE_ARGS_OF,
    SPARK_FUNCTIONS,
    SPARK_NO_ARG_ONLY,
    SPARK_ORDERED_OK,
    SPARK_RANKING,
    SPARK_SEEDED,
    WINDOW_TIES_CODE,
)
from ..base.structs import field, struct


@struct(frozen=True)
class SqlSite:
    """A nondeterministic function (or clause) in SQL text: rule, name, and [start, end) offsets."""

    rule: str
    name: str
    start: int
    end: int
    # For window functions and ordered aggregates: (partition columns, order columns) of the window.
    window: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@struct
class SqlPart:
    """One piece of SQL: the sites in it, the columns it reads and the placeholders it contains."""

    sites: list[SqlSite] = field(default_factory=list)
    refs: set[str] = field(default_factory=set)
    holes: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # names of functions Spark does not know (UDFs)
    # of ``refs``, those read only by ``IS [NOT] NULL`` tests: their values do not matter, only whether
    # they are null (a clock, a random number or a UUID is never null)
    null_refs: set[str] = field(default_factory=set)


_FUNC_BY_CLASS = {
    "CurrentTimestamp": "current_timestamp",
    "CurrentDate": "current_date",
    "CurrentTime": "current_time",
    "CurrentDatetime": "current_timestamp",
    "Localtimestamp": "localtimestamp",
    "Rand": "rand",
    "Randstr": "randstr",
    "Uniform": "uniform",
    "Randn": "randn",
    "Uuid": "uuid",
    "Shuffle": "shuffle",
    "First": "first",
    "Last": "last",
    "FirstValue": "first_value",
    "LastValue": "last_value",
    "AnyValue": "any_value",
    "ArrayAgg": "collect_list",
    "ArrayUniqueAgg": "collect_set",
    "GroupConcat": "listagg",
    "Mode": "mode",
    "RowNumber": "row_number",
    "Rank": "rank",
    "DenseRank": "dense_rank",
    "PercentRank": "percent_rank",
    "CumeDist": "cume_dist",
    "Ntile": "ntile",
    "Lag": "lag",
    "Lead": "lead",
    "NthValue": "nth_value",
    "StrToUnix": "unix_timestamp",
    "UnixTimestamp": "unix_timestamp",
}
# Functions whose result does not depend on the order of the array they are given.
_ORDER_FIXING_CLASSES = {"ArraySort", "SortArray", "ArraySize", "Size", "Cardinality"}
# Other names sqlglot reads as the same function class, looked for in the text when the node has no position
_SPELLINGS = {
    "current_timestamp": ("now",),
    "listagg": ("string_agg", "group_concat"),
    "collect_list": ("array_agg",),
    "rand": ("random",),
}
_BARE_FUNCTIONS = {"localtimestamp", "current_timestamp", "current_date", "now", "curdate"}


@cache
def sqlglot_module() -> Any:
    """sqlglot, imported only when a file really holds SQL to look at. It reports unsupported constructs
    through logging, and the linter's output must stay its own: its logger is quieted before any parse."""
    import logging

    import sqlglot

    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    return sqlglot


def exp_module() -> Any:
    sqlglot_module()
    from sqlglot import exp

    return exp


def _name_of(node) -> str | None:
    """The catalogue name of a sqlglot node, if it is a function the catalogue knows."""
    exp = exp_module()
    cls = type(node).__name__
    if cls in _FUNC_BY_CLASS:
        return _FUNC_BY_CLASS[cls]
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Column) and not node.table and node.name.lower() in _BARE_FUNCTIONS:
        return node.name.lower()
    return None


def column_name(node: Any) -> str:
    """The unqualified column name of a Column node (``t.id`` -> ``id``)."""
    return str(node.name)


class Positions:
    """Find character offsets of nodes; falls back to the token stream for nodes without metadata."""

    def __init__(self, text: str) -> None:
        from sqlglot.dialects.spark import Spark

        self.text = text
        try:
            self.tokens = Spark().tokenize(text)
        except Exception:  # noqa: BLE001 - a tokenizer failure only costs precision
            self.tokens = []
        self.used: set[int] = set()

    def locate(self, node, name: str) -> tuple[int, int]:
        meta = getattr(node, "meta", None) or {}
        if "start" in meta and "end" in meta and self.text[meta["start"] : meta["end"] + 1].lower() == name:
            self.used.add(meta["start"])
            return meta["start"], meta["end"] + 1
        ident = getattr(node, "this", None)
        imeta = getattr(ident, "meta", None) or {}
        if "start" in imeta and self.text[imeta["start"] : imeta["end"] + 1].lower() == name:
            self.used.add(imeta["start"])
            return imeta["start"], imeta["end"] + 1
        aliases = {name, *_SPELLINGS.get(name, ())}
        for tok in self.tokens:
            if tok.start not in self.used and tok.text.lower() in aliases:
                self.used.add(tok.start)
                return tok.start, tok.end + 1
        if "start" in meta:
            return meta["start"], meta["end"] + 1
        return 0, max(len(self.text), 1)


def _cols(nodes) -> tuple[str, ...]:
    exp = exp_module()
    out = []
    for n in nodes or []:
        inner = n.this if isinstance(n, exp.Ordered) else n
        out.append(column_name(inner) if isinstance(inner, exp.Column) else inner.sql(dialect="spark"))
    return tuple(out)


def part_of(node, pos: Positions) -> SqlPart:
    """The sites in a sqlglot node, the columns it reads, its placeholders and the functions Spark does not
    know (an empty part for None)."""
    exp = exp_module()
    part = SqlPart()
    if node is None:
        return part
    valued: set[str] = set()  # refs read for their value, somewhere
    for sub in node.walk():
        if isinstance(sub, exp.Column):
            name = column_name(sub)
            if name.startswith("__ph") and name.endswith("__"):
                part.holes.add(name)
            elif not (name.lower() in _BARE_FUNCTIONS and not sub.table):
                part.refs.add(name)
                if not (isinstance(sub.parent, exp.Is) and isinstance(sub.parent.expression, exp.Null)):
                    valued.add(name)
        if isinstance(sub, (exp.Literal, exp.Identifier)) and "__ph" in str(sub.this):
            text = str(sub.this)
            i = text.find("__ph")
            while i >= 0:
                j = text.find("__", i + 4)
                if j < 0:
                    break
                part.holes.add(text[i : j + 2])
                i = text.find("__ph", j + 2)
        name = _name_of(sub)
        if name is None:
            continue
        if isinstance(sub, exp.Anonymous):
            part.calls.add(name)
        if name in SPARK_RANKING or name in SPARK_ORDERED_OK:
            window = sub.parent if isinstance(sub.parent, exp.Window) else None
            if window is not None:
                spec = (
                    _cols(window.args.get("partition_by")),
                    _cols((window.args.get("order") or exp.Order()).expressions),
                )
                start, end = pos.locate(sub, name)
                rule = (
                    WINDOW_TIES_CODE if name in SPARK_RANKING else SPARK_FUNCTIONS.get(name, WINDOW_TIES_CODE)
                )
                part.sites.append(SqlSite(rule, name, start, end, spec))
                continue
            if name in SPARK_RANKING:
                continue
        if name not in SPARK_FUNCTIONS:
            continue
        if name in ORDER_INSENSITIVE_ARGS_OF and type(sub.parent).__name__ in _ORDER_FIXING_CLASSES:
            continue  # sort_array(collect_set(x)), size(collect_list(x)): the order no longer matters
        if name in SPARK_NO_ARG_ONLY:
            inner = sub.args.get("this")
            synthesized = type(inner).__name__ == "CurrentTimestamp" and not (
                getattr(inner, "meta", None) or {}
            )
            if inner is not None and not synthesized:
                continue
        if (
            name == "current_timestamp"
            and type(sub.parent).__name__ in ("StrToUnix", "UnixTimestamp")
            and not (getattr(sub, "meta", None) or {})
        ):
            continue
        start, end = pos.locate(sub, name)
        rule = SPARK_FUNCTIONS[name]
        seeded = SPARK_SEEDED.get(name)
        if seeded is not None and _arg_count(sub) > seeded[1]:
            rule = seeded[0]  # rand(42): repeatable, but only for the same partitioning
        part.sites.append(SqlSite(rule, name, start, end))
    part.null_refs = part.refs - valued
    return part


def _arg_count(node) -> int:
    """How many arguments a function call node was given."""
    exp = exp_module()
    if isinstance(node, exp.Anonymous):
        return len(node.expressions)
    return sum(1 for v in node.args.values() if isinstance(v, exp.Expression) or (isinstance(v, list) and v))
