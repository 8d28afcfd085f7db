"""ND002: random values."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..base.types import FixSpec
from .rule import Invalid, Rule, Valid, seed_fix

if TYPE_CHECKING:
    from ..model.semantic import SemanticModel


_SEEDABLE = frozenset({"rand", "randn", "random"})


def _seed_fix(model: SemanticModel, call: ast.Call, qualified: str) -> FixSpec | None:
    """``F.rand()`` -> ``F.rand(seed=N)``: unsafe, the values still depend on the partitioning."""
    if call.args or call.keywords or model.spark_name(qualified) not in _SEEDABLE:
        return None
    return seed_fix(
        model,
        call,
        "seed",
        "the values then repeat on a replay only while the input is partitioned the same way; they are still "
        "partition-dependent (reported as ND004 afterwards)",
    )


RULE = Rule(
    code="ND002",
    name="random-value",
    verb="draws a random value",
    summary="A random value: Spark's `rand()`, `randn()`, `random()`, `shuffle()`, `uniform()`, `randstr()`, "
    "Python's `random.*`, `secrets.*`, `os.urandom()`, unseeded `numpy.random`.",
    description="""
Random values differ on every run. Spark's `rand(seed)` / `randn(seed)` repeat their values only for the
same partitioning (the sequence is seeded per partition), so the seeded form is reported as ND004
(partition-dependent) instead of here. Python's
`random` and `numpy.random` module functions are accepted once the module calls `random.seed(...)` /
`numpy.random.seed(...)`, and generators built with a seed (`random.Random(42)`,
`numpy.random.default_rng(42)`) are accepted. A seed given as `None` (`random.seed(None)`,
`default_rng(None)`, `F.rand(seed=None)`) is no seed: each of these APIs then seeds from the OS or the clock;
nor is a seed read from the clock (`random.seed(time.time())`).
""",
    why="Each replay draws different numbers.",
    fix_hook=_seed_fix,
    autofix="Unsafe: Spark's `rand()`, `randn()` and `random()` without arguments gain an explicit "
    "`seed=N` (N derived from the call's position and text, so two calls get different seeds). The values "
    "then repeat on a replay only while the input is partitioned the same way: still partition-dependent, "
    "so the finding becomes an ND004 one. A value computed from the row (a hash of its columns) is the real "
    "fix.",
    fix={
        "key": "derive the key from source columns, e.g. `sha2(concat_ws('|', col_a, col_b), 256)`.",
        "sequence": "take the sequence from the data (event time, source offset), not from a random number.",
        "column": "compute the value from the row (e.g. a hash of its columns) instead of drawing it, or seed "
        "the generator from the batch id.",
        "rows": "decide by a hash of the row's columns instead of a random draw.",
    },
    invalid=(
        Invalid(
            "import pyspark.sql.functions as fn\nfrom upsertsink import UpsertSink\n"
            "df2 = df.withColumn('bucket', (fn.rand() * 10).cast('int'))\n",
            3,
            32,
            "column",
            "bucket",
        ),
        Invalid(
            "from pyspark.sql import functions as F\nscored = df.withColumn('noise', F.rand())\n",
            2,
            33,
            "column",
            "noise",
            fixed="from pyspark.sql import functions as F\n"
            "scored = df.withColumn('noise', F.rand(seed=10719))\n",
            unsafe=True,
        ),
        Invalid(
            "from pyspark.sql.functions import rand as r, col\n"
            "df2 = df.select(col('a'), r().alias('k'))\nUpsertSink(path, 'k')\n",
            2,
            27,
            "key",
            "k",
        ),
        Invalid(
            "import random\nfrom pyspark.sql import functions as F\n"
            "salt = random.randint(0, 9)\ndf2 = df.withColumn('salt', F.lit(salt))\n",
            3,
            8,
            "column",
            "salt",
        ),
    ),
    valid=(
        Valid(
            "import random\nrandom.seed(7)\nfrom pyspark.sql import functions as F\n"
            "df2 = df.withColumn('salt', F.lit(random.randint(0, 9)))\n"
        ),
        Valid(
            "from pyspark.sql import functions as F\ndef f(rand):\n    return df.withColumn('k', rand())\n",
            keys=("k",),
        ),
        Valid(
            "from pyspark.sql import functions as F\ndf2 = df.select(F.col('rand').alias('k'))\n", keys=("k",)
        ),
    ),
)
