"""SQL text asked the same questions as Python code, with sqlglot's Spark dialect (never regexes).

Given a SQL string (an expression for ``F.expr``/``selectExpr``/filters/merge maps, or whole statements for
``spark.sql``), report: the nondeterministic functions in it with their character offsets, the columns it
reads, the output columns it produces, the conditions that decide which rows are written, and the key
columns of MERGE conditions. Positions are character offsets into the text; the caller maps them back to
the file through :class:`upsertsink.lint.values.strings.PosText`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..base.sources import SQL_CLAUSES
from ..base.structs import field, struct
from . import sqlsimple
from .sqlparts import Positions, SqlPart, SqlSite, column_name, exp_module, part_of, sqlglot_module


@struct(frozen=True)
class SqlWrite:
    """A statement that writes a table: INSERT (``append`` unless OVERWRITE or REPLACE WHERE), MERGE,
    CREATE TABLE ... AS SELECT or UPDATE, with the [start, end) offsets of its keyword."""

    kind: str  # insert | merge | create | update
    table: str | None
    start: int
    end: int
    append: bool = False
    reads: tuple[str, ...] = ()  # the tables and views it reads (lower case): MERGE's USING, INSERT's query


@struct(frozen=True)
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


@struct
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
    statements: list[SqlWrite] = field(default_factory=list)  # INSERT, MERGE and CTAS statements
    # CREATE VIEW v AS SELECT ...: (v, the tables and views its query reads), lower case
    views: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    merge_updates: list[MergeUpdate] = field(default_factory=list)


def _star(node) -> Any:
    """The star of a projection item (``*``, ``t.*``, ``* EXCEPT (rn)``), or None."""
    exp = exp_module()
    inner = node.this if isinstance(node, exp.Column) else node
    return inner if isinstance(inner, exp.Star) else None


def _left_out(star) -> set[str]:
    """The columns ``* EXCEPT (a, b)`` leaves out (lower case)."""
    exp = exp_module()
    listed = star.args.get("except_") or star.args.get("except") or []
    return {column_name(c).lower() for c in listed if isinstance(c, exp.Column)}


def _output_name(node) -> str:
    exp = exp_module()
    if _star(node) is not None:
        return "*"
    if isinstance(node, exp.Alias):
        return str(node.alias)
    if isinstance(node, exp.Column):
        return column_name(node)
    return node.sql(dialect="spark")


def _eq_columns(cond) -> list[str]:
    """Columns compared with ``=`` (or null-safe ``<=>``) to another column; ``s.rn = 1`` (a literal) is a
    filter, not a key."""
    exp = exp_module()
    out: list[str] = []
    if cond is None:
        return out
    for eq in cond.find_all(exp.EQ, exp.NullSafeEQ):
        if not (isinstance(eq.left, exp.Column) and isinstance(eq.right, exp.Column)):
            continue
        for side in (eq.left, eq.right):
            name = column_name(side)
            if name not in out:
                out.append(name)
    return out


def _table_name(node) -> str | None:
    exp = exp_module()
    table = node if isinstance(node, exp.Table) else node.find(exp.Table) if node is not None else None
    if table is None:
        return None
    parts = (table.args.get("catalog") and table.catalog, table.args.get("db") and table.db, table.name)
    if parts[1] and parts[1].lower() == "delta" and not parts[0] and "/" in parts[2]:
        return parts[2]  # delta.`/lake/orders`: the table at that path, as DeltaTable.forPath names it
    name = ".".join(p for p in parts if p)  # main.sales.orders: the catalog's part too
    if not name or "__ph" in name:
        return None  # ``MERGE INTO {table}``: a table not known
    return name if "/" in name or ":" in name else name.lower()  # as paths.canonical_table


def _reads(node) -> tuple[str, ...]:
    """The tables and views a statement's part reads (lower case, as written: ``db.t`` or ``v``)."""
    exp = exp_module()
    if node is None:
        return ()
    found = (_table_name(t) for t in node.find_all(exp.Table))
    return tuple(dict.fromkeys(n.lower() for n in found if n))


def _ddl(create, result: SqlResult) -> None:
    """Key columns a CREATE TABLE declares: PRIMARY KEY (inline or as a constraint) and identity columns."""
    exp = exp_module()
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


def _select(sel, pos: Positions, result: SqlResult) -> None:
    exp = exp_module()
    for item in sel.expressions:
        part, star = part_of(item, pos), _star(item)
        if star is not None:  # a star's EXCEPT list names the columns it leaves out, not ones it reads
            left = _left_out(star)
            part.refs = {r for r in part.refs if r.lower() not in left}
        result.outputs.append((_output_name(item), part))
    for key in ("where", "having", "qualify"):
        if sel.args.get(key) is not None:
            result.rows.append(("filter", part_of(sel.args[key], pos)))
    for join in sel.args.get("joins") or []:
        if join.args.get("on") is not None:
            result.rows.append(("filter", part_of(join.args["on"], pos)))
    limit = sel.args.get("limit")
    if limit is not None and sel.args.get("order") is not None:  # ORDER BY rand() LIMIT n: a random sample
        result.rows.append(("limit", part_of(sel.args["order"], pos)))
    elif limit is not None:
        start, end = pos.locate(limit, "limit")
        result.rows.append(("limit", SqlPart(sites=[SqlSite(SQL_CLAUSES["limit"], "LIMIT", start, end)])))
    for sample in sel.find_all(exp.TableSample):
        if sample.args.get("seed") is None:
            start, end = pos.locate(sample, "tablesample")
            result.rows.append(
                ("sample", SqlPart(sites=[SqlSite(SQL_CLAUSES["tablesample"], "TABLESAMPLE", start, end)]))
            )


def _merge(merge, pos: Positions, result: SqlResult) -> None:
    exp = exp_module()
    target = merge.this
    names = [str(target.alias)] if isinstance(target, exp.Table) and target.alias else []
    if isinstance(target, exp.Table) and target.name:
        names.append(str(target.name))
    on = merge.args.get("on")
    result.merge_keys.extend(_eq_columns(on))
    _query(merge, pos, result)  # USING (SELECT ...): its columns feed the merge
    result.rows.append(("merge", part_of(on, pos)))
    whens = merge.args.get("whens")
    for when in whens.expressions if whens is not None else []:
        then = when.args.get("then")
        if when.args.get("condition") is not None:
            # WHEN MATCHED AND ... THEN UPDATE decides values of existing keys; other clauses decide keys
            kind = "update" if isinstance(then, exp.Update) else "merge"
            result.rows.append((kind, part_of(when.args["condition"], pos)))
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
            guarded = cond is not None and (
                any(c.lower() == d.lower() and c.lower() in assigned for _t, c, _u, d in _guard_pairs(cond))
                or _sets_what_it_compares(cond, then)
            )
            for eq in then.expressions:
                if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
                    name = column_name(eq.left)
                    start, end = pos.locate(eq.left, name.lower())
                    result.merge_updates.append(
                        MergeUpdate(name, eq.right, start, end, guarded, tuple(n.lower() for n in names))
                    )
                    result.writes.append((name, part_of(eq.right, pos)))
        elif isinstance(then, exp.Insert):
            cols = then.this.expressions if isinstance(then.this, exp.Tuple) else []
            vals = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
            for col, val in zip(cols, vals, strict=False):
                if isinstance(col, exp.Column):
                    result.writes.append((column_name(col), part_of(val, pos)))


def _update(update, pos: Positions, result: SqlResult) -> None:
    """``UPDATE t SET c = v, ... WHERE cond``: each ``SET`` writes its column of ``t``; the condition decides
    which rows' values change (an update of values, as a ``WHEN MATCHED AND ...`` clause: keys stay)."""
    exp = exp_module()
    name = _table_name(update.this)
    if name:
        result.tables_written.append(name)
    start, end = pos.locate(update, "update")
    result.statements.append(SqlWrite("update", name, start, end))
    for eq in update.expressions:
        if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
            result.writes.append((column_name(eq.left), part_of(eq.right, pos)))
    where = update.args.get("where")
    if where is not None:
        result.rows.append(("update", part_of(where.this, pos)))


# Databricks' ``MERGE WITH SCHEMA EVOLUTION INTO``, which sqlglot does not parse: read as ``MERGE INTO``, the
# clause blanked out so that every position in the text stays where it was
_SCHEMA_EVOLUTION = re.compile(r"\bMERGE(\s+WITH\s+SCHEMA\s+EVOLUTION)(?=\s+INTO\b)", re.IGNORECASE)


def _blank_schema_evolution(text: str) -> str:
    return _SCHEMA_EVOLUTION.sub(lambda m: "MERGE" + " " * len(m.group(1)), text)


@lru_cache(maxsize=4096)
def analyze_statements(text: str) -> SqlResult:
    """Analyze ``spark.sql`` text: one or more statements."""
    sqlglot = sqlglot_module()
    text = _blank_schema_evolution(text)

    exp = exp_module()
    try:
        trees = [t for t in sqlglot.parse(text, read="spark") if t is not None]
    except Exception:  # noqa: BLE001 - unparseable or templated SQL: nothing can be said
        try:  # Databricks DDL (GENERATED ... AS IDENTITY, constraints) parses with its own dialect
            trees = [t for t in sqlglot.parse(text, read="databricks") if t is not None]
        except Exception:  # noqa: BLE001
            return SqlResult(ok=False)
    pos = Positions(text)
    result = SqlResult(ok=True)
    for tree in trees:
        if isinstance(tree, exp.Merge):
            name = _table_name(tree.this)
            if name:
                result.tables_written.append(name)
            start, end = pos.locate(tree, "merge")
            result.statements.append(SqlWrite("merge", name, start, end, reads=_reads(tree.args.get("using"))))
            _merge(tree, pos, result)
            continue
        if isinstance(tree, exp.Create):
            _ddl(tree, result)
            if tree.expression is not None:
                name = _table_name(tree.this)
                if name:
                    result.tables_written.append(name)
                    if str(tree.args.get("kind") or "").upper() == "VIEW":
                        result.views.append((name.lower(), _reads(tree.expression)))
                    else:  # CREATE TABLE ... AS SELECT: its query's rows go to that table, not to one it reads
                        start, end = pos.locate(tree, "create")
                        result.statements.append(SqlWrite("create", name, start, end, reads=_reads(tree.expression)))
        if isinstance(tree, exp.Update):  # UPDATE t SET c = v WHERE ...: values of the rows the WHERE picks
            _update(tree, pos, result)
            continue
        if isinstance(tree, exp.Insert):
            name = _table_name(tree.this)
            if name:
                result.tables_written.append(name)
            start, end = pos.locate(tree, "insert")
            append = not tree.args.get("overwrite") and tree.args.get("where") is None
            result.statements.append(SqlWrite("insert", name, start, end, append, _reads(tree.expression)))
            if isinstance(tree.expression, exp.Values):  # INSERT ... VALUES (1, current_timestamp()): col1, col2...
                cols = [c.name for c in tree.this.expressions] if isinstance(tree.this, exp.Schema) else []
                for row in tree.expression.expressions:
                    for i, e in enumerate(row.expressions if isinstance(row, exp.Tuple) else [row]):
                        result.outputs.append((cols[i] if i < len(cols) else f"col{i + 1}", part_of(e, pos)))
        _query(tree, pos, result)
    return result


def _query(tree, pos: Positions, result: SqlResult) -> None:
    """The SELECTs in ``tree``. The outermost ones produce the output columns; inner ones decide rows and feed
    the outer columns. An inner column the outer projection does not carry (not selected by name, nor by a
    star that keeps it: ``SELECT a FROM (SELECT a, row_number() ... AS rn ...) WHERE rn = 1``,
    ``SELECT * EXCEPT (rn)``) is not written: what it holds goes to the parts that read it (the filter)."""
    exp = exp_module()
    outer, inner = SqlResult(ok=True), SqlResult(ok=True)
    names: set[str] = set()
    stars: list[set[str]] = []  # per outer star: the columns it leaves out
    for sel in tree.find_all(exp.Select):
        if sel.find_ancestor(exp.Select) is None:
            _select(sel, pos, outer)
            for item in sel.expressions:
                star = _star(item)
                if star is not None:
                    stars.append(_left_out(star))
                else:
                    names.add(_output_name(item).lower())
        else:
            _select(sel, pos, inner)
    hidden: dict[str, list[SqlPart]] = {}
    for name, part in inner.outputs:
        low = name.lower()
        if low in names or any(low not in left for left in stars):
            outer.outputs.append((name, part))
        else:
            hidden.setdefault(low, []).append(part)
    result.outputs.extend((name, _fold(part, hidden)) for name, part in outer.outputs)
    result.rows.extend((kind, _fold(part, hidden)) for kind, part in outer.rows + inner.rows)


def _fold(part: SqlPart, hidden: dict[str, list[SqlPart]], seen: frozenset[str] = frozenset()) -> SqlPart:
    """``part`` with its reads of columns that are not written replaced by what those columns hold."""
    read = {r for r in part.refs if r.lower() in hidden and r.lower() not in seen}
    if not read:
        return part
    out = SqlPart(list(part.sites), part.refs - read, set(part.holes), set(part.calls), part.null_refs - read)
    for ref in read:
        for held in hidden[ref.lower()]:
            held = _fold(held, hidden, seen | {r.lower() for r in read})
            out.sites.extend(s for s in held.sites if s not in out.sites)
            out.refs |= {r for r in held.refs if r.lower() not in hidden}
            out.holes |= held.holes
            out.calls |= held.calls
    return out


@lru_cache(maxsize=4096)
def parse_expression(text: str) -> Any:
    """One SQL expression as a sqlglot tree (shared: do not modify it), or None when it does not parse."""
    sqlglot = sqlglot_module()

    try:
        return sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return None


@lru_cache(maxsize=4096)
def analyze_expression(text: str) -> tuple[bool, str | None, SqlPart]:
    """Analyze one SQL expression (``F.expr``, ``selectExpr``, filters, merge values): ok, alias, part.
    A simple one (columns, literals, comparisons, AND/OR: :mod:`.sqlsimple`) without sqlglot."""
    simple = sqlsimple.parse(text)
    if simple is not None:
        part = SqlPart(refs=sqlsimple.columns(simple), null_refs=sqlsimple.null_columns(simple))
        return True, sqlsimple.alias(simple), part
    return analyze_expression_sqlglot(text)


def analyze_expression_sqlglot(text: str) -> tuple[bool, str | None, SqlPart]:
    """:func:`analyze_expression` by sqlglot, whatever the text."""
    sqlglot = sqlglot_module()
    exp = exp_module()
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001
        return False, None, SqlPart()
    if tree is None:
        return False, None, SqlPart()
    pos = Positions(text)
    alias = str(tree.alias) if isinstance(tree, exp.Alias) else None
    if alias is None and isinstance(tree, exp.Column):
        alias = column_name(tree)
    return True, alias, part_of(tree, pos)


def _newer_columns(cond) -> list[str]:
    """Columns a merge clause compares with themselves by order (``s.updated_at > t.updated_at``): the
    newer-wins check of a sequence column."""
    exp = exp_module()
    out: list[str] = []
    for cmp in cond.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE):
        left, right = cmp.left, cmp.right
        if (
            isinstance(left, exp.Column)
            and isinstance(right, exp.Column)
            and column_name(left).lower() == column_name(right).lower()
            and left.table != right.table
            and column_name(left) not in out
            and "__ph" not in column_name(left)  # an f-string field not known: no column name
        ):
            out.append(column_name(left))
    return out


def _sets_what_it_compares(cond, update) -> bool:
    """Does the clause compare a target column with a value by strict order and set the column to that same
    value (``WHEN MATCHED AND {batch_id} > t.batch_id THEN UPDATE SET t.batch_id = {batch_id}``)? Once the
    update ran, a replay of the batch no longer passes the condition."""
    exp = exp_module()
    sets = {
        column_name(eq.left).lower(): eq.right.sql()
        for eq in update.expressions
        if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column)
    }
    for cmp in _conjuncts(cond):
        if not isinstance(cmp, (exp.GT, exp.LT)):
            continue
        for value, column in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            same = sets.get(column_name(column).lower()) == value.sql() != column.sql()
            if isinstance(column, exp.Column) and same:
                return True
    return False


def _conjuncts(cond) -> list:
    """The parts a condition requires: through AND and parentheses (never under OR or NOT)."""
    exp = exp_module()
    out, stack = [], [cond]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.And):
            stack.extend((n.this, n.expression))
        elif isinstance(n, exp.Paren):
            stack.append(n.this)
        else:
            out.append(n)
    return out


def _guard_pairs(cond) -> list[tuple[str, str, str, str]]:
    """(table, column, table, column) of each strict ordering comparison between columns of two tables that
    the whole condition requires (one of its :func:`_conjuncts`). A replay passes ``s.v >= t.v`` and
    ``s.v > t.v OR s.force`` again; it cannot pass ``s.v > t.v AND ...`` once the update set ``t.v``."""
    exp = exp_module()
    return [
        (n.left.table or "", column_name(n.left), n.right.table or "", column_name(n.right))
        for n in _conjuncts(cond)
        if isinstance(n, (exp.GT, exp.LT))
        and isinstance(n.left, exp.Column)
        and isinstance(n.right, exp.Column)
        and (n.left.table or "") != (n.right.table or "")
    ]


@lru_cache(maxsize=4096)
def condition_guards(text: str) -> list[tuple[str, str, str, str]]:
    """The newer-wins guards of a merge clause condition (:func:`_guard_pairs`)."""
    simple = sqlsimple.parse(text)
    if simple is not None:
        return sqlsimple.guard_pairs(simple)
    tree = parse_expression(text)
    return _guard_pairs(tree) if tree is not None else []


@lru_cache(maxsize=4096)
def condition_sequences(text: str) -> list[str]:
    """Newer-wins columns of a merge clause condition (``s.v > t.v`` -> [v])."""
    simple = sqlsimple.parse(text)
    if simple is not None:
        return sqlsimple.newer_columns(simple)
    tree = parse_expression(text)
    return _newer_columns(tree) if tree is not None else []


def named(columns: list[str]) -> list[str]:
    """The columns of a condition less the placeholders of values not known (``t.{k} = s.{k}``)."""
    return [c for c in columns if "__ph" not in c]


@lru_cache(maxsize=4096)
def condition_keys(text: str) -> list[str]:
    """Columns compared with ``=`` or ``<=>`` in a merge condition (``t.k = s.k AND t.j <=> s.j`` -> [k, j])."""
    simple = sqlsimple.parse(text)
    if simple is not None:
        return sqlsimple.eq_columns(simple)
    return _eq_columns(parse_expression(text))
