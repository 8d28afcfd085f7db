"""The catalogue of sources: every nondeterministic Python call and Spark function (and SQL clause) the linter
knows, under the code of the rule that reports it.

Data only, below every stage: the SQL reader (:mod:`upsertsink.lint.values.sqlparts`), the fact extractors
and the taint read these tables; a rule module (``rules/ndNNN_*.py``) holds what the rule says about what is
catalogued under its code (messages, docs, examples, fixes). Python names are import-qualified; Spark names
are bare function names, the same in ``pyspark.sql.functions`` and in Spark SQL text (lower case).
"""

from __future__ import annotations

from .structs import struct


@struct(frozen=True)
class Sources:
    """What one rule recognizes as a source."""

    python_calls: frozenset[str] = frozenset()  # always a source
    python_calls_no_args: frozenset[str] = frozenset()  # a source only without arguments
    python_calls_one_arg: frozenset[str] = frozenset()  # a source only with exactly one argument
    python_now_strings: frozenset[str] = frozenset()  # a source when given "now"/"today"
    python_modules: frozenset[str] = frozenset()  # every function of the module is a source...
    python_module_neutral: frozenset[str] = frozenset()  # ...except these
    python_module_seedable: frozenset[str] = frozenset()  # ...and these when given a seed
    spark_functions: frozenset[str] = frozenset()  # value sources (also in SQL text)
    spark_no_arg_only: frozenset[str] = frozenset()  # of those, sources only without an argument
    window_functions: frozenset[str] = frozenset()  # results depend on the order among tied rows
    ordered_ok: frozenset[str] = frozenset()  # deterministic over a window with a tie-free ordering
    order_insensitive_args_of: frozenset[str] = frozenset()  # only their element order is arbitrary
    order_fixing_functions: frozenset[str] = frozenset()  # make that element order irrelevant
    udf_factories: frozenset[str] = frozenset()
    sql_clauses: frozenset[str] = frozenset()  # SQL clauses that choose rows (``limit``, ``tablesample``)
    method_sources: frozenset[str] = frozenset()  # methods whose result is a source on any receiver
    trigger_words: frozenset[str] = frozenset()  # other words that must make the pre-filter analyze a file
    # Spark functions whose seeded form belongs to this rule: (name, position of the seed argument);
    # ``rand(42)`` repeats its values only for the same partitioning, unlike ``rand()``
    spark_seeded: tuple[tuple[str, int], ...] = ()


# rule code -> its sources, in code order (a name two rules list belongs to the first)
SOURCES: dict[str, Sources] = {
    "ND001": Sources(  # the wall clock
        python_calls=frozenset(
            {
                "datetime.datetime.now",
                "datetime.datetime.utcnow",
                "datetime.datetime.today",
                "datetime.date.today",
                "time.time",
                "time.time_ns",
                "time.monotonic",
                "time.monotonic_ns",
                "time.perf_counter",
                "time.perf_counter_ns",
                "time.process_time",
                "pandas.Timestamp.now",
                "pandas.Timestamp.utcnow",
                "pandas.Timestamp.today",
            }
        ),
        # time.localtime()/gmtime()/ctime()/asctime() and time.strftime(fmt) read the clock only without a
        # time
        python_calls_no_args=frozenset({"time.localtime", "time.gmtime", "time.ctime", "time.asctime"}),
        python_calls_one_arg=frozenset({"time.strftime"}),
        python_now_strings=frozenset({"pandas.Timestamp", "pandas.to_datetime", "numpy.datetime64"}),
        spark_functions=frozenset(
            {
                "current_timestamp",
                "current_date",
                "curdate",
                "current_time",
                "now",
                "localtimestamp",
                "unix_timestamp",
            }
        ),
        spark_no_arg_only=frozenset({"unix_timestamp"}),
    ),
    "ND002": Sources(  # random numbers
        python_calls=frozenset({"os.urandom", "os.getrandom"}),
        # every function of these modules draws a value, except the neutral ones and seeded constructors
        python_modules=frozenset({"random", "secrets", "numpy.random"}),
        python_module_neutral=frozenset({"seed", "getstate", "setstate", "SeedSequence", "BitGenerator"}),
        python_module_seedable=frozenset(
            {"Random", "default_rng", "RandomState", "Generator", "PCG64", "MT19937", "Philox", "SFC64"}
        ),
        spark_functions=frozenset({"rand", "randn", "random", "shuffle", "uniform", "randstr"}),
        trigger_words=frozenset({"random", "secrets"}),
    ),
    "ND003": Sources(  # UUIDs
        python_calls=frozenset({"uuid.uuid1", "uuid.uuid4", "uuid.uuid6", "uuid.uuid7"}),
        spark_functions=frozenset({"uuid"}),
    ),
    "ND004": Sources(  # ids that depend on partitioning
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
    "ND005": Sources(  # order-dependent aggregates
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
    "ND006": Sources(  # numberings over orderings that may tie
        window_functions=frozenset({"row_number", "ntile", "lag", "lead", "nth_value"}),
        ordered_ok=frozenset({"nth_value"}),
    ),
    "ND008": Sources(sql_clauses=frozenset({"limit"})),  # a limit without a total order
    # samples
    "ND009": Sources(sql_clauses=frozenset({"tablesample"}), trigger_words=frozenset({"tablesample"})),
    "ND010": Sources(udf_factories=frozenset({"udf", "pandas_udf"})),  # Python UDFs
}


def _by_code(attr: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for code, sources in SOURCES.items():
        for name in getattr(sources, attr):
            out.setdefault(name, code)
    return out


def _union(attr: str) -> frozenset[str]:
    return frozenset(n for sources in SOURCES.values() for n in getattr(sources, attr))


def owner(attr: str) -> str:
    """The code of the rule whose sources hold the ``attr`` entries (``window_functions`` -> ND006)."""
    return next(code for code, sources in SOURCES.items() if getattr(sources, attr))


# Python: qualified name -> rule code.  Calls are resolved through imports, so ``dt.datetime.now`` with
# ``import datetime as dt`` becomes ``datetime.datetime.now``.
PYTHON_CALLS: dict[str, str] = _by_code("python_calls")
PYTHON_CALLS_NO_ARGS: dict[str, str] = _by_code("python_calls_no_args")
PYTHON_CALLS_ONE_ARG: dict[str, str] = _by_code("python_calls_one_arg")
NOW_STRING_CALLS: dict[str, str] = _by_code("python_now_strings")
PYTHON_MODULES: dict[str, str] = _by_code("python_modules")
PYTHON_RANDOM_NEUTRAL: frozenset[str] = _union("python_module_neutral")
PYTHON_RANDOM_SEEDABLE: frozenset[str] = _union("python_module_seedable")

# Spark functions (Python API and SQL): name -> rule code.
SPARK_FUNCTIONS: dict[str, str] = _by_code("spark_functions")
SPARK_NO_ARG_ONLY: frozenset[str] = _union("spark_no_arg_only")
# Seeded forms of value sources: name -> (code of the rule that reports the seeded form, seed position).
SPARK_SEEDED: dict[str, tuple[str, int]] = {
    name: (code, position) for code, sources in SOURCES.items() for name, position in sources.spark_seeded
}
# Window functions whose result depends on the order among tied rows (ND006 when the ordering may tie).
SPARK_RANKING: frozenset[str] = _union("window_functions")
# Order-dependent aggregates that become deterministic over a window with a tie-free ordering.
SPARK_ORDERED_OK: frozenset[str] = _union("ordered_ok")
# Array aggregates whose only problem is element order, and the functions that make the order irrelevant.
ORDER_INSENSITIVE_ARGS_OF: frozenset[str] = _union("order_insensitive_args_of")
ORDER_FIXING_FUNCTIONS: frozenset[str] = _union("order_fixing_functions")
UDF_FACTORIES: frozenset[str] = _union("udf_factories")
SQL_CLAUSES: dict[str, str] = _by_code("sql_clauses")  # "limit" -> its rule code
METHOD_SOURCES: dict[str, str] = _by_code("method_sources")  # "zipWithIndex" -> its rule code
TRIGGER_WORDS: frozenset[str] = _union("trigger_words")  # words beyond the names above

WINDOW_TIES_CODE = owner("window_functions")  # a numbering over an ordering that may tie
ORDER_CODE = owner("order_insensitive_args_of")  # an order-dependent aggregate
UDF_CODE = owner("udf_factories")  # a source inside a Python UDF

# Nondeterministic in SQL whatever their arguments, evaluated per row (the ``delete_when`` question):
# the value sources of the wall-clock, random, uuid and partition rules. Order-dependent aggregates and
# window functions are not row predicates; ``unix_timestamp`` is one only without an argument.
ROW_VALUE_CODES = ("ND001", "ND002", "ND003", "ND004")
