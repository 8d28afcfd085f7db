"""ND010: Python UDFs whose body uses a nondeterministic source."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
    code="ND010",
    name="nondeterministic-udf",
    verb="makes the UDF's result nondeterministic",
    summary="A Python UDF (`@udf`, `F.udf(f)`, `pandas_udf`, `spark.udf.register`) whose return value uses a "
    "nondeterministic source; reported at the source inside the UDF, naming the column the UDF's result "
    "reaches.",
    description="""
Spark cannot see inside a Python UDF and treats it as deterministic unless it is marked
`.asNondeterministic()` (which only stops the optimizer from duplicating it; the value still differs per
run). The source is followed through the UDF's `return` statements.
""",
    why="The UDF returns a different value on each replay.",
    fix={
        "key": "compute the key from the UDF's inputs only (hash them), not from the clock or a random source.",
        "sequence": "take the sequence from the data passed into the UDF.",
        "column": "make the UDF a pure function of its arguments; pass times or seeds in as arguments.",
    },
    invalid=(
        Invalid(
            "import uuid\nfrom pyspark.sql.functions import udf, col\n\n@udf('string')\n"
            "def make_id(x):\n    return f'{x}-{uuid.uuid4()}'\n\n"
            "df2 = df.withColumn('id', make_id(col('name')))\n",
            6,
            19,
            "key",
            "id",
            keys=("id",),
        ),
        Invalid(
            "import time\nfrom pyspark.sql import functions as F\n"
            "stamp = F.udf(lambda v: f'{v}@{time.time()}')\ndf2 = df.withColumn('tag', stamp('v'))\n",
            3,
            32,
            "column",
            "tag",
        ),
    ),
    valid=(
        Valid(
            "import hashlib\nfrom pyspark.sql.functions import udf, col\n\n@udf('string')\n"
            "def make_id(x):\n    return hashlib.sha256(x.encode()).hexdigest()\n\n"
            "df2 = df.withColumn('id', make_id(col('name')))\n",
            keys=("id",),
        ),
    ),
)
