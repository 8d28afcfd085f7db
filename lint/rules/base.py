"""The rule class: one small object per source family carrying its code, documentation and examples.

Like Fixit's rules, every rule lists VALID and INVALID code examples. They are the rule's tests
(tests/lint/test_rule_examples.py runs each through the real analyzer) and its documentation
(``--explain`` and docs/rules.md print them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Valid:
    """Code that must produce no finding of the rule."""

    code: str
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invalid:
    """Code that must produce a finding of the rule at ``line``/``column`` (1-based) with this target."""

    code: str
    line: int
    column: int
    target: str | None
    column_name: str | None = None
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()


@dataclass(frozen=True)
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
    invalid: tuple[Invalid, ...] = field(default_factory=tuple)

    TARGETS: ClassVar[tuple[str, ...]] = ("key", "sequence", "column", "rows")

    def advice(self, target: str | None) -> str:
        """The fix advice for a finding that reaches ``target``."""
        if target in self.fix:
            return self.fix[target]
        return self.fix.get("column", next(iter(self.fix.values()), ""))

    def explain(self) -> str:
        """The rule's documentation as Markdown (``--explain`` and docs/rules.md)."""
        out = [f"## {self.code} {self.name}", "", self.summary, "", self.description.strip(), ""]
        out += ["**Why it breaks replays.** " + self.why, ""]
        out += ["**How to fix it.**", ""]
        for target, text in self.fix.items():
            out.append(f"- {_TARGET_LABEL.get(target, target)}: {text}")
        out.append("")
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
                    extra.append(f"reported at {where}, reaches {target}")
                if extra:
                    out.append("<!-- " + "; ".join(extra) + " -->")
                out += ["```python", ex.code.strip("\n"), "```", ""]
        return "\n".join(out).rstrip() + "\n"


_TARGET_LABEL = {
    "key": "reaching a merge key",
    "sequence": "reaching the sequence column",
    "column": "reaching another written column",
    "rows": "deciding which rows are written",
    "file": "the whole file",
}
