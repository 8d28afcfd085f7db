"""Method chains over the semantic model: walking down ``a.b().c()``, what the end of a chain does with a
DataFrame (writes it, only looks at it, throws it away), and the ordering before a row choice."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from upsertsink.lint.api import (
    LOOK_ONLY_ACTIONS,
    LOOK_ONLY_CONSUMERS,
    LOOK_ONLY_FUNCTIONS,
    ORDER_METHODS,
    PASS_THROUGH,
    TRANSFORMS,
    WRITE_ATTRS,
)
from upsertsink.lint.model import SemanticModel
from upsertsink.lint.scopes import Scope


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


def looked_only(model: SemanticModel, call: ast.Call) -> bool:
    """Does the chain ``call`` starts only end in a look-only action or function (``display``, ``show``)?"""
    if id(call) in model.looked_args:
        return True
    parent = model.chain_parent.get(id(call))
    while parent is not None:
        if id(parent) in model.looked_args:
            return True
        assert isinstance(parent.func, ast.Attribute)
        if parent.func.attr in LOOK_ONLY_ACTIONS:
            return True
        if parent.func.attr not in PASS_THROUGH:
            return False
        parent = model.chain_parent.get(id(parent))
    return False


def ordering(model: SemanticModel, node: ast.AST, scope: Scope) -> tuple[ast.Call, Scope] | None:
    """The ``orderBy``/``sort`` call that orders the DataFrame expression, if any."""
    for _ in range(50):
        t = type(node)
        if t is ast.Call and type(node.func) is ast.Attribute:
            if node.func.attr in ORDER_METHODS:
                return node, scope
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
        self._uses: dict[int, dict[str, bool]] = {}

    def discarded(self, anchor: ast.AST | None) -> bool:
        """Is the DataFrame made by ``anchor`` thrown away, or only looked at (``display(df)``, an evaluator's
        ``evaluate(df)``, ``df.show()``)? A name that is never read again keeps its findings: in a snippet
        the rest of the job is not shown."""
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
        owner = self.model.assigned_to.get(id(top))
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
        root = scope.node if scope.node is not None else self.model.tree
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
            return (type(f) is ast.Name and f.id in LOOK_ONLY_FUNCTIONS) or (
                type(f) is ast.Attribute and f.attr in LOOK_ONLY_CONSUMERS
            )
        cur: ast.AST = node
        while type(p) is ast.Attribute and p.value is cur:
            call = parent.get(id(p))
            if type(call) is not ast.Call or call.func is not p:
                return False
            if p.attr in LOOK_ONLY_ACTIONS:
                return True
            if p.attr not in PASS_THROUGH:
                return False
            cur, p = call, parent.get(id(call))
        if type(p) is ast.Call and cur in p.args:
            f = p.func
            return (type(f) is ast.Name and f.id in LOOK_ONLY_FUNCTIONS) or (
                type(f) is ast.Attribute and f.attr in LOOK_ONLY_CONSUMERS
            )
        return False
