"""The rule class: one small object per rule carrying its code, detector hooks, messages, documentation and
examples.

Like Fixit's rules, every rule lists VALID and INVALID code examples next to its detector. They are the
rule's tests (tests/lint/test_lint_rules.py runs each through the real analyzer) and its documentation
(``--explain`` and docs/rules.md print them). Like ruff's one-file rules, a rule module
(``rules/ndNNN_<slug>.py``, exposing ``RULE``; ``rules/__init__.py`` finds it) holds everything about its
rule but its sources: how it finds (its ``method_hooks``, detectors the collection pass calls for every
matching method call, and its ``module_hooks``; rules that only report sources are evaluated by the flow
itself), what it says (``verb``, ``fix`` and :meth:`Rule.message`), and why. What each rule recognizes as a
source is data the stages below the rules read too: the catalogue, :mod:`upsertsink.lint.base.sources`,
under the rule's code. The shared flow (scopes, bindings, taint to columns, SQL) names no rule code.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..base.structs import field, struct
from ..base.types import FixSpec

if TYPE_CHECKING:
    from ..model.semantic import SemanticModel


# A method hook: (analysis, call, scope) -> None; it records row effects or writes through the analysis.
# A hook of an attribute that is subscripted (``iloc`` in ``pdf.iloc[:10]``) gets the subscript, not a call.
MethodHook = Callable[[Any, Any, Any], None]
# A module hook: (analysis) -> None; runs once after every call was seen and the keys were collected, and
# reports what it finds with ``analysis.report(...)`` (the non-idempotent writes are found this way).
ModuleHook = Callable[[Any], None]
# A fix hook for a catalogue source: (analysis, call, import-qualified name of the callee) -> FixSpec | None.
FixHook = Callable[[Any, Any, str], "FixSpec | None"]


def stable_seed(text: str) -> int:
    """A seed for a seed fix, derived from the call's position and text: stable, and different for two
    calls of one file (two `rand()` columns must not become equal)."""
    return zlib.crc32(text.encode("utf-8")) % 100_000


@struct(frozen=True)
class Valid:
    """Code that must produce no finding of the rule."""

    code: str
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()


@struct(frozen=True)
class Invalid:
    """Code that must produce a finding of the rule at ``line``/``column`` (1-based) with this target.

    ``severity`` is the expected severity when it does not follow from the target (the write rules).
    ``fixed`` is, like Fixit's ``expected_replacement``, the whole example after its fix (``--fix``, or
    ``--fix --unsafe-fixes`` when ``unsafe``); the tests apply the fix and compare."""

    code: str
    line: int
    column: int
    target: str | None
    column_name: str | None = None
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()
    severity: str | None = None
    fixed: str | None = None
    unsafe: bool = False
    path: str = "example.py"

    @property
    def expected_severity(self) -> str:
        """The severity the finding must have."""
        if self.severity is not None:
            return self.severity
        return "error" if self.target in (None, "key", "sequence") else "warning"


@struct(frozen=True)
class Rule:
    """A rule family: stable code, short name, docs, fix advice per target, and examples."""

    code: str
    name: str
    verb: str
    summary: str
    description: str
    why: str
    fix: dict[str, str]
    valid: tuple[Valid, ...] = field(default_factory=tuple)
    # why a finding breaks a replay in one situation, by the name of its fix advice (``pipeline``: in a
    # declarative pipeline's function), where ``why`` does not describe it
    why_in: Mapping[str, str] = field(default_factory=dict)
    invalid: tuple[Invalid, ...] = field(default_factory=tuple)
    # DataFrame method name -> detector called for every ``x.method(...)`` call of the analyzed code
    method_hooks: Mapping[str, MethodHook] = field(default_factory=dict)
    # attribute name -> detector called for every ``x.attr[...]`` read (pandas' ``iloc``): a subscript, never
    # a call (``x.iloc(axis=0)`` and ``cfg.limit[0]`` reach neither kind of hook of the other)
    subscript_hooks: Mapping[str, MethodHook] = field(default_factory=dict)
    # detectors run once per module after all calls were seen (see ModuleHook)
    module_hooks: tuple[ModuleHook, ...] = ()
    # the fix a catalogue source of this rule offers, if any (see FixHook)
    fix_hook: FixHook | None = None
    # what ``--fix`` does for this rule's findings, for the documentation ("" when it offers none)
    autofix: str = ""
    family: str = "Nondeterministic values"
    # words that must make the pre-filter analyze a file for this rule's hooks (its sources' words are
    # in the catalogue, :mod:`upsertsink.lint.base.sources`)
    trigger_words: frozenset[str] = frozenset()

    TARGETS: ClassVar[tuple[str, ...]] = ("key", "sequence", "column", "rows", "write")

    def message(self, reach: Any) -> str:
        """The finding's message: what the source is, what it reaches, what that does to a replay, the fix.

        ``reach`` is an :class:`upsertsink.lint.check.analysis.Reach` (source, target, column, others, rows)."""
        src = reach.source
        what = f"`{src.what}`" if not src.what.endswith(" in SQL") else f"`{src.what[:-7]}` in SQL text"
        if src.via:
            what = f"{what} inside {src.via}"
        also = ""
        if reach.others:
            shown = ", ".join(f"`{o}`" for o in reach.others[:3])
            also = f"; it also reaches {shown}{', ...' if len(reach.others) > 3 else ''}"
        target, column = reach.target, reach.column
        label = reach.key_label if target == "key" else _TARGET_TEXT[target]
        history = getattr(reach, "history", False) and target == "sequence"
        of_sink = f" of {getattr(reach, 'history_of', '') or 'an `scd_type=2` sink'}" if history else ""
        table = getattr(reach, "table", None)
        if reach.rows:
            if column == "*":
                where = "it decides which rows are written (all columns)"
            elif target == "sequence":
                where = f"it decides which duplicate row survives ({named('sequence column', column)}{of_sink})"
            else:
                where = f"it decides which rows are written ({named(label, column)})"
            where += f" into table `{table}`" if table else ""
            consequence = _HISTORY_ROWS_CONSEQUENCE if history else _ROWS_CONSEQUENCE[target]
            fix = self.advice("rows")
        else:
            where = f"it reaches {named(label, column)}{of_sink}"
            where += f" (table `{table}`)" if table and f"`{table}`" not in label else ""  # not named twice
            consequence = _HISTORY_CONSEQUENCE if history else _CONSEQUENCE[target]
            fix = self.advice(target)
        return f"{what} {self.verb}; {where}{also}: {consequence}. Fix: {fix}"

    def advice(self, target: str | None) -> str:
        """The fix advice for a finding that reaches ``target``."""
        if target in self.fix:
            return self.fix[target]
        return self.fix.get("column", next(iter(self.fix.values()), ""))

    def explain(self) -> str:
        """The rule's documentation as Markdown (``--explain`` and docs/rules.md)."""
        out = [f"## {self.code} {self.name}", "", self.summary, "", self.description.strip(), ""]
        out += ["**Why it breaks replays.** " + self.why, ""]
        for situation, text in self.why_in.items():
            out += [f"*{_TARGET_LABEL.get(situation, situation).capitalize()}:* " + text, ""]
        out += ["**How to fix it.**", ""]
        for target, text in self.fix.items():
            out.append(f"- {_TARGET_LABEL.get(target, target)}: {text}")
        out.append("")
        if self.autofix:
            out += ["**Automatic fix.** " + " ".join(self.autofix.split()), ""]
        for title, examples in (("Flagged", self.invalid), ("Not flagged", self.valid)):
            if not examples:
                continue
            out += [f"**{title}:**", ""]
            for ex in examples:
                extra = []
                if ex.keys:
                    extra.append("--key " + " --key ".join(ex.keys))
                if ex.sequence:
                    extra.append("--sequence " + " --sequence ".join(ex.sequence))
                if isinstance(ex, Invalid):
                    where = f"line {ex.line}, column {ex.column}"
                    target = ex.target or "parse error"
                    if ex.column_name:
                        target += f" `{ex.column_name}`"
                    extra.append(f"reported at {where}, reaches {target}, {ex.expected_severity}")
                if extra:
                    out.append("<!-- " + "; ".join(extra) + " -->")
                out += ["```python", ex.code.strip("\n"), "```", ""]
                if isinstance(ex, Invalid) and ex.fixed is not None:
                    how = "`--fix --unsafe-fixes`" if ex.unsafe else "`--fix`"
                    out += [f"After {how}:", "", "```python", ex.fixed.strip("\n"), "```", ""]
        return "\n".join(out).rstrip() + "\n"


class WriteRule(Rule):
    """A rule about how data is written rather than about a value: its detector (a module hook) states what
    it found in the finding's ``note``, and the message adds why that breaks a replay and the fix."""

    def message(self, reach: Any) -> str:
        """``note`` (what was found, where) + the rule's consequence + the fix advice."""
        fix = self.advice(reach.advice or "write")
        why = self.why_in.get(reach.advice, self.why)
        return f"{reach.note}: {why[0].lower()}{why[1:].rstrip('.')}. Fix: {fix}"


def named(label: str, column: str) -> str:
    """``merge key `id` ``; a column named by a value not known as text (a template, ``{key_col}`` or
    ``{c}_clean``): ``merge key named by `key_col` ``."""
    if column.startswith("{") and column.endswith("}") and column.count("{") == 1:
        return f"{label} named by `{column[1:-1]}`"
    if "{" in column:
        return f'{label} named by `f"{column}"`'
    return f"{label} `{column}`"


_TARGET_TEXT = {
    "key": "merge key",
    "sequence": "sequence column",
    "column": "column",
}
_CONSEQUENCE = {
    "key": "a replay computes different keys, so the upsert inserts new rows instead of overwriting the ones "
    "the first run wrote (duplicates) and the rows of the first run are never replaced",
    "sequence": "a replay computes a different sequence value, so the newer-wins check compares values that "
    "no longer describe the data: stale rows can win and re-sent rows are not recognized as the same",
    "column": "a replay writes different values into this column, so two runs of the same batch do not leave "
    "the same table (legal, but replays are no longer byte-for-byte repeatable)",
}
# the sequence column of an SCD type 2 sink (``UpsertSink(..., scd_type=2)``): its values become the versions'
# __START_AT/__END_AT, so what a type 1 sink only compares is written into the table as history
_HISTORY_CONSEQUENCE = (
    "this rewrites history on every replay, because the sequence value is every version's `__START_AT` and "
    "the `__END_AT` of the version before it: a replay computes other values, places its events elsewhere in "
    "each key's history, and opens, splits and closes versions that the first run did not (re-sent rows are "
    "not recognized as the same events)"
)
_HISTORY_ROWS_CONSEQUENCE = (
    "this rewrites history on every replay, because a replay can keep a different row of each group, with "
    "a different sequence value, and so opens and closes versions at other `__START_AT`/`__END_AT` values"
)
_ROWS_CONSEQUENCE = {
    "key": "a replay writes a different set of rows, and so of keys, than the first run",
    "sequence": "a replay can keep a different row of each group, with a different sequence value",
    "column": "a replay writes different rows than the first run",
}
_TARGET_LABEL = {
    "key": "reaching a merge key",
    "sequence": "reaching the sequence column",
    "column": "reaching another written column",
    "rows": "deciding which rows are written",
    "write": "the write",
    "pipeline": "in a declarative pipeline's function",
    "union": "a set union (`array_union`, `map_concat`)",
    "file": "the whole file",
}


def seed_fix(model: SemanticModel, call: Any, keyword: str, consequence: str) -> FixSpec:
    """The unsafe fix that adds ``keyword=<seed>`` to ``call`` (a seed stable for this call: see stable_seed);
    ``consequence`` tells what a seed does not fix."""
    span = model.span(call)
    seed = stable_seed(f"{span[0]}:{span[1]}:{model.segment(call)}")
    return FixSpec(
        "add-keyword", span, "unsafe", f"seed it (`{keyword}={seed}`): {consequence}",
        (("name", keyword), ("value", str(seed))),
    )
