"""``delete_when``: one SQL predicate language, evaluated alike by Spark and by DataFusion on Arrow.

The predicate is Spark SQL text over the batch's columns. It is parsed once (sqlglot) when the sink is
built, and refused there when it could not mean the same thing on both engines: a nondeterministic function
(the linter's catalogue: ``rand()``, ``now()``, ``uuid()`` ...) would delete different rows on a replay, and
anything outside the portable subset below is evaluated differently by Spark and DataFusion (integer
division, ``concat`` with nulls, casts of malformed text ...). The Spark engine evaluates the text with Spark;
the embedded engine translates it with sqlglot and evaluates it with DataFusion, the engine delta-rs itself
runs on. ``tests/test_predicate.py`` checks the two agree on every construct of the subset.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from upsertsink.errors import InvalidInputError

# The portable subset: node types whose meaning is the same in Spark SQL and DataFusion.
PORTABLE: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Neg,
    exp.Not, exp.And, exp.Or, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Add, exp.Sub, exp.Mul, exp.In, exp.Between, exp.Like, exp.Is,
    exp.Lower, exp.Upper, exp.Trim, exp.Coalesce, exp.Substring, exp.Length, exp.Abs,
)
PORTABLE_TEXT = (
    "comparisons (=, <>, <, <=, >, >=, <=>), AND/OR/NOT, +, -, *, IN (...), BETWEEN, LIKE, IS [NOT] NULL, "
    "lower, upper, trim, coalesce, substring, length, abs"
)


@dataclass(frozen=True)
class Predicate:
    """A parsed, checked ``delete_when`` predicate."""

    text: str
    tree: exp.Expression
    option: str = "delete_when"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(sorted({c.name for c in self.tree.find_all(exp.Column)}))

    def spark_sql(self) -> str:
        return self.text

    def datafusion_sql(self) -> str:
        """The predicate in DataFusion's SQL (identifiers double-quoted, Spark's ``<=>`` spelled out)."""
        return self.tree.sql(dialect="postgres", identify=True)

    def check_columns(self, columns: list[str]) -> None:
        unknown = [c for c in self.columns if c not in columns]
        if unknown:
            raise InvalidInputError(
                f"{self.option} {self.text!r} names column(s) {unknown} that the batch does not have; "
                f"batch columns are {columns}"
            )


def parse(text: object, option: str = "delete_when") -> Predicate:
    """Parse and check a predicate; raises InvalidInputError saying what is wrong and what is allowed."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"{option} must be a non-empty SQL predicate string, got {text!r}")
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as err:
        raise InvalidInputError(f"{option} is not a valid SQL predicate: {text!r} ({err})") from None
    if tree is None or isinstance(tree, (exp.Select, exp.Command, exp.Query)) or tree.find(exp.Subquery, exp.Select):
        raise InvalidInputError(f"{option} must be a predicate over the batch's columns: {text!r}")
    from upsertsink.lint.catalogue import nondeterministic_sql_calls

    changing = nondeterministic_sql_calls(text)  # the linter's catalogue, the same one its rules use
    if changing:
        raise InvalidInputError(
            f"{option} {text!r} calls {changing[0]}(), which gives a different value on every run: a replayed "
            "batch would delete different rows. Decide deletes from the batch's own columns."
        )
    bad = []
    for node in tree.walk():
        literal_list = all(isinstance(v, (exp.Literal, exp.Boolean, exp.Null, exp.Neg)) for v in node.expressions)
        if isinstance(node, exp.In) and (node.args.get("query") or not literal_list) or not isinstance(node, PORTABLE) and not isinstance(node, exp.DataType):
            bad.append(node)
    if bad:
        shown = bad[0].sql(dialect="spark")
        raise InvalidInputError(
            f"{option} {text!r} uses {shown!r}, which Spark and the embedded engine (DataFusion) do not "
            f"evaluate alike; use only {PORTABLE_TEXT}"
        )
    return Predicate(text, tree, option)


_contexts = threading.local()

_COMPARE = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal",
            exp.LT: "less", exp.LTE: "less_equal"}


def _fast(node: exp.Expression, table):  # -> pyarrow Array/ChunkedArray/Scalar, or raises _NotFast
    """A few common predicate shapes (column = literal, IN, IS NULL, AND/OR/NOT) evaluated with Arrow
    compute, which is what DataFusion does for them, without a query engine; anything else raises."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(node, exp.Paren):
        return _fast(node.this, table)
    if isinstance(node, exp.Column) and not node.table:
        return table[node.name]
    if isinstance(node, exp.Literal):
        return pa.scalar(node.this) if node.is_string else pa.scalar(int(node.this)) if node.is_int else _not_fast()
    if isinstance(node, exp.Boolean):
        return pa.scalar(bool(node.this))
    if isinstance(node, exp.Not):
        return pc.invert(_bool(_fast(node.this, table)))
    if isinstance(node, exp.And):
        return pc.and_kleene(_bool(_fast(node.left, table)), _bool(_fast(node.right, table)))
    if isinstance(node, exp.Or):
        return pc.or_kleene(_bool(_fast(node.left, table)), _bool(_fast(node.right, table)))
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return pc.is_null(_fast(node.this, table))
    if type(node) in _COMPARE:
        left, right = _fast(node.left, table), _fast(node.right, table)
        _same_kind(left, right)
        return getattr(pc, _COMPARE[type(node)])(left, right)
    if isinstance(node, exp.In) and not node.args.get("query"):
        col = _fast(node.this, table)
        values = [_fast(v, table) for v in node.expressions]
        if not values or any(not isinstance(v, pa.Scalar) or not v.is_valid for v in values):
            _not_fast()  # NULL in an IN list has SQL's three-valued meaning: left to DataFusion
        for v in values:
            _same_kind(col, v)
        hit = pc.is_in(col, value_set=pa.array([v.as_py() for v in values], col.type))
        return pc.if_else(pc.is_null(col), pa.scalar(None, pa.bool_()), hit)
    _not_fast()


class _NotFast(Exception):
    pass


def _not_fast():
    raise _NotFast


def _bool(value):
    import pyarrow as pa

    if not pa.types.is_boolean(value.type):
        _not_fast()
    return value


def _same_kind(left, right) -> None:
    """Both strings, or both integers: no implicit cast (DataFusion's coercions are left to DataFusion)."""
    import pyarrow as pa

    def kind(v):
        t = v.type
        return "str" if pa.types.is_string(t) or pa.types.is_large_string(t) else \
            "int" if pa.types.is_integer(t) else None

    if kind(left) is None or kind(left) != kind(right):
        _not_fast()


def evaluate_simple(predicate: Predicate, table):  # -> pyarrow.ChunkedArray of bool, or None
    """One boolean per row (null taken as false) when the predicate is one of the shapes ``_fast`` evaluates
    with Arrow compute and gives booleans: the shapes on which Arrow, DataFusion and Spark SQL agree (no
    implicit casts, no functions). None for anything else."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        flag = _fast(predicate.tree, table)
    except (_NotFast, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        return None
    if isinstance(flag, pa.Scalar) or len(flag) != table.num_rows or not pa.types.is_boolean(flag.type):
        return None
    return pc.fill_null(flag, False) if isinstance(flag, pa.ChunkedArray) else pa.chunked_array(
        [pc.fill_null(flag, False)])


def evaluate_arrow(predicate: Predicate, table):  # -> pyarrow.ChunkedArray of bool
    """Evaluate on an Arrow table with DataFusion: one boolean per row, null taken as false."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from datafusion import SessionConfig, SessionContext

    flag = evaluate_simple(predicate, table)
    if flag is not None:
        return flag
    ctx = getattr(_contexts, "ctx", None)
    if ctx is None:  # one context per thread, kept: making one costs more than the query on a micro-batch
        ctx = _contexts.ctx = SessionContext(SessionConfig().with_target_partitions(1))
    else:
        ctx.deregister_table("batch")
    subset = table.select(list(predicate.columns)) if predicate.columns else pa.table({"_": pa.nulls(table.num_rows)})
    ctx.from_arrow(subset, name="batch")
    try:
        result = ctx.sql(f"SELECT ({predicate.datafusion_sql()}) AS flag FROM batch").to_arrow_table()
    except Exception as err:  # noqa: BLE001 - DataFusion raises plain Exceptions for planning and type errors
        raise InvalidInputError(
            f"{predicate.option} {predicate.text!r} cannot be evaluated on this batch: {str(err).splitlines()[0]}"
        ) from None
    flag = result["flag"]
    if not (pa.types.is_boolean(flag.type) or pa.types.is_null(flag.type)):
        raise InvalidInputError(f"{predicate.option} {predicate.text!r} is not a boolean predicate (it gives {flag.type})")
    if len(flag) != table.num_rows:
        raise AssertionError("DataFusion returned a different number of rows")
    return pc.fill_null(flag.cast(pa.bool_()), False)
