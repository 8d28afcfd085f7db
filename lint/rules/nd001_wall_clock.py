"""ND001: the wall clock."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
    code="ND001",
    name="wall-clock",
    verb="reads the wall clock",
    summary="A value computed from the current time: Python's `datetime.now()`, `time.time()`..., or Spark's "
    "`current_timestamp()`, `current_date()`, `now()`, `localtimestamp()`, `unix_timestamp()` without an "
    "argument, also inside SQL text.",
    description="""
Spark evaluates `current_timestamp()` once per query, so it is constant within a run and Spark does not even
mark it nondeterministic; but every run, and every replay of a batch, sees a different value. Python's
clock functions (`datetime.datetime.now/utcnow/today`, `datetime.date.today`, `time.time/time_ns/monotonic/
perf_counter`, `pandas.Timestamp.now`...) behave the same way once their value is put into a column with
`F.lit(...)` or interpolated into SQL text. Clock reads that never reach DataFrame data (logging, timing a
step) are not reported.

A history table makes a clock in the sequence column worse: with `UpsertSink(..., scd_type=2)` (or
`UpsertSink.for_table(..., scd_type=2)`; `scd_type` given as `2` or as a constant that is 2, also from another
module of the tree) the `sequence_by` column becomes every version's `__START_AT` and the `__END_AT` of the
version before it, so a replay rewrites the table's history: its versions open and close at other times, and
re-sent events open new versions instead of matching the ones already written. The finding is an error, like
every clock sequence, and its message says that it rewrites history on every replay; the same holds for the
other sources (random numbers, UUIDs, partition-dependent ids, numberings over orderings that may tie). The
columns named in `track_history` / `track_history_except` are ordinary written columns. A partial-update
sink's `sequence_groups` (`UpsertSink(..., merge_engine="partial_update", sequence_groups={"pay_seq":
["paid_at", "amount"]})`) names one sequence column per group of columns: a clock in any of them (its keys)
is an error, as in `sequence_by`.

A declarative pipeline's CDC flow (`dlt.apply_changes`, `create_auto_cdc_flow` of `dlt` or
`pyspark.pipelines`) declares its `keys` and `sequence_by` like a sink: a clock in the column its
`sequence_by` names, or a `sequence_by` that is itself a clock expression (`F.current_timestamp()`,
`"current_timestamp()"`), is an error.
""",
    why="Each replay sees a different time.",
    fix={
        "key": "derive the key from source columns, e.g. `sha2(concat_ws('|', col_a, col_b), 256)`; never from "
        "the clock.",
        "sequence": "take the sequence from the data (an event time, a source commit version or offset), not "
        "from the clock.",
        "column": "take the timestamp from the data, or pass the batch's logical time in as a job parameter "
        "(the same on every replay).",
        "rows": "filter on a time passed in as a job parameter (the batch's logical date), not on the clock.",
    },
    invalid=(
        Invalid(
            "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
            "sink = UpsertSink('/lake/pay', keys=['id'], merge_engine='partial_update',\n"
            "                  sequence_groups={'pay_seq': ['paid_at', 'amount']})\n"
            "sink.write(df.withColumn('pay_seq', F.current_timestamp()), batch_id=1)\n",
            5,
            37,
            "sequence",
            "pay_seq",
        ),
        # a clock that only stamps (a SET clause) is a column finding: the ON clause only tests the column it
        # writes for null, which a clock never is
        Invalid(
            "from datetime import datetime\n"
            "now = datetime.now().isoformat()\n"
            "spark.sql(f\"MERGE INTO accounts t USING updates s ON t.id = s.id AND t.closed_at IS NULL \"\n"
            "          f\"WHEN MATCHED THEN UPDATE SET t.closed_at = '{now}'\")\n",
            2,
            7,
            "column",
            "closed_at",
        ),
        Invalid(
            "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
            "sink = UpsertSink('/t', keys=['id'])\n"
            "out = df.withColumn('id', F.concat(F.col('src'), F.current_timestamp().cast('string')))\n",
            4,
            50,
            "key",
            "id",
        ),
        Invalid(
            "import datetime as dt\nfrom pyspark.sql import functions as F\n"
            "BATCH_TS = dt.datetime.now()\nout = df.withColumn('ingested_at', F.lit(BATCH_TS))\n",
            3,
            12,
            "column",
            "ingested_at",
        ),
        Invalid(
            'out = spark.sql("""\n    SELECT id,\n           current_timestamp() AS updated_at\n    FROM src\n""")\n',
            3,
            12,
            "sequence",
            "updated_at",
            sequence=("updated_at",),
        ),
        Invalid(
            "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
            "history = UpsertSink.for_table('crm.customer_history', keys=['customer_id'],\n"
            "                               sequence_by='valid_from', scd_type=2)\n"
            "history.write(changes.withColumn('valid_from', F.current_timestamp()), batch_id=epoch)\n",
            5,
            48,
            "sequence",
            "valid_from",
        ),
        Invalid(
            "import dlt\nfrom pyspark.sql import functions as F\n"
            "dlt.apply_changes(target='customers', source='customers_feed', keys=['customer_id'],\n"
            "                  sequence_by=F.current_timestamp())\n",
            4,
            31,
            "sequence",
            "F.current_timestamp()",
        ),
    ),
    valid=(
        Valid(
            "import time\nimport logging\nstart = time.time()\nrun(df)\n"
            "logging.info('took %.1fs', time.time() - start)\n"
        ),
        Valid(
            "from pyspark.sql import functions as F\n"
            "out = df.withColumn('event_date', F.to_date(F.col('event_ts')))\n"
            "out = out.withColumn('u', F.unix_timestamp('event_ts'))\n"
        ),
        Valid("def now():\n    return 0\n\nout = df.withColumn('id', F.lit(now()))\n", keys=("id",)),
        Valid(
            "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
            "history = UpsertSink('/lake/customer_history', keys=['customer_id'], sequence_by='valid_from',\n"
            "                     scd_type=2, track_history=['street', 'city'])\n"
            "history.write(changes.withColumn('valid_from', F.col('source_commit_ts')), batch_id=epoch)\n"
        ),
    ),
)
