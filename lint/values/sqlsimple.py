"""SQL expressions simple enough to answer without sqlglot: merge conditions and clause values as they are
usually written (``t.id = s.id AND t.region = s.region``, ``s.version > t.version``, ``op = 'D'``,
``s.email``).

Importing sqlglot costs a process 0.1-0.2 s on the AMD machine, more than the whole rest of a one-file run,
and nearly every upsert job holds a merge condition. So a text of this grammar is answered here::

    expr    := conj (OR conj)*
    conj    := cmp (AND cmp)*
    cmp     := operand [op operand | IS [NOT] NULL]        op: = == != <> <=> < <= > >=
    operand := column | number | 'string' | TRUE | FALSE | NULL
    column  := name | name.name

with the tree sqlglot builds for it (left-deep ``And``/``Or``, comparisons by sqlglot's class names), walked
in sqlglot's breadth-first order so every answer lists columns as sqlglot's would. Anything else (a function,
arithmetic, parentheses, quoting, a placeholder, three-part names, a word sqlglot reads as a function without
parentheses) gives None and the caller asks sqlglot. tests/lint/test_lint_sqlsimple.py compares the answers
with sqlglot's on generated texts and on every word of sqlglot's Spark tokenizer.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from functools import lru_cache

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?(?![\w.]))|(?P<str>'[^'\\]*')|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=>|==|!=|<>|<=|>=|=|<|>)|(?P<dot>\.))"
)
_OPS = {"=": "EQ", "==": "EQ", "!=": "NEQ", "<>": "NEQ", "<=>": "NullSafeEQ"}
_OPS.update({"<": "LT", "<=": "LTE", ">": "GT", ">=": "GTE"})
_LITERAL_WORDS = frozenset({"true", "false", "null"})
# words this grammar uses, and words sqlglot's Spark dialect reads as something other than a column where a
# column could stand (functions without parentheses, statement and clause keywords, the catalogue's bare
# functions): never a column here. tests/lint/test_lint_sqlsimple.py tries every word of sqlglot's Spark
# tokenizer and function table in several places and fails on any answer that differs from sqlglot's.
REJECTED = frozenset(
    """
    alter analyze and any array as begin between binary cache call case cast comment commit
    connect_by_root copy create cross curdate current_catalog current_database current_date
    current_datetime current_role current_schema current_time current_timestamp current_timezone
    current_user current_version date declare delete desc describe distinct drop else escape except
    execute exists explain fetch for from glob grant having if ilike in inner insert intersect interval
    into is join kill lateral like load localtime localtimestamp map merge minus not notnull now on
    optimize or outer partitioned_by pivot pragma prepare qualify refresh regexp release rename returning revoke
    rlike rollback savepoint select serdeproperties session_user set show struct sysdate systimestamp tablesample
    then timestamp timestamp_ltz timestamp_ntz truncate uncache union unpivot update use user using
    utc_date utc_time utc_timestamp vacuum values when where with xor
    """.split()  # noqa: SIM905 - a list of words reads better as words
)

# a node: ("Column", table, name) | ("Literal", text) | (class, left, right) | ("Not", inner)
Node = tuple


@lru_cache(maxsize=4096)
def parse(text: str) -> Node | None:
    """The sqlglot-shaped tree of ``text`` when it is of the grammar above, else None."""
    if "__ph" in text:  # placeholders of f-strings: sqlglot's path records them
        return None
    tokens: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return None
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    reader = _Reader(tokens)
    node = reader.disjunction()
    return node if node is not None and reader.at_end() else None


class _Reader:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.i = tokens, 0

    def at_end(self) -> bool:
        return self.i == len(self.tokens)

    def _word(self, *words: str) -> bool:
        if (
            self.i < len(self.tokens)
            and self.tokens[self.i][0] == "name"
            and self.tokens[self.i][1].lower() in words
        ):
            self.i += 1
            return True
        return False

    def disjunction(self) -> Node | None:
        node = self.conjunction()
        while node is not None and self._word("or"):
            right = self.conjunction()
            node = ("Or", node, right) if right is not None else None
        return node

    def conjunction(self) -> Node | None:
        node = self.comparison()
        while node is not None and self._word("and"):
            right = self.comparison()
            node = ("And", node, right) if right is not None else None
        return node

    def comparison(self) -> Node | None:
        left = self.operand()
        if left is None or self.at_end():
            return left
        kind, value = self.tokens[self.i]
        if kind == "op":
            self.i += 1
            right = self.operand()
            return (_OPS[value], left, right) if right is not None else None
        if self._word("is"):
            negated = self._word("not")
            if not self._word("null"):
                return None
            node = ("Is", left, ("Null",))
            return ("Not", node) if negated else node
        return left

    def operand(self) -> Node | None:
        if self.at_end():
            return None
        kind, value = self.tokens[self.i]
        self.i += 1
        if kind in ("num", "str"):
            return ("Literal", value)
        if kind != "name":
            return None
        low = value.lower()
        if low in _LITERAL_WORDS:
            return ("Null",) if low == "null" else ("Boolean", low)
        if low in REJECTED:
            return None
        if self.i < len(self.tokens) and self.tokens[self.i][0] == "dot":
            name = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else ("", "")
            self.i += 2
            if name[0] != "name" or name[1].lower() in REJECTED | _LITERAL_WORDS:
                return None
            if self.i < len(self.tokens) and self.tokens[self.i][0] == "dot":
                return None  # db.table.column: left to sqlglot
            return ("Column", value, name[1])
        return ("Column", "", value)


def walk(node: Node) -> Iterator[Node]:
    """The nodes breadth first, children left to right: the order of sqlglot's ``find_all``."""
    queue = deque([node])
    while queue:
        n = queue.popleft()
        yield n
        if n[0] in ("Column", "Literal", "Null", "Boolean"):
            continue
        queue.extend(n[1:])


def columns(node: Node) -> set[str]:
    """The column names the expression reads (sqlglot's ``column_name``: the last part)."""
    return {n[2] for n in walk(node) if n[0] == "Column"}


def null_columns(node: Node) -> set[str]:
    """Of :func:`columns`, those read only by ``IS [NOT] NULL`` tests (``lint.sqlparts.part_of``'s
    ``null_refs``)."""
    tested = {n[1][2] for n in walk(node) if n[0] == "Is" and n[1][0] == "Column"}
    valued = set()
    for n in walk(node):
        if n[0] not in ("Column", "Literal", "Null", "Boolean", "Is"):
            valued.update(c[2] for c in n[1:] if c[0] == "Column")
    if node[0] == "Column":
        valued.add(node[2])
    return tested - valued


def alias(node: Node) -> str | None:
    """The output name of the expression: a lone column's name."""
    return node[2] if node[0] == "Column" else None


def eq_columns(node: Node) -> list[str]:
    """Columns compared with ``=`` or ``<=>`` to another column, in sqlglot's order (``lint.sql._eq_columns``)."""
    out: list[str] = []
    for n in walk(node):
        if (n[0] == "EQ" or n[0] == "NullSafeEQ") and n[1][0] == "Column" and n[2][0] == "Column":
            for side in (n[1], n[2]):
                if side[2] not in out:
                    out.append(side[2])
    return out


def newer_columns(node: Node) -> list[str]:
    """Columns compared by order with themselves across two tables (``lint.sql._newer_columns``)."""
    out: list[str] = []
    for n in walk(node):
        if n[0] in ("GT", "GTE", "LT", "LTE") and n[1][0] == "Column" and n[2][0] == "Column":
            left, right = n[1], n[2]
            if left[2].lower() == right[2].lower() and left[1] != right[1] and left[2] not in out:
                out.append(left[2])
    return out


def guard_pairs(node: Node) -> list[tuple[str, str, str, str]]:
    """(table, column, table, column) of each strict ordering comparison between columns of two tables that
    the whole condition requires: a conjunct, not under OR (``lint.sql._guard_pairs``)."""
    out: list[tuple[str, str, str, str]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] == "And":
            stack.extend(n[1:])
        elif n[0] in ("GT", "LT") and n[1][0] == "Column" and n[2][0] == "Column" and n[1][1] != n[2][1]:
            out.append((n[1][1] or "", n[1][2], n[2][1] or "", n[2][2]))
    return out
