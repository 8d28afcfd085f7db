"""Calls of the module's own functions: where a function is called, and what each call gives each of its
parameters. Used to read a write inside a helper (``def upsert(df, table, keys)``) once per call, with the
call's arguments (:meth:`upsertsink.lint.values.evaluate.Values.at_call`)."""

from __future__ import annotations

import ast

from .scopes import Scope
from .semantic import SemanticModel


def call_sites(model: SemanticModel, fscope: Scope) -> list[tuple[ast.Call, Scope]]:
    """The calls of this module that call the function of ``fscope`` by its name or as ``self.method``, and
    a class' ``__init__`` by the class' name (``Writer("/lake/t", ["id"])``), indexed once per module."""
    if model.call_index is None:
        index: dict[int, list[tuple[ast.Call, Scope]]] = {}
        classes = {(id(s.parent), s.node.name): s for s in model.scopes if s.kind == "class"}  # type: ignore[union-attr]
        for call, scope in model.calls:
            func = call.func
            if type(func) is ast.Name:
                owner = model.lookup(func.id, scope)
                target = owner.funcs.get(func.id) if owner is not None else None
                if target is None and owner is not None and (id(owner), func.id) in classes:
                    target = classes[(id(owner), func.id)].funcs.get("__init__")
            elif type(func) is ast.Attribute:
                cls = model.self_class(func.value, scope)
                target = cls.funcs.get(func.attr) if cls is not None else None
            else:
                target = None
            if target is not None:
                index.setdefault(id(target[1]), []).append((call, scope))
        model.call_index = index
    return model.call_index.get(id(fscope), [])


def arguments(call: ast.Call, scope: Scope, fscope: Scope) -> dict[str, tuple[ast.AST, Scope]]:
    """What each parameter of the function of ``fscope`` is given by ``call`` (made in ``scope``): its
    argument, else its default (in the scope that defines the function). A parameter a ``*args``
    argument may fill is left out (unknown); a ``**kwargs`` argument leaves all of them out."""
    a = fscope.node.args  # type: ignore[union-attr]
    positional = [x.arg for x in a.posonlyargs + a.args]
    home = fscope.parent if fscope.parent is not None else fscope
    out: dict[str, tuple[ast.AST, Scope]] = {}
    for name, d in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
        out[name] = (d, home)
    for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if d is not None:
            out[x.arg] = (d, home)
    constructor = type(call.func) is ast.Name and getattr(fscope.node, "name", "") == "__init__"
    if (type(call.func) is ast.Attribute or constructor) and positional:  # self.method(...), Cls(...): self
        positional = positional[1:]
    for i, arg in enumerate(call.args[: len(positional)]):
        if type(arg) is ast.Starred:
            for later in positional[i:]:
                out.pop(later, None)
            break
        out[positional[i]] = (arg, scope)
    for kw in call.keywords:
        if kw.arg is None:  # **kwargs: any parameter may come from it
            return {}
        out[kw.arg] = (kw.value, scope)
    return out


def default_of(fscope: Scope, name: str) -> ast.AST | None:
    """The default value of parameter ``name`` of the function (or lambda) of ``fscope``, if it has one."""
    a = fscope.node.args  # type: ignore[union-attr]
    positional = [x.arg for x in a.posonlyargs + a.args]
    pairs = [*zip(positional[len(positional) - len(a.defaults) :], a.defaults)]
    pairs += [(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    return next((d for p, d in pairs if p == name), None)


def is_default(node: ast.AST, fscope: Scope) -> bool:
    """Is ``node`` one of the default values of the function of ``fscope``?"""
    a = fscope.node.args  # type: ignore[union-attr]
    return any(node is d for d in (*a.defaults, *a.kw_defaults))


def passed(node: ast.AST | None) -> bool:
    """Is an argument given with a value (not left out, not ``None``: ``seed=None`` is no seed)?"""
    return node is not None and not (type(node) is ast.Constant and node.value is None)


def called_name(func: ast.AST) -> str:
    """The name a call is made by: ``f`` of ``f(...)`` and of ``mod.f(...)`` / ``obj.f(...)``."""
    return func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""


def given_argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    """The argument ``call`` gives a parameter known only by its ``name`` and ``position`` (another file's
    function, a library's): the keyword, else the positional argument when no ``*args`` comes before it."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if len(call.args) > position and not any(type(a) is ast.Starred for a in call.args[: position + 1]):
        return call.args[position]
    return None
