"""Shared helpers for the linter tests: lint a snippet through the real checker."""

from __future__ import annotations

import textwrap

from upsertsink.lint.checker import Finding, check_bytes


def lint_code(code: str, keys: tuple[str, ...] = (), sequence: tuple[str, ...] = ()) -> list[Finding]:
    """Findings for a code snippet (dedented), as the CLI would compute them (pre-filter included)."""
    return check_bytes("job.py", textwrap.dedent(code).encode("utf-8"), list(keys), list(sequence)).findings


def summary(findings: list[Finding]) -> list[tuple[str, int, int, str | None, str | None]]:
    """(rule, line, column, target, column_name) per finding."""
    return [(f.rule, f.line, f.column, f.target, f.column_name) for f in findings]
