"""The linter's catalogue for other tools: which Spark SQL functions are nondeterministic.

Public and stable for the rest of upsertsink: :func:`nondeterministic_sql_functions` and
:func:`nondeterministic_sql_calls` (the sink refuses a nondeterministic ``delete_when`` with them). The
catalogue itself, every source under the code of the rule that reports it, is
:mod:`upsertsink.lint.base.sources`.
"""

from __future__ import annotations

from .base.sources import ROW_VALUE_CODES, SPARK_FUNCTIONS, SPARK_NO_ARG_ONLY

__all__ = ["nondeterministic_sql_calls", "nondeterministic_sql_functions"]


def nondeterministic_sql_functions() -> frozenset[str]:
    """Lower-case Spark SQL function names whose value differs between runs (``rand``, ``uuid``, ``now``,
    ``current_timestamp``, ``monotonically_increasing_id``, ``input_file_name``...), whatever the arguments."""
    return frozenset(
        name for name, code in SPARK_FUNCTIONS.items() if code in ROW_VALUE_CODES and name not in SPARK_NO_ARG_ONLY
    )


def nondeterministic_sql_calls(expression: str) -> list[str]:
    """The nondeterministic functions used in one Spark SQL expression (e.g. a ``delete_when`` predicate),
    in text order, lower case; bare keywords (``current_timestamp``) and ``unix_timestamp()`` without an
    argument included. SQL that does not parse gives ``[]``; parse it yourself first if that matters."""
    from .values.sql import analyze_expression  # sqlglot loads only when a predicate is checked

    ok, _alias, part = analyze_expression(expression)
    if not ok:
        return []
    row_value = {n for n, code in SPARK_FUNCTIONS.items() if code in ROW_VALUE_CODES}
    return [s.name for s in sorted(part.sites, key=lambda s: s.start) if s.name in row_value]
