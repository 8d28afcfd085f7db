"""What the analysis takes from the rules: their detectors by the node they read (method calls, subscripts,
the whole module), the fixes their catalogue sources offer, and the pre-filter's trigger words.

The stages below the rules (the collection pass, the taint) are handed these tables by the analysis
(:mod:`upsertsink.lint.check.analysis`); they never import the rules.
"""

from __future__ import annotations

from ..base.sources import (
    METHOD_SOURCES,
    PYTHON_CALLS,
    PYTHON_CALLS_NO_ARGS,
    PYTHON_CALLS_ONE_ARG,
    SPARK_FUNCTIONS,
    SPARK_RANKING,
)
from ..base.sources import TRIGGER_WORDS as SOURCE_TRIGGER_WORDS
from ..base.spark_api import PIPELINE_TRIGGER_WORDS
from . import ALL_RULES

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
    | SOURCE_TRIGGER_WORDS
    | {word for rule in ALL_RULES for word in rule.trigger_words}
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
