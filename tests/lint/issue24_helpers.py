"""Helpers shared by the issue 24 tests: lint a fixture of tests/lint/fixtures/issue24 through the checker."""

from __future__ import annotations

from pathlib import Path

from upsertsink.lint.check.checker import CheckOptions, Finding, check_bytes
from upsertsink.lint.run.config import DEFAULT_KEY_PATTERNS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "issue24"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def lint_text(
    name: str, source: str, keys: tuple[str, ...] = (), key_patterns: tuple[str, ...] | None = None
) -> list[Finding]:
    """Findings for ``source`` checked as a file called ``name`` (the suffix picks .py or .ipynb)."""
    patterns = list(DEFAULT_KEY_PATTERNS if key_patterns is None else key_patterns)
    options = CheckOptions(key_patterns=patterns)
    return check_bytes(name, source.encode("utf-8"), list(keys), [], options=options).findings


def lint_fixture(
    name: str, keys: tuple[str, ...] = (), key_patterns: tuple[str, ...] | None = None
) -> list[Finding]:
    return lint_text(name, text(name), keys, key_patterns)


def at(source: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """(line, column), 1-based, of the nth occurrence of ``needle`` in ``source``."""
    pos = -1
    for _ in range(nth):
        pos = source.index(needle, pos + 1)
    line = source.count("\n", 0, pos) + 1
    return line, pos - (source.rfind("\n", 0, pos) + 1) + 1


def brief(findings: list[Finding]) -> list[tuple[str, str, int, int, str | None, str | None]]:
    """(rule, severity, line, column, target, column_name) per finding."""
    return [(f.rule, f.severity, f.line, f.column, f.target, f.column_name) for f in findings]
