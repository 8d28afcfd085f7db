"""Every rule's VALID and INVALID examples, run through the real analyzer (Fixit style)."""

from __future__ import annotations

import pytest
from upsertsink.lint.checker import check_bytes
from upsertsink.lint.rules import ALL_RULES, RULES

INVALID = [(r.code, i, ex) for r in ALL_RULES for i, ex in enumerate(r.invalid)]
VALID = [(r.code, i, ex) for r in ALL_RULES for i, ex in enumerate(r.valid)]


@pytest.mark.parametrize(
    ("code", "index", "example"), INVALID, ids=[f"{c}-invalid-{i}" for c, i, _ in INVALID]
)
def test_invalid_example_is_reported(code, index, example) -> None:
    result = check_bytes("example.py", example.code.encode(), list(example.keys), list(example.sequence))
    got = [(f.rule, f.line, f.column, f.target, f.column_name) for f in result.findings]
    assert (code, example.line, example.column, example.target, example.column_name) in got
    finding = next(f for f in result.findings if f.rule == code and f.line == example.line)
    expected_severity = "error" if example.target in (None, "key", "sequence") else "warning"
    assert finding.severity == expected_severity
    assert finding.message


@pytest.mark.parametrize(("code", "index", "example"), VALID, ids=[f"{c}-valid-{i}" for c, i, _ in VALID])
def test_valid_example_is_clean(code, index, example) -> None:
    result = check_bytes("example.py", example.code.encode(), list(example.keys), list(example.sequence))
    assert [f for f in result.findings if f.rule == code] == []


def test_every_rule_has_examples_and_docs() -> None:
    assert list(RULES) == [f"ND{i:03d}" for i in range(len(RULES))]
    for rule in ALL_RULES:
        assert rule.invalid, rule.code
        assert rule.valid, rule.code
        doc = rule.explain()
        assert rule.code in doc and "```python" in doc
        assert rule.verb and rule.why and rule.fix


def test_codes_and_names_are_unique() -> None:
    assert len({r.name for r in ALL_RULES}) == len(ALL_RULES)
