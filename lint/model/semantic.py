"""The semantic model of one module: scopes, bindings, imports, qualified names and positions.

Built in one pass over Python's ``ast`` (no metadata provider): an import binds a qualified name, any other
binding (assignment, parameter, def, class, loop variable) in a nearer scope shadows it. The model also
records where every call is and how calls chain (``a.b().c()``), and answers single-binding lookups (the one
value a name is bound to). It knows nothing of Spark beyond the table in :mod:`upsertsink.lint.base.spark_api`, computes
no values (:mod:`upsertsink.lint.values.evaluate`) and no data flow (:mod:`upsertsink.lint.flow.taint`).

Why ``ast`` and not libcst: ``ast`` gives line/column/end positions of every node for free and parses
about ten times faster than ``libcst.parse_module``; with libcst the positions alone (PositionProvider)
cost 1.6x the parse. The linter never rewrites code here, so the concrete syntax tree buys nothing.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.spark_api import (
    CONVENTIONAL,
    LOOK_ONLY_FUNCTIONS,
    PIPELINE_QUERY_DECORATORS,
    SPARK_FUNCTION_MODULES,
    is_library,
    pipeline_name,
)
from ..base.structs import replace
from ..flow.facts import Span, Src
from .scopes import Scope, walk

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ..rules.rule import FixSpec


class SemanticModel:
    """Scopes, bindings, imports and calls of one parsed module, and the lookups over them."""

    def __init__(
        self,
        tree: ast.Module,
        lines: Sequence[str],
        externals: dict[str, dict] | None = None,
        runs: list[str] | tuple[str, ...] = (),
        notebook: bool = False,
        udf_factories: frozenset[str] = frozenset(),
        spark_names: frozenset[str] = frozenset(),
    ) -> None:
        self.tree = tree
        self.lines = lines
        self.externals: dict[str, dict] = externals or {}
        self.runs = list(runs)
        self.notebook = notebook
        self._udf_factories = udf_factories
        self._spark_names = spark_names  # Spark function names a star import of pyspark's functions gives
        self.module = Scope("module", None, tree)
        self.scopes: list[Scope] = [self.module]  # every scope, so release() can break their cycles
        self.module.star.extend(f"%run:{r}" for r in self.runs)
        # class scope -> attribute -> values bound to ``self.attr`` in its methods
        self.class_attrs: dict[int, dict[str, list[tuple[ast.AST, Scope]]]] = {}
        self.assigned_to: dict[int, tuple[str, Scope]] = {}  # id(call) -> (name, scope) of ``name = call``
        self.expr_stmts: set[int] = set()  # ids of calls that are a whole expression statement
        self.calls: list[tuple[ast.Call, Scope]] = []  # every call in source order, with its scope
        self.sub_writes: list[tuple[ast.Subscript, ast.AST, Scope]] = []  # ``pdf["col"] = value``
        self.attr_subscripts: list[tuple[ast.Subscript, Scope]] = []  # ``pdf.iloc[:10]`` (read, not assigned)
        self.chain_parent: dict[int, ast.Call] = {}  # id(call) -> the call made on its result
        self.looked_args: set[int] = set()  # ids of calls passed to a look-only function (``display``)
        self.fn_scopes: dict[int, Scope] = {}  # id(lambda) -> its scope
        self.call_index: dict[int, list] | None = None  # id(function scope) -> its calls (callsites.py)
        self.dbt_model = False  # the module defines a dbt Python model ``def model(dbt, session)``
        self.decorated: list[Scope] = []  # the scopes of the ``def``s that have decorators
        self.wants: set[str] = set()  # import-qualified names looked up in other files of the tree
        # id(value) of each ``name = value`` -> is it directly in its scope's body; each scope's loops: reaching.py
        self.plain: dict[int, bool] = {}
        self.loops: dict[int, list[ast.AST]] = {}
        self._top: set[int] = {id(stmt) for stmt in tree.body}
        self._collect()

    def _scope(self, kind: str, parent: Scope, node: ast.AST) -> Scope:
        scope = Scope(kind, parent, node)
        self.scopes.append(scope)
        return scope

    def release(self) -> None:
        """Break the reference cycles between scopes (a parent holds its functions' scopes, each scope its
        parent) once the module's analysis is done, so the memory is freed without a garbage collection."""
        for scope in self.scopes:
            scope.parent = None
            scope.funcs.clear()
        self.scopes.clear()
        self.class_attrs.clear()
        self.fn_scopes.clear()

    def _collect(self) -> None:
        walk([(stmt, self.module) for stmt in self.tree.body], self._visit)
        self.calls.sort(key=lambda cs: (cs[0].lineno, cs[0].col_offset))
        self.decorated.sort(key=lambda fs: (fs.node.lineno, fs.node.col_offset))

    def _visit(self, node: ast.AST, scope: Scope, stack: list) -> bool:
        """Record what ``node`` binds, imports or calls; True when its children are queued already (a
        ``def``, ``lambda`` or ``class``, whose body has a scope of its own), False to queue them as usual."""
        t = type(node)
        if t is ast.Call:
            self.calls.append((node, scope))
            func = node.func
            if type(func) is ast.Attribute and type(func.value) is ast.Call:
                self.chain_parent[id(func.value)] = node
            if type(func) is ast.Name and func.id in LOOK_ONLY_FUNCTIONS:
                for a in node.args:
                    if type(a) is ast.Call:
                        self.looked_args.add(id(a))
        elif t is ast.Assign:
            for target in node.targets:
                self._bind_target(target, node.value, scope)
            if (
                len(node.targets) == 1
                and type(node.targets[0]) is ast.Name
                and node.targets[0].id not in scope.globals
            ):
                self.plain[id(node.value)] = id(node) in self._top
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name and type(node.value) is ast.Call:
                self.assigned_to[id(node.value)] = (node.targets[0].id, scope)
        elif t is ast.Expr:
            if type(node.value) is ast.Call:
                self.expr_stmts.add(id(node.value))
        elif t is ast.Subscript:
            if type(node.value) is ast.Attribute and type(node.ctx) is ast.Load:
                self.attr_subscripts.append((node, scope))
        elif t is ast.AnnAssign or t is ast.AugAssign:
            if node.value is not None:
                self._bind_target(node.target, node.value, scope)
        elif t is ast.NamedExpr:
            scope.bind(node.target.id, node.value)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
            if t is not ast.Lambda:
                if node.name == "model" and [a.arg for a in node.args.args[:1]] == ["dbt"]:
                    self.dbt_model = True  # its returned DataFrame is a table
                scope.bind(node.name, None)
                scope.funcs[node.name] = (node, self._scope("function", scope, node))
                fscope = scope.funcs[node.name][1]
                if node.decorator_list:
                    self.decorated.append(fscope)
                for dec in node.decorator_list:
                    stack.append((dec, scope))
                    if self.is_udf_factory(dec, scope):
                        scope.udfs.add(node.name)
                for d in node.args.defaults + node.args.kw_defaults:
                    if d is not None:
                        stack.append((d, scope))
                if node.returns is not None:
                    stack.append((node.returns, scope))
            else:
                fscope = self._scope("function", scope, node)
                self.fn_scopes[id(node)] = fscope
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
                    self._top.add(id(stmt))
            return True
        elif t is ast.ClassDef:
            scope.bind(node.name, None)
            cscope = self._scope("class", scope, node)
            for sub in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                stack.append((sub, scope))
            for stmt in node.body:
                stack.append((stmt, cscope))
            return True
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
            if t is not ast.comprehension:
                self.loops.setdefault(id(scope), []).append(node)
        elif t is ast.While:
            self.loops.setdefault(id(scope), []).append(node)
        elif t is ast.With or t is ast.AsyncWith:
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, item.context_expr, scope)
        elif t is ast.ExceptHandler:
            if node.name:
                scope.bind(node.name, None)
        elif t is ast.Global or t is ast.Nonlocal:
            scope.globals.update(node.names)
        return False

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
            cls = self.self_class(target.value, scope)
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

    def self_class(self, node: ast.AST, scope: Scope) -> Scope | None:
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

    def attr_values(self, node: ast.Attribute, scope: Scope) -> list[tuple[ast.AST, Scope]] | None:
        """What ``self.attr`` was bound to: in the class's methods or its body; None if not ``self.x``."""
        cls = self.self_class(node.value, scope)
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
        if not mod or is_library(mod):
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

    def _star_summaries(self, name: str, scope: Scope) -> Iterator[dict]:
        """The summaries of modules imported with ``*`` / notebooks ``%run`` here (noted as wanted for ``name``)."""
        s: Scope | None = scope
        while s is not None:
            for mod in (m for m in s.star if not is_library(m)):
                self.wants.add(f"{mod}.{name}")
                if mod in self.externals:
                    yield self.externals[mod]
            s = s.parent

    def _star_external(self, name: str, scope: Scope) -> tuple[dict, str, str] | None:
        """A name defined by a module imported with ``*`` or a notebook run with ``%run``."""
        return next((f for sm in self._star_summaries(name, scope) if (f := self._in_summary(sm, name))), None)

    def resolve_external(self, node: ast.AST, scope: Scope) -> tuple[dict, str, str] | None:
        """The other-file definition a Name/Attribute refers to, if any."""
        if type(node) is ast.Name and self.lookup(node.id, scope) is None:
            return self._star_external(node.id, scope)
        return self.external(self._import_path(node, scope))

    def _import_path(self, node: ast.AST, scope: Scope) -> str | None:
        node, parts = _dotted(node)
        if node is None:
            return None
        s = self.lookup(node.id, scope)
        if s is None or node.id not in s.imports or node.id in s.assigns:
            return None
        return ".".join([s.imports[node.id], *reversed(parts)])

    def qualname(self, node: ast.AST, scope: Scope) -> str | None:
        """Import-qualified dotted name of a Name/Attribute chain, or None when it is not from an import."""
        node, parts = _dotted(node)
        if node is None:
            return None
        s = self.lookup(node.id, scope)
        if s is None:
            for mod in self._star_modules(scope):
                if node.id in self._spark_names or node.id in ("col", "expr", "udf"):
                    return ".".join([mod, node.id, *reversed(parts)])
            imported = (sm["imports"][node.id] for sm in self._star_summaries(node.id, scope)
                        if node.id in sm.get("imports", {}))  # a name a %run notebook imports
            conventional = CONVENTIONAL.get(node.id) or next(imported, None)
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

    def is_udf_factory(self, node: ast.AST, scope: Scope) -> bool:
        if type(node) is ast.Call:
            node = node.func
        q = self.qualname(node, scope)
        if q is not None:
            return q.rsplit(".", 1)[-1] in self._udf_factories
        return type(node) is ast.Name and node.id in self._udf_factories

    def pipeline_decorator(self, fscope: Scope) -> tuple[str, ast.AST] | None:
        """(name, decorator) when the ``def`` of ``fscope`` is a query function of a declarative pipeline
        (``@dlt.table``, ``@dp.materialized_view(name=...)``, ``@dp.temporary_view``...), else None."""
        node, outer = fscope.node, fscope.parent
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or outer is None:
            return None
        for dec in node.decorator_list:
            func = dec.func if type(dec) is ast.Call else dec
            name = pipeline_name(self.qualname(func, outer))
            if name in PIPELINE_QUERY_DECORATORS:
                return name, dec
        return None

    def is_import(self, name: str, scope: Scope) -> bool:
        """Is ``name`` bound by an import only (not rebound) as seen from ``scope``?"""
        s = self.lookup(name, scope)
        return s is not None and name in s.imports and name not in s.assigns

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

    # ------------------------------------------------------------------ single bindings
    def single_value(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """The one expression a name is bound to (and the scope binding it), or None."""
        s = self.lookup(node.id, scope)
        if s is None or node.id not in s.assigns:
            return None
        values = [v for v in s.assigns[node.id] if v is not None]
        if len(values) != 1 or values[0] is node:
            return None
        return values[0], s

    def resolve_dict(self, node: ast.AST, scope: Scope) -> ast.AST:
        """A dict literal, or the one dict literal a name, ``self`` attribute or function returns."""
        value = self.returned(node, scope)
        if value is not None and type(value[0]) is ast.Dict:
            return value[0]
        if type(node) is ast.Name:
            s = self.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and type(values[0]) is ast.Dict:
                    return values[0]
        if type(node) is ast.Attribute:
            bound = self.attr_values(node, scope)
            if bound is not None and len(bound) == 1 and type(bound[0][0]) is ast.Dict:
                return bound[0][0]
        return node

    def returned(self, node: ast.AST, scope: Scope) -> tuple[ast.AST, Scope] | None:
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
            cls = self.self_class(func.value, scope)
            if cls is not None and func.attr in cls.funcs:
                fn_scope = cls.funcs[func.attr][1]
        if fn_scope is None or len(fn_scope.returns) != 1:
            return None
        return fn_scope.returns[0], fn_scope

    def lambda_scope(self, node: ast.Lambda) -> Scope | None:
        """The scope of a lambda's body."""
        return self.fn_scopes.get(id(node))

    @staticmethod
    def kwarg(call: ast.Call, *names: str) -> ast.AST | None:
        """The value of the first keyword argument of ``call`` named one of ``names``."""
        for kw in call.keywords:
            if kw.arg in names:
                return kw.value
        return None


def top_function(scope: Scope | None) -> Scope | None:
    """The module-level function (or class) scope that ``scope`` is inside, if any."""
    while scope is not None and scope.parent is not None:
        if scope.parent.parent is None:
            return scope
        scope = scope.parent
    return None


def dotted(node: ast.AST) -> str | None:
    """The text of a Name/Attribute chain (``dbutils.widgets``), or None for any other expression."""
    name, parts = _dotted(node)
    return None if name is None else ".".join([name.id, *reversed(parts)])


def _dotted(node: ast.AST) -> tuple[ast.Name | None, list[str]]:
    """The name a Name/Attribute chain starts from and its attributes, innermost last (``a.b.c``: ``a``,
    ``["c", "b"]``); None when the chain starts from anything else (a call, a subscript)."""
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    return (node if type(node) is ast.Name else None), parts
