"""SQL text asked the same questions as Python code, with sqlglot's Spark dialect (never regexes).

Given a SQL string (an expression for ``F.expr``/``selectExpr``/filters/merge maps, or whole statements for
``spark.sql``), report: the nondeterministic functions in it with their character offsets, the columns it
reads, the output columns it produces, the conditions that decide which rows are written, and the key
columns of MERGE conditions. Positions are character offsets into the text; the caller maps them back to
the file through :class:`upsertsink.lint.strings.PosText`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from upsertsink.lint.catalogue import (
    ORDER_INSENSITIVE_ARGS_OF,
    SPARK_FUNCTIONS,
    SPARK_NO_ARG_ONLY,
    SPARK_ORDERED_OK,
    SPARK_RANKING,
    SPARK_SEEDED,
    SQL_CLAUSES,
    WINDOW_TIES_CODE,
)


@dataclass(frozen=True)
class SqlSite:
    """A nondeterministic function (or clause) in SQL text: rule, name, and [start, end) offsets."""

    rule: str
    name: str
    start: int
    end: int
    # For window functions and ordered aggregates: (partition columns, order columns) of the window.
    window: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@dataclass
class SqlPart:
    """One piece of SQL: the sites in it, the columns it reads and the placeholders it contains."""

    sites: list[SqlSite] = field(default_factory=list)
    refs: set[str] = field(default_factory=set)
    holes: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # names of functions Spark does not know (UDFs)


@dataclass(frozen=True)
class SqlWrite:
    """A statement that writes a table: INSERT (``append`` unless OVERWRITE or REPLACE WHERE) or MERGE, with
    the [start, end) offsets of its keyword."""

    kind: str  # insert | merge
    table: str | None
    start: int
    end: int
    append: bool = False


@dataclass(frozen=True)
class MergeUpdate:
    """One ``SET column = value`` of a MERGE's ``WHEN MATCHED ... UPDATE`` clause: the value's sqlglot
    node, the [start, end) offsets of the assigned column, whether the clause is guarded by a newer-wins
    condition on a column it also sets (``WHEN MATCHED AND s.batch > t.batch ... SET ..., batch = s.batch``),
    and the names the target table is referred to by (its alias and its name)."""

    column: str
    value: Any
    start: int
    end: int
    guarded: bool
    target_names: tuple[str, ...]


@dataclass
class SqlResult:
    """What a SQL string does: output columns, row-deciding parts, merge keys and merge writes."""

    ok: bool
    outputs: list[tuple[str, SqlPart]] = field(default_factory=list)
    rows: list[tuple[str, SqlPart]] = field(default_factory=list)  # (kind, part): where/limit/sample/on
    merge_keys: list[str] = field(default_factory=list)
    writes: list[tuple[str, SqlPart]] = field(default_factory=list)
    # (column, table, "primary key" | "identity column") declared by CREATE TABLE
    ddl_keys: list[tuple[str, str, str]] = field(default_factory=list)
    tables_written: list[str] = field(default_factory=list)  # INSERT INTO / MERGE INTO / CREATE ... AS
    sequence_cols: list[str] = field(default_factory=list)  # WHEN MATCHED AND s.v > t.v: newer-wins columns
    statements: list[SqlWrite] = field(default_factory=list)  # INSERT and MERGE statements
    merge_updates: list[MergeUpdate] = field(default_factory=list)


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
_BARE_FUNCTIONS = {"localtimestamp", "current_timestamp", "current_date", "now", "curdate"}


def _exp():  # sqlglot is imported only when a file really holds SQL to look at
    from sqlglot import exp

    return exp


def _name_of(node) -> str | None:
    """The catalogue name of a sqlglot node, if it is a function the catalogue knows."""
    exp = _exp()
    cls = type(node).__name__
    if cls in _FUNC_BY_CLASS:
        return _FUNC_BY_CLASS[cls]
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Column) and not node.table and node.name.lower() in _BARE_FUNCTIONS:
        return node.name.lower()
    return None


# sqlglot reports unsupported constructs through logging; the linter's output must stay its own.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def column_name(node: Any) -> str:
    """The unqualified column name of a Column node (``t.id`` -> ``id``)."""
    return str(node.name)


class _Positions:
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
        aliases = {name, "now"} if name == "current_timestamp" else {name}
        for tok in self.tokens:
            if tok.start not in self.used and tok.text.lower() in aliases:
                self.used.add(tok.start)
                return tok.start, tok.end + 1
        if "start" in meta:
            return meta["start"], meta["end"] + 1
        return 0, max(len(self.text), 1)


def _cols(nodes) -> tuple[str, ...]:
    exp = _exp()
    out = []
    for n in nodes or []:
        inner = n.this if isinstance(n, exp.Ordered) else n
        out.append(column_name(inner) if isinstance(inner, exp.Column) else inner.sql(dialect="spark"))
    return tuple(out)


def _part(node, pos: _Positions) -> SqlPart:
    exp = _exp()
    part = SqlPart()
    if node is None:
        return part
    for sub in node.walk():
        if isinstance(sub, exp.Column):
            name = column_name(sub)
            if name.startswith("__ph") and name.endswith("__"):
                part.holes.add(name)
            elif not (name.lower() in _BARE_FUNCTIONS and not sub.table):
                part.refs.add(name)
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
    return part


def _arg_count(node) -> int:
    """How many arguments a function call node was given."""
    exp = _exp()
    if isinstance(node, exp.Anonymous):
        return len(node.expressions)
    return sum(1 for v in node.args.values() if isinstance(v, exp.Expression) or (isinstance(v, list) and v))


def _output_name(node) -> str:
    exp = _exp()
    if isinstance(node, exp.Alias):
        return str(node.alias)
    if isinstance(node, exp.Column):
        return column_name(node)
    return node.sql(dialect="spark")


def _eq_columns(cond) -> list[str]:
    """Columns compared with ``=`` to another column; ``s.rn = 1`` (a literal) is a filter, not a key."""
    exp = _exp()
    out: list[str] = []
    if cond is None:
        return out
    for eq in cond.find_all(exp.EQ):
        if not (isinstance(eq.left, exp.Column) and isinstance(eq.right, exp.Column)):
            continue
        for side in (eq.left, eq.right):
            name = column_name(side)
            if name not in out:
                out.append(name)
    return out


def _table_name(node) -> str | None:
    exp = _exp()
    table = node if isinstance(node, exp.Table) else node.find(exp.Table) if node is not None else None
    if table is None:
        return None
    return ".".join(p for p in (table.args.get("db") and table.db, table.name) if p) or None


def _ddl(create, result: SqlResult) -> None:
    """Key columns a CREATE TABLE declares: PRIMARY KEY (inline or as a constraint) and identity columns."""
    exp = _exp()
    schema = create.this
    table = _table_name(schema) or "?"
    if not isinstance(schema, exp.Schema):
        return
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            for c in item.args.get("constraints") or []:
                kind = type(c.args.get("kind")).__name__
                if kind == "PrimaryKeyColumnConstraint":
                    result.ddl_keys.append((item.name, table, "primary key"))
                elif kind == "GeneratedAsIdentityColumnConstraint":
                    result.ddl_keys.append((item.name, table, "identity column"))
        for pk in [item] if isinstance(item, exp.PrimaryKey) else item.find_all(exp.PrimaryKey):
            for ident in pk.expressions:
                name = ident.name if hasattr(ident, "name") else str(ident)
                result.ddl_keys.append((name, table, "primary key"))


def _select(sel, pos: _Positions, result: SqlResult) -> None:
    exp = _exp()
    for item in sel.expressions:
        result.outputs.append((_output_name(item), _part(item, pos)))
    for key in ("where", "having", "qualify"):
        if sel.args.get(key) is not None:
            result.rows.append(("filter", _part(sel.args[key], pos)))
    for join in sel.args.get("joins") or []:
        if join.args.get("on") is not None:
            result.rows.append(("filter", _part(join.args["on"], pos)))
    limit = sel.args.get("limit")
    if limit is not None and sel.args.get("order") is None:
        start, end = pos.locate(limit, "limit")
        result.rows.append(("limit", SqlPart(sites=[SqlSite(SQL_CLAUSES["limit"], "LIMIT", start, end)])))
    for sample in sel.find_all(exp.TableSample):
        if sample.args.get("seed") is None:
            start, end = pos.locate(sample, "tablesample")
            result.rows.append(
                ("sample", SqlPart(sites=[SqlSite(SQL_CLAUSES["tablesample"], "TABLESAMPLE", start, end)]))
            )


def _merge(merge, pos: _Positions, result: SqlResult) -> None:
    exp = _exp()
    target = merge.this
    names = [str(target.alias)] if isinstance(target, exp.Table) and target.alias else []
    if isinstance(target, exp.Table) and target.name:
        names.append(str(target.name))
    on = merge.args.get("on")
    result.merge_keys.extend(_eq_columns(on))
    for sel in merge.find_all(exp.Select):  # USING (SELECT ...): its columns feed the merge
        _select(sel, pos, result)
    result.rows.append(("merge", _part(on, pos)))
    whens = merge.args.get("whens")
    for when in whens.expressions if whens is not None else []:
        then = when.args.get("then")
        if when.args.get("condition") is not None:
            # WHEN MATCHED AND ... THEN UPDATE decides values of existing keys; other clauses decide keys
            kind = "update" if isinstance(then, exp.Update) else "merge"
            result.rows.append((kind, _part(when.args["condition"], pos)))
            result.sequence_cols.extend(
                c for c in _newer_columns(when.args["condition"]) if c not in result.sequence_cols
            )
        if isinstance(then, exp.Update):
            assigned = {
                column_name(eq.left).lower()
                for eq in then.expressions
                if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column)
            }
            cond = when.args.get("condition")
            guarded = cond is not None and any(c.lower() in assigned for c in _newer_columns(cond))
            for eq in then.expressions:
                if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
                    name = column_name(eq.left)
                    start, end = pos.locate(eq.left, name.lower())
                    result.merge_updates.append(
                        MergeUpdate(name, eq.right, start, end, guarded, tuple(n.lower() for n in names))
                    )
                    result.writes.append((name, _part(eq.right, pos)))
        elif isinstance(then, exp.Insert):
            cols = then.this.expressions if isinstance(then.this, exp.Tuple) else []
            vals = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
            for col, val in zip(cols, vals, strict=False):
                if isinstance(col, exp.Column):
                    result.writes.append((column_name(col), _part(val, pos)))


@lru_cache(maxsize=4096)
def analyze_statements(text: str) -> SqlResult:
    """Analyze ``spark.sql`` text: one or more statements."""
    import sqlglot

    exp = _exp()
    try:
        trees = [t for t in sqlglot.parse(text, read="spark") if t is not None]
    except Exception:  # noqa: BLE001 - unparseable or templated SQL: nothing can be said
        try:  # Databricks DDL (GENERATED ... AS IDENTITY, constraints) parses with its own dialect
            trees = [t for t in sqlglot.parse(text, read="databricks") if t is not None]
        except Exception:  # noqa: BLE001
            return SqlResult(ok=False)
    pos = _Positions(text)
    result = SqlResult(ok=True)
    for tree in trees:
        if isinstance(tree, exp.Merge):
            name = _table_name(tree.this)
            if name:
                result.tables_written.append(name)
            start, end = pos.locate(tree, "merge")
            result.statements.append(SqlWrite("merge", name, start, end))
            _merge(tree, pos, result)
            continue
        if isinstance(tree, exp.Create):
            _ddl(tree, result)
            if tree.expression is not None:
                name = _table_name(tree.this)
                if name:
                    result.tables_written.append(name)
        if isinstance(tree, exp.Insert):
            name = _table_name(tree.this)
            if name:
                result.tables_written.append(name)
            start, end = pos.locate(tree, "insert")
            append = not tree.args.get("overwrite") and tree.args.get("where") is None
            result.statements.append(SqlWrite("insert", name, start, end, append))
        # the outermost SELECTs produce the output columns; inner ones only decide rows / feed columns
        top = tree.find(exp.Select)
        for sel in tree.find_all(exp.Select):
            if sel is top or (isinstance(sel.parent, exp.Union) and sel.parent.find(exp.Select) is not None):
                _select(sel, pos, result)
            else:
                inner = SqlResult(ok=True)
                _select(sel, pos, inner)
                result.rows.extend(inner.rows)
                # a subquery's sites feed the outer query's columns: keep them as row-neutral outputs
                for name, part in inner.outputs:
                    result.outputs.append((name, part))
    return result


@lru_cache(maxsize=4096)
def parse_expression(text: str) -> Any:
    """One SQL expression as a sqlglot tree (shared: do not modify it), or None when it does not parse."""
    import sqlglot

    try:
        return sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return None


@lru_cache(maxsize=4096)
def analyze_expression(text: str) -> tuple[bool, str | None, SqlPart]:
    """Analyze one SQL expression (``F.expr``, ``selectExpr``, filters, merge values): ok, alias, part."""
    import sqlglot

    exp = _exp()
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return False, None, SqlPart()
    if tree is None:
        return False, None, SqlPart()
    pos = _Positions(text)
    alias = str(tree.alias) if isinstance(tree, exp.Alias) else None
    if alias is None and isinstance(tree, exp.Column):
        alias = column_name(tree)
    return True, alias, _part(tree, pos)


def _newer_columns(cond) -> list[str]:
    """Columns a merge clause compares with themselves by order (``s.updated_at > t.updated_at``): the
    newer-wins check of a sequence column."""
    exp = _exp()
    out: list[str] = []
    for cmp in cond.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE):
        left, right = cmp.left, cmp.right
        if (
            isinstance(left, exp.Column)
            and isinstance(right, exp.Column)
            and column_name(left).lower() == column_name(right).lower()
            and left.table != right.table
            and column_name(left) not in out
        ):
            out.append(column_name(left))
    return out


@lru_cache(maxsize=4096)
def condition_sequences(text: str) -> list[str]:
    """Newer-wins columns of a merge clause condition (``s.v > t.v`` -> [v])."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return []
    return _newer_columns(tree) if tree is not None else []


@lru_cache(maxsize=4096)
def condition_keys(text: str) -> list[str]:
    """Columns compared with ``=`` in a merge condition (``t.k = s.k AND t.j = s.j`` -> [k, j])."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return []
    return _eq_columns(tree)
