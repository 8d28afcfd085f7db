"""The rule registry: stable codes ND000-ND014. ND001-ND010 find nondeterministic values, ND011-ND014
non-idempotent writes."""

from __future__ import annotations

from upsertsink.lint.rules.base import Invalid, Rule, Valid
from upsertsink.lint.rules.clock import WALL_CLOCK
from upsertsink.lint.rules.ids import PARTITION_IDS, UUIDS
from upsertsink.lint.rules.ordering import DEDUP_SUBSET, LIMIT, ORDER_DEPENDENT, SAMPLE, WINDOW_TIES
from upsertsink.lint.rules.randomness import RANDOM
from upsertsink.lint.rules.syntax import PARSE_ERROR
from upsertsink.lint.rules.udf import UDF
from upsertsink.lint.rules.nd011_append import RULE as APPEND
from upsertsink.lint.rules.nd012_accumulating_merge import RULE as ACCUMULATING_MERGE
from upsertsink.lint.rules.nd013_unmarked_merge import RULE as UNMARKED_MERGE
from upsertsink.lint.rules.nd014_sink_without_batch_id import RULE as SINK_WITHOUT_BATCH_ID

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
    APPEND,
    ACCUMULATING_MERGE,
    UNMARKED_MERGE,
    SINK_WITHOUT_BATCH_ID,
)
RULES: dict[str, Rule] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES", "Invalid", "Rule", "Valid"]
