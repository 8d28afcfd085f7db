"""Method chains over the semantic model: walking down ``a.b().c()``, what the end of a chain does with a
DataFrame (writes it, only looks at it, throws it away), and the ordering before a row choice."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..base.spark_api import (
    LOOK_ONLY_ACTIONS,
    LOOK_ONLY_CONSUMERS,
    LOOK_ONLY_FUNCTIONS,
    ORDER_METHODS,
    PASS_THROUGH,
    STORE_METHODS,
    TRANSFORMS,
    WRITE_ATTRS,
)
from .scopes import Scope, parent_map
from .semantic import SemanticModel


def down_chain(
    model: SemanticModel, node: ast.AST, scope: Scope, limit: int = 50
) -> Iterator[tuple[ast.AST, Scope]]:
    """The calls and attributes down a method chain from ``node`` (``a.b().c()``: the call ``c()``, the
    attribute, the call ``b()``, ...), each with its scope, through names bound to one value. Stops at any
    other expression, at a name bound more than once, or after ``limit`` steps."""
    for _ in range(limit):
        t = type(node)
        if t is ast.Name:
            value = model.single_value(node, scope)
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


def pandas_name(model: SemanticModel, func: ast.AST, scope: Scope) -> bool:
    """Is ``func`` a name imported from pandas (``from pandas import DataFrame``)?"""
    return type(func) is ast.Name and (model.qualname(func, scope) or "").startswith("pandas.")


def looked_only(model: SemanticModel, call: ast.Call) -> bool:
    """Does the chain ``call`` starts only end in a look-only action or function (``display``, ``show``)?"""
    if id(call) in model.looked_args:
        return True
    parent = model.chain_parent.get(id(call))
    while parent is not None:
        if id(parent) in model.looked_args:
            return True
        assert isinstance(parent.func, ast.Attribute)
        if parent.func.attr in GROUPING:  # groupBy(...).count(): the aggregation is a DataFrame
            parent = aggregation(model, parent)
            if parent is None:
                return False
            if id(parent) in model.looked_args:
                return True
            parent = model.chain_parent.get(id(parent))
            continue
        if parent.func.attr in LOOK_ONLY_ACTIONS:
            return True
        if parent.func.attr not in PASS_THROUGH:
            return False
        parent = model.chain_parent.get(id(parent))
    return False


GROUPING = frozenset({"groupBy", "groupby", "rollup", "cube"})
# methods whose DataFrame argument's rows go into their result, as the receiver's do
_COMBINING = frozenset({"union", "unionAll", "unionByName", "join", "crossJoin"})


def aggregation(model: SemanticModel, grouping: ast.Call) -> ast.Call | None:
    """The call aggregating a grouping (``.count()``, ``.agg(...)``; past a ``pivot``), which makes a DataFrame
    again; None when the grouped data is not aggregated in the same chain."""
    agg = model.chain_parent.get(id(grouping))
    while agg is not None and agg.func.attr == "pivot":  # type: ignore[attr-defined]
        agg = model.chain_parent.get(id(agg))
    return agg


def quick_look(model: SemanticModel, call: ast.Call, writes_table: bool) -> bool:
    """Is ``spark.sql(...)`` a statement of its own whose SQL writes no table (a notebook's quick-look cell)?
    Not when the notebook reads the last SQL cell's result (Databricks' implicit ``_sqldf``)."""
    if writes_table or id(call) not in model.expr_stmts:
        return False
    return not any("_sqldf" in line for line in model.lines)


# Spark methods that shuffle the rows: an ordering below one of them is lost (``orderBy(...).groupBy(...)
# .agg(...).limit(10)`` keeps an arbitrary ten). pandas' ``groupby`` sorts by its keys and is not here.
_SHUFFLING = frozenset(
    {"groupBy", "agg", "repartition", "repartitionByRange", "distinct", "dropDuplicates", "join", "crossJoin",
     "intersect", "intersectAll", "subtract", "exceptAll", "pivot", "rollup", "cube"}
)


def ordering(
    model: SemanticModel, node: ast.AST, scope: Scope, shuffles: bool = True
) -> tuple[ast.Call, Scope] | None:
    """The ``orderBy``/``sort`` call that orders the DataFrame expression, if any (with ``shuffles``, a
    Spark frame's: none past a shuffle)."""
    for _ in range(50):
        t = type(node)
        if t is ast.Call and type(node.func) is ast.Attribute:
            if node.func.attr in ORDER_METHODS:
                return node, scope
            if shuffles and node.func.attr in _SHUFFLING:
                return None
            node = node.func.value
        elif t is ast.Name:
            value = model.single_value(node, scope)
            if value is None:
                return None
            node, scope = value
        else:
            return None
    return None


def after_write(node: ast.AST) -> bool:
    """Is ``node`` a ``df.write...`` / ``df.writeStream...`` / ``df.writeTo(...)`` chain?"""
    return writer_source(node) is not None


def writer_source(node: ast.AST) -> ast.AST | None:
    """The DataFrame of a writer chain ``df.write.format(...).mode(...)``: what ``.write`` is read from."""
    for _ in range(30):
        if type(node) is ast.Attribute:
            if node.attr in WRITE_ATTRS:
                return node.value
            node = node.value
        elif type(node) is ast.Call:
            node = node.func
        else:
            return None
    return None


class Uses:
    """Which DataFrames of a module are thrown away or only looked at."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._loads: dict[int, dict[str, list]] = {}
        self._parent: dict[int, ast.AST] | None = None
        self._scoped: dict[int, dict[int, ast.AST]] = {}  # id(function or class node) -> its parent map
        self._call_scope: dict[int, Scope] | None = None

    def discarded(self, anchor: ast.AST | None) -> bool:
        """Is the DataFrame made by ``anchor`` thrown away, or only looked at (``display(df)``, an evaluator's
        ``evaluate(df)``, ``df.show()``, a local helper that only evaluates what it is given)? A name that is
        never read again keeps its findings: in a snippet the rest of the job is not shown."""
        if anchor is None:
            return False
        top = anchor
        while id(top) in self.model.chain_parent:
            top = self.model.chain_parent[id(top)]
        if id(top) in self.model.looked_args:
            return True
        if id(top) in self.model.expr_stmts:
            func = top.func
            return type(func) is ast.Attribute and func.attr in TRANSFORMS
        scope = self._scope_of(top)
        if scope is None:
            return False
        verdict = self._verdict(top, scope)
        return verdict is not True and (verdict is False or not self._used(*verdict, frozenset()))

    def _scope_of(self, node: ast.AST) -> Scope | None:
        """The scope of the nearest call at or around ``node``."""
        if self._call_scope is None:
            self._call_scope = {id(call): scope for call, scope in self.model.calls}
            self._call_scope.update((id(sub), scope) for sub, scope in self.model.attr_subscripts)
        found = self._call_scope.get(id(node))
        if found is not None:  # an anchor is a call: no parent map needed
            return found
        parent = self._parents()
        cur: ast.AST | None = node
        while cur is not None:
            found = self._call_scope.get(id(cur))
            if found is not None:
                return found
            cur = parent.get(id(cur))
        return None

    def _parents(self) -> dict[int, ast.AST]:
        if self._parent is None:
            self._parent = parent_map(self.model.tree)
        return self._parent

    def _parents_in(self, scope: Scope) -> dict[int, ast.AST]:
        """Parents of the nodes inside ``scope``'s code (the module's map for the module): a verdict walks
        up from a node of the scope and stops at a statement or at the scope itself, never above it."""
        if scope.node is None or self._parent is not None:
            return self._parents()
        found = self._scoped.get(id(scope.node))
        if found is None:
            found = self._scoped[id(scope.node)] = parent_map(scope.node)
        return found

    def _used(self, name: str, scope: Scope, seen: frozenset) -> bool:
        """Is ``name`` (bound in ``scope``) really used: read somewhere other than to be looked at?"""
        key = (id(scope), name)
        loads = self._name_loads(scope).get(name)
        if key in seen or loads is None:
            return True  # never read (a snippet), or read into itself: kept
        for verdict in loads:
            if verdict is True or (verdict is not False and self._used(*verdict, seen | {key})):
                return True
        return False

    def _name_loads(self, scope: Scope) -> dict[str, list]:
        """Per name loaded in the scope's code, the verdict of each load (see :meth:`_verdict`)."""
        found = self._loads.get(id(scope))
        if found is None:
            found = {}
            for node in ast.walk(scope.node if scope.node is not None else self.model.tree):
                if type(node) is ast.Name and type(node.ctx) is ast.Load:
                    found.setdefault(node.id, []).append(self._verdict(node, scope))
            self._loads[id(scope)] = found
        return found

    def _verdict(self, node: ast.AST, scope: Scope) -> bool | tuple[str, Scope]:
        """What the code around ``node`` does with its value: True (uses it), False (only looks at it), or
        the name (and scope) it is only handed on to: assigned to, or a local function's parameter."""
        parent = self._parents_in(scope)
        cur, p = node, parent.get(id(node))
        for _ in range(50):
            t = type(p)
            if t is ast.Attribute and p.value is cur:  # cur.method(...)
                call = parent.get(id(p))
                if type(call) is not ast.Call or call.func is not p:
                    return True
                if p.attr in LOOK_ONLY_ACTIONS:  # rows fetched to the driver are only looked at unless kept
                    return self._fetched(call, scope)
                if p.attr in GROUPING:  # cur.groupBy(...).count(): on with the aggregated DataFrame
                    call = aggregation(self.model, call)
                    if call is None:
                        return True
                elif p.attr not in PASS_THROUGH:
                    return True
            elif t is ast.Call and (cur in p.args or any(kw.value is cur for kw in p.keywords)):
                f = p.func
                if (type(f) is ast.Name and f.id in LOOK_ONLY_FUNCTIONS) or (
                    type(f) is ast.Attribute and f.attr in LOOK_ONLY_CONSUMERS
                ):
                    return False
                if type(f) is ast.Name:
                    return self._parameter(p, cur, scope) or True
                if type(f) is ast.Attribute and f.attr in _COMBINING:  # old.union(new): on with the result
                    call = p
                elif type(f) is not ast.Attribute or f.attr != "transform" or p.args[:1] != [cur]:
                    return True
                else:
                    call = p  # model.transform(df): a fitted model's predictions, a new DataFrame
            elif t is ast.Assign and p.value is cur and [type(x) for x in p.targets] == [ast.Name]:
                return p.targets[0].id, scope
            else:  # ``pdf.iloc[:5]`` alone on its line (not a call) is looked at: a notebook shows it
                return not (t is ast.Expr and type(cur) is not ast.Call)
            cur, p = call, parent.get(id(call))
        return True

    def _fetched(self, call: ast.Call, scope: Scope) -> bool | tuple[str, Scope]:
        """A look-only action's result (``df.toPandas()``, ``pdf.head(100)``): a name it is assigned to, a store
        it is handed to (``write_deltalake(path, pdf.head(100))``), or else only looked at."""
        p = self._parents_in(scope).get(id(call))
        if type(p) is ast.Assign and p.value is call and [type(x) for x in p.targets] == [ast.Name]:
            return p.targets[0].id, scope
        if type(p) is ast.Call and call in p.args:
            f = p.func
            return (f.id if type(f) is ast.Name else getattr(f, "attr", "")) in STORE_METHODS
        return False

    def _parameter(self, call: ast.Call, arg: ast.AST, scope: Scope) -> tuple[str, Scope] | None:
        """The parameter of the local function ``call`` calls that receives ``arg`` (and its scope)."""
        name = call.func.id  # type: ignore[attr-defined]
        owner = self.model.lookup(name, scope)
        if owner is None or name not in owner.funcs:
            return None
        fn, fscope = owner.funcs[name]
        if arg in call.args:
            index = call.args.index(arg)
            positional = len(fn.args.posonlyargs) + len(fn.args.args)
            if any(type(a) is ast.Starred for a in call.args[: index + 1]) or index >= positional:
                return None
            return fscope.params[index], fscope
        kw = next(k.arg for k in call.keywords if k.value is arg)
        return (kw, fscope) if kw in fscope.params else None
