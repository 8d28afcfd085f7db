"""Text built from pieces: ``str.format`` and ``str.format_map`` of a known template, ``%`` formatting and
``sep.join(...)``, the ways a SQL statement is built.

``"MERGE INTO {target} ... ON t.{key} = s.{key}".format(**params)``: a field's value is spliced in when it
is known text (a keyword, a positional argument, an entry of a dict literal given with ``**`` or to
``format_map``, an element of a list given with ``*``), and stands as a hole otherwise (its expression
still carries what it computes: a clock in ``params`` reaches the SQL). Only a field that no argument can
give (``"{x}".format()``) leaves the whole text unknown.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from .strings import PosText

_PERCENT = re.compile(r"%(\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[a-zA-Z%]")

if TYPE_CHECKING:
    from typing import Protocol

    from ..model.scopes import Scope
    from ..model.semantic import SemanticModel

    Env = tuple  # as in evaluate: of dict[str, PosText], loop variables, innermost last

    class Values(Protocol):
        """What ``format``, ``%`` and ``join`` need of :class:`~upsertsink.lint.values.evaluate.Values`
        (which imports this module)."""

        model: SemanticModel

        def str_value(self, node: ast.AST | None, scope: Scope, env: Env = ()) -> PosText | None: ...
        def hole(self, node: ast.AST, pos: tuple[int, int]) -> PosText: ...
        def binding(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None: ...
        def const_strings(self, node: ast.AST | None, scope: Scope) -> list[str] | None: ...


def str_format(values: Values, base: PosText, call: ast.Call, scope: Scope, env: Env) -> PosText | None:
    """``base.format(...)`` / ``base.format_map(...)`` with known texts spliced in, other values as holes."""
    model = values.model
    kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    spread = [kw.value for kw in call.keywords if kw.arg is None]
    if type(call.func) is ast.Attribute and call.func.attr == "format_map":
        spread, args, rest = list(call.args[:1]), [], None
    else:
        args, rest = _positional(model, call, scope)
    for d in spread:  # **params: the string keys of the dict literal it is bound to
        found = model.resolve_dict(d, scope)
        if type(found) is ast.Dict:
            for k, v in zip(found.keys, found.values, strict=False):
                if type(k) is ast.Constant and isinstance(k.value, str):
                    kwargs.setdefault(k.value, v)
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
        if head == "" or head.isdigit():
            k = auto if head == "" else int(head)
            auto += head == ""
            arg = args[k] if k < len(args) else rest
        else:
            arg = kwargs.get(head, spread[0] if spread else None)
        if arg is None:
            return None
        value = values.str_value(arg, scope, env) if head == field_name and arg not in spread else None
        out = out + (value if value is not None else values.hole(arg, base.positions[i]))
        i = j + 1
    return out


def _positional(model, call: ast.Call, scope: Scope) -> tuple[list[ast.AST], ast.AST | None]:
    """The positional arguments, a ``*ARGS`` of a list or tuple literal spread out; after a ``*`` of
    unknown value, that value (it gives every later field)."""
    args: list[ast.AST] = []
    for a in call.args:
        if type(a) is not ast.Starred:
            args.append(a)
            continue
        seq = a.value
        if type(seq) is ast.Name:
            bound = model.single_value(seq, scope)
            seq = bound[0] if bound is not None else seq
        if type(seq) not in (ast.List, ast.Tuple):
            return args, a.value
        args.extend(seq.elts)
    return args, None


def percent_format(values: Values, base: PosText, right: ast.AST, scope: Scope, env: Env) -> PosText | None:
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
        value = values.str_value(arg, scope, env) if m.group(0)[-1] in "sr" else None
        out = out + (value if value is not None else values.hole(arg, base.positions[m.start()]))
    return out + base[last:]

def joined(
    values: Values, sep: PosText, iterable: ast.AST, scope: Scope, env: Env, depth: int = 0
) -> PosText | None:
    """``" AND ".join(parts)`` over a literal list, a list variable, or a comprehension over key names."""
    t = type(iterable)
    parts: list[PosText] = []
    if t is ast.Name and depth < 5:
        value = values.binding(iterable, scope)
        return joined(values, sep, value[0], value[1], env, depth + 1) if value is not None else None
    if t is ast.List or t is ast.Tuple:
        for elt in iterable.elts:
            v = values.str_value(elt, scope, env)
            if v is None:
                return None
            parts.append(v)
    elif t in (ast.GeneratorExp, ast.ListComp) and len(iterable.generators) == 1:
        gen = iterable.generators[0]
        if gen.ifs or type(gen.target) is not ast.Name:
            return None
        names = iter_texts(values, gen.iter, scope, env)
        if names is None:
            return None
        for value in names:
            v = values.str_value(iterable.elt, scope, (*env, {gen.target.id: value}))
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

def iter_texts(values: Values, node: ast.AST, scope: Scope, env: Env) -> list[PosText] | None:
    """The texts a loop over ``node`` sees: the items of a literal list (with their positions)."""
    if type(node) is ast.Name:
        value = values.binding(node, scope)
        if value is not None:
            return iter_texts(values, value[0], value[1], env)
    if type(node) in (ast.List, ast.Tuple):
        out = [values.str_value(e, scope, env) for e in node.elts]
        return None if any(o is None for o in out) else out  # type: ignore[return-value]
    strings = values.const_strings(node, scope)
    if strings is None:
        return None
    pos = values.model.span(node)[:2]
    return [PosText.at(v, pos) for v in strings]
