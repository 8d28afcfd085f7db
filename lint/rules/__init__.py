"""The rule registry: one rule per source family, stable codes ND000-ND010."""

from __future__ import annotations

from upsertsink.lint.rules.base import Invalid, Rule, Valid
from upsertsink.lint.rules.clock import WALL_CLOCK
from upsertsink.lint.rules.ids import PARTITION_IDS, UUIDS
from upsertsink.lint.rules.ordering import DEDUP_SUBSET, LIMIT, ORDER_DEPENDENT, SAMPLE, WINDOW_TIES
from upsertsink.lint.rules.randomness import RANDOM
from upsertsink.lint.rules.syntax import PARSE_ERROR
from upsertsink.lint.rules.udf import UDF

ALL_RULES: tuple[Rule, ...] = (
    PARSE_ERROR,
    WALL_CLOCK,
    RANDOM,
    UUIDS,
    PARTITION_IDS,
    ORDER_DEPENDENT,
    WINDOW_TIES,
    DEDUP_SUBSET,
    LIMIT,
    SAMPLE,
    UDF,
)
RULES: dict[str, Rule] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES", "Invalid", "Rule", "Valid"]
