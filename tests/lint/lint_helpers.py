"""Shared helpers for the linter tests: lint a snippet through the real checker."""

from __future__ import annotations

import textwrap

from upsertsink.lint.checker import CheckOptions, Finding, check_bytes
from upsertsink.lint.config import DEFAULT_KEY_PATTERNS


def lint_code(
    code: str,
    keys: tuple[str, ...] = (),
    sequence: tuple[str, ...] = (),
    key_patterns: tuple[str, ...] | None = None,
) -> list[Finding]:
    """Findings for a code snippet (dedented), as the CLI would compute them (pre-filter included)."""
    patterns = list(DEFAULT_KEY_PATTERNS if key_patterns is None else key_patterns)
    options = CheckOptions(key_patterns=patterns)
    data = textwrap.dedent(code).encode("utf-8")
    return check_bytes("job.py", data, list(keys), list(sequence), options=options).findings


def summary(findings: list[Finding]) -> list[tuple[str, int, int, str | None, str | None]]:
    """(rule, line, column, target, column_name) per finding."""
    return [(f.rule, f.line, f.column, f.target, f.column_name) for f in findings]
