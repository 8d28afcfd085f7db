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
    LOOK_ONLY_FUNCTIONS,
)
from ..base.structs import replace
from ..base.types import FixSpec, Span, Src
from .names import Names
from .scopes import Scope, walk

if TYPE_CHECKING:
    from collections.abc import Sequence



class SemanticModel(Names):
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
        super().__init__(externals, udf_factories, spark_names)
        self.tree = tree
        self.lines = lines
        self.runs = list(runs)
        self.notebook = notebook
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
        self._classes: dict[tuple[int, str], Scope] | None = None  # (id(scope), name) -> the class it binds
        self.dbt_model = False  # the module defines a dbt Python model ``def model(dbt, session)``
        self.decorated: list[Scope] = []  # the scopes of the ``def``s that have decorators
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
        self._classes = None

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
            self._visit_function(node, t, scope, stack)
            return True
        elif t is ast.ClassDef:
            self._visit_class(node, scope, stack)
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

    def _visit_function(self, node: ast.AST, t: type, scope: Scope, stack: list) -> None:
        """A ``def`` or ``lambda``: its name, decorators, defaults and parameters; its body queued in a scope of
        its own."""
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

    def _visit_class(self, node: ast.ClassDef, scope: Scope, stack: list) -> None:
        """A ``class``: its name; its decorators and bases queued here, its body in a scope of its own."""
        scope.bind(node.name, None)
        cscope = self._scope("class", scope, node)
        for sub in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            stack.append((sub, scope))
        for stmt in node.body:
            stack.append((stmt, cscope))

    def _bind_target(self, target: ast.AST, value: ast.AST, scope: Scope) -> None:
        t = type(target)
        if t is ast.Name:
            scope.bind(target.id, value)
        elif t is ast.Tuple or t is ast.List:
            vt = type(value)
            pairs = (vt is ast.Tuple or vt is ast.List) and len(value.elts) == len(target.elts)
            if pairs and not any(type(e) is ast.Starred for e in (*target.elts, *value.elts)):
                for elt, item in zip(target.elts, value.elts, strict=True):  # a, b = x, y: a is x
                    self._bind_target(elt, item, scope)
            else:
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
    def attr_values(self, node: ast.Attribute, scope: Scope) -> list[tuple[ast.AST, Scope]] | None:
        """What ``self.attr`` was bound to: in the class's methods or its body; None if not ``self.x``."""
        cls = self.self_class(node.value, scope)
        if cls is None:
            return None
        out = list(self.class_attrs.get(id(cls), {}).get(node.attr, ()))
        out += [(v, cls) for v in cls.assigns.get(node.attr, ()) if v is not None]
        return out

    def class_named(self, name: str, scope: Scope) -> Scope | None:
        """The scope of the class of this module that ``name`` names where ``scope`` sees it, if any."""
        if self._classes is None:
            self._classes = {(id(c.parent), c.node.name): c for c in self.scopes if c.kind == "class"}  # type: ignore[union-attr]
        owner = self.lookup(name, scope)
        return self._classes.get((id(owner), name)) if owner is not None else None

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
