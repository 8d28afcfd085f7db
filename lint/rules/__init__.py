"""The rule registry: stable codes ND000-ND014. ND001-ND010 find nondeterministic values, ND011-ND014
non-idempotent writes."""

from __future__ import annotations

from upsertsink.lint.rules import (
    nd000_parse_error,
    nd001_wall_clock,
    nd002_random,
    nd003_uuid,
    nd004_partition_ids,
    nd005_order_dependent,
    nd006_window_ties,
    nd007_dedup_subset,
    nd008_limit,
    nd009_sample,
    nd010_udf,
    nd011_append,
    nd012_accumulating_merge,
    nd013_unmarked_merge,
    nd014_sink_without_batch_id,
)
from upsertsink.lint.rules.base import Invalid, Rule, Valid

ALL_RULES: tuple[Rule, ...] = tuple(
    m.RULE
    for m in (
        nd000_parse_error,
        nd001_wall_clock,
        nd002_random,
        nd003_uuid,
        nd004_partition_ids,
        nd005_order_dependent,
        nd006_window_ties,
        nd007_dedup_subset,
        nd008_limit,
        nd009_sample,
        nd010_udf,
        nd011_append,
        nd012_accumulating_merge,
        nd013_unmarked_merge,
        nd014_sink_without_batch_id,
    )
)
RULES: dict[str, Rule] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES", "Invalid", "Rule", "Valid"]
