"""ND003: random UUIDs."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
    code="ND003",
    name="random-uuid",
    verb="generates a random UUID",
    summary="A random or time-based UUID: Python's `uuid.uuid1()`/`uuid4()`, Spark's `uuid()` (also in SQL).",
    description="""
`uuid4()` is random and `uuid1()` embeds the clock and host, so neither identifies the same row twice.
Name-based UUIDs (`uuid.uuid5(namespace, name)` / `uuid3`) are deterministic and not reported.
""",
    why="Each replay generates new ids.",
    fix={
        "key": "derive the id from the row's business key: `uuid.uuid5(NAMESPACE, key)` in Python or "
        "`sha2(concat_ws('|', col_a, col_b), 256)` in Spark.",
        "sequence": "take the sequence from the data, not from a UUID.",
        "column": "derive the value from the row's columns (`uuid5`, `sha2`) so a replay reproduces it.",
    },
    invalid=(
        Invalid(
            "import uuid\nfrom pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n\n"
            "def new_id():\n    return str(uuid.uuid4())\n\n"
            "df2 = df.withColumn('order_id', F.lit(new_id()))\n"
            "UpsertSink('/t', ['order_id']).write(df2)\n",
            6,
            16,
            "key",
            "order_id",
        ),
        Invalid(
            "df2 = df.selectExpr('*', 'uuid() AS event_id')\n", 1, 27, "key", "event_id", keys=("event_id",)
        ),
    ),
    valid=(
        Valid(
            "import uuid\nNS = uuid.UUID('6ba7b811-9dad-11d1-80b4-00c04fd430c8')\n"
            "key = str(uuid.uuid5(NS, 'order-1'))\ndf2 = df.withColumn('id', F.lit(key))\n",
            keys=("id",),
        ),
        Valid("import uuid\nimport logging\nlogging.info('run %s', uuid.uuid4())\n"),
    ),
)
