"""Which call is a source: a Python call or Spark function of the catalogue
(:mod:`upsertsink.lint.base.sources`), with the fix its rule offers, and the sources inside a Python UDF as
the UDF rule reports them."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..base.sources import (
    NOW_STRING_CALLS,
    ORDER_INSENSITIVE_ARGS_OF,
    PYTHON_CALLS,
    PYTHON_CALLS_NO_ARGS,
    PYTHON_CALLS_ONE_ARG,
    PYTHON_MODULES,
    PYTHON_RANDOM_NEUTRAL,
    PYTHON_RANDOM_SEEDABLE,
    SPARK_FUNCTIONS,
    SPARK_NO_ARG_ONLY,
    SPARK_SEEDED,
    UDF_CODE,
)
from ..base.structs import replace
from ..base.types import Src
from ..model.callsites import passed

if TYPE_CHECKING:
    from ..model.semantic import SemanticModel


def source_of_call(
    model: SemanticModel,
    call: ast.Call,
    q: str | None,
    seeded: frozenset[str],
    fix_hooks: Mapping[str, Callable],
) -> Src | None:
    """The catalogue source ``call`` is (``q``: its callee's import-qualified name), with the fix its rule
    offers; None when it is none (``seeded``: the modules seeded with a constant, ``random.seed(1)``)."""
    if q is None:
        return None
    nargs = len(call.args) + len(call.keywords)
    rule = PYTHON_CALLS.get(q)
    if rule is None and nargs == 0:
        rule = PYTHON_CALLS_NO_ARGS.get(q)
    if rule is None and nargs == 1:
        rule = PYTHON_CALLS_ONE_ARG.get(q)
    if rule is not None:
        return model.src(rule, call)
    if q in NOW_STRING_CALLS and call.args:
        first = call.args[0]
        if (
            type(first) is ast.Constant
            and isinstance(first.value, str)
            and first.value.lower() in ("now", "today")
        ):
            return model.src(NOW_STRING_CALLS[q], call)
    mod, _, name = q.rpartition(".")
    if mod in PYTHON_MODULES:
        if name in PYTHON_RANDOM_NEUTRAL or mod in seeded:
            return None
        given = [*call.args, *(k.value for k in call.keywords)]
        if name in PYTHON_RANDOM_SEEDABLE and any(map(passed, given)):
            return None
        return model.src(PYTHON_MODULES[mod], call)
    sname = model.spark_name(q)
    if sname is not None and sname in SPARK_FUNCTIONS:
        if sname in SPARK_NO_ARG_ONLY and nargs:
            return None
        rule = SPARK_FUNCTIONS[sname]
        if sname in SPARK_SEEDED and _seeded_call(call, SPARK_SEEDED[sname][1]):
            rule = SPARK_SEEDED[sname][0]  # rand(42): repeatable only for the same partitioning
        src = model.src(rule, call)
        if sname in ORDER_INSENSITIVE_ARGS_OF:
            src = replace(src, order_only=True)
        hook = fix_hooks.get(rule)
        if hook is not None:
            fix = hook(model, call, q)
            if fix is not None:
                src = replace(src, fix=fix)
        return src
    return None


def _seeded_call(call: ast.Call, position: int) -> bool:
    """Is the seed argument (``seed=`` or the positional argument at ``position``) given?"""
    if any(kw.arg == "seed" and passed(kw.value) for kw in call.keywords):
        return True
    args = call.args
    return len(args) > position and not any(type(a) is ast.Starred for a in args) and passed(args[position])


def as_udf(inner: frozenset, label: str) -> frozenset:
    """The sources inside a Python UDF, reported as the UDF rule's (``via`` names the UDF)."""
    return frozenset(
        Src(
            UDF_CODE,
            s.line,
            s.col,
            s.end_line,
            s.end_col,
            s.what,
            via=f"UDF `{label}`",
            alt_line=s.alt_line,
        )
        for s in inner
    )
