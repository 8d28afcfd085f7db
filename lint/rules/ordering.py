"""ND005-ND009: results that depend on the order or layout in which Spark happens to see the rows.

ND007-ND009 are found by method hooks (``dropDuplicates``, ``limit``, ``sample``...) defined here; ND005 and
ND006 by their catalogue entries (aggregates, window functions), which the shared flow evaluates.
"""

from __future__ import annotations

from upsertsink.lint import chains

import ast
from typing import Any, TYPE_CHECKING

from upsertsink.lint.rules.base import Catalogue, FixSpec, Invalid, Rule, Valid, seed_fix


def _dedup_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``dropDuplicates(subset)``: an arbitrary row of each group survives (pandas ``keep=`` is exact)."""
    subset_node = call.args[0] if call.args else ctx.model.kwarg(call, "subset")
    if subset_node is None or ctx.model.kwarg(call, "keep") is not None or chains.looked_only(ctx.model, call):
        return
    subset = ctx.values.const_strings(subset_node, scope)
    if subset is not None and ctx.values.selects_only(call.func.value, scope, subset):
        return  # every selected column is in the subset: only exact duplicates are removed
    what = f"{call.func.attr}() with a subset"
    own = ctx.model.source("ND007", call, what=what, span=ctx.model.method_span(call))
    ctx.facts.add_row_effect("dedup", scope, own=own, subset=subset or [])


def _limit_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``limit(n)`` without an ordering before it (``limit(0)`` selects nothing and is exact)."""
    if not call.args or chains.looked_only(ctx.model, call):
        return
    first = call.args[0]
    if type(first) is ast.Constant and first.value == 0:
        return
    ordered = chains.ordering(ctx.model, call.func.value, scope)
    if ordered is not None:
        order_call, order_scope = ordered
        # orderBy(F.rand()).limit(n) is a random sample: the ordering's sources decide the rows
        # (whether any source reaches the ordering is asked once every fact and key is known)
        keys = ast.Tuple(elts=list(order_call.args), ctx=ast.Load())
        ctx.facts.add_row_effect("limit", order_scope, expr=keys)
        return
    own = ctx.model.source("ND008", call, what=f"{call.func.attr}() without orderBy", span=ctx.model.method_span(call))
    ctx.facts.add_row_effect("limit", scope, own=own)


def _seeded_sample(ctx: Context, call: ast.Call, method: str) -> bool:
    if ctx.model.kwarg(call, "seed", "random_state") is not None:
        return True
    args = call.args
    if method == "sample":
        first_is_bool = bool(args) and type(args[0]) is ast.Constant and isinstance(args[0].value, bool)
        return len(args) >= (3 if first_is_bool else 2)
    if method == "sampleBy":
        return len(args) >= 3
    return len(args) >= 2  # randomSplit(weights, seed)


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
        or any(type(a) is ast.Starred for a in call.args)
        or any(k.arg is None for k in call.keywords)
    ):
        return None
    return seed_fix(
        ctx.model, call, keyword,
        "the same rows are drawn again only while the input is partitioned (and ordered within partitions) the "
        "same way; the sample is still partition-dependent",
    )


def _sample_hook(ctx: Context, call: ast.Call, scope: Any) -> None:
    """``sample``/``sampleBy``/``randomSplit`` without a seed."""
    m = call.func.attr
    if chains.looked_only(ctx.model, call) or _seeded_sample(ctx, call, m):
        return
    own = ctx.model.source(
        "ND009", call, what=f"{m}() without a seed", span=ctx.model.method_span(call), fix=_sample_fix(ctx, call, m)
    )
    ctx.facts.add_row_effect("sample", scope, own=own)


ORDER_DEPENDENT = Rule(
    code="ND005",
    name="order-dependent-aggregate",
    verb="depends on row order",
    summary="An aggregate whose result depends on the order rows arrive in: `first`, `last`, `any_value`, "
    "`first_value`/`last_value`, `collect_list`, `collect_set`, `array_agg`, `listagg`/`string_agg`, `mode`.",
    description="""
After a shuffle, rows reach an aggregation in whatever order the tasks finish; `first('x')` in a `groupBy`
picks an arbitrary row, `collect_list` builds the array in arbitrary order, and `collect_set` gives an
array whose element order is arbitrary. Used over a window whose ordering cannot tie (see ND006), `first`,
`last` and `collect_list` are deterministic and not reported; neither are `collect_list`/`collect_set`
wrapped in `sort_array`, `array_sort` or `size` (in Python or in SQL text), nor dictionary aggregations
other than `first`/`last`/`collect_*` (`agg({"v": "max"})`).
""",
    why="A replay can pick a different row or order the elements differently.",
    catalogue=Catalogue(
        spark_functions=frozenset(
            {
                "first",
                "last",
                "first_value",
                "last_value",
                "any_value",
                "collect_list",
                "collect_set",
                "array_agg",
                "listagg",
                "string_agg",
                "mode",
            }
        ),
        ordered_ok=frozenset({"first", "last", "first_value", "last_value", "collect_list", "array_agg"}),
        order_insensitive_args_of=frozenset({"collect_list", "collect_set", "array_agg"}),
        order_fixing_functions=frozenset({"sort_array", "array_sort", "size", "array_size", "cardinality"}),
    ),
    fix={
        "key": "aggregate with an order-insensitive function (`min`, `max`, `sort_array(collect_set(...))`) or "
        "pick the row with `max_by(x, tie_free_ordering)`.",
        "sequence": "use `max(seq)` instead of `first(seq)`.",
        "column": "use `min`/`max`/`max_by` with a tie-free ordering, or wrap arrays in `sort_array(...)`.",
        "rows": "use an order-insensitive aggregate or a tie-free ordering.",
    },
    invalid=(
        Invalid(
            "from pyspark.sql import functions as F\n"
            "latest = df.groupBy('id').agg(F.first('status').alias('status'))\n",
            2,
            31,
            "column",
            "status",
        ),
        Invalid(
            "from pyspark.sql import functions as F\n"
            "out = df.groupBy('k').agg(F.collect_list('v').alias('vs'))\n",
            2,
            27,
            "column",
            "vs",
        ),
        Invalid("out = spark.sql('SELECT id, first(v) AS v FROM t GROUP BY id')\n", 1, 29, "column", "v"),
    ),
    valid=(
        Valid(
            "from pyspark.sql import functions as F\n"
            "out = df.groupBy('k').agg(F.max('v').alias('v'), F.sort_array(F.array_distinct(F.col('vs'))))\n"
        ),
        Valid(
            "from pyspark.sql import functions as F\n"
            "out = df.groupBy('k').agg(F.sort_array(F.collect_set('v')).alias('vs'))\n"
        ),
        Valid(
            "from pyspark.sql import functions as F\nfrom pyspark.sql.window import Window\n"
            "w = Window.partitionBy('k').orderBy('ts', 'event_id')\n"
            "out = df.withColumn('first_v', F.first('v').over(w))\n"
        ),
    ),
)

WINDOW_TIES = Rule(
    code="ND006",
    name="window-ordering-may-tie",
    verb="numbers rows over an ordering that may tie",
    summary="`row_number`, `rank`, `dense_rank`, `ntile`, `lag`/`lead`, `nth_value`... over a window whose "
    "ordering may tie (or has no ordering).",
    description="""
Heuristic (static analysis cannot know which columns are unique): a window ordering is considered
tie-free when its ordering columns (those not also in `partitionBy`) include a merge key or the
sequence column, or when it orders by two or more distinct columns (the last one taken as the tie-breaker).
A single ordering column that is neither a key nor the sequence column may tie, and among tied rows
`row_number()` numbers them arbitrarily: the classic "keep the latest row per key" deduplication then keeps
a different row on replay. The window is followed through variables (`w = Window.partitionBy(...)...`);
a window that comes from elsewhere (a parameter) is not reported. The same check applies to `OVER (...)`
clauses in SQL text. `rank()`, `dense_rank()`, `percent_rank()` and `cume_dist()` give tied rows equal
values and are not reported. When the window is partitioned by exactly the written key set (or a superset),
keeping `rn = 1` picks one row per key: the keys are right and only the row's values depend on the order,
so the finding is a warning, not an error.
""",
    why="Among tied rows the numbering is arbitrary.",
    # rank(), dense_rank(), percent_rank() and cume_dist() give tied rows equal values: deterministic
    catalogue=Catalogue(
        window_functions=frozenset({"row_number", "ntile", "lag", "lead", "nth_value"}),
        ordered_ok=frozenset({"nth_value"}),
    ),
    fix={
        "key": "add a tie-breaker to the window ordering, e.g. `.orderBy(F.col('updated_at').desc(), "
        "F.col('event_id'))`.",
        "sequence": "add a tie-breaker to the window ordering (a unique column such as an event id).",
        "column": "add a tie-breaker to the window ordering (a unique column such as an event id).",
        "rows": "add a tie-breaker to the window ordering, so the row that survives is always the same one.",
    },
    invalid=(
        Invalid(
            "from pyspark.sql import functions as F\nfrom pyspark.sql.window import Window\n"
            "w = Window.partitionBy('id').orderBy(F.col('updated_at').desc())\n"
            "latest = (df.withColumn('rn', F.row_number().over(w))\n"
            "          .filter(F.col('rn') == 1).drop('rn'))\n"
            "UpsertSink('/t', ['id', 'day']).write(latest)\n",
            4,
            31,
            "key",
            "id",
        ),
        Invalid(
            "out = spark.sql('SELECT *, ntile(4) OVER (PARTITION BY k ORDER BY ts) AS r FROM t')\n",
            1,
            28,
            "column",
            "r",
        ),
    ),
    valid=(
        Valid(
            "from pyspark.sql import functions as F\nfrom pyspark.sql.window import Window\n"
            "w = Window.partitionBy('id').orderBy(F.col('updated_at').desc(), F.col('event_id'))\n"
            "latest = df.withColumn('rn', F.row_number().over(w)).filter('rn = 1')\n",
            keys=("id",),
        ),
        Valid(
            "from pyspark.sql import functions as F\nfrom pyspark.sql.window import Window\n"
            "w = Window.partitionBy('id').orderBy('version')\n"
            "out = df.withColumn('rn', F.row_number().over(w))\n",
            keys=("id",),
            sequence=("version",),
        ),
        Valid(
            "from pyspark.sql import functions as F\nfrom pyspark.sql.window import Window\n"
            "w = Window.partitionBy('customer').orderBy(F.col('amount').desc())\n"
            "ranked = df.withColumn('rnk', F.dense_rank().over(w)).withColumn('r', F.rank().over(w))\n"
            "out = spark.sql('SELECT *, rank() OVER (PARTITION BY k ORDER BY ts) AS r2 FROM t')\n",
        ),
    ),
)

DEDUP_SUBSET = Rule(
    code="ND007",
    name="drop-duplicates-subset",
    verb="keeps an arbitrary row of each duplicate group",
    summary="`dropDuplicates(subset)` / `drop_duplicates(subset)`: which of the duplicates survives is "
    "arbitrary.",
    description="""
With a subset, Spark keeps one row per distinct subset value, and which one depends on the order rows reach
the aggregation. When the subset leaves out a key column, a replay can write a different set of keys: an
error reaching that key. When the subset holds every key (deduplicating by exactly the written key set), the
keys are right and only the surviving row's *values* are order-dependent: a warning (`column_name: "*"`).
With no known keys, a sequence column outside the subset is reported as an error, else a warning.
`dropDuplicates()` without a subset, and a subset that holds every selected column
(`df.select("a", "b").dropDuplicates(["a", "b"])`), remove exact duplicates only and are deterministic.
pandas' `drop_duplicates(..., keep=...)` is deterministic for a deterministic input order.
""",
    why="A replay can keep a different row of each group.",
    method_hooks={
        "dropDuplicates": _dedup_hook,
        "drop_duplicates": _dedup_hook,
        "dropDuplicatesWithinWatermark": _dedup_hook,
    },
    fix={
        "rows": "pick the surviving row explicitly: `row_number()` over `partitionBy(keys).orderBy(sequence "
        "desc, tie_breaker)` and keep `rn = 1` (or let UpsertSink's sequence_by resolve duplicates).",
        "column": "pick the surviving row explicitly with a tie-free ordering.",
    },
    invalid=(
        Invalid(
            "from upsertsink import UpsertSink\n"
            "clean = df.dropDuplicates(['order_id'])\n"
            "UpsertSink('/t', keys=['order_id', 'line_no'], sequence_by='version').write(clean)\n",
            2,
            12,
            "key",
            "line_no",
        ),
        Invalid(
            "from upsertsink import UpsertSink\n"
            "clean = df.dropDuplicates(['id'])\n"
            "UpsertSink('/t', keys=['id'], sequence_by='version').write(clean)\n",
            2,
            12,
            "column",
            "*",
        ),
        Invalid("clean = pdf.drop_duplicates(subset=['id', 'day'])\n", 1, 13, "column", "*"),
    ),
    valid=(
        Valid("clean = df.dropDuplicates()\n", keys=("id",)),
        Valid(
            "pairs = df.select('id', 'tag').dropDuplicates(['id', 'tag'])\n"
            "pairs.write.saveAsTable('id_tags')\n",
            keys=("id",),
        ),
        Valid("clean = pdf.drop_duplicates(subset=['id'], keep='last')\n", keys=("id",)),
    ),
)

LIMIT = Rule(
    code="ND008",
    name="limit-without-order",
    verb="keeps an arbitrary set of rows",
    summary="`limit(n)` (or SQL `LIMIT n`) without an ordering before it.",
    description="""
Without `orderBy`, `limit(n)` returns whichever n rows the first tasks produce. Limits that only feed an
action that looks at the data (`show()`, `collect()`, `toPandas()`, `count()`, `display(...)`...) are not
reported, nor is `limit(0)` (it selects nothing, e.g. to take a schema). The
ordering is searched along the method chain and through one variable (`ordered = df.orderBy(...)`;
`ordered.limit(10)`).
""",
    why="A replay can write a different subset of rows.",
    method_hooks={"limit": _limit_hook},
    catalogue=Catalogue(sql_clauses=frozenset({"limit"})),
    fix={
        "rows": "order before limiting with a tie-free ordering: `df.orderBy('id').limit(n)`.",
        "column": "order before limiting with a tie-free ordering.",
    },
    invalid=(
        Invalid(
            "from upsertsink import UpsertSink\nbatch = df.limit(1000)\n"
            "UpsertSink('/t', ['id']).write(batch)\n",
            2,
            12,
            "key",
            "id",
        ),
        Invalid("top = spark.sql('SELECT id, v FROM t LIMIT 10')\n", 1, 38, "key", "id", keys=("id",)),
    ),
    valid=(
        Valid("batch = df.orderBy('id').limit(1000)\n", keys=("id",)),
        Valid("df.limit(20).show()\nprint(df.limit(5).collect())\n", keys=("id",)),
        Valid("empty = df.limit(0)\nempty.write.saveAsTable('schema_only')\n", keys=("id",)),
    ),
)

SAMPLE = Rule(
    code="ND009",
    name="sample-without-seed",
    verb="samples rows without a seed",
    summary="`sample()`, `sampleBy()`, `randomSplit()` without a seed, SQL `TABLESAMPLE` without "
    "`REPEATABLE`.",
    description="""
An unseeded sample draws a different subset on every run. Samples that only feed an action that looks at
the data (`show()`, `count()`...) are debug sampling and not reported. pandas' `random_state=` counts as a
seed.
""",
    why="A replay writes a different sample.",
    method_hooks={"sample": _sample_hook, "sampleBy": _sample_hook, "randomSplit": _sample_hook},
    catalogue=Catalogue(sql_clauses=frozenset({"tablesample"}), trigger_words=frozenset({"tablesample"})),
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

if TYPE_CHECKING:
    from upsertsink.lint.context import Context
