"""Which bindings of a name reach one use of it, for names rebound over themselves in straight-line code:

    out = df.withColumn("tmp_ts", F.current_timestamp())
    out = out.drop("tmp_ts")
    sink.write(out)          # only the second binding reaches this use

The semantic model binds names flow-insensitively (every ``name = value`` of a scope). Here a use sees the
last binding made directly in its scope's body before it (not inside an ``if``, loop, ``with`` or ``try``),
the bindings made after that one and before the use (in branches: any of them may have run), and, when the
use is inside a loop, the bindings later in that loop (they reach it on the next round). Any other shape
(a use in another scope than the binding, a binding by ``for``, ``with``, ``import``, a parameter, a walrus,
a tuple target or ``global``) keeps every binding, as before.
"""

from __future__ import annotations

import ast

from .scopes import Scope
from .semantic import SemanticModel


def reaching(model: SemanticModel, node: ast.Name, scope: Scope) -> tuple[Scope | None, list[ast.AST]]:
    """The scope binding ``node``'s name and the values of the bindings that may reach this use."""
    s = model.lookup(node.id, scope)
    if s is None:
        return None, []
    values = s.assigns.get(node.id, [])
    plain = model.plain
    if s is not scope or len(values) < 2 or any(v is None or id(v) not in plain for v in values):
        return s, [v for v in values if v is not None]
    here = (node.lineno, node.col_offset)
    before = [v for v in values if (v.end_lineno, v.end_col_offset) <= here]
    top = [_start(v) for v in before if plain[id(v)]]
    if not top:
        return s, list(values)
    last = max(top)
    keep = [v for v in before if _start(v) >= last]
    for loop in model.loops.get(id(s), ()):
        start, end = _start(loop), (loop.end_lineno, loop.end_col_offset)
        if start <= here <= end:
            keep.extend(v for v in values if start <= _start(v) <= end and v not in keep)
    return s, keep


def _start(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset
