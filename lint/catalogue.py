"""The catalogue: every nondeterministic Python call and Spark/SQL function the linter knows, gathered from
the rules that own them (each rule module declares its entries in a :class:`~upsertsink.lint.rules.rule.
Catalogue`), plus the shape of the Spark API that the shared data flow needs.

Public and stable for the rest of upsertsink: :func:`nondeterministic_sql_functions` and
:func:`nondeterministic_sql_calls` (the sink refuses a nondeterministic ``delete_when`` with them).
"""

from __future__ import annotations

from .base.spark_api import PIPELINE_TRIGGER_WORDS
from .rules import ALL_RULES

# The module prefixes under which pyspark exposes its column functions.
SPARK_FUNCTION_MODULES = (
    "pyspark.sql.functions",
    "pyspark.sql.functions.builtin",
    "pyspark.sql.connect.functions",
    "pyspark.sql.connect.functions.builtin",
)


def _by_code(attr: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rule in ALL_RULES:
        for name in getattr(rule.catalogue, attr):
            out.setdefault(name, rule.code)
    return out


def _union(attr: str) -> frozenset[str]:
    return frozenset(n for rule in ALL_RULES for n in getattr(rule.catalogue, attr))


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
    name: (rule.code, position) for rule in ALL_RULES for name, position in rule.catalogue.spark_seeded
}  # Window functions whose result depends on the order among tied rows (ND006 when the ordering may tie).
SPARK_RANKING: frozenset[str] = _union("window_functions")
# Order-dependent aggregates that become deterministic over a window with a tie-free ordering.
SPARK_ORDERED_OK: frozenset[str] = _union("ordered_ok")
# Array aggregates whose only problem is element order, and the functions that make the order irrelevant.
ORDER_INSENSITIVE_ARGS_OF: frozenset[str] = _union("order_insensitive_args_of")
ORDER_FIXING_FUNCTIONS: frozenset[str] = _union("order_fixing_functions")
UDF_FACTORIES: frozenset[str] = _union("udf_factories")


def owner(attr: str) -> str:
    """The code of the rule whose catalogue holds the ``attr`` entries (``window_functions`` -> ND006)."""
    return next(rule.code for rule in ALL_RULES if getattr(rule.catalogue, attr))


SQL_CLAUSES: dict[str, str] = _by_code("sql_clauses")  # "limit" -> its rule code
METHOD_SOURCES: dict[str, str] = _by_code(
    "method_sources"
)  # "zipWithIndex" -> its rule code  # "limit" -> its rule code
WINDOW_TIES_CODE = owner("window_functions")  # a numbering over an ordering that may tie
ORDER_CODE = owner("order_insensitive_args_of")  # an order-dependent aggregate
UDF_CODE = owner("udf_factories")  # a source inside a Python UDF

# DataFrame method name -> the detectors of the rules that look at that method; a detector several rules
# declare (the write rules' ``foreachBatch`` collector) runs once.
METHOD_HOOKS: dict[str, tuple] = {}
for _rule in ALL_RULES:
    for _method, _hook in _rule.method_hooks.items():
        if _hook not in METHOD_HOOKS.get(_method, ()):
            METHOD_HOOKS[_method] = (*METHOD_HOOKS.get(_method, ()), _hook)
# Attribute name -> the detectors of ``x.attr[...]`` reads (a subscript node, not a call).
SUBSCRIPT_HOOKS: dict[str, tuple] = {}
for _rule in ALL_RULES:
    for _attr, _hook in _rule.subscript_hooks.items():
        SUBSCRIPT_HOOKS[_attr] = (*SUBSCRIPT_HOOKS.get(_attr, ()), _hook)
# Detectors that run once per module, and the fixes catalogue sources offer (rule code -> hook).
MODULE_HOOKS: tuple = tuple(hook for rule in ALL_RULES for hook in rule.module_hooks)
FIX_HOOKS: dict[str, object] = {rule.code: rule.fix_hook for rule in ALL_RULES if rule.fix_hook is not None}

# Nondeterministic in SQL whatever their arguments, evaluated per row (the ``delete_when`` question):
# the value sources of the wall-clock, random, uuid and partition rules. Order-dependent aggregates and
# window functions are not row predicates; ``unix_timestamp`` is one only without an argument.
_ROW_VALUE_RULES = ("ND001", "ND002", "ND003", "ND004")


def nondeterministic_sql_functions() -> frozenset[str]:
    """Lower-case Spark SQL function names whose value differs between runs (``rand``, ``uuid``, ``now``,
    ``current_timestamp``, ``monotonically_increasing_id``, ``input_file_name``...), whatever the arguments."""
    return frozenset(
        name
        for name, code in SPARK_FUNCTIONS.items()
        if code in _ROW_VALUE_RULES and name not in SPARK_NO_ARG_ONLY
    )


def nondeterministic_sql_calls(expression: str) -> list[str]:
    """The nondeterministic functions used in one Spark SQL expression (e.g. a ``delete_when`` predicate),
    in text order, lower case; bare keywords (``current_timestamp``) and ``unix_timestamp()`` without an
    argument included. SQL that does not parse gives ``[]``; parse it yourself first if that matters."""
    from .values.sql import analyze_expression

    ok, _alias, part = analyze_expression(expression)
    if not ok:
        return []
    row_value = {n for n, code in SPARK_FUNCTIONS.items() if code in _ROW_VALUE_RULES}
    return [s.name for s in sorted(part.sites, key=lambda s: s.start) if s.name in row_value]


# The trigger words of the pre-filter (matched case-insensitively on the raw bytes): a file containing none
# of them cannot produce a finding (other than a parse error, which Python itself reports) and is never
# analyzed. Every source has to be named in the file: an import names the function, SQL text names it too;
# SQL read from a ``.sql`` file is named by its file name. A declarative pipeline's CDC flow declares keys and
# a sequence (``apply_changes``, ``create_auto_cdc_flow``, ``sequence_by``): its file is analyzed too.
TRIGGER_WORDS: frozenset[str] = frozenset(
    set(SPARK_FUNCTIONS)
    | SPARK_RANKING
    | set(METHOD_HOOKS)
    | set(SUBSCRIPT_HOOKS)
    | {name.rsplit(".", 1)[1] for name in (*PYTHON_CALLS, *PYTHON_CALLS_NO_ARGS, *PYTHON_CALLS_ONE_ARG)}
    | _union("trigger_words")
    | set(METHOD_SOURCES)
    | PIPELINE_TRIGGER_WORDS
    | {".sql"}
)
# Checked as plain substrings of the lower-cased bytes (memchr-speed), the most frequent words first so a
# typical file is accepted after one or two scans.
_FREQUENT_FIRST = ("time", "first", "random", "limit", "now", "last", "mode", "uuid", "sample", ".sql")
TRIGGER_BYTES: tuple[bytes, ...] = tuple(
    w.encode()
    for w in (*_FREQUENT_FIRST, *sorted({t.lower() for t in TRIGGER_WORDS} - set(_FREQUENT_FIRST)))
    if not any(w != other and other in w for other in _FREQUENT_FIRST)  # "timestamp" is covered by "time"
)


def has_trigger(data: bytes) -> bool:
    """Does the file mention any catalogue word at all (case-insensitively)? If not, it needs no analysis."""
    lowered = data.lower()
    return any(word in lowered for word in TRIGGER_BYTES)
