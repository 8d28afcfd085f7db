"""The catalogue: every nondeterministic Python call and Spark/SQL function the linter knows, with its rule.

Python sources are keyed by qualified name (after resolving imports and aliases). Spark sources are keyed
by the bare function name, which is the same in ``pyspark.sql.functions`` and in Spark SQL text.
"""

from __future__ import annotations

# Python: qualified name -> rule code.  Calls are resolved through imports, so ``dt.datetime.now`` with
# ``import datetime as dt`` becomes ``datetime.datetime.now``.
PYTHON_CALLS: dict[str, str] = {
    "datetime.datetime.now": "ND001",
    "datetime.datetime.utcnow": "ND001",
    "datetime.datetime.today": "ND001",
    "datetime.date.today": "ND001",
    "time.time": "ND001",
    "time.time_ns": "ND001",
    "time.monotonic": "ND001",
    "time.monotonic_ns": "ND001",
    "time.perf_counter": "ND001",
    "time.perf_counter_ns": "ND001",
    "time.process_time": "ND001",
    "pandas.Timestamp.now": "ND001",
    "pandas.Timestamp.utcnow": "ND001",
    "pandas.Timestamp.today": "ND001",
    "uuid.uuid1": "ND003",
    "uuid.uuid4": "ND003",
    "uuid.uuid6": "ND003",
    "uuid.uuid7": "ND003",
    "os.urandom": "ND002",
    "os.getrandom": "ND002",
}
# time.localtime()/gmtime()/ctime()/asctime() and time.strftime(fmt) read the clock only without a time argument.
PYTHON_CALLS_NO_ARGS: dict[str, str] = {
    "time.localtime": "ND001",
    "time.gmtime": "ND001",
    "time.ctime": "ND001",
    "time.asctime": "ND001",
}
PYTHON_CALLS_ONE_ARG: dict[str, str] = {"time.strftime": "ND001"}
# Every function of these modules is a source (``random.seed`` and seeded constructors excepted).
PYTHON_MODULES: dict[str, str] = {"random": "ND002", "secrets": "ND002", "numpy.random": "ND002"}
# Calls in a random module that do not draw a value, or that are seeded when given an argument.
PYTHON_RANDOM_NEUTRAL = {"seed", "getstate", "setstate", "SeedSequence", "BitGenerator"}
PYTHON_RANDOM_SEEDABLE = {
    "Random",
    "default_rng",
    "RandomState",
    "Generator",
    "PCG64",
    "MT19937",
    "Philox",
    "SFC64",
}

# The module prefixes under which pyspark exposes its column functions.
SPARK_FUNCTION_MODULES = (
    "pyspark.sql.functions",
    "pyspark.sql.functions.builtin",
    "pyspark.sql.connect.functions",
    "pyspark.sql.connect.functions.builtin",
)

# Spark functions (Python API and SQL): name -> rule code.
SPARK_FUNCTIONS: dict[str, str] = {
    # wall clock
    "current_timestamp": "ND001",
    "current_date": "ND001",
    "curdate": "ND001",
    "current_time": "ND001",
    "now": "ND001",
    "localtimestamp": "ND001",
    "unix_timestamp": "ND001",  # only without an argument, see SPARK_NO_ARG_ONLY
    # random values
    "rand": "ND002",
    "randn": "ND002",
    "random": "ND002",
    "shuffle": "ND002",
    "uniform": "ND002",
    "randstr": "ND002",
    # generated ids
    "uuid": "ND003",
    # partition / file / position dependent
    "monotonically_increasing_id": "ND004",
    "spark_partition_id": "ND004",
    "input_file_name": "ND004",
    "input_file_block_start": "ND004",
    "input_file_block_length": "ND004",
    # order-dependent aggregation
    "first": "ND005",
    "last": "ND005",
    "first_value": "ND005",
    "last_value": "ND005",
    "any_value": "ND005",
    "collect_list": "ND005",
    "collect_set": "ND005",
    "array_agg": "ND005",
    "listagg": "ND005",
    "string_agg": "ND005",
    "mode": "ND005",
}
SPARK_NO_ARG_ONLY = {"unix_timestamp"}
# Array aggregates whose only problem is element order, and the functions that make the order irrelevant.
ORDER_INSENSITIVE_ARGS_OF = {"collect_list", "collect_set", "array_agg"}
ORDER_FIXING_FUNCTIONS = {"sort_array", "array_sort", "size", "array_size", "cardinality"}
# Window functions whose result depends on the window's ordering (ND006 when the ordering may tie).
SPARK_RANKING: set[str] = {
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "nth_value",
}
# Order-dependent aggregates that become deterministic over a window with a tie-free ordering.
SPARK_ORDERED_OK = {"first", "last", "first_value", "last_value", "collect_list", "array_agg", "nth_value"}

# DataFrame methods that change which rows are written (ND007, ND008, ND009).
DEDUP_METHODS = {"dropDuplicates", "drop_duplicates", "dropDuplicatesWithinWatermark"}
LIMIT_METHODS = {"limit"}
SAMPLE_METHODS = {"sample", "sampleBy", "randomSplit"}
ORDER_METHODS = {"orderBy", "sort", "sort_values", "sortWithinPartitions", "nlargest", "nsmallest"}
# Actions that only look at the data: a limit/sample feeding one of these never reaches a table.
LOOK_ONLY_ACTIONS = {
    "show",
    "collect",
    "take",
    "head",
    "first",
    "count",
    "toPandas",
    "printSchema",
    "explain",
    "display",
    "describe",
    "summary",
    "toLocalIterator",
    "isEmpty",
    "toJSON",
    "cache",
    "persist",
}
SQL_METHODS = {"sql"}
SQL_FUNCTIONS = {"expr"}
SQL_STRING_METHODS = {"selectExpr", "filter", "where"}

# The trigger words of the pre-filter (matched case-insensitively on the raw bytes): a file containing none
# of them cannot produce a finding (other than a parse error, which Python itself reports) and is never
# parsed. Every source has to be named in the file: an import names the function, SQL text names it too.
TRIGGER_WORDS: frozenset[str] = frozenset(
    set(SPARK_FUNCTIONS)
    | SPARK_RANKING
    | DEDUP_METHODS
    | LIMIT_METHODS
    | SAMPLE_METHODS
    | {name.rsplit(".", 1)[1] for name in PYTHON_CALLS}
    | {name.rsplit(".", 1)[1] for name in PYTHON_CALLS_NO_ARGS}
    | {name.rsplit(".", 1)[1] for name in PYTHON_CALLS_ONE_ARG}
    | {"random", "secrets", "tablesample"}
)
# Checked as plain substrings of the lower-cased bytes (memchr-speed), the most frequent words first so a
# typical file is accepted after one or two scans.
_FREQUENT_FIRST = ("time", "first", "random", "limit", "now", "last", "mode", "uuid", "sample", "rank")
TRIGGER_BYTES: tuple[bytes, ...] = tuple(
    w.encode()
    for w in (*_FREQUENT_FIRST, *sorted({t.lower() for t in TRIGGER_WORDS} - set(_FREQUENT_FIRST)))
    if not any(w != other and other in w for other in _FREQUENT_FIRST)  # "timestamp" is covered by "time"
)


def has_trigger(data: bytes) -> bool:
    """Does the file mention any catalogue word at all (case-insensitively)? If not, it needs no analysis."""
    lowered = data.lower()
    return any(word in lowered for word in TRIGGER_BYTES)
