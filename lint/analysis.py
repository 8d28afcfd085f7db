"""Per-module data flow on Python's ``ast``: sources -> names -> column expressions -> written columns.

One pass collects scopes, bindings, imports, calls and writes; a second, demand-driven pass computes for
every written column the set of nondeterministic sources that reach it (memoized, cycle-safe). Names are
resolved here, in one pass, without any metadata provider: an import binds a qualified name, any other
binding (assignment, parameter, def, class, loop variable) in a nearer scope shadows it.

Why ``ast`` and not libcst: ``ast`` gives line/column/end positions of every node for free and parses
about ten times faster than ``libcst.parse_module``; with libcst the positions alone (PositionProvider)
cost 1.6x the parse. The linter never rewrites code, so the concrete syntax tree buys nothing here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from upsertsink.lint import sql as sqlmod
from upsertsink.lint.catalogue import (
    LOOK_ONLY_ACTIONS,
    METHOD_HOOKS,
    NOW_STRING_CALLS,
    ORDER_FIXING_FUNCTIONS,
    ORDER_INSENSITIVE_ARGS_OF,
    ORDER_METHODS,
    PYTHON_CALLS,
    PYTHON_CALLS_NO_ARGS,
    PYTHON_CALLS_ONE_ARG,
    PYTHON_MODULES,
    PYTHON_RANDOM_NEUTRAL,
    PYTHON_RANDOM_SEEDABLE,
    SPARK_FUNCTION_MODULES,
    SPARK_FUNCTIONS,
    SPARK_NO_ARG_ONLY,
    SPARK_ORDERED_OK,
    SPARK_RANKING,
    UDF_FACTORIES,
)
from upsertsink.lint.strings import PosText, literal_text

EMPTY: frozenset = frozenset()
Span = tuple[int, int, int, int]


@dataclass(frozen=True)
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


# DataFrame methods that return a DataFrame (or a reader/writer/builder): their result carries no value
# taint of its own; what they write is recorded as column writes instead. (``format``, ``replace`` and
# ``join`` are left out on purpose: as str methods they carry values, e.g. "-".join([a, str(uuid4())]).)
DF_METHODS = {
    "select",
    "selectExpr",
    "withColumn",
    "withColumns",
    "withColumnRenamed",
    "withColumnsRenamed",
    "filter",
    "where",
    "agg",
    "groupBy",
    "groupby",
    "crossJoin",
    "union",
    "unionAll",
    "unionByName",
    "drop",
    "dropDuplicates",
    "drop_duplicates",
    "dropDuplicatesWithinWatermark",
    "distinct",
    "orderBy",
    "sort",
    "limit",
    "sample",
    "sampleBy",
    "randomSplit",
    "repartition",
    "repartitionByRange",
    "coalesce",
    "cache",
    "persist",
    "checkpoint",
    "localCheckpoint",
    "toDF",
    "fillna",
    "dropna",
    "transform",
    "mapInPandas",
    "mapInArrow",
    "applyInPandas",
    "sql",
    "table",
    "read",
    "readStream",
    "createDataFrame",
    "load",
    "parquet",
    "csv",
    "json",
    "orc",
    "text",
    "option",
    "options",
    "schema",
    "writeStream",
    "write",
    "merge",
    "whenMatchedUpdate",
    "whenMatchedUpdateAll",
    "whenMatchedDelete",
    "whenNotMatchedInsert",
    "whenNotMatchedInsertAll",
    "whenNotMatchedBySourceUpdate",
    "whenNotMatchedBySourceDelete",
    "execute",
    "when_matched_update",
    "when_matched_update_all",
    "when_matched_delete",
    "when_not_matched_insert",
    "when_not_matched_insert_all",
    "when_not_matched_by_source_update",
    "when_not_matched_by_source_delete",
    "hint",
    "withWatermark",
    "observe",
    "pivot",
    "forPath",
    "forName",
    "toPandas",
    "collect",
    "show",
    "count",
    "assign",
    "sortWithinPartitions",
    "unpersist",
    "createOrReplaceTempView",
    "registerTempTable",
    "saveAsTable",
    "save",
    "insertInto",
    "foreachBatch",
    "start",
    "trigger",
    "outputMode",
}
_ALIAS_METHODS = {"alias", "name", "as_"}
_NAME_ARG_FUNCS = {"col", "column"}
_ORDER_WRAPPERS = {"desc", "asc", "desc_nulls_first", "desc_nulls_last", "asc_nulls_first", "asc_nulls_last"}
_MERGE_MAP_METHODS = {
    "whenMatchedUpdate": ("set", 1),
    "whenNotMatchedInsert": ("values", 1),
    "whenNotMatchedBySourceUpdate": ("set", 1),
    "when_matched_update": ("updates", 0),
    "when_not_matched_insert": ("updates", 0),
    "when_not_matched_by_source_update": ("updates", 0),
}
# DataFrame methods between a row choice and a look-only action that do not write anything themselves.
_PASS_THROUGH = {
    "limit",
    "select",
    "orderBy",
    "sort",
    "withColumn",
    "filter",
    "where",
    "drop",
    "dropDuplicates",
    "drop_duplicates",
    "sample",
    "alias",
    "selectExpr",
    "distinct",
    "toDF",
}
# DataFrame methods that keep the columns of the DataFrame they are called on.
_COLUMN_KEEPING = {
    "cache",
    "persist",
    "checkpoint",
    "localCheckpoint",
    "repartition",
    "repartitionByRange",
    "coalesce",
    "hint",
    "union",
    "unionAll",
    "unionByName",
    "withWatermark",
    "sortWithinPartitions",
}
# Methods that decide which rows are written when called on a DataFrame.
_ROW_METHODS = {
    "filter",
    "where",
    "limit",
    "sample",
    "sampleBy",
    "randomSplit",
    "dropDuplicates",
    "drop_duplicates",
    "dropDuplicatesWithinWatermark",
}
# Functions that only show what they are given: ``display(df.limit(10))`` writes nothing.
_LOOK_ONLY_FUNCTIONS = {"print", "display", "len", "repr", "pprint"}
_MERGE_COND_KW = ("condition", "predicate", "merge_condition")
_NOQA_RE = re.compile(
    "#" + r"\s*noqa(?::\s*(?P<codes>[A-Za-z0-9_]+(?:[\s,]+[A-Za-z0-9_]+)*))?", re.IGNORECASE
)


_SPECIAL = frozenset(
    {
        ast.Call,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.NamedExpr,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.Lambda,
        ast.ClassDef,
        ast.Return,
        ast.Import,
        ast.ImportFrom,
        ast.For,
        ast.AsyncFor,
        ast.comprehension,
        ast.With,
        ast.AsyncWith,
        ast.ExceptHandler,
        ast.Global,
        ast.Nonlocal,
    }
)
# Nodes that can hold nothing collect() needs: names, constants, contexts and operators.
_LEAVES = frozenset(
    {ast.Constant, ast.Name, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue}
    | {
        c
        for c in vars(ast).values()
        if isinstance(c, type) and issubclass(c, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop))
    }
)
_NON_NODE_FIELDS = {
    "ctx",
    "op",
    "ops",
    "attr",
    "id",
    "arg",
    "name",
    "names",
    "module",
    "level",
    "type_comment",
    "kind",
    "asname",
    "is_async",
    "conversion",
    "simple",
}
_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def _child_fields(t: type) -> tuple[str, ...]:
    fields = _FIELDS_CACHE.get(t)
    if fields is None:
        fields = tuple(f for f in t._fields if f not in _NON_NODE_FIELDS)
        _FIELDS_CACHE[t] = fields
    return fields


def _push_children(node: ast.AST, scope: Scope, stack: list) -> None:
    """Queue the child nodes of ``node`` that collect() must see (leaves such as names are skipped)."""
    for f in _child_fields(node.__class__):
        v = getattr(node, f, None)
        if v is None:
            continue
        if v.__class__ is list:
            for x in v:
                if x.__class__ not in _LEAVES and isinstance(x, ast.AST):
                    stack.append((x, scope))
        elif v.__class__ not in _LEAVES and isinstance(v, ast.AST):
            stack.append((v, scope))


class Scope:
    """A function, lambda, class or module scope: its bindings and imports."""

    __slots__ = (
        "assigns",
        "funcs",
        "globals",
        "imports",
        "kind",
        "node",
        "params",
        "parent",
        "returns",
        "star",
        "udfs",
    )

    def __init__(self, kind: str, parent: Scope | None, node: ast.AST | None) -> None:
        self.kind = kind
        self.params: list[str] = []  # positional parameters in order, then keyword-only ones
        self.parent = parent
        self.node = node
        self.assigns: dict[str, list[ast.AST | None]] = {}
        self.imports: dict[str, str] = {}
        self.globals: set[str] = set()
        self.returns: list[ast.AST] = []
        self.funcs: dict[str, tuple[ast.AST, Scope]] = {}
        self.star: list[str] = []
        self.udfs: set[str] = set()

    def bind(self, name: str, value: ast.AST | None) -> None:
        if name in self.globals and self.parent is not None:
            root = self
            while root.parent is not None:
                root = root.parent
            root.assigns.setdefault(name, []).append(value)
            return
        self.assigns.setdefault(name, []).append(value)


@dataclass
class Write:
    column: str
    scope: Scope
    expr: ast.AST | None = None
    sql: tuple[sqlmod.SqlPart, PosText] | None = None
    node: ast.AST | None = None
    rename: bool = False  # expr is a Constant holding the old column name
    own: Src | None = None  # a source the write itself introduces (``agg({"v": "first"})``)


@dataclass
class RowEffect:
    kind: str  # filter | limit | sample | dedup | merge
    scope: Scope
    expr: ast.AST | None = None
    sql: tuple[sqlmod.SqlPart, PosText] | None = None
    own: Src | None = None
    subset: list[str] | None = None


class ModuleAnalysis:
    """Analyze one parsed module; :meth:`run` returns (Src, target, column, other columns) tuples."""

    def __init__(self, tree: ast.Module, lines: list[str], keys: list[str], sequence: list[str]) -> None:
        self.tree = tree
        self.lines = lines
        self.keys: list[str] = list(keys)
        self.sequence: list[str] = list(sequence)
        self.module = Scope("module", None, tree)
        self.calls: list[tuple[ast.Call, Scope]] = []
        self.sub_writes: list[tuple[ast.Subscript, ast.AST, Scope]] = []
        self.chain_parent: dict[int, ast.Call] = {}
        self.looked_args: set[int] = set()
        self.writes: list[Write] = []
        self.rows: list[RowEffect] = []
        self.sink_calls: list[tuple[ast.Call, Scope]] = []
        self.merge_conds: list[tuple[ast.AST, Scope]] = []
        self.seeded: set[str] = set()
        self._memo: dict[int, frozenset] = {}
        self._busy: set[int] = set()
        self._col_memo: dict[str, frozenset] = {}
        self._col_busy: set[str] = set()
        self._str_memo: dict[int, PosText | None] = {}
        self._by_column: dict[str, list[Write]] = {}
        self._fn_memo: dict[int, frozenset] = {}
        self._fn_scopes: dict[int, Scope] = {}
        self.sql_udfs: dict[str, tuple[ast.AST, Scope]] = {}
        self._call_sites: dict[int, list[tuple[ast.Call, Scope]]] | None = None

    # ------------------------------------------------------------------ pass 1: collect
    def collect(self) -> None:
        stack: list[tuple[ast.AST, Scope]] = [(stmt, self.module) for stmt in self.tree.body]
        visit = self._visit
        special = _SPECIAL
        push = _push_children
        while stack:
            node, scope = stack.pop()
            if node.__class__ in special:
                visit(node, scope, stack)
            else:
                push(node, scope, stack)
        self.calls.sort(key=lambda cs: (cs[0].lineno, cs[0].col_offset))

    def _visit(self, node: ast.AST, scope: Scope, stack: list) -> None:
        t = type(node)
        if t is ast.Call:
            self.calls.append((node, scope))
            func = node.func
            if type(func) is ast.Attribute and type(func.value) is ast.Call:
                self.chain_parent[id(func.value)] = node
            if type(func) is ast.Name and func.id in _LOOK_ONLY_FUNCTIONS:
                for a in node.args:
                    if type(a) is ast.Call:
                        self.looked_args.add(id(a))
        elif t is ast.Assign:
            for target in node.targets:
                self._bind_target(target, node.value, scope)
        elif t is ast.AnnAssign or t is ast.AugAssign:
            if node.value is not None:
                self._bind_target(node.target, node.value, scope)
        elif t is ast.NamedExpr:
            scope.bind(node.target.id, node.value)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
            if t is not ast.Lambda:
                scope.bind(node.name, None)
                scope.funcs[node.name] = (node, Scope("function", scope, node))
                fscope = scope.funcs[node.name][1]
                for dec in node.decorator_list:
                    stack.append((dec, scope))
                    if self._is_udf_factory(dec, scope):
                        scope.udfs.add(node.name)
                for d in node.args.defaults + node.args.kw_defaults:
                    if d is not None:
                        stack.append((d, scope))
                if node.returns is not None:
                    stack.append((node.returns, scope))
            else:
                fscope = Scope("function", scope, node)
                self._fn_scopes[id(node)] = fscope
                for d in node.args.defaults + node.args.kw_defaults:
                    if d is not None:
                        stack.append((d, scope))
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None:
                    fscope.bind(arg.arg, None)
            fscope.params = [arg.arg for arg in a.posonlyargs + a.args + a.kwonlyargs]
            if t is ast.Lambda:
                fscope.returns.append(node.body)
                stack.append((node.body, fscope))
            else:
                for stmt in node.body:
                    stack.append((stmt, fscope))
            return
        elif t is ast.ClassDef:
            scope.bind(node.name, None)
            cscope = Scope("class", scope, node)
            for sub in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                stack.append((sub, scope))
            for stmt in node.body:
                stack.append((stmt, cscope))
            return
        elif t is ast.Return:
            if node.value is not None:
                scope.returns.append(node.value)
        elif t is ast.Import:
            for alias in node.names:
                if alias.asname:
                    scope.imports[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    scope.imports[top] = top
        elif t is ast.ImportFrom:
            mod = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    scope.star.append(mod)
                else:
                    scope.imports[alias.asname or alias.name] = f"{mod}.{alias.name}" if mod else alias.name
        elif t is ast.For or t is ast.AsyncFor or t is ast.comprehension:
            self._bind_target(node.target, node.iter, scope)
        elif t is ast.With or t is ast.AsyncWith:
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, item.context_expr, scope)
        elif t is ast.ExceptHandler:
            if node.name:
                scope.bind(node.name, None)
        elif t is ast.Global or t is ast.Nonlocal:
            scope.globals.update(node.names)
        _push_children(node, scope, stack)

    def _bind_target(self, target: ast.AST, value: ast.AST, scope: Scope) -> None:
        t = type(target)
        if t is ast.Name:
            scope.bind(target.id, value)
        elif t is ast.Tuple or t is ast.List:
            for elt in target.elts:
                self._bind_target(elt, value, scope)
        elif t is ast.Starred:
            self._bind_target(target.value, value, scope)
        elif t is ast.Subscript:
            self.sub_writes.append((target, value, scope))

    # ------------------------------------------------------------------ name resolution
    def lookup(self, name: str, scope: Scope) -> Scope | None:
        """The scope that binds ``name`` as seen from ``scope`` (class scopes are skipped for nested code)."""
        s: Scope | None = scope
        first = True
        while s is not None:
            if (first or s.kind != "class") and (name in s.assigns or name in s.imports):
                return s
            first = False
            s = s.parent
        return None

    def qualname(self, node: ast.AST, scope: Scope) -> str | None:
        """Import-qualified dotted name of a Name/Attribute chain, or None when it is not from an import."""
        parts: list[str] = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        s = self.lookup(node.id, scope)
        if s is None:
            for mod in self._star_modules(scope):
                if (
                    node.id in SPARK_FUNCTIONS
                    or node.id in SPARK_RANKING
                    or node.id in ("col", "expr", "udf")
                ):
                    return ".".join([mod, node.id, *reversed(parts)])
            return None
        if node.id not in s.imports:
            return None
        if node.id in s.assigns and not all(
            type(v) is ast.Constant and v.value is None for v in s.assigns[node.id]
        ):
            return None  # rebound locally: a def, a parameter or an assignment shadows the import
        # (``except ImportError: F = None`` keeps the import's meaning)
        return ".".join([s.imports[node.id], *reversed(parts)])

    def _star_modules(self, scope: Scope) -> list[str]:
        out: list[str] = []
        s: Scope | None = scope
        while s is not None:
            out.extend(m for m in s.star if m in SPARK_FUNCTION_MODULES)
            s = s.parent
        return out

    @staticmethod
    def spark_name(q: str | None) -> str | None:
        if q is None or "." not in q:
            return None
        mod, name = q.rsplit(".", 1)
        return name if mod in SPARK_FUNCTION_MODULES else None

    def _is_udf_factory(self, node: ast.AST, scope: Scope) -> bool:
        if type(node) is ast.Call:
            node = node.func
        q = self.qualname(node, scope)
        if q is not None:
            return q.rsplit(".", 1)[-1] in UDF_FACTORIES
        return type(node) is ast.Name and node.id in UDF_FACTORIES

    # ------------------------------------------------------------------ positions and text
    def span(self, node: ast.AST) -> Span:
        line = node.lineno
        end_line = node.end_lineno or line
        return (
            line,
            self._char_col(line, node.col_offset),
            end_line,
            self._char_col(end_line, node.end_col_offset),
        )

    def _char_col(self, line: int, byte_off: int | None) -> int:
        if byte_off is None:
            return 1
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_off].decode("utf-8", "replace")) + 1
        return byte_off + 1

    def method_span(self, call: ast.Call) -> Span:
        """From the method name of ``x.method(...)`` to the end of the call."""
        func = call.func
        assert isinstance(func, ast.Attribute)
        line = func.end_lineno or call.lineno
        end_col = self._char_col(line, func.end_col_offset)
        _, _, eline, ecol = self.span(call)
        return (line, end_col - len(func.attr), eline, ecol)

    def segment(self, node: ast.AST, limit: int = 60) -> str:
        line, col, eline, ecol = self.span(node)
        if line == eline and 0 < line <= len(self.lines):
            text = self.lines[line - 1][col - 1 : ecol - 1]
        else:
            text = (self.lines[line - 1][col - 1 :].rstrip() + " ...") if 0 < line <= len(self.lines) else "?"
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def src(self, rule: str, node: ast.AST, what: str | None = None, span: Span | None = None) -> Src:
        s = span or self.span(node)
        return Src(rule, *s, what or self.segment(node))

    # ------------------------------------------------------------------ constant strings
    def str_value(self, node: ast.AST | None, scope: Scope) -> PosText | None:
        if node is None:
            return None
        key = id(node)
        if key in self._str_memo:
            return self._str_memo[key]
        self._str_memo[key] = None
        out: PosText | None = None
        t = type(node)
        if (t is ast.Constant and isinstance(node.value, str)) or t is ast.JoinedStr:
            out = literal_text(node, self.lines)
        elif t is ast.Name:
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1:
                    out = self.str_value(values[0], s)
        elif t is ast.BinOp and isinstance(node.op, ast.Add):
            left, right = self.str_value(node.left, scope), self.str_value(node.right, scope)
            if left is not None and right is not None:
                out = left + right
        elif t is ast.Call and node.args:
            func = node.func
            name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
            if name == "dedent" and len(node.args) == 1:
                inner = self.str_value(node.args[0], scope)
                out = inner.dedent() if inner is not None else None
        elif (
            t is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "strip" and not node.args
        ):
            inner = self.str_value(node.func.value, scope)
            out = inner.strip() if inner is not None else None
        self._str_memo[key] = out
        return out

    def const_strings(self, node: ast.AST | None, scope: Scope) -> list[str] | None:
        if node is None:
            return None
        t = type(node)
        if t is ast.Constant and isinstance(node.value, str):
            return [node.value]
        if t is ast.List or t is ast.Tuple or t is ast.Set:
            out: list[str] = []
            for elt in node.elts:
                sub = self.const_strings(elt, scope)
                if sub is None:
                    return None
                out.extend(sub)
            return out
        if t is ast.Name:
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and values[0] is not node:
                    return self.const_strings(values[0], s)
        if t is ast.Call and type(node.func) is ast.Name and node.func.id in ("list", "tuple") and node.args:
            return self.const_strings(node.args[0], scope)
        return None

    # ------------------------------------------------------------------ pass 2: taint
    def taint(self, node: ast.AST | None, scope: Scope) -> frozenset:
        if node is None:
            return EMPTY
        key = id(node)
        memo = self._memo.get(key)
        if memo is not None:
            return memo
        if key in self._busy:
            return EMPTY
        self._busy.add(key)
        try:
            result = self._taint(node, scope)
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _taint(self, node: ast.AST, scope: Scope) -> frozenset:
        t = type(node)
        if t is ast.Constant:
            return EMPTY
        if t is ast.Name:
            return self.name_taint(node.id, scope)
        if t is ast.Call:
            return self.call_taint(node, scope)
        if t is ast.Attribute:
            out = self.taint(node.value, scope)
            if type(node.value) is ast.Name and self.qualname(node.value, scope) is None:
                out = out | self.column_taint(node.attr)  # df.col_name
            return out
        if t is ast.Subscript:
            out = self.taint(node.value, scope) | self.taint(node.slice, scope)
            sl = node.slice
            if type(sl) is ast.Constant and isinstance(sl.value, str):
                out |= self.column_taint(sl.value)
            return out
        if t is ast.Lambda or t is ast.FunctionDef:
            return EMPTY
        out = EMPTY
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) or type(child) in (
                ast.keyword,
                ast.comprehension,
                ast.FormattedValue,
            ):
                out = out | self.taint(child, scope)
        return out

    def name_taint(self, name: str, scope: Scope) -> frozenset:
        s = self.lookup(name, scope)
        if s is None or name not in s.assigns:
            return EMPTY
        out = EMPTY
        for value in s.assigns[name]:
            if value is not None:
                out = out | self.taint(value, s)
        if s.kind == "function" and name in s.params:
            out = out | self.param_taint(s, name)
        return out

    def param_taint(self, fscope: Scope, name: str) -> frozenset:
        """What the module's own calls of the function pass for parameter ``name``."""
        if self._call_sites is None:
            self._call_sites = {}
            for call, scope in self.calls:
                if type(call.func) is ast.Name:
                    owner = self.lookup(call.func.id, scope)
                    if owner is not None and call.func.id in owner.funcs:
                        fn = owner.funcs[call.func.id][0]
                        self._call_sites.setdefault(id(fn), []).append((call, scope))
        node = fscope.node
        if isinstance(node, ast.Lambda) or node is None:
            return EMPTY
        index = fscope.params.index(name)
        n_positional = len(node.args.posonlyargs) + len(node.args.args)
        out = EMPTY
        for call, scope in self._call_sites.get(id(node), ()):
            if index < n_positional and index < len(call.args) and type(call.args[index]) is not ast.Starred:
                out = out | self.taint(call.args[index], scope)
            for kw in call.keywords:
                if kw.arg == name:
                    out = out | self.taint(kw.value, scope)
        return out

    def column_taint(self, column: str) -> frozenset:
        """Sources reaching a column by name (through every write of that column in the module)."""
        col = _norm(column)
        memo = self._col_memo.get(col)
        if memo is not None:
            return memo
        if col in self._col_busy:
            return EMPTY
        self._col_busy.add(col)
        out = EMPTY
        try:
            for w in self._by_column.get(col, ()):
                out = out | self.write_taint(w)
        finally:
            self._col_busy.discard(col)
        self._col_memo[col] = out
        return out

    def write_taint(self, w: Write | RowEffect) -> frozenset:
        if isinstance(w, Write) and w.rename and isinstance(w.expr, ast.Constant):
            return self.column_taint(str(w.expr.value))
        out = self.taint(w.expr, w.scope) if w.expr is not None else EMPTY
        if w.sql is not None:
            out = out | self.sql_taint(w.sql[0], w.sql[1], w.scope)
        if w.own is not None:
            out = out | {w.own}
        return out

    def sql_taint(self, part: sqlmod.SqlPart, text: PosText, scope: Scope) -> frozenset:
        out = set()
        for site in part.sites:
            if site.window is not None and not self.may_tie(*site.window):
                continue
            line, col, eline, ecol = text.span(site.start, site.end)
            alt = text.last_line
            out.add(Src(site.rule, line, col, eline, ecol, f"{site.name} in SQL", alt_line=alt))
        for ref in part.refs:
            out |= self.column_taint(ref)
        for hole in part.holes:
            node = text.holes.get(hole)
            if node is not None:
                out |= self.taint(node, scope)
        for name in part.calls:
            registered = self.sql_udfs.get(name.lower())
            if registered is not None:
                out |= self._udf_taint(registered[0], registered[1], name)
        return frozenset(out)

    def may_tie(self, partition: tuple[str, ...], order: tuple[str, ...]) -> bool:
        """Heuristic: a window ordering may tie unless it includes a key or sequence column that is not a
        partition column, or it orders by two or more distinct columns (the last one a tie-breaker)."""
        order_n = {_norm(c) for c in order}
        part_n = {_norm(c) for c in partition}
        if not order_n:
            return True
        unique = {_norm(k) for k in self.keys} | {_norm(s) for s in self.sequence}
        if (order_n - part_n) & unique:
            return False
        return len(order_n - part_n) < 2

    def window_spec(self, node: ast.AST, scope: Scope, depth: int = 0) -> tuple[tuple, tuple] | None:
        if depth > 20:
            return None
        t = type(node)
        if t is ast.Name:
            s = self.lookup(node.id, scope)
            if s is None or node.id not in s.assigns:
                q = self.qualname(node, scope) or node.id
                return ((), ()) if q.rsplit(".", 1)[-1] == "Window" else None
            values = [v for v in s.assigns[node.id] if v is not None]
            if len(values) != 1:
                return None
            return self.window_spec(values[0], s, depth + 1)
        if t is ast.Attribute:
            return ((), ()) if node.attr == "Window" else None
        if t is ast.Call and type(node.func) is ast.Name:  # a helper that builds the window
            s = self.lookup(node.func.id, scope)
            if s is None or node.func.id not in s.funcs:
                return None
            fscope = s.funcs[node.func.id][1]
            specs = {self.window_spec(r, fscope, depth + 1) for r in fscope.returns}
            return specs.pop() if len(specs) == 1 else None
        if t is ast.Call and type(node.func) is ast.Attribute:
            base = self.window_spec(node.func.value, scope, depth + 1)
            if base is None:
                return None
            part, order = base
            m = node.func.attr
            cols = tuple(c for a in node.args for c in self._col_names(a, scope))
            if m == "partitionBy":
                return (part + cols, order)
            if m == "orderBy":
                return (part, order + cols)
            return base
        return None

    def _col_names(self, node: ast.AST, scope: Scope) -> list[str]:
        t = type(node)
        if t is ast.Constant and isinstance(node.value, str):
            return [node.value]
        if t is ast.List or t is ast.Tuple:
            return [c for e in node.elts for c in self._col_names(e, scope)]
        if t is ast.Starred:
            return self._col_names(node.value, scope)
        if t is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and func.attr in _ORDER_WRAPPERS and not node.args:
                return self._col_names(func.value, scope)
            sname = self.spark_name(self.qualname(func, scope))
            if (sname in _NAME_ARG_FUNCS or sname in _ORDER_WRAPPERS) and node.args:
                return self._col_names(node.args[0], scope)
        if t is ast.Subscript:
            return self._col_names(node.slice, scope)
        if t is ast.Attribute:
            return [node.attr]
        if t is ast.Name:
            strs = self.const_strings(node, scope)
            if strs is not None:
                return strs
        return [f"<{self.segment(node, 30)}>"]

    def source_of_call(self, call: ast.Call, q: str | None) -> Src | None:
        if q is None:
            return None
        nargs = len(call.args) + len(call.keywords)
        rule = PYTHON_CALLS.get(q)
        if rule is None and nargs == 0:
            rule = PYTHON_CALLS_NO_ARGS.get(q)
        if rule is None and nargs == 1:
            rule = PYTHON_CALLS_ONE_ARG.get(q)
        if rule is not None:
            return self.src(rule, call)
        if q in NOW_STRING_CALLS and call.args:
            first = call.args[0]
            if (
                type(first) is ast.Constant
                and isinstance(first.value, str)
                and first.value.lower() in ("now", "today")
            ):
                return self.src("ND001", call)
        mod, _, name = q.rpartition(".")
        if mod in PYTHON_MODULES:
            if name in PYTHON_RANDOM_NEUTRAL or mod in self.seeded:
                return None
            if name in PYTHON_RANDOM_SEEDABLE and nargs:
                return None
            return self.src(PYTHON_MODULES[mod], call)
        sname = self.spark_name(q)
        if sname is not None and sname in SPARK_FUNCTIONS:
            if sname in SPARK_NO_ARG_ONLY and nargs:
                return None
            return self.src(SPARK_FUNCTIONS[sname], call)
        return None

    def call_taint(self, call: ast.Call, scope: Scope) -> frozenset:
        func = call.func
        ft = type(func)
        out: set[Src] = set()
        q = self.qualname(func, scope) if ft is ast.Name or ft is ast.Attribute else None
        source = self.source_of_call(call, q)
        if source is not None:
            out.add(source)
        sname = self.spark_name(q)
        args = call.args
        if sname is not None:
            if sname == "expr" and args:
                text = self.str_value(args[0], scope)
                if text is not None:
                    ok, _alias, part = sqlmod.analyze_expression(text.text)
                    if ok:
                        out |= self.sql_taint(part, text, scope)
            elif sname != "lit":
                for a in args:
                    if type(a) is ast.Constant and isinstance(a.value, str):
                        out |= self.column_taint(a.value)
            if sname in ORDER_FIXING_FUNCTIONS and args:
                # sort_array(collect_set(x)): the array's order, the only problem of collect_*, is fixed here
                fixed = set()
                for a in args:
                    if type(a) is ast.Call and self.spark_name(self.qualname(a.func, scope)) in (
                        ORDER_INSENSITIVE_ARGS_OF
                    ):
                        fixed.add(self.span(a))
                rest = frozenset(
                    x
                    for a in args
                    for x in self.taint(a, scope)
                    if not (x.rule == "ND005" and (x.line, x.col, x.end_line, x.end_col) in fixed)
                )
                for kw in call.keywords:
                    rest = rest | self.taint(kw.value, scope)
                return frozenset(out) | rest
            if sname in UDF_FACTORIES:
                return frozenset(out)
        if ft is ast.Attribute:
            m = func.attr
            if m == "over":
                return frozenset(out | self._over_taint(call, scope))
            if m in DF_METHODS:
                return EMPTY
            if q is None:
                out |= self.taint(func.value, scope)
        elif ft is ast.Name:
            out |= self._local_call_taint(func.id, scope)
        elif ft is ast.Call and self._is_udf_factory(func, scope) and func.args:
            out |= self._udf_taint(func.args[0], scope, self.segment(func.args[0], 30))
        else:
            out |= self.taint(func, scope)
        for a in args:
            out |= self.taint(a, scope)
        for kw in call.keywords:
            out |= self.taint(kw.value, scope)
        return frozenset(out)

    def _over_taint(self, call: ast.Call, scope: Scope) -> frozenset:
        func = call.func
        assert isinstance(func, ast.Attribute)
        inner = func.value
        spec = self.window_spec(call.args[0], scope) if call.args else ((), ())
        ties = spec is None or self.may_tie(*spec)
        name = None
        if type(inner) is ast.Call:
            name = self.spark_name(self.qualname(inner.func, scope))
        out = set(self.taint(inner, scope))
        if name in SPARK_RANKING and spec is not None and ties:
            out.add(
                self.src("ND006", inner, what=f"{self.segment(inner.func, 40)}() over a window that may tie")
            )
        elif name in SPARK_ORDERED_OK and spec is not None and not ties:
            own = self.span(inner)
            out = {
                s for s in out if not (s.rule == "ND005" and (s.line, s.col, s.end_line, s.end_col) == own)
            }
        for a in call.args:
            out |= self.taint(a, scope)
        return frozenset(out)

    def _local_call_taint(self, name: str, scope: Scope) -> frozenset:
        s = self.lookup(name, scope)
        if s is None:
            return EMPTY
        out = EMPTY
        if name in s.funcs:
            fn, fscope = s.funcs[name]
            if name in s.udfs:
                out = out | self._udf_taint_fn(fn, fscope, name)
            else:
                out = out | self._returns_taint(fn, fscope)
        for value in s.assigns.get(name, ()):
            while (
                type(value) is ast.Call
                and type(value.func) is ast.Attribute
                and value.func.attr in ("asNondeterministic", "withName")
            ):
                value = value.func.value
            if type(value) is ast.Call and self._is_udf_factory(value, s):
                target = value.args[0] if value.args else None
                if (
                    type(value.func) is ast.Attribute
                    and value.func.attr == "register"
                    and len(value.args) > 1
                ):
                    target = value.args[1]
                if target is not None:
                    out = out | self._udf_taint(target, s, name)
            elif type(value) is ast.Lambda:
                out = out | self.taint(value.body, self._fn_scopes.get(id(value), s))
        return out

    def _returns_taint(self, fn: ast.AST, fscope: Scope) -> frozenset:
        key = id(fn)
        if key in self._fn_memo:
            return self._fn_memo[key]
        self._fn_memo[key] = EMPTY
        out = EMPTY
        for r in fscope.returns:
            out = out | self.taint(r, fscope)
        self._fn_memo[key] = out
        return out

    def _udf_taint(self, target: ast.AST, scope: Scope, label: str) -> frozenset:
        if type(target) is ast.Lambda:
            fscope = self._fn_scopes.get(id(target))
            inner = self.taint(target.body, fscope) if fscope is not None else EMPTY
            return self._as_udf(inner, label)
        if type(target) is ast.Name:
            s = self.lookup(target.id, scope)
            if s is not None and target.id in s.funcs:
                fn, fscope = s.funcs[target.id]
                return self._udf_taint_fn(fn, fscope, label)
        return EMPTY

    def _udf_taint_fn(self, fn: ast.AST, fscope: Scope, label: str) -> frozenset:
        return self._as_udf(self._returns_taint(fn, fscope), label)

    @staticmethod
    def _as_udf(inner: frozenset, label: str) -> frozenset:
        return frozenset(
            Src(
                "ND010",
                s.line,
                s.col,
                s.end_line,
                s.end_col,
                s.what,
                via=f"UDF `{label}`",
                alt_line=s.alt_line,
            )
            for s in inner
        )

    # ------------------------------------------------------------------ writes, row effects, keys
    def looked_only(self, call: ast.Call) -> bool:
        if id(call) in self.looked_args:
            return True
        parent = self.chain_parent.get(id(call))
        while parent is not None:
            if id(parent) in self.looked_args:
                return True
            assert isinstance(parent.func, ast.Attribute)
            if parent.func.attr in LOOK_ONLY_ACTIONS:
                return True
            if parent.func.attr not in _PASS_THROUGH:
                return False
            parent = self.chain_parent.get(id(parent))
        return False

    def ordered_before(self, node: ast.AST, scope: Scope, depth: int = 0) -> bool:
        while depth < 50:
            depth += 1
            t = type(node)
            if t is ast.Call and type(node.func) is ast.Attribute:
                if node.func.attr in ORDER_METHODS:
                    return True
                node = node.func.value
            elif t is ast.Name:
                s = self.lookup(node.id, scope)
                if s is None or node.id not in s.assigns:
                    return False
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) != 1 or values[0] is node:
                    return False
                node, scope = values[0], s
            else:
                return False
        return False

    def _sql_arg(self, node: ast.AST, scope: Scope) -> PosText | None:
        text = self.str_value(node, scope)
        if text is None or not text.text.strip():
            return None
        return text

    def _add_write(
        self,
        column: str,
        scope: Scope,
        expr: ast.AST | None = None,
        sql=None,
        node=None,
        rename: bool = False,
    ) -> None:
        w = Write(column, scope, expr, sql, node, rename)
        self.writes.append(w)
        self._by_column.setdefault(_norm(column), []).append(w)

    def _resolve_dict(self, node: ast.AST, scope: Scope) -> ast.AST:
        """A dict literal, or the one dict literal a name is bound to."""
        if type(node) is ast.Name:
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and type(values[0]) is ast.Dict:
                    return values[0]
        return node

    # ---- the API rule hooks use (see rules/base.py)
    def source(self, rule: str, node: ast.AST, what: str | None = None, span: Span | None = None) -> Src:
        """A source occurrence of ``rule`` at ``node`` (or ``span``)."""
        return self.src(rule, node, what, span)

    def add_row_effect(
        self, kind: str, scope: Scope, own: Src | None = None, subset: list[str] | None = None
    ) -> None:
        """Record that the code decides which rows are written (filter, limit, sample, dedup)."""
        self.rows.append(RowEffect(kind, scope, own=own, subset=subset))

    def selects_only(self, node: ast.AST, scope: Scope, columns: list[str]) -> bool:
        """Does the DataFrame expression ``node`` hold only ``columns`` (its nearest select lists no other)?"""
        wanted = {_norm(c) for c in columns}
        for _ in range(50):
            t = type(node)
            if t is ast.Call and type(node.func) is ast.Attribute:
                m = node.func.attr
                if m in ("select", "toDF") and node.args:
                    names = [c for a in node.args for c in (self.const_strings(a, scope) or ["<expr>"])]
                    return bool(names) and {_norm(c) for c in names} <= wanted
                if m not in _PASS_THROUGH and m not in _COLUMN_KEEPING:
                    return False
                node = node.func.value
            elif t is ast.Name:
                value = self._single_value(node, scope)
                if value is None:
                    return False
                node, scope = value
            else:
                return False
        return False

    def _single_value(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None:
        s = self.lookup(node.id, scope)
        if s is None or node.id not in s.assigns:
            return None
        values = [v for v in s.assigns[node.id] if v is not None]
        if len(values) != 1 or values[0] is node:
            return None
        return values[0], s

    def _may_be_text(self, node: ast.AST, scope: Scope) -> bool:
        """Could ``node`` be SQL text rather than a Column expression?"""
        return type(node) in (ast.Constant, ast.JoinedStr, ast.Name, ast.BinOp) or (
            type(node) is ast.Call and self.str_value(node, scope) is not None
        )

    def kwarg(self, call: ast.Call, *names: str) -> ast.AST | None:
        for kw in call.keywords:
            if kw.arg in names:
                return kw.value
        return None

    def _process_call(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        if type(func) is ast.Name:
            if func.id == "UpsertSink" or (self.qualname(func, scope) or "").endswith(".UpsertSink"):
                self.sink_calls.append((call, scope))
            return
        if type(func) is not ast.Attribute:
            return
        m = func.attr
        if m in _ROW_METHODS and self.qualname(func, scope) is not None:
            return  # a module function (numpy.where, random.sample...), not a DataFrame method
        handler = _FLOW.get(m)
        if handler is not None:
            handler(self, call, scope)
        for hook in METHOD_HOOKS.get(m, ()):
            hook(self, call, scope)

    # ---- the shared flow's handlers, one per DataFrame/DeltaTable method (dispatched through _FLOW)
    def _on_sink(self, call: ast.Call, scope: Scope) -> None:
        self.sink_calls.append((call, scope))

    def _on_seed(self, call: ast.Call, scope: Scope) -> None:
        q = self.qualname(call.func, scope)
        if call.args and q in ("random.seed", "numpy.random.seed"):
            self.seeded.add(q.rsplit(".", 1)[0])

    def _on_with_column(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if len(args) >= 2:
            names = self.const_strings(args[0], scope)
            if names and not self.looked_only(call):
                self._add_write(names[0], scope, args[1], node=call)

    def _on_rename(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if len(args) >= 2:
            old, new = self.const_strings(args[0], scope), self.const_strings(args[1], scope)
            if old and new:
                self._add_write(new[0], scope, ast.Constant(value=old[0]), node=call, rename=True)

    def _on_register(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        if len(call.args) >= 2 and type(func.value) is ast.Attribute and func.value.attr == "udf":
            names = self.const_strings(call.args[0], scope)
            if names:
                self.sql_udfs[names[0].lower()] = (call.args[1], scope)

    def _on_with_columns(self, call: ast.Call, scope: Scope) -> None:
        if not call.args:
            return
        mapping = self._resolve_dict(call.args[0], scope)
        if type(mapping) is ast.Dict and not self.looked_only(call):
            for k, v in zip(mapping.keys, mapping.values, strict=False):
                names = self.const_strings(k, scope)
                if names:
                    self._add_write(names[0], scope, v, node=call)

    def _on_select(self, call: ast.Call, scope: Scope) -> None:
        if not self.looked_only(call):
            for a in call.args:
                self._select_item(a, scope)

    def _on_assign(self, call: ast.Call, scope: Scope) -> None:
        for kw in call.keywords:
            if not kw.arg:
                continue
            if type(kw.value) is ast.Lambda and id(kw.value) in self._fn_scopes:
                self._add_write(kw.arg, self._fn_scopes[id(kw.value)], kw.value.body, node=call)
            else:
                self._add_write(kw.arg, scope, kw.value, node=call)

    def _on_select_expr(self, call: ast.Call, scope: Scope) -> None:
        if self.looked_only(call):
            return
        for a in call.args:
            text = self._sql_arg(a, scope)
            if text is None:
                continue
            ok, alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._add_write(alias or text.text.strip(), scope, sql=(part, text), node=call)

    def _on_sql(self, call: ast.Call, scope: Scope) -> None:
        if call.args:
            text = self._sql_arg(call.args[0], scope)
            if text is not None:
                self._sql_statements(text, scope, call)

    def _on_filter(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        if not args or self.looked_only(call):
            return
        text = self._sql_arg(args[0], scope) if self._may_be_text(args[0], scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self.rows.append(RowEffect("filter", scope, sql=(part, text)))
        else:
            self.rows.append(RowEffect("filter", scope, expr=args[0]))

    def _on_merge(self, call: ast.Call, scope: Scope) -> None:
        cond = call.args[1] if len(call.args) > 1 else self.kwarg(call, *_MERGE_COND_KW)
        if cond is not None:
            self.merge_conds.append((cond, scope))

    def _on_merge_map(self, call: ast.Call, scope: Scope) -> None:
        args = call.args
        kw, pos = _MERGE_MAP_METHODS[call.func.attr]
        mapping = self.kwarg(call, kw)
        if mapping is None and len(args) > pos:
            mapping = args[pos]
        cond = self.kwarg(call, *_MERGE_COND_KW)
        if cond is None and pos == 1 and args:
            cond = args[0]
        elif cond is None and pos == 0 and len(args) > 1:
            cond = args[1]
        if cond is not None:
            self._condition_effect(cond, scope)
        mapping = self._resolve_dict(mapping, scope) if mapping is not None else None
        if type(mapping) is not ast.Dict:
            return
        for k, v in zip(mapping.keys, mapping.values, strict=False):
            names = self.const_strings(k, scope)
            if not names or v is None:
                continue
            text = self._sql_arg(v, scope) if self._may_be_text(v, scope) else None
            if text is not None:
                ok, _alias, part = sqlmod.analyze_expression(text.text)
                if ok:
                    self._add_write(_strip_qualifier(names[0]), scope, sql=(part, text), node=call)
            else:
                self._add_write(_strip_qualifier(names[0]), scope, v, node=call)

    def _on_merge_delete(self, call: ast.Call, scope: Scope) -> None:
        cond = self.kwarg(call, *_MERGE_COND_KW) or (call.args[0] if call.args else None)
        if cond is not None:
            self._condition_effect(cond, scope)

    def _condition_effect(self, cond: ast.AST, scope: Scope) -> None:
        text = self._sql_arg(cond, scope) if type(cond) in (ast.Constant, ast.JoinedStr, ast.Name) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self.rows.append(RowEffect("merge", scope, sql=(part, text)))
        else:
            self.rows.append(RowEffect("merge", scope, expr=cond))

    def _select_item(self, a: ast.AST, scope: Scope) -> None:
        t = type(a)
        if t is ast.Dict:  # agg({"col": "first"}): Spark names the result "first(col)"
            for k, v in zip(a.keys, a.values, strict=False):
                names = self.const_strings(k, scope) if k is not None else None
                if not names or type(v) is not ast.Constant or not isinstance(v.value, str):
                    continue
                rule = SPARK_FUNCTIONS.get(v.value.lower())
                if rule is not None and rule == "ND005":
                    own = self.src(rule, v, what=f"agg({{{names[0]!r}: {v.value!r}}})")
                    w = Write(f"{v.value.lower()}({names[0]})", scope, None, None, a, own=own)
                    self.writes.append(w)
                    self._by_column.setdefault(_norm(w.column), []).append(w)
            return
        if t is ast.Constant or t is ast.Starred:
            return
        if t is ast.List or t is ast.Tuple:
            for e in a.elts:
                self._select_item(e, scope)
            return
        if t is ast.Call and type(a.func) is ast.Attribute and a.func.attr in _ALIAS_METHODS and a.args:
            names = self.const_strings(a.args[0], scope)
            self._add_write(names[0] if names else self.segment(a.args[0], 60), scope, a, node=a)
            return
        sname = self.spark_name(self.qualname(a.func, scope)) if t is ast.Call else None
        if sname in _NAME_ARG_FUNCS:
            return
        if sname == "expr" and a.args:
            text = self.str_value(a.args[0], scope)
            alias = sqlmod.analyze_expression(text.text)[1] if text is not None else None
            if alias:
                self._add_write(alias, scope, a, node=a)
                return
        if (t is ast.Name or t is ast.Subscript or t is ast.Attribute) and not self.taint(a, scope):
            return
        self._add_write(self.segment(a, 80), scope, a, node=a)

    def _sql_statements(self, text: PosText, scope: Scope, call: ast.Call) -> None:
        result = sqlmod.analyze_statements(text.text)
        if not result.ok:
            return
        looked = self.looked_only(call)
        if not looked:
            for name, part in result.outputs:
                self._add_write(name, scope, sql=(part, text), node=call)
        for kind, part in result.rows:
            if not looked:
                self.rows.append(RowEffect(kind, scope, sql=(part, text)))
        for name, part in result.writes:
            self._add_write(name, scope, sql=(part, text), node=call)
        for k in result.merge_keys:
            if _norm(k) not in {_norm(x) for x in self.keys}:
                self.keys.append(k)

    def _collect_keys(self) -> None:
        known = {_norm(k) for k in self.keys}
        known_seq = {_norm(s) for s in self.sequence}
        for call, scope in self.sink_calls:
            keys_node = self.kwarg(call, "keys") or (call.args[1] if len(call.args) > 1 else None)
            for k in self.const_strings(keys_node, scope) or []:
                if _norm(k) not in known:
                    known.add(_norm(k))
                    self.keys.append(k)
            delete_when = self.kwarg(call, "delete_when")
            if delete_when is not None:
                self._condition_effect(delete_when, scope)
            seq_node = self.kwarg(call, "sequence_by", "sequence")
            for s in self.const_strings(seq_node, scope) or []:
                if _norm(s) not in known_seq:
                    known_seq.add(_norm(s))
                    self.sequence.append(s)
        for cond, scope in self.merge_conds:
            text = self.str_value(cond, scope)
            cols: list[str] = []
            if text is not None:
                cols = sqlmod.condition_keys(text.text)
            else:
                for cmp in ast.walk(cond):
                    if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) is ast.Eq:
                        for side in (cmp.left, cmp.comparators[0]):
                            cols.extend(c for c in self._col_names(side, scope) if not c.startswith("<"))
            for c in cols:
                c = _strip_qualifier(c)
                if _norm(c) not in known:
                    known.add(_norm(c))
                    self.keys.append(c)

    def run(self) -> list[tuple[Src, str, str, list[str], bool]]:
        """Analyze: (source, target, column name, other columns reached, decides-rows) per finding."""
        self.collect()
        for call, scope in self.calls:
            self._process_call(call, scope)
        for target, value, scope in self.sub_writes:
            sl = target.slice
            if type(sl) is ast.Tuple and sl.elts:  # pdf.loc[:, "col"] = ...
                sl = sl.elts[-1]
            if type(sl) is ast.Constant and isinstance(sl.value, str):
                self._add_write(sl.value, scope, value, node=target)
        self._collect_keys()
        for cond, scope in self.merge_conds:
            self._condition_effect(cond, scope)
        keys_n = [_norm(k) for k in self.keys]
        seq_n = [_norm(s) for s in self.sequence]
        reach: dict[Src, list[tuple[float, str, str, bool]]] = {}
        for col_n, writes in self._by_column.items():
            taint = self.column_taint(col_n)
            if not taint:
                continue
            name = writes[0].column
            if col_n in keys_n:
                entry = (0, "key", name, False)
            elif col_n in seq_n:
                entry = (1, "sequence", name, False)
            else:
                entry = (2, "column", name, False)
            for s in taint:
                reach.setdefault(s, []).append(entry)
        for effect in self.rows:
            taint = self.write_taint(effect)
            if not taint:
                continue
            entry = self._row_target(effect)
            for s in taint:
                reach.setdefault(s, []).append(entry)
        out = []
        for s, entries in reach.items():
            entries.sort()
            best = entries[0]
            others = []
            for e in entries[1:]:
                if not e[3] and e[2] != best[2] and e[2] not in others:
                    others.append(e[2])
            out.append((s, best[1], best[2], others, best[3]))
        out.sort(key=lambda x: (x[0].line, x[0].col, x[0].rule))
        return out

    def _row_target(self, effect: RowEffect) -> tuple[float, str, str, bool]:
        # a row choice ranks just after a direct reach of the same target: the direct one explains more
        if effect.kind == "dedup":
            subset = {_norm(c) for c in effect.subset or []}
            for s in self.sequence:
                if _norm(s) not in subset:
                    return (1.5, "sequence", s, True)
            for k in self.keys:
                if _norm(k) not in subset:
                    return (0.5, "key", k, True)
            return (2.5, "column", "*", True)
        if self.keys:
            return (0.5, "key", self.keys[0], True)
        return (2.5, "column", "*", True)


def _norm(column: str) -> str:
    return _strip_qualifier(column).lower()


def _strip_qualifier(column: str) -> str:
    c = column.strip()
    if "." in c and not c.startswith("`"):
        c = c.rsplit(".", 1)[1]
    return c.strip('`"')


def noqa_codes(line: str) -> set[str] | None:
    """None when the line has no ``# noqa``; an empty set for a bare ``# noqa``; else the listed codes."""
    if "noqa" not in line.lower():
        return None
    m = _NOQA_RE.search(line)
    if m is None:
        return None
    codes = m.group("codes")
    if not codes:
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c}


_FLOW = {
    "UpsertSink": ModuleAnalysis._on_sink,
    "seed": ModuleAnalysis._on_seed,
    "withColumn": ModuleAnalysis._on_with_column,
    "withColumnRenamed": ModuleAnalysis._on_rename,
    "register": ModuleAnalysis._on_register,
    "withColumns": ModuleAnalysis._on_with_columns,
    "select": ModuleAnalysis._on_select,
    "agg": ModuleAnalysis._on_select,
    "assign": ModuleAnalysis._on_assign,
    "selectExpr": ModuleAnalysis._on_select_expr,
    "sql": ModuleAnalysis._on_sql,
    "filter": ModuleAnalysis._on_filter,
    "where": ModuleAnalysis._on_filter,
    "merge": ModuleAnalysis._on_merge,
    **{m: ModuleAnalysis._on_merge_map for m in _MERGE_MAP_METHODS},
    **{
        m: ModuleAnalysis._on_merge_delete
        for m in (
            "whenMatchedDelete",
            "when_matched_delete",
            "whenNotMatchedBySourceDelete",
            "when_not_matched_by_source_delete",
        )
    },
}
