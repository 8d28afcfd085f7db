"""ND006: numberings over a window ordering that may tie.

Found by its catalogue entries (window functions), which the shared flow evaluates: the rule has no hook."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
    code="ND006",
    name="window-ordering-may-tie",
    verb="numbers rows over an ordering that may tie",
    summary="`row_number`, `rank`, `dense_rank`, `ntile`, `lag`/`lead`, `nth_value`... over a window whose "
    "ordering may tie (or has no ordering).",
    description="""
Heuristic (static analysis cannot know which columns are unique): a window ordering is considered
tie-free when its ordering columns (those not also in `partitionBy`) include a merge key or the
sequence column, or when it orders by two or more distinct columns (the last one taken as the tie-breaker).
A constant (`F.lit(0)`) breaks no tie and does not count as a column. A window ordered by a nondeterministic
value (`monotonically_increasing_id()`, `rand()`, a column computed from the clock, named by a string or
by `F.col`) is not a tie: that
value's own rule (ND004, ND002, ND001) is reported where the numbering lands. A single ordering column that is neither a key nor the sequence column may tie, and among tied rows
`row_number()` numbers them arbitrarily: the classic "keep the latest row per key" deduplication then keeps
a different row on replay. The window is followed through variables (`w = Window.partitionBy(...)...`,
`Window().orderBy(...)` alike);
a window that comes from elsewhere (a parameter) is not reported. The same check applies to `OVER (...)`
clauses in SQL text. `rank()`, `dense_rank()`, `percent_rank()` and `cume_dist()` give tied rows equal
values and are not reported. When the window is partitioned by exactly the written key set (or a superset),
keeping `rn = 1` picks one row per key: the keys are right and only the row's values depend on the order,
so the finding is a warning, not an error.
""",
    why="Among tied rows the numbering is arbitrary.",
    # rank(), dense_rank(), percent_rank() and cume_dist() give tied rows equal values: deterministic
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
