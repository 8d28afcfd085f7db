"""ND005: aggregates whose result depends on the order rows arrive in.

Found by its catalogue entries (aggregates), which the shared flow evaluates: the rule has no hook."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
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
