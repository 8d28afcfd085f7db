"""docs/rules.md is generated from the rules and must be up to date."""

from __future__ import annotations

from pathlib import Path

from upsertsink.lint.command.reference import render_rules_md
from upsertsink.lint.rules import ALL_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_rules_md_is_up_to_date() -> None:
    committed = (DOCS / "rules.md").read_text(encoding="utf-8")
    assert committed == render_rules_md(), "regenerate with: python -m upsertsink.lint.command.reference > docs/rules.md"


def test_rules_md_documents_every_rule() -> None:
    text = render_rules_md()
    for rule in ALL_RULES:
        assert f"## {rule.code} {rule.name}" in text
