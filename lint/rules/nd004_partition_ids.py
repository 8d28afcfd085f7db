"""ND004: partition- and position-dependent ids."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
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
        # a surrogate key named by a parameter that no call here gives: the merge condition names the same
        # column by the same parameter, so it is the write's merge key, whatever it is called
        Invalid(
            "from delta.tables import DeltaTable\nfrom pyspark.sql import functions as F\n\n"
            "def add_rows(target, rows, key_col):\n"
            "    staged = rows.withColumn(key_col, F.monotonically_increasing_id())\n"
            "    on = f't.{key_col} = s.{key_col}'\n"
            "    DeltaTable.forName(spark, target).alias('t').merge(staged.alias('s'), on)"
            ".whenNotMatchedInsertAll().execute()\n",
            5,
            39,
            "key",
            "{key_col}",
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
