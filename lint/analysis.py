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
import bisect
import fnmatch
import hashlib
import posixpath
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from upsertsink.lint import sql as sqlmod
from upsertsink.lint.catalogue import (
    FIX_HOOKS,
    LOOK_ONLY_ACTIONS,
    METHOD_HOOKS,
    METHOD_SOURCES,
    MODULE_HOOKS,
    NOW_STRING_CALLS,
    ORDER_CODE,
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
    SPARK_SEEDED,
    TRIGGER_BYTES,
    UDF_CODE,
    UDF_FACTORIES,
    WINDOW_TIES_CODE,
)
from upsertsink.lint.rules.base import FixSpec
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
    fix: FixSpec | None = None  # the fix this occurrence offers, if any


@dataclass(frozen=True)
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

    @property
    def severity(self) -> str:
        if self.level is not None:
            return self.level
        if self.history:
            return "error"  # a replay rewrites the table's history
        return "error" if self.target in ("key", "sequence") else "warning"


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
    "withColumns",
    "withColumnRenamed",
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
    "transform",
    "sortWithinPartitions",
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
_TRIGGER_RE = re.compile("|".join(re.escape(w.decode()) for w in TRIGGER_BYTES))
_STDLIB = frozenset(sys.stdlib_module_names) - {"", "__future__"}
_SPARK_PREFIXES = ("pyspark", "delta", "deltalake", "upsertsink", "datetime", "time", "uuid", "random", "os")
# Names a notebook (or a module that %runs another) uses without importing them: pyspark's conventions.
_CONVENTIONAL = {
    "F": "pyspark.sql.functions",
    "T": "pyspark.sql.types",
    "W": "pyspark.sql.window.Window",
    "Window": "pyspark.sql.window.Window",
}
# Methods that store data wherever they are called; others (parquet, csv, append...) only after ``.write``.
_WRITERS = {
    "saveAsTable",
    "insertInto",
    "toTable",
    "foreachBatch",
    "to_delta",
    "to_table",
    "to_sql",
    "write_deltalake",
    "execute",
}
_WRITE_ATTRS = {"write", "writeStream", "writeTo"}
# Transformations whose result, thrown away as a statement of its own, writes nothing.
_TRANSFORMS = {
    "select",
    "selectExpr",
    "withColumn",
    "withColumns",
    "withColumnRenamed",
    "filter",
    "where",
    "agg",
    "limit",
    "sample",
    "dropDuplicates",
    "drop_duplicates",
    "orderBy",
    "sort",
    "join",
    "union",
    "unionByName",
    "distinct",
    "alias",
}
# Functions that only show what they are given: ``display(df.limit(10))`` writes nothing.
_LOOK_ONLY_FUNCTIONS = {"print", "display", "len", "repr", "pprint"}
# Methods of other objects that only read a DataFrame they are given (an evaluator scoring predictions).
_LOOK_ONLY_CONSUMERS = {"evaluate", "assertDataFrameEqual", "assert_frame_equal"}
_MERGE_COND_KW = ("condition", "predicate", "merge_condition")
_MATCHED_UPDATES = {"whenMatchedUpdate", "when_matched_update"}
_ORDER_OPS = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)
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
        ast.Expr,
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
    anchor: ast.AST | None = None  # the DataFrame method call that makes the write


@dataclass
class RowEffect:
    kind: str  # filter | limit | sample | dedup | merge
    scope: Scope
    expr: ast.AST | None = None
    sql: tuple[sqlmod.SqlPart, PosText] | None = None
    own: Src | None = None
    subset: list[str] | None = None
    anchor: ast.AST | None = None  # the DataFrame method call that makes the choice


class ModuleAnalysis:
    """Analyze one parsed module; :meth:`run` returns (Src, target, column, other columns) tuples."""

    def __init__(
        self,
        tree: ast.Module,
        lines: list[str],
        keys: list[str],
        sequence: list[str],
        key_patterns: list[str] | tuple[str, ...] = (),
        externals: dict[str, dict] | None = None,
        origin: str | None = None,
        root: str | None = None,
        runs: list[str] | tuple[str, ...] = (),
        notebook: bool = False,
    ) -> None:
        self.tree = tree
        self.key_patterns = [p.lower() for p in key_patterns]
        self.externals: dict[str, dict] = externals or {}
        self.origin = origin
        self.root = root
        self.runs = list(runs)
        self.notebook = notebook
        self.deps: dict[str, str] = {}  # files read for SQL text -> content digest
        # class scope -> attribute -> values bound to ``self.attr`` in its methods
        self.class_attrs: dict[int, dict[str, list[tuple[ast.AST, Scope]]]] = {}
        self.assigned_to: dict[int, tuple[str, Scope]] = {}  # id(call) -> (name, scope) of ``name = call``
        self.expr_stmts: set[int] = set()  # ids of calls that are a whole expression statement
        self.dbt_keys: list[tuple[ast.Call, Scope]] = []
        self.ext_keys: list[tuple[str, Scope]] = []
        self.seq_conds: list[tuple[ast.AST, Scope]] = []  # whenMatchedUpdate(condition=...) of merges
        self.window_partitions: dict[Src, set[str]] = {}  # ND006 source -> its window's partition columns
        self.ddl_keys: list[tuple[str, str, str]] = []  # (column, table, label)
        self.tables_written: set[str] = set()
        self.joins: list[tuple[ast.Call, Scope]] = []
        self.ext_calls: list[tuple[ast.Call, Scope, dict, str]] = []
        self.key_scopes: dict[str, list[Scope]] = {}  # normalized key -> scopes that declared it
        self._uses: dict[int, dict[str, bool]] = {}
        self._current: ast.Call | None = None  # the call _process_call is handling
        self._env: list[dict[str, PosText]] = []  # loop variables bound while evaluating a join
        self._holes = 0
        self._trigger_lines: list[int] | None = None
        self.writes_data = False  # the module stores data (a table, a dbt model): key-name patterns apply
        self.wants: set[str] = set()  # import-qualified names looked up in other files of the tree
        self.lines = lines
        self.keys: list[str] = list(keys)
        self.sequence: list[str] = list(sequence)
        # normalized sequence columns of SCD type 2 sinks (``UpsertSink(..., scd_type=2)``), with the scopes
        # that declared them (for what a function gives the files that call it)
        self.history: dict[str, list[Scope]] = {}
        self.module = Scope("module", None, tree)
        self.module.star.extend(f"%run:{r}" for r in self.runs)
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
        self.key_labels: dict[str, str] = {}  # normalized key -> how it was learned (for messages)
        self.reported: list[Reach] = []  # findings of rules that report directly (module hooks)
        self.rule_state: dict[str, object] = {}  # per-module scratch space of rule detectors, by rule

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
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name and type(node.value) is ast.Call:
                self.assigned_to[id(node.value)] = (node.targets[0].id, scope)
        elif t is ast.Expr:
            if type(node.value) is ast.Call:
                self.expr_stmts.add(id(node.value))
        elif t is ast.AnnAssign or t is ast.AugAssign:
            if node.value is not None:
                self._bind_target(node.target, node.value, scope)
        elif t is ast.NamedExpr:
            scope.bind(node.target.id, node.value)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
            if t is not ast.Lambda:
                if node.name == "model" and [a.arg for a in node.args.args[:1]] == ["dbt"]:
                    self.writes_data = True  # a dbt Python model: its returned DataFrame is a table
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
            mod = "." * (node.level or 0) + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    scope.star.append(mod)
                else:
                    full = f"{mod}.{alias.name}" if node.module else f"{mod}{alias.name}"
                    scope.imports[alias.asname or alias.name] = full
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
        elif t is ast.Attribute:
            cls = self._self_class(target.value, scope)
            if cls is not None:
                self.class_attrs.setdefault(id(cls), {}).setdefault(target.attr, []).append((value, scope))

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

    def _self_class(self, node: ast.AST, scope: Scope) -> Scope | None:
        """The class scope when ``node`` is the ``self`` parameter of one of its methods."""
        if type(node) is not ast.Name:
            return None
        s = self.lookup(node.id, scope)
        if (
            s is not None
            and s.kind == "function"
            and s.params
            and s.params[0] == node.id
            and s.parent is not None
            and s.parent.kind == "class"
        ):
            return s.parent
        return None

    def _attr_values(self, node: ast.Attribute, scope: Scope) -> list[tuple[ast.AST, Scope]] | None:
        """What ``self.attr`` was bound to: in the class's methods or its body; None if not ``self.x``."""
        cls = self._self_class(node.value, scope)
        if cls is None:
            return None
        out = list(self.class_attrs.get(id(cls), {}).get(node.attr, ()))
        out += [(v, cls) for v in cls.assigns.get(node.attr, ()) if v is not None]
        return out

    def external(self, q: str | None) -> tuple[dict, str, str] | None:
        """(summary entry, kind, label) of a name another file of the linted tree defines: ``q`` is an
        import-qualified name (``helpers.new_id``); kind is ``func`` or ``value``."""
        if not q:
            return None
        mod, _, name = q.rpartition(".")
        if not mod or mod.startswith(_SPARK_PREFIXES) or mod.split(".", 1)[0] in _STDLIB:
            return None
        self.wants.add(q)
        summary = self.externals.get(mod)
        if summary is None:
            return None
        return self._in_summary(summary, name)

    @staticmethod
    def _in_summary(summary: dict, name: str) -> tuple[dict, str, str] | None:
        label = summary.get("path", "?")
        if name in summary.get("funcs", {}):
            return summary["funcs"][name], "func", label
        if name in summary.get("values", {}):
            return summary["values"][name], "value", label
        return None

    def _star_external(self, name: str, scope: Scope) -> tuple[dict, str, str] | None:
        """A name defined by a module imported with ``*`` or a notebook run with ``%run``."""
        s: Scope | None = scope
        while s is not None:
            for mod in s.star:
                if mod.startswith(_SPARK_PREFIXES) or mod.split(".", 1)[0] in _STDLIB:
                    continue
                self.wants.add(f"{mod}.{name}")
                summary = self.externals.get(mod)
                if summary is not None:
                    found = self._in_summary(summary, name)
                    if found is not None:
                        return found
            s = s.parent
        return None

    def resolve_external(self, node: ast.AST, scope: Scope) -> tuple[dict, str, str] | None:
        """The other-file definition a Name/Attribute refers to, if any."""
        if type(node) is ast.Name and self.lookup(node.id, scope) is None:
            return self._star_external(node.id, scope)
        return self.external(self._import_path(node, scope))

    def _import_path(self, node: ast.AST, scope: Scope) -> str | None:
        parts: list[str] = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        s = self.lookup(node.id, scope)
        if s is None or node.id not in s.imports or node.id in s.assigns:
            return None
        return ".".join([s.imports[node.id], *reversed(parts)])

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
            conventional = _CONVENTIONAL.get(node.id)
            if conventional is not None and self._star_external(node.id, scope) is None:
                return ".".join([conventional, *reversed(parts)])
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
        """The text a string expression evaluates to, with the file position of every character: literals,
        f-strings, ``+``, ``%``, ``str.format``, ``sep.join(...)`` over literal lists and comprehensions,
        ``textwrap.dedent``/``strip``, variables, ``self`` attributes, other files' constants and ``.sql``
        files read with ``Path(...).read_text()`` or ``open(...).read()``."""
        if node is None:
            return None
        key = id(node)
        if not self._env and key in self._str_memo:
            return self._str_memo[key]
        if not self._env:
            self._str_memo[key] = None
        out = self._str_value(node, scope)
        if not self._env:
            self._str_memo[key] = out
        return out

    def _str_value(self, node: ast.AST, scope: Scope) -> PosText | None:
        t = type(node)
        if t is ast.Constant:
            return literal_text(node, self.lines) if isinstance(node.value, str) else None
        if t is ast.JoinedStr:
            out = literal_text(node, self.lines)
            return self._inline_holes(out, scope) if out is not None else None
        if t is ast.Name:
            for env in reversed(self._env):
                if node.id in env:
                    return env[node.id]
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and values[0] is not node:
                    return self.str_value(values[0], s)
                return None
            return self._external_text(node, scope)
        if t is ast.Attribute:
            bound = self._attr_values(node, scope)
            if bound is not None:
                return self.str_value(bound[0][0], bound[0][1]) if len(bound) == 1 else None
            return self._external_text(node, scope)
        if t is ast.BinOp:
            if isinstance(node.op, ast.Add):
                left, right = self.str_value(node.left, scope), self.str_value(node.right, scope)
                return left + right if left is not None and right is not None else None
            if isinstance(node.op, ast.Mod):
                base = self.str_value(node.left, scope)
                return self._percent(base, node.right, scope) if base is not None else None
            return None
        if t is not ast.Call:
            return None
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
        if name == "dedent" and len(node.args) == 1:
            inner = self.str_value(node.args[0], scope)
            return inner.dedent() if inner is not None else None
        returned = self._returned(node, scope)
        if returned is not None:  # a helper or method that builds the text
            return self.str_value(returned[0], returned[1])
        if type(func) is not ast.Attribute:
            if name == "str" and len(node.args) == 1:
                return self.str_value(node.args[0], scope)
            return None
        if name == "strip" and not node.args:
            inner = self.str_value(func.value, scope)
            return inner.strip() if inner is not None else None
        if name == "format":
            base = self.str_value(func.value, scope)
            return self._format(base, node, scope) if base is not None else None
        if name == "join" and len(node.args) == 1:
            sep = self.str_value(func.value, scope)
            return self._join(sep, node.args[0], scope) if sep is not None else None
        if name == "read_text":
            return self._file_text(func.value, scope, node)
        if name == "read" and not node.args:
            opened = func.value
            if type(opened) is ast.Name:
                value = self._single_value(opened, scope)
                opened = value[0] if value is not None else opened
            if type(opened) is ast.Call and type(opened.func) is ast.Name and opened.func.id == "open":
                return self._file_text(opened.args[0], scope, node) if opened.args else None
            if type(opened) is ast.Call and type(opened.func) is ast.Attribute and opened.func.attr == "open":
                return self._file_text(opened.func.value, scope, node)
        return None

    def _hole(self, node: ast.AST, pos: tuple[int, int]) -> PosText:
        self._holes += 1
        name = f"__ph{self._holes}x__"
        out = PosText.at(name, pos)
        out.holes[name] = node
        return out

    def _inline_holes(self, text: PosText, scope: Scope) -> PosText:
        """Replace the f-string fields whose value is known text by that text (``f"t.{k} = s.{k}"``)."""
        for name, hole in list(text.holes.items()):
            value = self.str_value(hole, scope)
            if value is None:
                continue
            i = text.text.find(name)
            while i >= 0:
                text = text[:i] + value + text[i + len(name) :]
                i = text.text.find(name, i + len(value.text))
        return text

    def _format(self, base: PosText, call: ast.Call, scope: Scope) -> PosText | None:
        """``"...{}...{name}".format(a, name=b)`` with known texts spliced in and other values as holes."""
        kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        args = [a for a in call.args if type(a) is not ast.Starred]
        text, out, i, auto = base.text, PosText("", []), 0, 0
        while i < len(text):
            ch = text[i]
            if ch in "{}" and i + 1 < len(text) and text[i + 1] == ch:
                out = out + base[i : i + 1]
                i += 2
                continue
            if ch != "{":
                out = out + base[i : i + 1]
                i += 1
                continue
            j = text.find("}", i)
            if j < 0:
                return None
            field_name = re.split(r"[!:]", text[i + 1 : j], maxsplit=1)[0]
            head = re.split(r"[.\[]", field_name, maxsplit=1)[0]
            if head == "":
                arg = args[auto] if auto < len(args) else None
                auto += 1
            elif head.isdigit():
                arg = args[int(head)] if int(head) < len(args) else None
            else:
                arg = kwargs.get(head)
            if arg is None:
                return None
            value = self.str_value(arg, scope) if head == field_name else None
            out = out + (value if value is not None else self._hole(arg, base.positions[i]))
            i = j + 1
        return out

    def _percent(self, base: PosText, right: ast.AST, scope: Scope) -> PosText | None:
        """``"... %s ... %(name)s" % (a,) / % {"name": b}``."""
        if type(right) is ast.Tuple:
            items: list[ast.AST] = list(right.elts)
            mapping: dict[str, ast.AST] = {}
        elif type(right) is ast.Dict:
            items = []
            mapping = {
                k.value: v
                for k, v in zip(right.keys, right.values, strict=False)
                if type(k) is ast.Constant and isinstance(k.value, str)
            }
        else:
            items, mapping = [right], {}
        out, last, auto = PosText("", []), 0, 0
        for m in _PERCENT.finditer(base.text):
            out = out + base[last : m.start()]
            last = m.end()
            if m.group(0) == "%%":
                out = out + base[m.start() : m.start() + 1]
                continue
            key = m.group(1)
            if key is not None:
                arg = mapping.get(key[1:-1])
            else:
                arg = items[auto] if auto < len(items) else None
                auto += 1
            if arg is None:
                return None
            value = self.str_value(arg, scope) if m.group(0)[-1] in "sr" else None
            out = out + (value if value is not None else self._hole(arg, base.positions[m.start()]))
        return out + base[last:]

    def _join(self, sep: PosText, iterable: ast.AST, scope: Scope, depth: int = 0) -> PosText | None:
        """``" AND ".join(parts)`` over a literal list, a list variable, or a comprehension over key names."""
        t = type(iterable)
        parts: list[PosText] = []
        if t is ast.Name and depth < 5:
            value = self._single_value(iterable, scope)
            return self._join(sep, value[0], value[1], depth + 1) if value is not None else None
        if t is ast.List or t is ast.Tuple:
            for elt in iterable.elts:
                v = self.str_value(elt, scope)
                if v is None:
                    return None
                parts.append(v)
        elif t in (ast.GeneratorExp, ast.ListComp) and len(iterable.generators) == 1:
            gen = iterable.generators[0]
            if gen.ifs or type(gen.target) is not ast.Name:
                return None
            names = self._iter_texts(gen.iter, scope)
            if names is None:
                return None
            for value in names:
                self._env.append({gen.target.id: value})
                try:
                    v = self.str_value(iterable.elt, scope)
                finally:
                    self._env.pop()
                if v is None:
                    return None
                parts.append(v)
        else:
            return None
        if not parts:
            return PosText("", [])
        out = parts[0]
        for part in parts[1:]:
            out = out + sep + part
        return out

    def _iter_texts(self, node: ast.AST, scope: Scope) -> list[PosText] | None:
        """The texts a loop over ``node`` sees: the items of a literal list (with their positions)."""
        if type(node) is ast.Name:
            value = self._single_value(node, scope)
            if value is not None:
                return self._iter_texts(value[0], value[1])
        if type(node) in (ast.List, ast.Tuple):
            out = [self.str_value(e, scope) for e in node.elts]
            return None if any(o is None for o in out) else out  # type: ignore[return-value]
        strings = self.const_strings(node, scope)
        if strings is None:
            return None
        pos = self.span(node)[:2]
        return [PosText.at(v, pos) for v in strings]

    def _external_text(self, node: ast.AST, scope: Scope) -> PosText | None:
        ext = self.resolve_external(node, scope)
        if ext is None or ext[1] != "value":
            return None
        entry, _kind, label = ext
        text = entry.get("text")
        if text is None and isinstance(entry.get("strings"), list) and len(entry["strings"]) == 1:
            text = entry["strings"][0]
        if text is None:
            return None
        return PosText.at(text, self.span(node)[:2], [f"`{label}`"] * len(text))

    def _path_value(self, node: ast.AST, scope: Scope, depth: int = 0) -> str | None:
        """The file path an expression names (``Path(__file__).parent / "sql" / "merge.sql"``...)."""
        if depth > 20:
            return None
        t = type(node)
        if t is ast.Constant and isinstance(node.value, str):
            return node.value
        if t is ast.Name:
            if node.id == "__file__":
                return self.origin
            value = self._single_value(node, scope)
            return self._path_value(value[0], value[1], depth + 1) if value is not None else None
        if t is ast.JoinedStr or t is ast.BinOp and isinstance(node.op, ast.Add):
            text = self.str_value(node, scope)
            return text.text if text is not None and "__ph" not in text.text else None
        if t is ast.BinOp and isinstance(node.op, ast.Div):
            left, right = (
                self._path_value(node.left, scope, depth + 1),
                self._path_value(node.right, scope, depth + 1),
            )
            return posixpath.join(left, right) if left is not None and right is not None else None
        if t is ast.Attribute and node.attr == "parent":
            inner = self._path_value(node.value, scope, depth + 1)
            return posixpath.dirname(inner) if inner is not None else None
        if t is ast.Call:
            func = node.func
            name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
            if name in ("Path", "PurePath", "PosixPath", "join", "joinpath"):
                parts = list(node.args)
                if name == "joinpath" and type(func) is ast.Attribute:
                    parts = [func.value, *parts]
                values = [self._path_value(a, scope, depth + 1) for a in parts]
                if not values or any(v is None for v in values):
                    return None
                return posixpath.join(*values)  # type: ignore[arg-type]
            if name == "dirname" and node.args:
                inner = self._path_value(node.args[0], scope, depth + 1)
                return posixpath.dirname(inner) if inner is not None else None
            if name in ("resolve", "absolute", "abspath", "expanduser") and type(func) is ast.Attribute:
                target = node.args[0] if name == "abspath" and node.args else func.value
                return self._path_value(target, scope, depth + 1)
        return None

    def _file_text(self, path_node: ast.AST, scope: Scope, call: ast.AST) -> PosText | None:
        """The text of a ``.sql`` file of the linted tree that the code reads (a dependency of the file)."""
        raw = self._path_value(path_node, scope)
        if raw is None or not raw.lower().endswith(".sql"):
            return None
        found = _find_sql_file(raw, self.origin, self.root)
        if found is None:
            return None
        try:
            data = found.read_bytes()
        except OSError:
            return None
        text = data.decode("utf-8", "replace")
        label = _shown(found, self.root)
        self.deps[str(found)] = hashlib.blake2b(data, digest_size=16).hexdigest()
        origins: list[str | None] = []
        for number, line in enumerate(text.splitlines(keepends=True), 1):
            origins.extend([f"`{label}` (line {number})"] * len(line))
        return PosText.at(text, self.span(call)[:2], origins)

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
                return None
        if t is ast.Attribute:
            bound = self._attr_values(node, scope)
            if bound is not None:
                return self.const_strings(bound[0][0], bound[0][1]) if len(bound) == 1 else None
        if t is ast.Name or t is ast.Attribute:
            ext = self.resolve_external(node, scope)
            if ext is not None and ext[1] == "value" and isinstance(ext[0].get("strings"), list):
                return list(ext[0]["strings"])
            return None
        if t is ast.BinOp and isinstance(node.op, ast.Add):
            left, right = self.const_strings(node.left, scope), self.const_strings(node.right, scope)
            return left + right if left is not None and right is not None else None
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
            return self.name_taint(node.id, scope, node)
        if t is ast.Call:
            return self.call_taint(node, scope)
        if t is ast.Attribute:
            bound = self._attr_values(node, scope)
            if bound is not None:  # self.attr: whatever the class's methods bind to it
                out = EMPTY
                for value, vscope in bound:
                    out = out | self.taint(value, vscope)
                return out
            ext = self.resolve_external(node, scope)
            if ext is not None and ext[1] == "value":
                return self._ext_srcs(ext, node)
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

    def name_taint(self, name: str, scope: Scope, node: ast.AST | None = None) -> frozenset:
        s = self.lookup(name, scope)
        if s is None or name not in s.assigns:
            if node is not None:
                ext = self.resolve_external(node, scope)
                if ext is not None and ext[1] == "value":
                    return self._ext_srcs(ext, node)
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
            src = Src(
                site.rule,
                line,
                col,
                eline,
                ecol,
                f"{site.name} in SQL",
                via=text.origin_of(site.start),
                alt_line=alt,
            )
            if site.window is not None and site.rule == WINDOW_TIES_CODE:
                self.window_partitions[src] = {_norm(c) for c in site.window[0]}
            out.add(src)
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
                return self.src(NOW_STRING_CALLS[q], call)
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
            rule = SPARK_FUNCTIONS[sname]
            if sname in SPARK_SEEDED and self._seeded_call(call, SPARK_SEEDED[sname][1]):
                rule = SPARK_SEEDED[sname][0]  # rand(42): repeatable only for the same partitioning
            src = self.src(rule, call)
            hook = FIX_HOOKS.get(rule)
            if hook is not None:
                fix = hook(self, call, q)
                if fix is not None:
                    src = replace(src, fix=fix)
            return src
        return None

    @staticmethod
    def _seeded_call(call: ast.Call, position: int) -> bool:
        """Is the seed argument (``seed=`` or the positional argument at ``position``) given?"""
        if any(kw.arg == "seed" for kw in call.keywords):
            return True
        return len(call.args) > position and not any(type(a) is ast.Starred for a in call.args)

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
                    if type(a) is ast.Call and type(a.func) is ast.Attribute and a.func.attr == "over":
                        a = a.func.value  # sort_array(collect_set(x).over(w))
                    if type(a) is ast.Call and self.spark_name(self.qualname(a.func, scope)) in (
                        ORDER_INSENSITIVE_ARGS_OF
                    ):
                        fixed.add(self.span(a))
                rest = frozenset(
                    x
                    for a in args
                    for x in self.taint(a, scope)
                    if not (x.rule == ORDER_CODE and (x.line, x.col, x.end_line, x.end_col) in fixed)
                )
                for kw in call.keywords:
                    rest = rest | self.taint(kw.value, scope)
                return frozenset(out) | rest
            if sname in UDF_FACTORIES:
                return frozenset(out)
        if ft is ast.Attribute:
            m = func.attr
            if m in METHOD_SOURCES:
                out.add(self.src(METHOD_SOURCES[m], call, what=f"{m}()", span=self.method_span(call)))
            if m == "over":
                return frozenset(out | self._over_taint(call, scope))
            if m in DF_METHODS and sname is None:  # F.coalesce(...) is a function, df.coalesce(2) a method
                return EMPTY
            cls = self._self_class(func.value, scope)
            if cls is not None and m in cls.funcs:  # self.method(...): what the method returns
                fn, fscope = cls.funcs[m]
                out |= self._returns_taint(fn, fscope)
            elif q is None:
                out |= self.taint(func.value, scope)
            else:
                ext = self.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    out |= self._ext_srcs(ext, call)
        elif ft is ast.Name:
            out |= self._local_call_taint(func.id, scope)
            if self.lookup(func.id, scope) is None or self._is_import(func.id, scope):
                ext = self.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    out |= self._ext_srcs(ext, call)
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
            src = self.src(
                WINDOW_TIES_CODE, inner, what=f"{self.segment(inner.func, 40)}() over a window that may tie"
            )
            self.window_partitions[src] = {_norm(c) for c in spec[0]}
            out.add(src)
        elif name in SPARK_ORDERED_OK and spec is not None and not ties:
            own = self.span(inner)
            out = {
                s for s in out if not (s.rule == ORDER_CODE and (s.line, s.col, s.end_line, s.end_col) == own)
            }
        for a in call.args:
            out |= self.taint(a, scope)
        return frozenset(out)

    def _is_import(self, name: str, scope: Scope) -> bool:
        s = self.lookup(name, scope)
        return s is not None and name in s.imports and name not in s.assigns

    def _ext_srcs(self, ext: tuple[dict, str, str], node: ast.AST, key: str = "returns") -> frozenset:
        """Sources another file's definition carries, reported at ``node`` (the use in this file)."""
        entry, kind, _label = ext  # _label: the defining file
        rows = entry.get(key, ()) if kind == "func" else entry.get("sources", ())
        callee = self.segment(node.func if type(node) is ast.Call else node, 40)
        line, col, eline, ecol = self.span(node)
        return frozenset(
            Src(
                r["rule"],
                line,
                col,
                eline,
                ecol,
                r["what"],
                via=f"`{callee}` ({r.get('path') or _label}:{r['line']})",
            )
            for r in rows
        )

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
                UDF_CODE,
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
        """Is the DataFrame expression ordered (``orderBy``/``sort`` earlier in its chain or its variable)?"""
        return self.ordering(node, scope, depth) is not None

    def ordering(self, node: ast.AST, scope: Scope, depth: int = 0) -> tuple[ast.Call, Scope] | None:
        """The ``orderBy``/``sort`` call that orders the DataFrame expression, if any."""
        while depth < 50:
            depth += 1
            t = type(node)
            if t is ast.Call and type(node.func) is ast.Attribute:
                if node.func.attr in ORDER_METHODS:
                    return node, scope
                node = node.func.value
            elif t is ast.Name:
                s = self.lookup(node.id, scope)
                if s is None or node.id not in s.assigns:
                    return None
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) != 1 or values[0] is node:
                    return None
                node, scope = values[0], s
            else:
                return None
        return None

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
        w = Write(column, scope, expr, sql, node, rename, anchor=self._current)
        self.writes.append(w)
        self._by_column.setdefault(_norm(column), []).append(w)

    def _row(self, effect: RowEffect) -> None:
        if effect.anchor is None:
            effect.anchor = self._current
        self.rows.append(effect)

    def _resolve_dict(self, node: ast.AST, scope: Scope) -> ast.AST:
        """A dict literal, or the one dict literal a name, ``self`` attribute or function returns."""
        value = self._returned(node, scope)
        if value is not None and type(value[0]) is ast.Dict:
            return value[0]
        if type(node) is ast.Name:
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and type(values[0]) is ast.Dict:
                    return values[0]
        if type(node) is ast.Attribute:
            bound = self._attr_values(node, scope)
            if bound is not None and len(bound) == 1 and type(bound[0][0]) is ast.Dict:
                return bound[0][0]
        return node

    def _returned(self, node: ast.AST, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """The single expression a call of a local function or of ``self.method()`` returns."""
        if type(node) is not ast.Call:
            return None
        func = node.func
        fn_scope: Scope | None = None
        if type(func) is ast.Name:
            s = self.lookup(func.id, scope)
            if s is not None and func.id in s.funcs:
                fn_scope = s.funcs[func.id][1]
        elif type(func) is ast.Attribute:
            cls = self._self_class(func.value, scope)
            if cls is not None and func.attr in cls.funcs:
                fn_scope = cls.funcs[func.attr][1]
        if fn_scope is None or len(fn_scope.returns) != 1:
            return None
        return fn_scope.returns[0], fn_scope

    # ---- the API rule hooks use (see rules/base.py)
    def source(
        self,
        rule: str,
        node: ast.AST,
        what: str | None = None,
        span: Span | None = None,
        fix: FixSpec | None = None,
    ) -> Src:
        """A source occurrence of ``rule`` at ``node`` (or ``span``), with the fix it offers if any."""
        src = self.src(rule, node, what, span)
        return replace(src, fix=fix) if fix is not None else src

    def report(
        self,
        rule: str,
        span: Span,
        note: str,
        level: str,
        column: str = "*",
        advice: str = "write",
        fix: FixSpec | None = None,
        alt_line: int = 0,
    ) -> None:
        """A finding of a rule that reports directly (a module hook): ``note`` says what was found and where
        (the message adds why it breaks a replay and the fix advice ``advice`` names); the JSON target is
        ``write`` and ``column`` the column it concerns (``*``: the whole row)."""
        src = Src(rule, *span, note, alt_line=alt_line, fix=fix)
        self.reported.append(Reach(src, "write", column, level=level, note=note, advice=advice))

    def single_value(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """The one expression a name is bound to (and the scope binding it), or None."""
        return self._single_value(node, scope)

    def down_chain(self, node: ast.AST, scope: Scope, limit: int = 50) -> Iterator[tuple[ast.AST, Scope]]:
        """The calls and attributes down a method chain from ``node`` (``a.b().c()``: the call ``c()``, the
        attribute, the call ``b()``, ...), each with its scope, through names bound to one value. Stops at any
        other expression, at a name bound more than once, or after ``limit`` steps."""
        for _ in range(limit):
            t = type(node)
            if t is ast.Name:
                value = self._single_value(node, scope)
                if value is None:
                    return
                node, scope = value
                continue
            if t is not ast.Call and t is not ast.Attribute:
                return
            yield node, scope
            if t is ast.Attribute:
                node = node.value
            else:
                node = node.func.value if type(node.func) is ast.Attribute else node.func

    def resolve_dict(self, node: ast.AST, scope: Scope) -> ast.AST:
        """A dict literal, or the one dict literal a name, ``self`` attribute or function returns."""
        return self._resolve_dict(node, scope)

    def sql_text(self, node: ast.AST, scope: Scope) -> PosText | None:
        """The SQL text an expression evaluates to (with file positions), or None."""
        return self._sql_arg(node, scope)

    def self_class(self, node: ast.AST, scope: Scope) -> Scope | None:
        """The class scope when ``node`` is the ``self`` parameter of one of its methods."""
        return self._self_class(node, scope)

    def attr_values(self, node: ast.Attribute, scope: Scope) -> list[tuple[ast.AST, Scope]] | None:
        """What ``self.attr`` is bound to in its class, or None when ``node`` is not ``self.x``."""
        return self._attr_values(node, scope)

    def lambda_scope(self, node: ast.Lambda) -> Scope | None:
        """The scope of a lambda's body."""
        return self._fn_scopes.get(id(node))

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

    def selects_only(self, node: ast.AST, scope: Scope, columns: list[str]) -> bool:
        """Does the DataFrame expression ``node`` hold only ``columns`` (its nearest select lists no other)?"""
        wanted = {_norm(c) for c in columns}
        for step, where in self.down_chain(node, scope):
            if type(step) is not ast.Call or type(step.func) is not ast.Attribute:
                return False
            m = step.func.attr
            if m in ("select", "toDF") and step.args:
                names = [c for a in step.args for c in (self.const_strings(a, where) or ["<expr>"])]
                return bool(names) and {_norm(c) for c in names} <= wanted
            if m not in _PASS_THROUGH and m not in _COLUMN_KEEPING:
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
        self._current = call
        func = call.func
        if type(func) is ast.Name:
            if func.id == "UpsertSink" or (self.qualname(func, scope) or "").endswith(".UpsertSink"):
                self.sink_calls.append((call, scope))
                self.writes_data = True
                return
            if func.id in _WRITERS:  # write_deltalake(path, df)
                self.writes_data = True
            if self.lookup(func.id, scope) is None or self._is_import(func.id, scope):
                ext = self.resolve_external(func, scope)
                if ext is not None and ext[1] == "func":
                    self._external_call(call, scope, ext)
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
        if m in _WRITERS or self._after_write(func.value):
            self.writes_data = True
        if m == "transform" and call.args:  # df.transform(helper): the helper's writes happen here
            ext = self.resolve_external(call.args[0], scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)
        elif handler is None and self.externals:
            ext = self.resolve_external(func, scope)
            if ext is not None and ext[1] == "func":
                self._external_call(call, scope, ext)

    @staticmethod
    def _after_write(node: ast.AST) -> bool:
        """Is ``node`` a ``df.write...`` / ``df.writeStream...`` / ``df.writeTo(...)`` chain?"""
        for _ in range(30):
            if type(node) is ast.Attribute:
                if node.attr in _WRITE_ATTRS:
                    return True
                node = node.value
            elif type(node) is ast.Call:
                node = node.func
            else:
                return False
        return False

    def _external_call(self, call: ast.Call, scope: Scope, ext: tuple[dict, str, str]) -> None:
        """A call of another file's function: the columns it writes are written here, its keys known here."""
        entry, _kind, label = ext
        line, col, eline, ecol = self.span(call)
        callee = self.segment(
            call.func
            if not call.args or call.func.__class__ is not ast.Attribute or call.func.attr != "transform"
            else call.args[0],
            40,
        )
        for column, rows in entry.get("writes", ()):
            for r in rows:
                own = Src(
                    r["rule"],
                    line,
                    col,
                    eline,
                    ecol,
                    r["what"],
                    via=f"`{callee}` ({r.get('path') or label}:{r['line']})",
                )
                w = Write(column, scope, None, None, call, own=own, anchor=call)
                self.writes.append(w)
                self._by_column.setdefault(_norm(column), []).append(w)
        history = entry.get("history", ())
        for k in entry.get("keys", ()):
            if k not in history:  # a history sink's sequence column is learned as one, below
                self.ext_keys.append((k, scope))
        for s in history:
            self.learn_key(s, "sequence column", scope, sequence=True)
            self.history.setdefault(_norm(s), []).append(scope)

    def _on_to_df(self, call: ast.Call, scope: Scope) -> None:
        """``rdd.zipWithIndex().map(...).toDF([..., "row_id"])`` / ``createDataFrame(rdd, [..., "row_id"])``:
        the position index (appended last by convention) becomes the last named column."""
        m = call.func.attr
        if m == "toDF":
            receiver, names_nodes = call.func.value, list(call.args)
        elif len(call.args) > 1:
            receiver, names_nodes = call.args[0], [call.args[1]]
        else:
            return
        sources = self._numbering_sources(receiver, scope)
        if not sources:
            return
        last = None
        for node in names_nodes:
            while type(node) is ast.BinOp and isinstance(node.op, ast.Add):
                node = node.right
            names = self.const_strings(node, scope)
            if names:
                last = names[-1]
        if last is not None:
            for src in sources:
                w = Write(last, scope, None, None, call, own=src, anchor=call)
                self.writes.append(w)
                self._by_column.setdefault(_norm(last), []).append(w)

    def _numbering_sources(self, node: ast.AST, scope: Scope) -> list[Src]:
        out: list[Src] = []
        for step, _where in self.down_chain(node, scope, limit=30):
            if type(step) is ast.Call:
                if type(step.func) is not ast.Attribute:
                    break
                if step.func.attr in METHOD_SOURCES:
                    out.append(
                        self.src(
                            METHOD_SOURCES[step.func.attr],
                            step,
                            what=f"{step.func.attr}()",
                            span=self.method_span(step),
                        )
                    )
        return out

    def _on_option(self, call: ast.Call, scope: Scope) -> None:
        """``.option("replaceWhere", "...")`` on a writer: the predicate decides which rows are replaced."""
        if len(call.args) < 2 or self.const_strings(call.args[0], scope) != ["replaceWhere"]:
            return
        self._condition_effect(call.args[1], scope)

    def _on_add_column(self, call: ast.Call, scope: Scope) -> None:
        """``DeltaTable.create(spark)...addColumn("id", ..., generatedAlwaysAs=IdentityGenerator())``."""
        gen = self.kwarg(call, "generatedAlwaysAs", "generatedByDefaultAs")
        if type(gen) is not ast.Call or not call.args:
            return
        name = gen.func.attr if type(gen.func) is ast.Attribute else getattr(gen.func, "id", "")
        names = self.const_strings(call.args[0], scope)
        if name == "IdentityGenerator" and names:
            self.ddl_keys.append((names[0], "?", "identity column"))

    # ---- where tables are written and read, joins, dbt models
    def _on_table_write(self, call: ast.Call, scope: Scope) -> None:
        if call.func.attr == "save" and not self._after_write(call.func.value):
            return  # model.save(path), not a DataFrame writer
        self.writes_data = True
        arg = call.args[0] if call.args else self.kwarg(call, "name", "path", "tableName")
        names = self.const_strings(arg, scope) if arg is not None else None
        if names:
            self.tables_written.add(names[0].lower())

    def _on_delta_table(self, call: ast.Call, scope: Scope) -> None:
        # DeltaTable.forName(spark, "t") / forPath(spark, "/p"): a table that is merged into (written)
        if len(call.args) > 1:
            names = self.const_strings(call.args[1], scope)
            if names:
                self.tables_written.add(names[0].lower())

    def _on_join(self, call: ast.Call, scope: Scope) -> None:
        if call.args:
            self.joins.append((call, scope))

    def _on_dbt_config(self, call: ast.Call, scope: Scope) -> None:
        """``dbt.config(unique_key=...)`` in a dbt Python model: the model's keys."""
        owner = call.func.value
        if type(owner) is not ast.Name:
            return
        s = self.lookup(owner.id, scope)
        if owner.id != "dbt" and not (s is not None and s.kind == "function" and s.params[:1] == [owner.id]):
            return
        self.writes_data = True  # a dbt model's returned DataFrame is its table
        node = self.kwarg(call, "unique_key")
        if node is not None:
            self.dbt_keys.append((call, scope))

    def _table_read(self, node: ast.AST, scope: Scope) -> str | None:
        """The table (name or path) a DataFrame expression reads, following the chain and variables."""
        for step, where in self.down_chain(node, scope):
            if type(step) is not ast.Call:
                continue
            if type(step.func) is not ast.Attribute:
                return None
            m = step.func.attr
            if m in ("table", "load", "parquet", "delta") and step.args:
                names = self.const_strings(step.args[0], where)
                return names[0].lower() if names else None
            if m in ("forName", "forPath") and len(step.args) > 1:
                names = self.const_strings(step.args[1], where)
                return names[0].lower() if names else None
        return None

    # ---- the shared flow's handlers, one per DataFrame/DeltaTable method (dispatched through _FLOW)
    def _on_sink(self, call: ast.Call, scope: Scope) -> None:
        self.sink_calls.append((call, scope))

    def _on_sink_for_table(self, call: ast.Call, scope: Scope) -> None:
        """``UpsertSink.for_table(name, keys, **options)``: a sink like the constructor's (same positions)."""
        recv = call.func.value
        q = self.qualname(recv, scope) or ""
        if (
            (type(recv) is ast.Name and recv.id == "UpsertSink")
            or q == "UpsertSink"
            or q.endswith(".UpsertSink")
        ):
            self.sink_calls.append((call, scope))
            self.writes_data = True

    def sink_option(self, call: ast.Call, scope: Scope, *names: str) -> ast.AST | None:
        """A keyword argument of a sink call: ``name=...``, or an entry of a ``**{...}`` / ``**dict(...)``
        argument (also through a name bound once to one)."""
        found = self.kwarg(call, *names)
        if found is not None:
            return found
        for kw in call.keywords:
            if kw.arg is not None:
                continue
            value: ast.AST | None = kw.value
            if type(value) is ast.Name:
                bound = self._single_value(value, scope)
                value = bound[0] if bound is not None else None
            if type(value) is ast.Dict:
                for k, v in zip(value.keys, value.values):
                    if type(k) is ast.Constant and k.value in names:
                        return v
            elif type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "dict":
                for inner in value.keywords:
                    if inner.arg in names:
                        return inner.value
        return None

    def const_int(self, node: ast.AST | None, scope: Scope, depth: int = 0) -> int | None:
        """The integer a constant expression evaluates to: a literal, a name or ``self.attr`` bound once to
        one, or a constant of another file of the tree; None when unknown."""
        if node is None or depth > 20:
            return None
        t = type(node)
        if t is ast.Constant:
            v = node.value
            return v if type(v) is int else None
        if t is ast.Name:
            bound = self._single_value(node, scope)
            if bound is not None:
                return self.const_int(bound[0], bound[1], depth + 1)
        if t is ast.Attribute:
            attrs = self._attr_values(node, scope)
            if attrs is not None:
                return self.const_int(attrs[0][0], attrs[0][1], depth + 1) if len(attrs) == 1 else None
        if t is ast.Name or t is ast.Attribute:
            ext = self.resolve_external(node, scope)
            if ext is not None and ext[1] == "value":
                number = ext[0].get("number")
                return number if type(number) is int else None
        return None

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
                self._row(RowEffect("filter", scope, sql=(part, text)))
        else:
            self._row(RowEffect("filter", scope, expr=args[0]))

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
            update = call.func.attr in _MATCHED_UPDATES
            self._condition_effect(cond, scope, "update" if update else "merge")
            if update:
                self.seq_conds.append((cond, scope))
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

    def _on_update_all(self, call: ast.Call, scope: Scope) -> None:
        cond = self.kwarg(call, *_MERGE_COND_KW) or (call.args[0] if call.args else None)
        if cond is not None:
            self._condition_effect(cond, scope, "update")
            self.seq_conds.append((cond, scope))

    def _on_merge_delete(self, call: ast.Call, scope: Scope) -> None:
        cond = self.kwarg(call, *_MERGE_COND_KW) or (call.args[0] if call.args else None)
        if cond is not None:
            self._condition_effect(cond, scope)

    def _condition_effect(self, cond: ast.AST, scope: Scope, kind: str = "merge") -> None:
        """A condition that decides rows: ``merge`` (which keys are inserted, deleted, matched) or ``update``
        (whether a matched row's values are updated: values only, the keys stay)."""
        text = self._sql_arg(cond, scope) if self._may_be_text(cond, scope) else None
        if text is not None:
            ok, _alias, part = sqlmod.analyze_expression(text.text)
            if ok:
                self._row(RowEffect(kind, scope, sql=(part, text)))
        else:
            self._row(RowEffect(kind, scope, expr=cond))

    def _select_item(self, a: ast.AST, scope: Scope) -> None:
        t = type(a)
        if t is ast.Dict:  # agg({"col": "first"}): Spark names the result "first(col)"
            for k, v in zip(a.keys, a.values, strict=False):
                names = self.const_strings(k, scope) if k is not None else None
                if not names or type(v) is not ast.Constant or not isinstance(v.value, str):
                    continue
                rule = SPARK_FUNCTIONS.get(v.value.lower())
                if rule is not None and rule == ORDER_CODE:
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
                self._row(RowEffect(kind, scope, sql=(part, text)))
        for name, part in result.writes:
            self._add_write(name, scope, sql=(part, text), node=call)
        for k in result.merge_keys:
            self.learn_key(k, "merge key", scope)
        for c in result.sequence_cols:
            self.learn_key(c, "sequence column", scope, sequence=True)
        for column, table, what in result.ddl_keys:
            self.ddl_keys.append((column, table, what))
            self.key_scopes.setdefault(_norm(column), []).append(scope)
        if result.tables_written:
            self.writes_data = True
            self.tables_written.update(t.lower() for t in result.tables_written)

    def learn_key(self, name: str, label: str, scope: Scope | None, sequence: bool = False) -> None:
        """A key (or sequence) column found in the code, with how it was found (for the message)."""
        name = _strip_qualifier(name)
        n = _norm(name)
        if scope is not None:
            self.key_scopes.setdefault(n, []).append(scope)
        if sequence:
            if n not in {_norm(x) for x in self.sequence}:
                self.sequence.append(name)
            return
        if n not in {_norm(x) for x in self.keys}:
            self.keys.append(name)
            self.key_labels.setdefault(n, label)

    def _collect_keys(self) -> None:
        for call, scope in self.sink_calls:
            keys_node = self.kwarg(call, "keys") or (call.args[1] if len(call.args) > 1 else None)
            for k in self.const_strings(keys_node, scope) or []:
                self.learn_key(k, "merge key", scope)
            delete_when = self.kwarg(call, "delete_when")
            if delete_when is not None:
                self._condition_effect(delete_when, scope)
            seq_node = self.sink_option(call, scope, "sequence_by", "sequence")
            history = self.const_int(self.sink_option(call, scope, "scd_type"), scope) == 2
            for s in self.const_strings(seq_node, scope) or []:
                self.learn_key(s, "sequence column", scope, sequence=True)
                if history:  # the sequence becomes every version's __START_AT/__END_AT
                    self.history.setdefault(_norm(s), []).append(scope)
        for cond, scope in self.merge_conds:
            text = self.str_value(cond, scope)
            cols: list[str] = []
            if text is not None:
                cols = sqlmod.condition_keys(text.text)
            else:
                for cmp in ast.walk(cond):
                    if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) is ast.Eq:
                        sides = [self._col_names(side, scope) for side in (cmp.left, cmp.comparators[0])]
                        if not all(sides) or not all(
                            self._is_column_ref(x) for x in (cmp.left, cmp.comparators[0])
                        ):
                            continue  # F.col("s.rn") == 1: a filter, not a key
                        for names in sides:
                            cols.extend(c for c in names if not c.startswith("<"))
            for c in cols:
                self.learn_key(c, "merge key", scope)
        for cond, scope in self.seq_conds:  # whenMatchedUpdate(condition="s.v > t.v"): newer wins by v
            text = self.str_value(cond, scope)
            if text is not None:
                newer = sqlmod.condition_sequences(text.text)
            else:
                newer = []
                for cmp in ast.walk(cond):
                    if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) in _ORDER_OPS:
                        left = self._col_names(cmp.left, scope)
                        right = self._col_names(cmp.comparators[0], scope)
                        same = len(left) == len(right) == 1 and _norm(left[0]) == _norm(right[0])
                        if same and left[0] != right[0] and not left[0].startswith("<"):
                            newer.append(left[0])
            for c in newer:
                self.learn_key(c, "sequence column", scope, sequence=True)
        for call, scope in self.dbt_keys:
            for k in self.const_strings(self.kwarg(call, "unique_key"), scope) or []:
                self.learn_key(k, "unique key of the dbt model", scope)
        for column, table, what in self.ddl_keys:
            self.learn_key(column, f"{what} of table `{table}`" if table != "?" else what, None)
        for k, scope in self.ext_keys:
            self.learn_key(k, "merge key", scope)
        for call, scope in self.joins:
            sides = [call.func.value, call.args[0]]
            tables = [self._table_read(side, scope) for side in sides]
            written = [t for t in tables if t is not None and t in self.tables_written]
            if not written:
                continue
            on = call.args[1] if len(call.args) > 1 else self.kwarg(call, "on")
            if on is None:
                continue
            names = self.const_strings(on, scope)
            if names is None:
                names = []
                for cmp in ast.walk(on):
                    if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) is ast.Eq:
                        for side in (cmp.left, cmp.comparators[0]):
                            names.extend(c for c in self._col_names(side, scope) if not c.startswith("<"))
            for k in names:
                self.learn_key(k, f"join key against the written table `{written[0]}`", scope)

    def _is_column_ref(self, node: ast.AST) -> bool:
        return not (type(node) is ast.Constant and not isinstance(node.value, str)) and not (
            type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "lit"
        )

    def _pattern_key(self, col_n: str) -> str | None:
        """The configured key-name pattern a column name matches, if any."""
        for pat in self.key_patterns:
            if fnmatch.fnmatchcase(col_n, pat):
                return pat
        return None

    # ---- DataFrames that are never written, returned or passed on
    def _discarded(self, anchor: ast.AST | None) -> bool:
        """Is the DataFrame made by ``anchor`` thrown away, or only looked at (``display(df)``, an evaluator's
        ``evaluate(df)``, ``df.show()``)? A name that is never read again keeps its findings: in a snippet
        the rest of the job is not shown."""
        if anchor is None:
            return False
        top = anchor
        while id(top) in self.chain_parent:
            top = self.chain_parent[id(top)]
        if id(top) in self.looked_args:
            return True
        if id(top) in self.expr_stmts:
            func = top.func
            return type(func) is ast.Attribute and func.attr in _TRANSFORMS
        owner = self.assigned_to.get(id(top))
        if owner is None:
            return False
        name, scope = owner
        return self._name_uses(scope).get(name, True) is False

    def _name_uses(self, scope: Scope) -> dict[str, bool]:
        """Per name loaded in the scope's code: True when some load really uses it (not only looks at it)."""
        key = id(scope)
        found = self._uses.get(key)
        if found is not None:
            return found
        root = scope.node if scope.node is not None else self.tree
        parent: dict[int, ast.AST] = {}
        for node in ast.walk(root):
            for child in ast.iter_child_nodes(node):
                parent[id(child)] = node
        uses: dict[str, bool] = {}
        for node in ast.walk(root):
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                real = not self._look_only_use(node, parent)
                uses[node.id] = uses.get(node.id, False) or real
        self._uses[key] = uses
        return uses

    @staticmethod
    def _look_only_use(node: ast.Name, parent: dict[int, ast.AST]) -> bool:
        p = parent.get(id(node))
        if type(p) is ast.Call and node in p.args:
            f = p.func
            return (type(f) is ast.Name and f.id in _LOOK_ONLY_FUNCTIONS) or (
                type(f) is ast.Attribute and f.attr in _LOOK_ONLY_CONSUMERS
            )
        cur: ast.AST = node
        while type(p) is ast.Attribute and p.value is cur:
            call = parent.get(id(p))
            if type(call) is not ast.Call or call.func is not p:
                return False
            if p.attr in LOOK_ONLY_ACTIONS:
                return True
            if p.attr not in _PASS_THROUGH:
                return False
            cur, p = call, parent.get(id(call))
        if type(p) is ast.Call and cur in p.args:
            f = p.func
            return (type(f) is ast.Name and f.id in _LOOK_ONLY_FUNCTIONS) or (
                type(f) is ast.Attribute and f.attr in _LOOK_ONLY_CONSUMERS
            )
        return False

    def run(self) -> list[Reach]:
        """Analyze: what each nondeterministic source reaches (one :class:`Reach` per source)."""
        self.collect()
        for call, scope in self.calls:
            self._process_call(call, scope)
        for target, value, scope in self.sub_writes:
            sl = target.slice
            if type(sl) is ast.Tuple and sl.elts:  # pdf.loc[:, "col"] = ...
                sl = sl.elts[-1]
            if type(sl) is ast.Constant and isinstance(sl.value, str):
                self._add_write(sl.value, scope, value, node=target)
        self._current = None
        self._collect_keys()
        for cond, scope in self.merge_conds:
            self._condition_effect(cond, scope)
        for hook in MODULE_HOOKS:
            hook(self)
        # DataFrames that are thrown away or only looked at give nothing (asked only where a source is)
        kept = [w for w in self.writes if not (self.column_taint(w.column) and self._discarded(w.anchor))]
        rows = [r for r in self.rows if not (self.write_taint(r) and self._discarded(r.anchor))]
        if len(kept) != len(self.writes) or len(rows) != len(self.rows):
            self.writes, self.rows = kept, rows
            self._by_column = {}
            for w in kept:
                self._by_column.setdefault(_norm(w.column), []).append(w)
            # taint computed over the writes before filtering is stale
            self._memo, self._col_memo, self._fn_memo = {}, {}, {}
        keys_n = [_norm(k) for k in self.keys]
        seq_n = [_norm(s) for s in self.sequence]
        reach: dict[Src, list[tuple[float, str, str, bool]]] = {}
        for col_n, writes in self._by_column.items():
            taint = self.column_taint(col_n)
            if not taint:
                continue
            name = writes[0].column
            pattern = None if col_n in keys_n or col_n in seq_n else self._pattern_key(col_n)
            if col_n in keys_n:
                entry = (0, "key", name, False)
            elif col_n in seq_n:
                entry = (1, "sequence", name, False)
            elif pattern is not None and self.writes_data:
                entry = (0.2, "key", name, False)  # after a declared key: that explains more
                self.key_labels.setdefault(
                    col_n, f"key-like column (its name matches key pattern `{pattern}`)"
                )
            else:
                entry = (2, "column", name, False)
            for s in taint:
                reach.setdefault(s, []).append(entry)
        for effect in self.rows:
            taint = self.write_taint(effect)
            for s in taint:
                reach.setdefault(s, []).append(self._row_target(effect, s))
        out: list[Reach] = []
        for s, entries in reach.items():
            entries.sort()
            best = entries[0]
            others: list[str] = []
            for e in entries[1:]:
                if not e[3] and e[2] != best[2] and e[2] not in others:
                    others.append(e[2])
            label = self.key_labels.get(_norm(best[2]), "merge key") if best[1] == "key" else ""
            history = best[1] == "sequence" and _norm(best[2]) in self.history
            out.append(
                Reach(s, best[1], best[2], tuple(others), best[3], label or "merge key", history=history)
            )
        out.extend(self.reported)
        out.sort(key=lambda r: (r.source.line, r.source.col, r.source.rule))
        return out

    # ------------------------------------------------------------------ what other files can use
    def summary(self) -> dict:
        """What this module gives the files that import (or %run) it: per top-level function the sources
        its return value carries, the columns it writes with their sources and the keys it declares; per
        module-level name the sources of its value, or its constant text / list of strings."""
        funcs: dict[str, dict] = {}
        by_top: dict[int, list[Write]] = {}  # top-level function scope -> the writes made inside it
        for w in self.writes:
            top = _top_function(w.scope)
            if top is not None:
                by_top.setdefault(id(top), []).append(w)
        keys_by_top: dict[int, set[str]] = {}
        for k, scopes in self.key_scopes.items():
            for sc in scopes:
                top = _top_function(sc)
                if top is not None:
                    keys_by_top.setdefault(id(top), set()).add(k)
        for name, (fn, fscope) in self.module.funcs.items():
            if name.startswith("__"):
                continue
            entry: dict = {}
            if self._mentions_trigger(fn) or self.externals:
                rets = self._returns_taint(fn, fscope)
                if rets:
                    entry["returns"] = _rows(rets)
            writes = []
            for w in by_top.get(id(fscope), ()):
                taint = self.write_taint(w)
                if taint:
                    writes.append([w.column, _rows(taint)])
            if writes:
                entry["writes"] = writes
            keys = keys_by_top.get(id(fscope))
            if keys:
                entry["keys"] = sorted(keys)
            history = sorted(
                k for k, scopes in self.history.items() if any(_top_function(sc) is fscope for sc in scopes)
            )
            if history:
                entry["history"] = history
            if entry:
                funcs[name] = entry
        values: dict[str, dict] = {}
        for name, bound in self.module.assigns.items():
            if name.startswith("__") or name in self.module.funcs:
                continue
            real = [v for v in bound if v is not None]
            if not real:
                continue
            entry = {}
            taint = EMPTY
            for v in real:
                taint = taint | self.taint(v, self.module)
            if taint:
                entry["sources"] = _rows(taint)
            if len(real) == 1:
                strings = self.const_strings(real[0], self.module)
                if strings is not None and len(strings) <= 64:
                    entry["strings"] = strings
                elif type(real[0]) is ast.Constant and type(real[0].value) is int:
                    entry["number"] = real[0].value  # e.g. SCD_TYPE = 2, passed to a sink as scd_type
                elif type(real[0]) is not ast.List:
                    text = self.str_value(real[0], self.module)
                    if text is not None and len(text.text) <= 20_000:
                        entry["text"] = text.text
            if entry:
                values[name] = entry
        out: dict = {}
        if funcs:
            out["funcs"] = funcs
        if values:
            out["values"] = values
        if self.notebook or self.runs:
            module_keys = [k for k, sc in self.key_scopes.items() if any(x is self.module for x in sc)]
            if module_keys:
                out["keys"] = sorted(module_keys)
        return out

    def _mentions_trigger(self, fn: ast.AST) -> bool:
        """Does the function's text name any catalogue word (else its return value carries no source)?"""
        if self._trigger_lines is None:
            text = "".join(self.lines).lower()
            starts = [0]
            for line in self.lines:
                starts.append(starts[-1] + len(line))
            self._trigger_lines = sorted(
                {bisect.bisect_right(starts, m.start()) for m in _TRIGGER_RE.finditer(text)}
            )
        i = bisect.bisect_left(self._trigger_lines, fn.lineno)
        return i < len(self._trigger_lines) and self._trigger_lines[i] <= (fn.end_lineno or fn.lineno)

    def _row_target(self, effect: RowEffect, src: Src) -> tuple[float, str, str, bool]:
        # a row choice ranks just after a direct reach of the same target: the direct one explains more
        keys_n = {_norm(k) for k in self.keys}
        if effect.kind == "dedup":
            subset = {_norm(c) for c in effect.subset or []}
            if keys_n and keys_n <= subset:
                # one row per written key survives, so the keys are right; which row is order-dependent
                return (2.5, "column", "*", True)
            for k in self.keys:
                if _norm(k) not in subset:
                    return (0.5, "key", k, True)
            for s in self.sequence:
                if _norm(s) not in subset:
                    return (1.5, "sequence", s, True)
            return (2.5, "column", "*", True)
        if effect.kind == "update":
            return (2.5, "column", "*", True)  # whether a matched row is updated: its values, not its key
        partition = self.window_partitions.get(src)
        if partition is not None and keys_n and keys_n <= partition:
            return (2.5, "column", "*", True)  # a numbering per key picks a row per key: values, not keys
        if self.keys:
            return (0.5, "key", self.keys[0], True)
        return (2.5, "column", "*", True)


_PERCENT = re.compile(r"%(\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[a-zA-Z%]")


def _find_sql_file(raw: str, origin: str | None, root: str | None) -> Path | None:
    """A .sql file named relative to the linted file, one of its parent folders, or the project root;
    only files inside the project root are read."""
    path = Path(raw)
    candidates: list[Path] = []
    if path.is_absolute():
        candidates.append(path)
    else:
        if origin:
            here = Path(origin).parent
            candidates += [folder / path for folder in (here, *here.parents)]
        if root:
            candidates.append(Path(root) / path)
    top = Path(root).resolve() if root else None
    for c in candidates:
        try:
            resolved = c.resolve()
        except OSError:
            continue
        if top is not None and top != resolved and top not in resolved.parents:
            continue
        if resolved.is_file():
            return resolved
    return None


def _shown(path: Path, root: str | None) -> str:
    if root:
        try:
            return path.relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return path.name


def _rows(taint: frozenset) -> list[dict]:
    """Sources as plain data for a summary (another file reports them at its own call site)."""
    return sorted(
        ({"rule": s.rule, "what": s.what, "line": s.line, "path": "", "via": s.via} for s in taint),
        key=lambda r: (r["line"], r["rule"], r["what"]),
    )


def _top_function(scope: Scope | None) -> Scope | None:
    """The module-level function (or class) scope that ``scope`` is inside, if any."""
    while scope is not None and scope.parent is not None:
        if scope.parent.parent is None:
            return scope
        scope = scope.parent
    return None


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
    "for_table": ModuleAnalysis._on_sink_for_table,
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
    "saveAsTable": ModuleAnalysis._on_table_write,
    "insertInto": ModuleAnalysis._on_table_write,
    "toTable": ModuleAnalysis._on_table_write,
    "save": ModuleAnalysis._on_table_write,
    "forName": ModuleAnalysis._on_delta_table,
    "forPath": ModuleAnalysis._on_delta_table,
    "join": ModuleAnalysis._on_join,
    "config": ModuleAnalysis._on_dbt_config,
    "toDF": ModuleAnalysis._on_to_df,
    "createDataFrame": ModuleAnalysis._on_to_df,
    "option": ModuleAnalysis._on_option,
    "addColumn": ModuleAnalysis._on_add_column,
    **{m: ModuleAnalysis._on_merge_map for m in _MERGE_MAP_METHODS},
    "whenMatchedUpdateAll": ModuleAnalysis._on_update_all,
    "when_matched_update_all": ModuleAnalysis._on_update_all,
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
