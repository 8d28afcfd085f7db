"""The column names an expression gives where code names a column (``withColumn(name, ...)``, the keys of a
``set`` clause, an ``alias``), and the names a condition's placeholders stand for.

A name is its known text (a literal, a name, a parameter every call gives the same text, a ``self`` attribute
the constructor sets, a class constant or an Enum member: :class:`~upsertsink.lint.values.evaluate.Values`);
an f-string inside a loop over a literal list is one name per value (``f"{c}_CLEAN"`` for ``c`` in
``["ORDER_DATE", "SHIP_DATE"]``). A name that stays unknown is the expression itself, as a template:
``{surrogate_key_col}``, ``{c}_CLEAN``, written after the parameter or attribute it comes from, so that two
places that name a column by one value (``withColumn(key_col, ...)`` and ``f"t.{key_col} = s.{key_col}"``)
name the same column, whatever it is called.
"""

from __future__ import annotations

import ast
import itertools
from typing import TYPE_CHECKING

from ..model.callsites import arguments, call_sites
from .formats import iter_texts

if TYPE_CHECKING:
    from ..model.scopes import Scope
    from .evaluate import Values
    from .strings import PosText

_MAX_NAMES = 64  # the names of one expression over the values of its loops, at most


def column_names(values: Values, node: ast.AST, scope: Scope) -> list[str]:
    """The names of the column ``node`` names (one, or one per value of the loops it is in)."""
    known = values.const_strings(node, scope)
    if known:
        return known[:1]
    return loop_names(values, node, scope) or [unknown_name(values, node, scope)]


def loop_names(values: Values, node: ast.AST, scope: Scope) -> list[str] | None:
    """``f"{c}_CLEAN"`` inside ``for c in ["A", "B"]`` (or a name bound to such a list): the name for each
    value of each loop variable it uses; None when it uses none or a value is not known."""
    model = values.model
    loops: dict[str, list[PosText]] = {}
    for name in {n.id for n in ast.walk(node) if type(n) is ast.Name}:
        owner = model.lookup(name, scope)
        for loop in model.loops.get(id(owner), ()) if owner is not None else ():
            target = getattr(loop, "target", None)
            inside = loop.lineno <= getattr(node, "lineno", 0) <= (loop.end_lineno or loop.lineno)
            if type(target) is ast.Name and target.id == name and inside:
                texts = iter_texts(values, loop.iter, owner, ())
                if texts is None:
                    return None
                loops[name] = texts
    if not loops:
        return None
    out: list[str] = []
    for combination in itertools.islice(itertools.product(*loops.values()), _MAX_NAMES):
        text = values.str_value(node, scope, (dict(zip(loops, combination, strict=True)),))
        if text is None or "__ph" in text.text:
            return None
        if text.text not in out:
            out.append(text.text)
    return out


def unknown_name(values: Values, node: ast.AST, scope: Scope) -> str:
    """The template a column name not known as text is shown and matched by: ``{expr}``, or an f-string's
    text with ``{expr}`` for each field not known (``{c}_CLEAN``)."""
    if type(node) is ast.JoinedStr:
        parts = []
        for piece in node.values:
            if type(piece) is ast.Constant:
                parts.append(str(piece.value))
            elif type(piece) is ast.FormattedValue:
                text = values.str_value(piece.value, scope)
                known = text is not None and "__ph" not in text.text
                parts.append(text.text if known else "{" + origin(values, piece.value, scope) + "}")
        return "".join(parts)
    return "{" + origin(values, node, scope) + "}"


def origin(values: Values, node: ast.AST, scope: Scope) -> str:
    """The text of the expression a value comes from: followed through a name bound once, a parameter given
    by the one call of its function, and a ``self`` attribute bound once (to a constructor's parameter,
    say), as far as they go."""
    model = values.model
    for _ in range(12):
        if type(node) is ast.Attribute:
            bound = model.attr_values(node, scope)
            if bound is None or len(bound) != 1:
                break
            node, scope = bound[0]
        elif type(node) is ast.Name:
            owner = model.lookup(node.id, scope)
            bound = [v for v in owner.assigns.get(node.id, ()) if v is not None] if owner is not None else []
            if owner is None or len(bound) > 1:
                break
            if bound:
                node, scope = bound[0], owner
                continue
            sites = call_sites(model, owner) if owner.kind == "function" and node.id in owner.params else []
            given = arguments(sites[0][0], sites[0][1], owner).get(node.id) if len(sites) == 1 else None
            if given is None:
                break
            node, scope = given
        else:
            break
    text = model.segment(node, 60)
    if getattr(node, "end_lineno", None) != getattr(node, "lineno", None):  # one line, as ast writes it
        text = " ".join(ast.unparse(node).split())
        text = text if len(text) <= 60 else text[:57] + "..."
    return text


def condition_names(values: Values, text: PosText, columns: list[str], scope: Scope) -> list[str]:
    """A condition's columns (``condition_keys`` of its text), each placeholder of a value not known as text
    (``t.{key_col} = s.{key_col}``) as the template of the expression it holds."""
    out: list[str] = []
    for column in columns:
        if "__ph" not in column:
            out.append(column)
            continue
        held = text.holes.get(column.rsplit(".", 1)[-1])
        name = unknown_name(values, held, scope) if held is not None else None
        if name is not None and name not in out:
            out.append(name)
    return out
