"""ND009: ``sample``, ``sampleBy``, ``randomSplit`` without a seed (and SQL ``TABLESAMPLE``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..base.types import FixSpec
from ..model import chains
from ..model.callsites import passed
from .rule import Invalid, Rule, Valid, seed_fix

if TYPE_CHECKING:
    from ..flow.context import Context


def _seeded_sample(ctx: Context, call: ast.Call, method: str) -> bool:
    if passed(ctx.model.kwarg(call, "seed", "random_state")):
        return True  # seed=None: no seed
    position = _seed_position(call, method)
    return len(call.args) > position and passed(call.args[position])


def _seed_position(call: ast.Call, method: str) -> int:
    """Where a positional seed goes: ``sample([withReplacement,] fraction, seed)``, ``sampleBy(col,
    fractions, seed)``, ``randomSplit(weights, seed)``."""
    if method == "sample":
        args = call.args
        return 2 if args and type(args[0]) is ast.Constant and isinstance(args[0].value, bool) else 1
    return 2 if method == "sampleBy" else 1


_PANDAS_SAMPLE = frozenset({"n", "frac", "replace", "weights", "axis", "ignore_index"})
_SPARK_SAMPLE = frozenset({"fraction", "withReplacement"})


def _seed_keyword(call: ast.Call, method: str) -> str | None:
    """``seed`` for a Spark sampler, ``random_state`` for pandas' ``sample``, None when it cannot be told."""
    if method in ("sampleBy", "randomSplit"):
        return "seed"
    names = {kw.arg for kw in call.keywords}
    if names & _SPARK_SAMPLE:
        return "seed"
    if names & _PANDAS_SAMPLE:
        return "random_state"
    first = call.args[0] if call.args else None
    if type(first) is ast.Constant and (isinstance(first.value, (bool, float))):
        return "seed"  # df.sample(0.1), df.sample(False, 0.1): Spark's (withReplacement, fraction)
    if type(first) is ast.Constant and isinstance(first.value, int):
        return "random_state"  # pdf.sample(5): pandas' n
    return None


def _sample_fix(ctx: Context, call: ast.Call, method: str) -> FixSpec | None:
    """``df.sample(0.1)`` -> ``df.sample(0.1, seed=N)``: unsafe, the sample still depends on partitioning."""
    keyword = _seed_keyword(call, method)
    if (
        keyword is None
        or len(call.args) > _seed_position(call, method)  # a positional seed (None) is there: not added twice
        or any(type(a) is ast.Starred for a in call.args)
        or any(k.arg is None for k in call.keywords)
    ):
        return None
    return seed_fix(
        ctx.model,
        call,
        keyword,
        "the same rows are drawn again only while the input is partitioned (and ordered within partitions) the "
        "same way; the sample is still partition-dependent",
    )


def _sample_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``sample``/``sampleBy``/``randomSplit`` without a seed."""
    m = call.func.attr
    if chains.looked_only(ctx.model, call) or _seeded_sample(ctx, call, m):
        return
    own = ctx.model.source(
        RULE.code,
        call,
        what=f"{m}() without a seed",
        span=ctx.model.method_span(call),
        fix=_sample_fix(ctx, call, m),
    )
    ctx.facts.add_row_effect("sample", scope, own=own)


RULE = Rule(
    code="ND009",
    name="sample-without-seed",
    verb="samples rows without a seed",
    summary="`sample()`, `sampleBy()`, `randomSplit()` without a seed, SQL `TABLESAMPLE` without "
    "`REPEATABLE`.",
    description="""
An unseeded sample draws a different subset on every run. Samples that only feed an action that looks at
the data (`show()`, `count()`...) are debug sampling and not reported. pandas' `random_state=` counts as a
seed; `seed=None` (or `random_state=None`, or `None` in the seed's place) is no seed.
""",
    why="A replay writes a different sample.",
    method_hooks={"sample": _sample_hook, "sampleBy": _sample_hook, "randomSplit": _sample_hook},
    fix={
        "rows": "seed the sampler (`df.sample(fraction=0.1, seed=42)`), or select rows by a hash of their key.",
        "column": "seed the sampler.",
    },
    autofix="Unsafe: `sample`, `sampleBy` and `randomSplit` gain `seed=N` (pandas' `sample` gains "
    "`random_state=N`; a call whose library cannot be told from its arguments is left alone). A seeded sample "
    "is accepted, but it draws the same rows again only while the input is partitioned, and ordered within "
    "partitions, the same way: selecting rows by a hash of their key is the stable choice.",
    invalid=(
        Invalid(
            "part = df.sample(0.1)\n",
            1,
            11,
            "column",
            "*",
            fixed="part = df.sample(0.1, seed=33681)\n",
            unsafe=True,
        ),
        Invalid(
            "train, test = df.randomSplit([0.8, 0.2])\n",
            1,
            18,
            "key",
            "id",
            keys=("id",),
            fixed="train, test = df.randomSplit([0.8, 0.2], seed=68436)\n",
            unsafe=True,
        ),
        Invalid(
            "sampled = (events\n"
            "    .sample(\n"
            "        withReplacement=False,\n"
            "        fraction=0.05,\n"
            "    ))\n"
            "sampled.write.saveAsTable('dw.sample')\n",
            2,
            6,
            "column",
            "*",
            fixed="sampled = (events\n"
            "    .sample(\n"
            "        withReplacement=False,\n"
            "        fraction=0.05,\n"
            "        seed=24043,\n"
            "    ))\n"
            "sampled.write.saveAsTable('dw.sample')\n",
            unsafe=True,
        ),
    ),
    valid=(
        Valid("part = df.sample(fraction=0.1, seed=42)\npart2 = df.sample(False, 0.1, 7)\n", keys=("id",)),
        Valid("df.sample(0.01).show()\n", keys=("id",)),
    ),
)
