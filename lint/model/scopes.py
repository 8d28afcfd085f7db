"""Scopes and the node kinds the model's one pass visits (see :mod:`upsertsink.lint.model.semantic`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

SPECIAL = frozenset(
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
        ast.While,
        ast.comprehension,
        ast.With,
        ast.AsyncWith,
        ast.ExceptHandler,
        ast.Global,
        ast.Nonlocal,
        ast.Expr,
        ast.Subscript,
    }
)
# Nodes that can hold nothing collect() needs: names, constants, contexts and operators.
LEAVES = frozenset(
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


def child_fields(t: type) -> tuple[str, ...]:
    """The fields of node class ``t`` that can hold child nodes."""
    fields = _FIELDS_CACHE.get(t)
    if fields is None:
        fields = tuple(f for f in t._fields if f not in _NON_NODE_FIELDS)
        _FIELDS_CACHE[t] = fields
    return fields


def push_children(node: ast.AST, tag: object, stack: list, skip: frozenset = LEAVES) -> None:
    """Queue ``(child, tag)`` for the child nodes of ``node``, leaving out the node kinds in ``skip`` (by
    default the leaves the model's pass never needs: names, constants, contexts, operators). The one way
    the linter finds children: :func:`parent_map` tags them with their parent, :func:`walk` (the model's
    pass, which inlines this loop: half a million nodes for pyspark) with their scope."""
    for f in child_fields(node.__class__):
        v = getattr(node, f, None)
        if v is None:
            continue
        if v.__class__ is list:
            for x in v:
                if x.__class__ not in skip and isinstance(x, ast.AST):
                    stack.append((x, tag))
        elif v.__class__ not in skip and isinstance(v, ast.AST):
            stack.append((v, tag))


_NOTHING: frozenset = frozenset()


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


def parent_map(root: ast.AST) -> dict[int, ast.AST]:
    """``id(node) -> parent`` for every node under ``root`` (names and constants included)."""
    parent: dict[int, ast.AST] = {}
    stack: list = []
    push_children(root, root, stack, _NOTHING)
    while stack:
        node, up = stack.pop()
        parent[id(node)] = up
        push_children(node, node, stack, _NOTHING)
    return parent


def walk(stack: list[tuple[ast.AST, Scope]], visit: Callable[[ast.AST, Scope, list], bool]) -> None:
    """Visit every node under the queued ``(node, scope)`` pairs, depth first, as the model's one pass does:
    ``visit(node, scope, stack)`` for the kinds in SPECIAL (it returns True when it queued the children
    itself, with a scope of their own), the children queued with the node's scope otherwise. Leaves are
    skipped; an attribute chain is followed without the stack."""
    special = SPECIAL
    attribute = ast.Attribute
    leaves = LEAVES
    fields_of = child_fields
    node_type = ast.AST
    append = stack.append
    pop = stack.pop
    while stack:
        node, scope = pop()
        cls = node.__class__
        while cls is attribute:  # a fifth of all nodes: its one child is followed without the stack
            node = node.value
            cls = node.__class__
        if cls in leaves:
            continue
        if cls in special and visit(node, scope, stack):
            continue
        # the children, with the node's scope (push_children, inlined: every node that is not a leaf
        # passes here)
        for f in fields_of(cls):
            v = getattr(node, f, None)
            if v is None:
                continue
            if v.__class__ is list:
                for x in v:
                    if x.__class__ not in leaves and isinstance(x, node_type):
                        append((x, scope))
            elif v.__class__ not in leaves and isinstance(v, node_type):
                append((v, scope))
