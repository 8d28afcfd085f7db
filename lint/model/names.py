"""Names as the semantic model resolves them: the scope a name is bound in, its import-qualified name
(``F.col`` -> ``pyspark.sql.functions.col``, through star imports and a notebook's ``%run`` too), and the
definitions other files of the linted tree export (their summaries).

:class:`Names` is the part of :class:`~upsertsink.lint.model.semantic.SemanticModel` that answers these
questions; the model's own pass fills the scopes it reads.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.spark_api import (
    CONVENTIONAL,
    PIPELINE_QUERY_DECORATORS,
    SPARK_FUNCTION_MODULES,
    is_library,
    pipeline_name,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .scopes import Scope


class Names:
    """Name resolution over a module's scopes, and the other files' summaries it may use."""

    def __init__(
        self, externals: dict[str, dict] | None, udf_factories: frozenset[str], spark_names: frozenset[str]
    ) -> None:
        self.externals: dict[str, dict] = externals or {}
        self.wants: set[str] = set()  # import-qualified names looked up in other files of the tree
        self._udf_factories = udf_factories
        self._spark_names = spark_names  # Spark function names a star import of pyspark's functions gives

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
            return self._member(mod, name)
        return self._in_summary(summary, name)

    def _member(self, mod: str, name: str) -> tuple[dict, str, str] | None:
        """``cols.ResultCol.calculated_at`` (``.value`` too): a string constant of a class of another file (an
        Enum member), from that file's summary; its class name is asked for, so the file is read."""
        if name == "value" and mod.count(".") >= 2:
            return self.external(mod)
        owner, _, cls = mod.rpartition(".")
        if not owner or not cls[:1].isupper() or is_library(owner):
            return None
        self.wants.add(mod)
        summary = self.externals.get(owner)
        entry = summary.get("values", {}).get(cls) if summary is not None else None
        members = entry.get("members") if isinstance(entry, dict) else None
        if not isinstance(members, dict) or name not in members:
            return None
        return {"strings": members[name]}, "value", summary.get("path", "?")

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
