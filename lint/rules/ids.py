"""ND003 (random UUIDs) and ND004 (partition- and position-dependent ids)."""

from upsertsink.lint.rules.base import Catalogue, Invalid, Rule, Valid

UUIDS = Rule(
    code="ND003",
    name="random-uuid",
    verb="generates a random UUID",
    summary="A random or time-based UUID: Python's `uuid.uuid1()`/`uuid4()`, Spark's `uuid()` (also in SQL).",
    description="""
`uuid4()` is random and `uuid1()` embeds the clock and host, so neither identifies the same row twice.
Name-based UUIDs (`uuid.uuid5(namespace, name)` / `uuid3`) are deterministic and not reported.
""",
    why="Each replay generates new ids.",
    catalogue=Catalogue(
        python_calls=frozenset({"uuid.uuid1", "uuid.uuid4", "uuid.uuid6", "uuid.uuid7"}),
        spark_functions=frozenset({"uuid"}),
    ),
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

PARTITION_IDS = Rule(
    code="ND004",
    name="partition-dependent-id",
    verb="depends on partitioning or input files",
    summary="A value that depends on how the data is split: `monotonically_increasing_id()`, "
    "`spark_partition_id()`, `input_file_name()`, `input_file_block_start()/length()`, and seeded random "
    "functions (`rand(seed)`, `randn(seed)`, `shuffle(col, seed)`...).",
    description="""
`monotonically_increasing_id()` encodes the partition index and the row's position in it; both change when
the input is re-listed, files are compacted, or the cluster size changes. `input_file_name()` changes when
files are rewritten (compaction, OPTIMIZE). A seeded `rand(42)` (also `randn`, `random`, `shuffle`,
`uniform`, `randstr` with a seed, in Python or SQL) seeds its generator per partition: its values repeat
only while the input is split and ordered the same way.
""",
    why="A replay that reads the same rows with a different layout numbers them differently.",
    catalogue=Catalogue(
        spark_functions=frozenset(
            {
                "monotonically_increasing_id",
                "spark_partition_id",
                "input_file_name",
                "input_file_block_start",
                "input_file_block_length",
            }
        ),
        # RDD row numbering by position: rdd.zipWithIndex().map(...).toDF([..., "row_id"])
        method_sources=frozenset({"zipWithIndex", "zipWithUniqueId"}),
        # random functions given a seed (argument position): repeatable only for the same partitioning
        spark_seeded=(
            ("rand", 0),
            ("randn", 0),
            ("random", 0),
            ("shuffle", 1),
            ("uniform", 2),
            ("randstr", 1),
        ),
    ),
    fix={
        "key": "derive the key from source columns, e.g. `sha2(concat_ws('|', col_a, col_b), 256)`, not from "
        "the row's position.",
        "sequence": "take the sequence from the data (event time, source offset or commit version).",
        "column": "derive the value from the row's content, or drop the column.",
    },
    invalid=(
        Invalid(
            "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
            "df2 = df.withColumn('row_id', F.monotonically_increasing_id())\n"
            "UpsertSink(target, keys='row_id').write(df2)\n",
            3,
            31,
            "key",
            "row_id",
        ),
        Invalid(
            "from pyspark.sql import functions as F\ndf2 = df.withColumn('src_file', F.input_file_name())\n",
            2,
            33,
            "column",
            "src_file",
        ),
        Invalid(
            "from pyspark.sql import functions as F\n"
            "df2 = df.withColumn('bucket', (F.rand(seed=7) * 16).cast('int'))\n",
            2,
            32,
            "column",
            "bucket",
        ),
    ),
    valid=(
        Valid(
            "from pyspark.sql import functions as F\n"
            "df2 = df.withColumn('row_id', F.sha2(F.concat_ws('|', 'a', 'b'), 256))\n",
            keys=("row_id",),
        ),
    ),
)
